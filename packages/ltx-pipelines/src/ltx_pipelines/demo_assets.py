"""Tiny, randomly initialised model files in the released formats, for `--demo` runs.

The demo exercises the real pipeline code end to end on a machine with no downloads and no GPU:
a single-file LTX checkpoint (all components under their released prefixes, config metadata), an
x2 spatial upsampler file and a tiny Gemma 3 folder with a locally built tokenizer. The weights
are random, so the output is noise; the point is that every code path a real run takes is taken.
Files are built once and cached under the user cache directory, with a manifest of their sizes and
hashes: a cache that is partial or corrupted (a killed build, a truncated copy) is rebuilt, and two
processes that start at once build it only once (the build holds an advisory lock).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union, overload

import torch
from safetensors.torch import save_file
from torch import nn

from ltx_pipelines.engine.defaults import DEFAULT_DEMO_FAMILY, DEMO_FAMILIES
from ltx_pipelines.io.atomic_files import apply_umask, atomic_output, remove_stale_partials

if TYPE_CHECKING:
    from ltx_pipelines.demo_assets_ltx25 import Ltx25DemoAssets

logger = logging.getLogger(__name__)

DEMO_VERSION = "1"  # bump when the demo configs change so stale caches are rebuilt
DEMO_MODEL_VERSION = "2.3.0"
DEMO_GEMMA_HIDDEN = 24
DEMO_GEMMA_LAYERS = 3

_BLOCK = {"num_layers": 1}

DEMO_CONFIG: dict[str, Any] = {
    "transformer": {
        "_class_name": "AVTransformer3DModel",
        "activation_fn": "gelu-approximate",
        "attention_bias": True,
        "norm_elementwise_affine": False,
        "norm_eps": 1e-6,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "positional_embedding_theta": 10000.0,
        "positional_embedding_type": "rope",
        "qk_norm": "rms_norm",
        "standardization_norm": "rms_norm",
        "timestep_scale_multiplier": 1000,
        "use_middle_indices_grid": True,
        "use_audio_video_cross_attention": True,
        "audio_positional_embedding_max_pos": [20],
        "connector_positional_embedding_max_pos": [4096],
        "connector_num_learnable_registers": 128,
        "use_embeddings_connector": True,
        "causal_temporal_positioning": True,
        "in_channels": 128,
        "out_channels": 128,
        "audio_in_channels": 128,
        "audio_out_channels": 128,
        "num_layers": 2,
        "num_attention_heads": 2,
        "attention_head_dim": 16,
        "cross_attention_dim": 32,
        "audio_num_attention_heads": 2,
        "audio_attention_head_dim": 8,
        "audio_cross_attention_dim": 16,
        "apply_gated_attention": True,
        "cross_attention_adaln": True,
        "av_ca_timestep_scale_multiplier": 1000.0,
        "caption_channels": DEMO_GEMMA_HIDDEN,
        "caption_proj_before_connector": True,
        "caption_proj_input_norm": False,
        "caption_projection_first_linear": False,
        "caption_projection_second_linear": False,
        "connector_apply_gated_attention": True,
        "connector_num_layers": 1,
        "connector_num_attention_heads": 2,
        "connector_attention_head_dim": 16,
        "audio_connector_num_attention_heads": 2,
        "audio_connector_attention_head_dim": 8,
        "frequencies_precision": "float64",
        "rope_type": "split",
        "text_encoder_norm_type": "per_token_rms",
    },
    "vae": {
        "_class_name": "CausalVideoAutoencoder",
        "dims": 3,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 128,
        "patch_size": 4,
        "norm_layer": "pixel_norm",
        "latent_log_var": "uniform",
        "spatial_padding_mode": "zeros",
        "timestep_conditioning": False,
        "causal_decoder": False,
        "decoder_base_channels": 4,
        "encoder_blocks": [
            ["res_x", _BLOCK],
            ["compress_space_res", {"multiplier": 1}],
            ["compress_time_res", {"multiplier": 1}],
            ["compress_all_res", {"multiplier": 1}],
            ["compress_all_res", {"multiplier": 2}],
        ],
        "decoder_blocks": [
            ["res_x", _BLOCK],
            ["compress_space", {"multiplier": 2}],
            ["res_x", _BLOCK],
            ["compress_time", {"multiplier": 2}],
            ["res_x", _BLOCK],
            ["compress_all", {"multiplier": 1}],
            ["res_x", _BLOCK],
            ["compress_all", {"multiplier": 2}],
            ["res_x", _BLOCK],
        ],
    },
    "audio_vae": {
        "model": {
            "params": {
                "ddconfig": {
                    "double_z": True,
                    "mel_bins": 64,
                    "z_channels": 8,
                    "resolution": 256,
                    "downsample_time": False,
                    "in_channels": 2,
                    "out_ch": 2,
                    "ch": 16,
                    "ch_mult": [1, 1, 1],
                    "num_res_blocks": 1,
                    "attn_resolutions": [],
                    "dropout": 0.0,
                    "mid_block_add_attention": False,
                    "norm_type": "pixel",
                    "causality_axis": "height",
                },
                "sampling_rate": 16000,
            }
        },
        "preprocessing": {"audio": {"sampling_rate": 16000}, "stft": {"hop_length": 160}},
    },
    "vocoder": {
        "vocoder": {
            "resblock": "AMP1",
            "resblock_kernel_sizes": [3, 7, 11],
            "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
            "stereo": True,
            "use_tanh_at_final": False,
            "activation": "snakebeta",
            "use_bias_at_final": False,
            "upsample_initial_channel": 16,
            "upsample_rates": [10, 4, 2, 2],
            "upsample_kernel_sizes": [20, 8, 4, 4],
        },
        "bwe": {
            "resblock": "AMP1",
            "resblock_kernel_sizes": [3, 7, 11],
            "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
            "stereo": True,
            "use_tanh_at_final": False,
            "activation": "snakebeta",
            "use_bias_at_final": False,
            "upsample_initial_channel": 16,
            "upsample_rates": [6, 5, 8],
            "upsample_kernel_sizes": [12, 11, 16],
            "apply_final_activation": False,
            "input_sampling_rate": 16000,
            "output_sampling_rate": 48000,
            "hop_length": 80,
            "n_fft": 512,
            "win_size": 512,
            "num_mels": 64,
        },
    },
}

DEMO_UPSAMPLER_CONFIG: dict[str, Any] = {
    "_class_name": "LatentUpsampler",
    "in_channels": 128,
    "mid_channels": 32,
    "num_blocks_per_stage": 1,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "spatial_scale": 2.0,
    "rational_resampler": False,
}


@dataclass(frozen=True)
class DemoAssets:
    checkpoint: Path
    spatial_upsampler: Path
    gemma_root: Path


AnyDemoAssets = Union[DemoAssets, "Ltx25DemoAssets"]

MANIFEST_NAME = "manifest.json"
_LOCK_NAME = ".build.lock"
_PARTIAL_MARK = ".partial"


def _check_family(family: str) -> str:
    if family not in DEMO_FAMILIES:
        raise ValueError(f"unknown demo model family {family!r}; accepted: {', '.join(DEMO_FAMILIES)}")
    return family


def _family_version(family: str) -> str:
    if family == "ltx-2.5":
        from ltx_pipelines.demo_assets_ltx25 import DEMO_LTX25_VERSION

        return f"ltx-2.5-v{DEMO_LTX25_VERSION}"
    return DEMO_VERSION


def default_demo_dir(family: str = DEFAULT_DEMO_FAMILY) -> Path:
    """The user-cache folder of a family's demo set (LTX-2.3 keeps the folder it always had)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "ltx2-demo"
    if _check_family(family) == "ltx-2.5":
        return base / _family_version(family)
    return base / f"v{DEMO_VERSION}"


