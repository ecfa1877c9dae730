"""`python -m ltx_core.tune CONFIG`: time this machine's kernel paths up front and print the decisions.

CONFIG is a checkpoint (its safetensors `config` metadata) or a JSON file with a "config" entry (such
as `ltx-2.3-22b-keys.json`). The video decoder it describes (random weights: timings do not depend on
the values) decodes one latent per dtype, as a run would (default tiling unless `--untiled`), so every
layer shape meets its decision; the transformer's attention shapes at `--video-tokens` time SDPA's
CPU kernels, and its stream widths the RMS norm's paths. Decisions go to the user cache
(`ltx_core.tune.default_cache_dir`) and are printed with the CPU's capability; later runs read them
instead of timing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch

from ltx_core.devices import parse_dtype
from ltx_core.tune.choices import KernelChoices, attach


def _config(path: Path) -> dict:
    if not path.is_file():
        raise SystemExit(f"error: CONFIG {str(path)!r} is not a file; give a checkpoint or a JSON with 'config'")
    if path.suffix == ".json":
        config = json.loads(path.read_text()).get("config")
    else:
        from ltx_core.loader.safetensors_header import read_safetensors_header

        config = read_safetensors_header(path).metadata.get("config")
    if not isinstance(config, dict):
        raise SystemExit(f"error: {str(path)!r} holds no 'config' entry (a checkpoint's metadata or a JSON)")
    return config


def _random_(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    model = model.to(dtype).to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, (p[0].numel() if p.ndim > 1 else 1) ** -0.5, generator=g)
        for b in model.buffers():
            b.fill_(1.0)
    return model.eval().requires_grad_(False)


def tune_decoder(config: dict, dtype: torch.dtype, latent_fhw: tuple[int, int, int], untiled: bool, choices) -> float:
    from ltx_core.model.video_vae import TilingConfig, video_decoder_from_config

    with torch.device("meta"):
        decoder = video_decoder_from_config(config)
    decoder = _random_(decoder, dtype)
    attach(decoder, choices)
    latent = torch.randn(1, decoder.config.latent_channels, *latent_fhw).to(dtype)
    began = time.perf_counter()
    with torch.inference_mode():
        for _ in decoder.decode_video(latent, None if untiled else TilingConfig.default()):
            pass
    return time.perf_counter() - began


def tune_attention(config: dict, dtype: torch.dtype, video_tokens: int, text_tokens: int, choices) -> None:
    from ltx_core.model.transformer.attention_backends import _heads_first, _mask_4d, cpu_sdpa_path
    from ltx_core.model.transformer.config import ModelVariant, parse_transformer_config
    from ltx_core.model.transformer.spec import transformer_section
    from ltx_core.tune.norm import rms_norm

    tc = parse_transformer_config(transformer_section(config), ModelVariant.AUDIO_VIDEO)
    g = torch.Generator().manual_seed(0)
    audio_tokens = max(video_tokens // 8, 1)  # about the audio/video token ratio of a 24 fps clip

    def time_shape(heads: int, dim: int, t: int, s: int, masked: bool) -> None:
        q, k, v = (torch.randn(1, n, heads * dim, generator=g).to(dtype) for n in (t, s, s))
        mask = _mask_4d(torch.zeros(1, t, s)).to(dtype) if masked else None
        cpu_sdpa_path(choices, *(_heads_first(x, heads) for x in (q, k, v)), mask)

    for stream, tokens in ((tc.video, video_tokens), (tc.audio, audio_tokens)):
        if stream is None:
            continue
        time_shape(stream.heads, stream.head_dim, tokens, tokens, False)  # self-attention
        time_shape(stream.heads, stream.head_dim, tokens, text_tokens, True)  # text cross-attention
        # The AdaLN norms (stream width) and q/k norms (heads x head_dim) of this stream's tokens.
        for width in sorted({stream.dim, stream.heads * stream.head_dim}):
            rms_norm(torch.randn(1, tokens, width, generator=g).to(dtype), tc.norm_eps, choices=choices)
    if tc.video is not None and tc.audio is not None:  # audio <-> video cross-attention (audio widths)
        time_shape(tc.audio.heads, tc.audio.head_dim, video_tokens, audio_tokens, False)
        time_shape(tc.audio.heads, tc.audio.head_dim, audio_tokens, video_tokens, False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ltx_core.tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, help="checkpoint .safetensors or JSON with a 'config' entry")
    parser.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], help="dtypes to tune (default bf16 fp32)")
    parser.add_argument("--latent", nargs=3, type=int, default=[3, 8, 12], metavar=("F", "H", "W"))
    parser.add_argument("--untiled", action="store_true", help="decode untiled (default: the default tiling)")
    parser.add_argument("--video-tokens", type=int, default=1024)
    parser.add_argument("--text-tokens", type=int, default=1024)
    parser.add_argument("--skip", choices=["decoder", "attention"], nargs="*", default=[])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    dtypes = [parse_dtype(d) for d in args.dtypes]
    config = _config(args.config)
    choices = KernelChoices.load()
    print(choices.machine.capability())
    print(f"decisions file: {choices.cache_file}")
    for dtype in dtypes:
        if "decoder" not in args.skip and "vae" in config:
            seconds = tune_decoder(config, dtype, tuple(args.latent), args.untiled, choices)
            print(f"video decoder {dtype}: decoded (with timings) in {seconds:.1f} s")
        if "attention" not in args.skip and "transformer" in config:
            tune_attention(config, dtype, args.video_tokens, args.text_tokens, choices)
    print(f"{len(choices.decisions)} decisions:")
    for key, decision in sorted(choices.decisions.items()):
        timings = ", ".join(f"{p} {s * 1e3:.1f} ms" for p, s in decision.seconds.items())
        print(f"  {key} -> {decision.path}" + (f"  ({timings})" if timings else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
