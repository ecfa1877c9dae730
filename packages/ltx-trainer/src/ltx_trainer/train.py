"""`python -m ltx_trainer.train CONFIG.yaml [--disable-progress-bars]` (also under `accelerate launch`)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ltx_trainer.config import ConfigError, load_config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ltx_trainer.train", description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="training config YAML (see packages/ltx-trainer/configs/)")
    parser.add_argument(
        "--demo",
        action="store_true",
        help="no config: train a few CPU steps on synthetic clips with the tiny demo models (ltx_trainer.demo)",
    )
    parser.add_argument("--demo-dir", default="outputs/demo-training", help="folder of the --demo run")
    parser.add_argument(
        "--disable-progress-bars",
        action="store_true",
        help="no progress bar; log one parseable line every --log-every steps instead",
    )
    parser.add_argument("--log-every", type=int, default=20, help="steps between log lines (default 20)")
    args = parser.parse_args(argv)
    if (args.config is None) == (not args.demo):
        parser.error("give a config file, or --demo (not both)")
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    if args.demo:
        from ltx_trainer.demo import demo_main

        return demo_main(args.demo_dir, disable_progress_bars=args.disable_progress_bars, log_every=args.log_every)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from ltx_trainer.training.checkpoints import ResumeError
    from ltx_trainer.training.trainer import Trainer, TrainingDiverged

    try:
        trainer = Trainer(config, disable_progress_bars=args.disable_progress_bars, log_every=args.log_every)
        trainer.train()  # logs `saved <file>` for every checkpoint, the final one included
    except (ValueError, ResumeError, TrainingDiverged) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