def demo_assets_at(root: Path) -> DemoAssets:
    """Where the demo files live under `root` (whether or not they exist yet)."""
    return DemoAssets(
        checkpoint=root / "ltx-demo-distilled.safetensors",
        spatial_upsampler=root / "ltx-demo-spatial-upscaler-x2.safetensors",
        gemma_root=root / "gemma-3-demo",
    )


def _partial_name(path: Path) -> Path:
    # Unique per writer; the leading dot and the mark let a later build recognise and delete leftovers.
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{_PARTIAL_MARK}")


def _save_atomically(tensors: dict[str, torch.Tensor], metadata: dict[str, str], path: Path) -> None:
    with atomic_output(path, overwrite=True) as tmp:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata)
        apply_umask(tmp)  # safetensors may recreate the file private


def _to_storage_dtype(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # The released files store floating tensors as bfloat16.
    return {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in tensors.items()}


def _file_keys_of(component: str, module: nn.Module) -> dict[str, torch.Tensor]:
    """Map a component's module keys to the released single-file keys (the inverse of our key rules)."""

    def file_key(key: str) -> str:
        if component == "transformer":
            return "model.diffusion_model." + key
        if component == "text_embeddings":
            for ours, theirs in (
                ("video_connector.", "model.diffusion_model.video_embeddings_connector."),
                ("audio_connector.", "model.diffusion_model.audio_embeddings_connector."),
                ("feature_extractor.", "text_embedding_projection."),
            ):
                if key.startswith(ours):
                    return theirs + key[len(ours) :]
            raise ValueError(f"unexpected text-embeddings key {key!r}")
        if component == "vocoder":
            return "vocoder." + key
        vae_prefix, part = {
            "video_encoder": ("vae.", "encoder."),
            "video_decoder": ("vae.", "decoder."),
            "audio_encoder": ("audio_vae.", "encoder."),
            "audio_decoder": ("audio_vae.", "decoder."),
        }[component]
        if key.startswith("per_channel_statistics."):
            return vae_prefix + key
        return vae_prefix + part + key

    return {file_key(k): v for k, v in module.state_dict().items()}


def _randomise_latent_statistics(tensors: dict[str, torch.Tensor], generator: torch.Generator) -> None:
    # Freshly initialised statistics may be zeros; the VAEs divide by std-of-means.
    for key, value in tensors.items():
        if key.endswith("per_channel_statistics.std-of-means"):
            tensors[key] = 0.5 + torch.rand(value.shape, generator=generator)
        elif key.endswith("per_channel_statistics.mean-of-means"):
            tensors[key] = 0.1 * torch.randn(value.shape, generator=generator)


# ---- the three demo parts -------------------------------------------------------------------------


def write_demo_checkpoint(
    path: Path,
    seed: int = 0,
    *,
    config: Mapping[str, Any] | None = None,
    model_version: str | None = DEMO_MODEL_VERSION,
) -> None:
    """The single-file checkpoint: every component under its released key prefix, config metadata.
    `config`: another architecture of the same components (tests, fixtures; default DEMO_CONFIG);
    `model_version` None: no version entry (as LTX-2.0 files)."""
    config = DEMO_CONFIG if config is None else config
    from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER
    from ltx_core.model.transformer import AV_TRANSFORMER
    from ltx_core.model.video_vae import VIDEO_DECODER, VIDEO_ENCODER
    from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec

    components = {
        "transformer": AV_TRANSFORMER,
        "text_embeddings": text_embeddings_spec(DEMO_GEMMA_HIDDEN, DEMO_GEMMA_LAYERS + 1),
        "video_encoder": VIDEO_ENCODER,
        "video_decoder": VIDEO_DECODER,
        "audio_encoder": AUDIO_ENCODER,
        "audio_decoder": AUDIO_DECODER,
        "vocoder": VOCODER,
    }
    tensors: dict[str, torch.Tensor] = {}
    # Module initialisers draw from the global generator: seed it for reproducible files, and give the
    # caller's random state back afterwards.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        for name, spec in components.items():
            with torch.device("cpu"):
                module = spec.configurator(config)
            for key, value in _file_keys_of(name, module).items():
                # Encoder and decoder share the latent statistics; keep the first copy.
                tensors.setdefault(key, value.detach().clone())
        _randomise_latent_statistics(tensors, generator)
    metadata = {"config": json.dumps(config)}
    if model_version is not None:
        metadata["model_version"] = model_version
    _save_atomically(_to_storage_dtype(tensors), metadata, path)


def write_demo_upsampler(path: Path, seed: int = 0) -> None:
    """The x2 spatial latent upsampler file (flat `config` metadata, keys as they are)."""
    from ltx_core.model.upsampler import LATENT_UPSAMPLER

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        with torch.device("cpu"):
            module = LATENT_UPSAMPLER.configurator(DEMO_UPSAMPLER_CONFIG)
        tensors = {k: v.detach().clone() for k, v in module.state_dict().items()}
    _save_atomically(_to_storage_dtype(tensors), {"config": json.dumps(DEMO_UPSAMPLER_CONFIG)}, path)


def write_demo_gemma(path: Path, seed: int = 0) -> None:
    """The tiny Gemma 3 folder, built beside `path` and swapped in whole."""
    from ltx_core.text_encoders.gemma import build_tiny_gemma_folder

    tmp = _partial_name(path)
    old = path.with_name(tmp.name.replace(_PARTIAL_MARK, f".old{_PARTIAL_MARK}"))
    try:
        build_tiny_gemma_folder(tmp, hidden_size=DEMO_GEMMA_HIDDEN, num_layers=DEMO_GEMMA_LAYERS, seed=seed)
        apply_umask(tmp)
        # A folder cannot replace a non-empty one in one step: move the old one aside first.
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, old):
            if leftover.exists():
                shutil.rmtree(leftover)


