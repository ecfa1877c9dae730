"""Our LoRA training step against the reference trainer's (Lightricks/LTX-2 v1.2.0), side by side on the CPU.

The model: the LTX-2.3 22B layout at 1/4 of its widths (video 8 x 128, audio 8 x 64, the text connectors
likewise, 8 connector layers), 2 blocks, written once by our package as ONE released-layout safetensors
file of random bf16 weights (the transformer's `model.diffusion_model.*` keys and the connectors',
config in the metadata), which each side loads the way its trainer does. LoRA rank 64 (alpha 64) on
to_q/to_k/to_v/to_out.0 (peft on both sides), AdamW lr 1e-4, one sample of 2 x 16 x 16 video latents
(512 tokens) + 32 audio steps and 1024 text tokens (200 valid) of precomputed text features.

    fp32      float32 base, no autocast (the same model code in float32 on both sides)
    bf16      bf16 base and connectors, float32 LoRA, the forward under bf16 autocast (each trainer's
              bf16 LoRA set-up: `mixed_precision_mode: bf16`)
    bf16-gc   as bf16, with gradient checkpointing

Each side runs what its trainer runs per step. Ours (`ltx_trainer.training`): the text contexts are
computed once before step 1 (`CachedTextContexts.precompute`, then the connectors are freed), glibc's
mmap threshold fixed (`host_memory`), then per step strategy inputs -> forward -> loss -> backward ->
AdamW. The reference's (`Trainer._training_step`): its embeddings connectors on the features every step,
its flexible strategy, the forward, its loss, backward, AdamW. Neither clips gradients.

Each run is a fresh process with `--threads` threads, ours and the reference's alternating (who goes
first rotates every round). A child runs `--steps` steps; its figures are the median of the steps after
the first (wall and the process's CPU seconds) and its peak RSS (loading included). Printed: per
setting, the medians over rounds and the ratios ours / reference.

Measured 2026-12-02, AMD EPYC (avx2 avx512f avx512_bf16 avx512_vnni; no AMX), torch 2.15.0, 2 threads,
3 rounds (fp32: 3 steps per child, bf16 rows: 2), the reference's connectors per step (as its trainer),
on a machine shared with other work (load average 5-14 on its 2 cores: wall time there mostly measures
the scheduler; CPU seconds are the figure to trust). Step medians, ours / reference:

    setting   wall s                CPU s                 peak RSS MiB
    fp32      34.9 / 62.5 = 0.56    10.6 / 17.5 = 0.61    1808 / 2141 = 0.84
    bf16      45.3 / 47.0 = 0.97    10.8 / 16.3 = 0.66    1245 / 1633 = 0.76
    bf16-gc   22.9 / 38.9 = 0.59    14.8 / 16.2 = 0.92    1195 / 1548 = 0.77

Per round, CPU: fp32 0.58 0.52 0.74, bf16 0.77 0.45 0.66, bf16-gc 1.16 0.71 0.90 (the first bf16-gc
round at load 12). Three more bf16-gc rounds at load 4-7: CPU 8.7 / 12.6 = 0.69 (rounds 0.46 0.81 0.59),
wall 10.3 / 12.6 = 0.82, RSS 1195 / 1537 = 0.78; all six rounds: CPU 10.9 / 15.9 = 0.68, wall 0.96.
Peak RSS is steady to 1% across rounds. The fp32 row compares the model code with a float32 base on
both sides (the reference trainer keeps a LoRA base in bf16 whatever the precision).

Reference set-up (a scratch venv using this environment's torch; see `transformer_vs_reference.py`):

    uv run python benchmarks/trainer_vs_reference.py --ref-python /tmp/refvenv_b/bin/python
    uv run python benchmarks/trainer_vs_reference.py --settings bf16 bf16-gc --rounds 3 --steps 3

The child side of the reference imports only the reference's public classes and this file's own code.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lora_step_parts import LORA_TARGETS, RANK
from side_by_side import Rounds, check_ref_python, dump, load_average, python_for, random_weights, run_child

_REPO = Path(__file__).resolve().parents[1]
_KEYS = _REPO / "tests" / "golden" / "ltx-2.3-22b-keys.json"
SETTINGS = ("fp32", "bf16", "bf16-gc")
_PREFIX = "model.diffusion_model."
FRAMES, SIZE = 2, 16  # 512 video tokens
AUDIO_STEPS = 32
TEXT_TOKENS, VALID_TOKENS = 1024, 200


def quarter_config() -> dict:
    """The 22B transformer config at 1/4 of its widths (heads / 4), 2 blocks."""
    tr = dict(json.loads(_KEYS.read_text())["config"]["transformer"])
    for key in (
        "num_attention_heads",
        "audio_num_attention_heads",
        "connector_num_attention_heads",
        "audio_connector_num_attention_heads",
        "cross_attention_dim",
        "audio_cross_attention_dim",
    ):
        tr[key] //= 4
    tr["num_layers"] = 2
    return {"transformer": tr}


def write_inputs(folder: Path) -> dict:
    """The one weights file (transformer + connectors) and the sample's tensors; returns the CPU's capability."""
    import torch
    from safetensors.torch import save_file

    from ltx_core.loader.key_rules import AUDIO_CONNECTOR_PREFIX, VIDEO_CONNECTOR_PREFIX
    from ltx_core.model.transformer import configure_transformer
    from ltx_core.tune import this_machine
    from ltx_trainer.training.text_contexts import text_connectors_spec

    config = quarter_config()
    g = torch.Generator().manual_seed(0)
    with torch.device("meta"):
        model = configure_transformer(config)
        connectors = text_connectors_spec(True).configurator(config)
    weights = random_weights(model, _PREFIX, g)
    weights |= random_weights(connectors.video_connector, VIDEO_CONNECTOR_PREFIX, g)
    weights |= random_weights(connectors.audio_connector, AUDIO_CONNECTOR_PREFIX, g)
    weights = {k: v.bfloat16() for k, v in weights.items()}
    save_file(weights, str(folder / "weights.safetensors"), metadata={"config": json.dumps(config)})
    tr = config["transformer"]
    sample = {
        "video_latents": torch.randn(1, 128, FRAMES, SIZE, SIZE, generator=g),
        "audio_latents": torch.randn(1, 8, AUDIO_STEPS, 16, generator=g),
        "video_features": torch.randn(
            1, TEXT_TOKENS, tr["connector_num_attention_heads"] * tr["connector_attention_head_dim"], generator=g
        ),
        "audio_features": torch.randn(
            1,
            TEXT_TOKENS,
            tr["audio_connector_num_attention_heads"] * tr["audio_connector_attention_head_dim"],
            generator=g,
        ),
        "mask": (torch.arange(TEXT_TOKENS) < VALID_TOKENS).long()[None],
    }
    save_file(sample, str(folder / "sample.safetensors"))
    return {"capability": this_machine().capability()}


def _timed_steps(step, steps: int) -> dict:
    import torch

    walls, cpus, losses = [], [], []
    for index in range(steps):
        began, cpu_began = time.perf_counter(), time.process_time()
        loss = step(index)
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - cpu_began)
        losses.append(float(loss))
    if not all(torch.isfinite(torch.tensor(losses))):
        raise RuntimeError(f"non-finite loss: {losses}")
    later = slice(1, None) if steps > 1 else slice(None)
    return {
        "wall_s": statistics.median(walls[later]),
        "cpu_s": statistics.median(cpus[later]),
        "first_step_s": walls[0],
        "losses": losses,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def ours(setting: str, folder: Path, steps: int) -> dict:
    """Our trainer's set-up and step (`ltx_trainer.training.build` / `step`), piece by piece
    (`lora_step_parts`: the same optimizer, strategy, cached contexts and step as the other trainer benchmarks)."""
    import torch
    from lora_step_parts import LoraStep, cached_contexts, optimizer_and_strategy
    from safetensors.torch import load_file

    from ltx_core.loader import build_model
    from ltx_core.model.transformer import AV_TRANSFORMER
    from ltx_trainer.training.host_memory import fix_mmap_threshold
    from ltx_trainer.training.lora_files import add_lora
    from ltx_trainer.training.text_contexts import text_connectors_spec

    fix_mmap_threshold()
    bf16 = setting.startswith("bf16")
    base_dtype = torch.bfloat16 if bf16 else torch.float32
    torch.manual_seed(0)
    path = folder / "weights.safetensors"
    model = build_model(AV_TRANSFORMER, path, dtype=base_dtype, device="cpu")
    connectors = build_model(text_connectors_spec(True), path, dtype=base_dtype, device="cpu")
    model.set_gradient_checkpointing(setting.endswith("-gc"))
    trained = add_lora(model, RANK, RANK, 0.0, LORA_TARGETS)
    for p in trained.parameters():
        if p.requires_grad:
            p.data = p.data.float()
    optimizer, strategy = optimizer_and_strategy(trained)
    s = load_file(str(folder / "sample.safetensors"))
    batch = {"v": {"latents": s["video_latents"], "fps": torch.full((1,), 24.0)}, "a": {"latents": s["audio_latents"]}}
    features = (s["video_features"].to(base_dtype), s["audio_features"].to(base_dtype))
    cache = cached_contexts(connectors, features, s["mask"])
    del connectors
    parts = LoraStep(trained, optimizer, strategy, batch, cache, features, s["mask"], bf16_autocast=bf16)
    return _timed_steps(parts.step, steps)


def reference(setting: str, folder: Path, steps: int, contexts_once: bool = False) -> dict:
    """The reference trainer's set-up and step (`Trainer._load_models`, `_setup_lora`, `_training_step`)
    through its public classes. `contexts_once`: its connectors run once before step 1 and are then freed,
    as ours are (not what its trainer does: it shows the model code's share of the difference)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open
    from safetensors.torch import load_file

    from ltx_core.text_encoders.gemma import convert_to_additive_mask
    from ltx_core.text_encoders.gemma.embeddings_connector import (
        AudioEmbeddings1DConnectorConfigurator,
        Embeddings1DConnectorConfigurator,
    )
    from ltx_core.text_encoders.gemma.embeddings_processor import EmbeddingsProcessor
    from ltx_trainer.model_loader import load_transformer
    from ltx_trainer.timestep_samplers import ShiftedLogitNormalTimestepSampler
    from ltx_trainer.training_strategies.flexible import FlexibleStrategy, FlexibleStrategyConfig, ModalityConfig

    bf16 = setting.startswith("bf16")
    base_dtype = torch.bfloat16 if bf16 else torch.float32
    torch.manual_seed(0)
    path = folder / "weights.safetensors"
    transformer = load_transformer(path, device="cpu", dtype=base_dtype).requires_grad_(False)
    with safe_open(str(path), "pt") as f:
        metadata = {"config": json.loads(f.metadata()["config"])}
        connector_keys = [k for k in f.keys() if "_embeddings_connector." in k]  # noqa: SIM118
        state = {k: f.get_tensor(k).to(base_dtype) for k in connector_keys}
    with torch.device("meta"):
        processor = EmbeddingsProcessor(
            video_connector=Embeddings1DConnectorConfigurator.from_metadata(metadata),
            audio_connector=AudioEmbeddings1DConnectorConfigurator.from_metadata(metadata),
        )
    names = {
        f"{_PREFIX}video_embeddings_connector.": "video_connector.",
        f"{_PREFIX}audio_embeddings_connector.": "audio_connector.",
    }
    renamed = {}
    for key, value in state.items():
        old = next(p for p in names if key.startswith(p))
        renamed[names[old] + key[len(old) :]] = value
    processor.load_state_dict(renamed, strict=True, assign=True)
    processor = processor.requires_grad_(False).eval()
    del state, renamed
    lora = LoraConfig(
        r=RANK, lora_alpha=RANK, target_modules=list(LORA_TARGETS), lora_dropout=0.0, init_lora_weights=True
    )
    model = get_peft_model(transformer, lora)
    model.get_base_model().set_gradient_checkpointing(setting.endswith("-gc"))
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    strategy = FlexibleStrategy(
        FlexibleStrategyConfig(
            video=ModalityConfig(is_generated=True, latents_dir="v"),
            audio=ModalityConfig(is_generated=True, latents_dir="a"),
        )
    )
    sampler = ShiftedLogitNormalTimestepSampler()
    s = load_file(str(folder / "sample.safetensors"))
    one = torch.ones(1, dtype=torch.int64)
    video_latents = {
        "latents": s["video_latents"], "num_frames": one * FRAMES, "height": one * SIZE, "width": one * SIZE,
        "fps": torch.full((1,), 24.0),
    }  # fmt: skip
    features = (s["video_features"].to(base_dtype), s["audio_features"].to(base_dtype))

    def contexts() -> tuple:
        with torch.no_grad():
            return processor.create_embeddings(*features, convert_to_additive_mask(s["mask"], features[0].dtype))

    if contexts_once:
        computed = contexts()
        del processor

    def step(index: int):
        video_embeds, audio_embeds, mask = computed if contexts_once else contexts()
        batch = {
            "video_latents": video_latents,
            "audio_latents": {"latents": s["audio_latents"]},
            "conditions": {"video_prompt_embeds": video_embeds, "audio_prompt_embeds": audio_embeds,
                           "prompt_attention_mask": mask},
        }  # fmt: skip
        inputs = strategy.prepare_training_inputs(batch, sampler)
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            video, audio = model(video=inputs.video, audio=inputs.audio, perturbations=None)
        # accelerate returns a mixed-precision model's outputs in float32
        loss = strategy.compute_loss(video.float(), audio.float(), inputs).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return _timed_steps(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref-python", default="/tmp/refvenv_b/bin/python")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="steps per child; the first is not counted")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--ref-contexts",
        choices=["per-step", "once"],
        default="per-step",
        help="the reference's text connectors every step (as its trainer) or once before step 1 (as ours)",
    )
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        kind, *rest = args.child
        if kind == "write":
            dump(write_inputs(Path(rest[0])))
        else:
            if kind == "ref":
                dump(reference(rest[0], Path(rest[1]), args.steps, args.ref_contexts == "once"))
            else:
                dump(ours(rest[0], Path(rest[1]), args.steps))
        return
    check_ref_python(args.ref_python, "transformer_vs_reference.py's docstring")
    script = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory(prefix="trainer_vs_ref_") as tmp:
        info = run_child(sys.executable, [script, "--child", "write", tmp], args.threads)
        print(info["capability"])
        print(
            f"LoRA step: 22B layout at 1/4 width, 2 blocks, rank {RANK}, {FRAMES * SIZE * SIZE} video + {AUDIO_STEPS} "
            f"audio tokens, {TEXT_TOKENS} text tokens; reference's text connectors {args.ref_contexts}; "
            f"{args.threads} threads; load before {load_average()}",
            flush=True,
        )
        rounds = Rounds()
        for setting in args.settings:

            def run(impl: str, setting: str = setting) -> dict:
                cmd = [script, "--child", impl, setting, tmp, "--threads", str(args.threads)]
                cmd += ["--steps", str(args.steps), "--ref-contexts", args.ref_contexts]
                return run_child(python_for(impl, args.ref_python), cmd, args.threads)

            rounds.alternate(setting, ["ours", "ref"], args.rounds, run)
        print(f"load after {load_average()}")
        print(rounds.table())


if __name__ == "__main__":
    main()
