"""One transformer forward at a mid-size config on the CPU: tokens/s and peak memory per dtype.

8 blocks, video 16 heads x 64, audio 16 heads x 32, 4096 video + 128 audio tokens, 128 text tokens,
random weights, LTX-2.3 layout (gated attention, cross-attention AdaLN). Each dtype runs in its own
process so the peak resident set size (ru_maxrss) belongs to that run alone.

    uv run python benchmarks/transformer_forward.py            # float32 and bfloat16
    uv run python benchmarks/transformer_forward.py --dtype bf16
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import torch

from ltx_core.devices import parse_dtype
from ltx_core.model.transformer import Modality, ModelVariant, configure_transformer

VIDEO_TOKENS = 4096  # 16 latent frames x 16 x 16
AUDIO_TOKENS = 128
TEXT_TOKENS = 128

CONFIG = {
    "num_layers": 8,
    "num_attention_heads": 16,
    "attention_head_dim": 64,
    "cross_attention_dim": 1024,
    "audio_num_attention_heads": 16,
    "audio_attention_head_dim": 32,
    "audio_cross_attention_dim": 512,
    "apply_gated_attention": True,
    "cross_attention_adaln": True,
    "av_ca_timestep_scale_multiplier": 1000.0,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "frequencies_precision": "float64",
    "rope_type": "split",
}


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _inputs(dtype: torch.dtype, g: torch.Generator) -> tuple[Modality, Modality]:
    f, h, w = 16, 16, 16
    grid = torch.stack(torch.meshgrid(torch.arange(f), torch.arange(h), torch.arange(w), indexing="ij"), 0)
    grid = grid.reshape(3, -1).float()
    starts = grid * torch.tensor([8 / 24, 32, 32])[:, None]
    ends = starts + torch.tensor([8 / 24, 32, 32])[:, None]
    video_pos = torch.stack([starts, ends], dim=-1)[None]
    t = torch.arange(AUDIO_TOKENS, dtype=torch.float32) * 0.04
    audio_pos = torch.stack([t, t + 0.04], dim=-1)[None, None]
    sigma = torch.tensor([0.8])
    video = Modality(
        latent=torch.randn(1, VIDEO_TOKENS, 128, generator=g).to(dtype),
        timesteps=torch.full((1, VIDEO_TOKENS, 1), 0.8),
        sigma=sigma,
        positions=video_pos,
        context=torch.randn(1, TEXT_TOKENS, 1024, generator=g).to(dtype),
    )
    audio = Modality(
        latent=torch.randn(1, AUDIO_TOKENS, 128, generator=g).to(dtype),
        timesteps=torch.full((1, AUDIO_TOKENS, 1), 0.8),
        sigma=sigma,
        positions=audio_pos,
        context=torch.randn(1, TEXT_TOKENS, 512, generator=g).to(dtype),
    )
    return video, audio


def run(dtype_name: str) -> None:
    dtype = parse_dtype(dtype_name)
    torch.manual_seed(0)
    model = configure_transformer({"transformer": CONFIG}, ModelVariant.AUDIO_VIDEO)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():  # modulation tables start at zero; give them values
            if "table" in name:
                p.normal_(0, 0.05, generator=g)
    model = model.to(dtype).eval().requires_grad_(False)
    params = sum(p.numel() for p in model.parameters())
    video, audio = _inputs(dtype, g)
    with torch.inference_mode():
        start = time.perf_counter()
        v, a = model(video, audio)
        elapsed = time.perf_counter() - start
    assert v is not None and a is not None and torch.isfinite(v.float()).all()
    tokens = VIDEO_TOKENS + AUDIO_TOKENS
    print(
        f"{str(dtype).removeprefix('torch.'):>9}: {params / 1e6:.0f}M params, {tokens} tokens, "
        f"{elapsed:.2f} s/forward, {tokens / elapsed:,.0f} tokens/s, peak RSS {_peak_rss_mib():,.0f} MiB "
        f"({torch.get_num_threads()} threads)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", help="run one dtype in this process (float32 | bfloat16 | fp32 | bf16)")
    args = parser.parse_args()
    if args.dtype:
        run(args.dtype)
        return
    for name in ("float32", "bfloat16"):
        subprocess.run([sys.executable, __file__, "--dtype", name], check=True)


if __name__ == "__main__":
    main()