def _parts(assets: AnyDemoAssets) -> dict[str, tuple[Path, Callable[[Path], None]]]:
    if not isinstance(assets, DemoAssets):
        from ltx_pipelines import demo_assets_ltx25 as ltx25

        return {
            "transformer": (assets.transformer, ltx25.write_ltx25_transformer),
            "text_encoder": (assets.text_encoder, ltx25.write_ltx25_text_encoder),
            "video_vae": (assets.video_vae, ltx25.write_ltx25_video_vae),
            "video_vae_conv": (assets.video_vae_conv, ltx25.write_ltx25_video_vae_conv),
            "audio_vae": (assets.audio_vae, ltx25.write_ltx25_audio_vae),
            "duration_head": (assets.duration_head, ltx25.write_ltx25_duration_head),
            "spatial_upsampler": (assets.spatial_upsampler, ltx25.write_ltx25_spatial_upsampler),
            "temporal_upsampler": (assets.temporal_upsampler, ltx25.write_ltx25_temporal_upsampler),
            "dubit_ic_lora": (assets.dubit_ic_lora, ltx25.write_ltx25_dubit_ic_lora),
            "detailing_ic_lora": (assets.detailing_ic_lora, ltx25.write_ltx25_detailing_ic_lora),
        }
    return {
        "checkpoint": (assets.checkpoint, write_demo_checkpoint),
        "spatial_upsampler": (assets.spatial_upsampler, write_demo_upsampler),
        "gemma": (assets.gemma_root, write_demo_gemma),
    }


