"""Fixtures for the pipeline tests: the tiny in-process model set the behaviour tests run on, the golden
upsampler for the parity tests, and writers for small LoRAs and conditioning images."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from ltx_core.loader import read_safetensors_header
from ltx_core.loader import state_dict as state_dict_module
from ltx_pipelines.demo import DemoAssets, default_demo_dir, ensure_demo_assets

# The prefix transformer keys have in a released checkpoint, and the one LoRA files use for them.
_CHECKPOINT_TRANSFORMER_PREFIX = "model.diffusion_model."
_LORA_PREFIX = "diffusion_model."


@pytest.fixture(scope="session")
def demo_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test-owned `XDG_CACHE_HOME` whose demo model cache is already built, for `--demo` runs that
    need not test the build itself (set it with monkeypatch)."""
    home = tmp_path_factory.mktemp("xdg_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(home))
        ensure_demo_assets(default_demo_dir())
    return home


@pytest.fixture(scope="session")
def tiny_models(demo_cache_home: Path) -> DemoAssets:
    """The demo model set (checkpoint, x2 spatial upsampler, Gemma folder), built in-process once per
    session under a test-owned folder: every behaviour test runs on these, never on the golden set."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
        return ensure_demo_assets(default_demo_dir())


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_models: DemoAssets) -> Path:
    return tiny_models.checkpoint


@pytest.fixture(scope="session")
def tiny_spatial_upsampler(tiny_models: DemoAssets) -> Path:
    return tiny_models.spatial_upsampler


@pytest.fixture(scope="session")
def tiny_gemma_root(tiny_models: DemoAssets) -> Path:
    """A random Gemma 3 folder whose hidden size and layer count fit the tiny checkpoint's text path."""
    return tiny_models.gemma_root


@pytest.fixture(scope="session")
def golden_spatial_upsampler(golden_dir: Path, golden_manifest: dict) -> Path:
    """The golden set's x2 spatial upsampler file (the one the two-stage pipelines use between stages),
    picked by its config rather than by its name in the manifest."""
    upsamplers = golden_manifest["spatial_upsamplers"]

    def is_spatial_x2(config: dict) -> bool:  # the upsampler config defaults: spatial, scale 2
        spatial = config.get("spatial_upsample", True) and not config.get("temporal_upsample", False)
        return bool(spatial) and float(config.get("spatial_scale", 2.0)) == 2.0

    x2 = {name: entry["file"] for name, entry in upsamplers.items() if is_spatial_x2(entry["config"])}
    assert x2, f"the golden set has no x2 spatial upsampler: {sorted(upsamplers)}"
    if len(x2) > 1:  # several x2 files: the one named x2 is the pipeline's
        assert "x2" in x2, f"several x2 spatial upsamplers and none named 'x2': {sorted(x2)}"
        return golden_dir / x2["x2"]
    return golden_dir / next(iter(x2.values()))


@pytest.fixture(scope="session")
def write_tiny_lora() -> Callable[..., Path]:
    """write_tiny_lora(checkpoint, path, rank=2, scale=0.5, seed=0) -> path.

    A LoRA in the released naming (`diffusion_model.<module>.lora_A/B.weight`) with a random low-rank
    pair for every 2-D weight of the checkpoint's transformer blocks; shapes come from the header.
    """

    def write(checkpoint: Path, path: Path, *, rank: int = 2, scale: float = 0.5, seed: int = 0) -> Path:
        header = read_safetensors_header(checkpoint)
        generator = torch.Generator().manual_seed(seed)
        tensors: dict[str, torch.Tensor] = {}
        for key, info in sorted(header.tensors.items()):
            module_key = key.removeprefix(_CHECKPOINT_TRANSFORMER_PREFIX)
            if module_key == key or not module_key.startswith("transformer_blocks.") or len(info.shape) != 2:
                continue
            if not module_key.endswith(".weight"):
                continue
            out_features, in_features = info.shape
            base = _LORA_PREFIX + module_key.removesuffix(".weight")
            tensors[f"{base}.lora_A.weight"] = torch.randn(rank, in_features, generator=generator) * scale
            tensors[f"{base}.lora_B.weight"] = torch.randn(out_features, rank, generator=generator) * scale
        if not tensors:
            raise ValueError(f"{checkpoint} has no 2-D transformer block weights to adapt")
        save_file(tensors, str(path))
        return path

    return write


@pytest.fixture(scope="session")
def write_test_image() -> Callable[..., Path]:
    """write_test_image(path, width=96, height=80, seed=0) -> path: a smooth coloured PNG."""

    def write(path: Path, width: int = 96, height: int = 80, seed: int = 0) -> Path:
        rng = np.random.default_rng(seed)
        ys = np.linspace(0.0, 1.0, height)[:, None, None]
        xs = np.linspace(0.0, 1.0, width)[None, :, None]
        phase = rng.uniform(0.0, 2 * np.pi, size=(1, 1, 3))
        pixels = 0.5 + 0.45 * np.sin(5.0 * (ys + 2.0 * xs) + phase)
        Image.fromarray((pixels * 255).round().astype(np.uint8), "RGB").save(path)
        return path

    return write


# ---- media for the conditioned pipelines (video references, mask videos, lip-dub sources) ---------------


def _write_clip(
    path: Path,
    *,
    frames: int,
    height: int,
    width: int,
    fps: int = 24,
    audio_rate: int | None = 16000,
    seed: int = 0,
) -> Path:
    """An H.264 clip of moving colour gradients, with a stereo AAC tone track when `audio_rate` is set."""
    rng = np.random.default_rng(seed)
    phase = rng.uniform(0, 2 * np.pi, size=3)
    ys = np.linspace(0, 1, height)[:, None, None]
    xs = np.linspace(0, 1, width)[None, :, None]
    with av.open(str(path), mode="w") as container:
        video = container.add_stream("libx264", rate=fps, options={"crf": "10"})
        video.height, video.width, video.pix_fmt = height, width, "yuv420p"
        audio = None
        if audio_rate is not None:
            audio = container.add_stream("aac", rate=audio_rate, layout="stereo")
        for i in range(frames):
            pixels = 0.5 + 0.45 * np.sin(4 * (ys + xs) + phase + 0.3 * i)
            frame = av.VideoFrame.from_ndarray((pixels * 255).astype(np.uint8), format="rgb24")
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        if audio is not None:
            samples = int(audio_rate * frames / fps)
            t = np.arange(samples) / audio_rate
            tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            block = np.stack([tone, tone])
            for start in range(0, samples, 1024):
                chunk = np.ascontiguousarray(block[:, start : start + 1024])
                frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
                frame.sample_rate = audio_rate
                container.mux(audio.encode(frame))
            container.mux(audio.encode(None))
    return path


@dataclass(frozen=True)
class Written:
    frames: np.ndarray  # (F, H, W, 3) uint8
    fps: Fraction
    audio_channels: int
    audio_samples: int
    sidecar: dict[str, Any]


def _read_output(path: Path) -> Written:
    with av.open(str(path)) as container:
        assert len(container.streams.video) == 1, "one video stream"
        assert len(container.streams.audio) == 1, "one audio stream"
        fps = container.streams.video[0].average_rate
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
        container.seek(0)
        chunks = [f.to_ndarray() for f in container.decode(audio=0)]
    audio = np.concatenate(chunks, axis=-1)
    return Written(frames, fps, audio.shape[0], audio.shape[1], json.loads(path.with_suffix(".json").read_text()))


@pytest.fixture(scope="session")
def write_clip() -> Callable[..., Path]:
    """write_clip(path, frames=, height=, width=, fps=24, audio_rate=16000, seed=0) -> path (H.264 + AAC)."""
    return _write_clip


@pytest.fixture(scope="session")
def read_output() -> Callable[[Path], Written]:
    """read_output(mp4) -> Written: decoded frames, frame rate, audio channels/samples and the sidecar."""
    return _read_output


@pytest.fixture
def read_keys(monkeypatch) -> list[str]:
    """Every tensor key the loader reads from a safetensors file while the test runs."""
    read: list[str] = []
    original = state_dict_module.safe_open

    class CountingOpen:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.inner = original(*args, **kwargs)

        def __enter__(self) -> CountingOpen:
            self.inner.__enter__()
            return self

        def __exit__(self, *exc: Any) -> None:
            self.inner.__exit__(*exc)

        def get_tensor(self, key: str) -> torch.Tensor:
            read.append(key)
            return self.inner.get_tensor(key)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(state_dict_module, "safe_open", CountingOpen)
    return read


@pytest.fixture(scope="session", params=("single-file", "diffusers"))
def golden_pipeline_models(request: pytest.FixtureRequest, golden_checkpoint: Path, golden_spatial_upsampler: Path):
    """(checkpoint, x2 spatial upsampler) as the pipelines take them: the golden files, or the diffusers
    model folder and `latent_upsampler*/` folder diffusers' converter wrote from them (`interop/`)."""
    if request.param == "single-file":
        return golden_checkpoint, golden_spatial_upsampler
    interop = request.getfixturevalue("golden_interop_dir")
    conversion = json.loads((interop / "verification.json").read_text())["conversion"]
    folders = {v["source"]: k for k, v in conversion.items() if isinstance(v, dict) and "source" in v}
    name = golden_spatial_upsampler.name
    assert name in folders, f"interop/verification.json names no diffusers folder converted from {name}"
    return interop / "diffusers", interop / "diffusers" / folders[name]