# ---- the manifest: what a complete cache holds -----------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _describe(root: Path, part_path: Path) -> dict[str, dict[str, Any]]:
    files = sorted(p for p in part_path.rglob("*") if p.is_file()) if part_path.is_dir() else [part_path]
    return {str(f.relative_to(root)): {"bytes": f.stat().st_size, "sha256": _sha256(f)} for f in files}


def _intact(root: Path, files: Any) -> bool:
    if not isinstance(files, dict) or not files:
        return False
    for name, expected in files.items():
        path = root / name
        try:
            if path.stat().st_size != expected["bytes"] or _sha256(path) != expected["sha256"]:
                return False
        except (OSError, KeyError, TypeError):
            return False
    return True


def _version_of(assets: AnyDemoAssets) -> str:
    return _family_version("ltx-2.3" if isinstance(assets, DemoAssets) else "ltx-2.5")


def _stale_parts(root: Path, assets: AnyDemoAssets) -> list[str]:
    """Names of the parts that are missing, partial or differ from the manifest (all of them when the
    manifest itself is missing or unreadable)."""
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text())
        recorded = manifest["parts"] if manifest.get("demo_version") == _version_of(assets) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        recorded = {}
    return [name for name in _parts(assets) if not _intact(root, recorded.get(name))]


def _write_manifest(root: Path, assets: AnyDemoAssets) -> None:
    parts = {name: _describe(root, path) for name, (path, _) in _parts(assets).items()}
    text = json.dumps({"demo_version": _version_of(assets), "parts": parts}, indent=2, sort_keys=True) + "\n"
    with atomic_output(root / MANIFEST_NAME, overwrite=True) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _remove_leftovers(root: Path) -> None:
    # Called with the build lock held: any partial file or folder is from a build that died.
    remove_stale_partials(root, min_age_s=0.0)
    for leftover in root.glob(f".*{_PARTIAL_MARK}"):
        logger.info("removing %s, left by an interrupted demo build", leftover)
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


@contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """An exclusive advisory lock on `root` (fcntl.flock; per open file, so threads exclude each other too)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): concurrent builds then only cost time, the renames stay atomic
        yield
        return
    with (root / _LOCK_NAME).open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process that is building the demo models in %s", root)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@overload
def ensure_demo_assets(root: Path | None = None, *, family: Literal["ltx-2.3"] = ...) -> DemoAssets: ...


@overload
def ensure_demo_assets(root: Path | None = None, *, family: Literal["ltx-2.5"]) -> Ltx25DemoAssets: ...


@overload
def ensure_demo_assets(root: Path | None = None, *, family: str) -> AnyDemoAssets: ...


def ensure_demo_assets(root: Path | None = None, *, family: str = DEFAULT_DEMO_FAMILY) -> AnyDemoAssets:
    """The demo model set of `family` under `root` (default: the user cache), built or repaired where
    needed: `DemoAssets` for `ltx-2.3` (single file, upsampler, Gemma 3 folder), `Ltx25DemoAssets` for
    `ltx-2.5` (split component files; `.model_files()` is the set the pipelines take).

    A complete cache is only verified (sizes and hashes against its manifest). Otherwise the missing
    or damaged parts are rebuilt under a lock, so concurrent callers build once and never see a
    half-written file; the manifest is written last.
    """
    _check_family(family)
    root = Path(root) if root is not None else default_demo_dir(family)
    root.mkdir(parents=True, exist_ok=True)
    if family == "ltx-2.5":
        from ltx_pipelines.demo_assets_ltx25 import ltx25_demo_assets_at

        assets: AnyDemoAssets = ltx25_demo_assets_at(root)
    else:
        assets = demo_assets_at(root)
    if not _stale_parts(root, assets):
        return assets
    with _build_lock(root):
        stale = _stale_parts(root, assets)  # another process may have finished the build while we waited
        if stale:
            _remove_leftovers(root)
            logger.info("building demo models (%s) in %s", ", ".join(stale), root)
            parts = _parts(assets)
            for name in stale:
                path, write = parts[name]
                write(path)
            _write_manifest(root, assets)
    return assets
