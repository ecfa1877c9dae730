"""Converting model files between the reference's single file and diffusers' model folder.

    python -m ltx_core.convert to-diffusers CHECKPOINT OUT_DIR [--upsampler FILE ...] [--[no-]distilled]
    python -m ltx_core.convert from-diffusers FOLDER OUT.safetensors
    python -m ltx_core.convert to-gguf CHECKPOINT OUT.gguf [--qtype Q8_0|F16|BF16]
    python -m ltx_core.convert to-gguf GEMMA_FOLDER OUT.gguf [--qtype Q8_0|F16|BF16]

`to-diffusers` writes the folder diffusers' own converter writes (`model_index.json`, `transformer/`,
`connectors/`, `vae/`, `audio_vae/`, `vocoder/`, `scheduler/`, and `latent_upsampler*/` for each
`--upsampler`): the same key names, the same `config.json` contents, every tensor copied as stored (no
precision change), for LTX-2.3 and LTX-2.0 files alike; the scheduler is the distilled one for a distilled
file. `from-diffusers` writes the single file back (or, given a `latent_upsampler*/` folder, the upsampler
file), its `config` metadata translated from the folders' `config.json`; a folder of some components gives
a file of those.

Round trips are tensor-exact, with one exception diffusers imposes: its video VAE keeps only the latent
mean and std of the reference's five per-channel statistics (`channel`, `mean-of-stds`,
`mean-of-stds_over_std-of-means` are read by no model and are not carried).

`to-gguf` writes the transformer's tensors (every `model.diffusion_model.*` key, names unchanged, as
ComfyUI-GGUF's files name them) to a GGUF file: 2-D weights of at least 1024 values whose rows fill whole
blocks in `--qtype`, the rest as stored; the checkpoint's metadata (`config`, `model_version`) becomes
string fields of the same names, so the file builds the transformer on its own (`ltx_core.loader.gguf_file`).
Given a Gemma 3 folder, it writes the text model in llama.cpp's gemma3 layout (the files ComfyUI-GGUF users
download), with the config and tokenizer the text encoder needs (`ltx_core.text_encoders.gemma.gguf_gemma`).

Nothing existing is overwritten; the output appears (renamed into place) only once complete. Exit status:
0 written; 2 a bad input or an existing output; 1 the output could not be written (a full disk, a folder
that is not writable), with nothing left behind.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from ltx_core.command_parser import CommandParser
from ltx_core.loader import diffusers_config as dc
from ltx_core.loader import diffusers_names as dn
from ltx_core.loader.diffusers_folder import (
    COMPONENT_FOLDERS,
    CONFIG,
    MODEL_INDEX,
    WEIGHTS_STEM,
    read_diffusers_folder,
    weight_files,
)
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.gguf_file import MIN_QUANTIZED_NUMEL, write_gguf
from ltx_core.loader.key_rules import TRANSFORMER_PREFIX
from ltx_core.loader.safetensors_header import read_safetensors_header
from ltx_core.write_errors import write_failure

logger = logging.getLogger(__name__)

# The pipeline index and scheduler diffusers' converter writes for a full (non-distilled) LTX-2 pipeline.
MODEL_INDEX_CONTENT: dict[str, Any] = {
    "_class_name": "LTX2Pipeline",
    "_diffusers_version": dc.DIFFUSERS_VERSION,
    "audio_vae": ["diffusers", dc.AUDIO_VAE_CLASS],
    "connectors": ["ltx2", dc.CONNECTORS_CLASS],
    "duration_head": [None, None],
    "processor": [None, None],
    "prompt_enhancer": [None, None],
    "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
    "text_encoder": [None, None],
    "tokenizer": [None, None],
    "transformer": ["diffusers", dc.TRANSFORMER_CLASS],
    "vae": ["diffusers", dc.VIDEO_VAE_CLASS],
    "vocoder": ["ltx2", dc.VOCODER_CLASS],
}
SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "_diffusers_version": dc.DIFFUSERS_VERSION,
    "base_image_seq_len": 1024,
    "base_shift": 0.95,
    "invert_sigmas": False,
    "max_image_seq_len": 4096,
    "max_shift": 2.05,
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "shift_terminal": 0.1,
    "stochastic_sampling": False,
    "time_shift_type": "exponential",
    "use_beta_sigmas": False,
    "use_dynamic_shifting": True,
    "use_exponential_sigmas": False,
    "use_karras_sigmas": False,
}
# A distilled checkpoint's scheduler: its sigmas are used as they are (diffusers' converter writes this for a
# checkpoint whose file name says "distilled").
DISTILLED_SCHEDULER_OVERRIDES: dict[str, Any] = {"use_dynamic_shifting": False, "shift_terminal": None}
WEIGHTS_FILE = f"{WEIGHTS_STEM}.safetensors"


def scheduler_config(*, distilled: bool) -> dict[str, Any]:
    """The scheduler_config.json diffusers' converter writes for a distilled or a full checkpoint."""
    return {**SCHEDULER_CONFIG, **(DISTILLED_SCHEDULER_OVERRIDES if distilled else {})}


def is_distilled_name(path: str | Path) -> bool:
    """diffusers' converter rule: a checkpoint is distilled when its file name says so (the single file
    states it nowhere else)."""
    return "distilled" in Path(path).name


def diffusers_load_problems(config: Mapping[str, Any], tensors: Mapping[str, Any]) -> list[str]:
    """Why diffusers' own classes would not load the folder written from this single file (empty: they
    would). `tensors`: the file's header entries (name -> shape-bearing info)."""
    problems = []
    audio = config.get("audio_vae", {}).get("model", {}).get("params", {}).get("ddconfig", {})
    stats = tensors.get("audio_vae.per_channel_statistics.mean-of-means")
    if stats is not None and audio and list(stats.shape) != [audio.get("ch", 128)]:
        # AutoencoderKLLTX2Audio sizes latents_mean / latents_std by base_channels; the reference by
        # latent channels x latent mel bins. Only files where the two agree (every release) load there.
        problems.append(
            f"audio_vae: {stats.shape[0]} latent statistics but base_channels (ch) {audio.get('ch')}; diffusers' "
            "AutoencoderKLLTX2Audio holds base_channels statistics and refuses these weights"
        )
    return problems


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@contextmanager
def _atomic_folder(target: Path) -> Iterator[Path]:
    """A hidden temporary folder beside `target`, renamed to it when the block completes."""
    if target.exists():
        raise FileExistsError(f"output {str(target)!r} already exists; choose a new folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700 is for the temporary name only
    try:
        yield tmp
        if target.exists():
            raise FileExistsError(f"output {str(target)!r} appeared while converting; left it untouched")
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def _atomic_file(target: Path) -> Iterator[Path]:
    if target.exists():
        raise FileExistsError(f"output {str(target)!r} already exists; choose a new file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(0o666 & ~_umask())
    try:
        yield tmp
        if target.exists():
            raise FileExistsError(f"output {str(target)!r} appeared while converting; left it untouched")
        os.rename(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_json(path: Path, content: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(content, indent=2) + "\n")


def _copy_renamed(
    sources: Sequence[Path], rename: Callable[[str], str | None], target: Path, metadata: Mapping[str, str]
) -> int:
    """Copy every tensor `rename` maps (None: skip) into one safetensors file; returns the count."""
    tensors = {}
    for path in sources:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                new = rename(key)
                if new is None:
                    continue
                if new in tensors:
                    raise CheckpointError(f"{str(path)!r}: two tensors map to {new!r}")
                tensors[new] = f.get_tensor(key)
    save_file(tensors, str(target), metadata=dict(metadata))
    return len(tensors)


def _upsampler_folder_name(config: Mapping[str, Any]) -> str:
    if config.get("temporal_upsample"):
        return "latent_upsampler_temporal"
    scale = float(config.get("spatial_scale", 2.0))
    return "latent_upsampler" if scale == 2.0 else f"latent_upsampler_x{scale:g}"


# A full single file carries these config sections (one per model that has a diffusers folder).
_FULL_SECTIONS = ("transformer", "vae", "audio_vae", "vocoder")
# The connectors' input projection: LTX-2.3 names (per-modality aggregate) first, then LTX-2.0's.
_PROJECTION_NAMES = ("text_embedding_projection.video_aggregate_embed", "text_embedding_projection.aggregate_embed")
# A component folder's config.json and the rename of single-file keys into its weights (None: not its key).
_Component = tuple[dict[str, Any], Callable[[str], str | None]]


@dataclass(frozen=True)
class _TensorFacts:
    """What the diffusers configs need that the single file's config does not state, read off tensor shapes."""

    vocoder_in_channels: int
    bwe_in_channels: int | None
    projection_in_features: int
    projection_bias: bool


def _full_config(checkpoint: Path, metadata: Mapping[str, Any]) -> dict[str, Any]:
    config = metadata.get("config")
    missing = [s for s in _FULL_SECTIONS if not isinstance(config, dict) or s not in config]
    if missing:
        raise CheckpointError(
            f"{str(checkpoint)!r} is not a full single-file checkpoint: no config section(s) {missing}"
        )
    return config


def _tensor_facts(checkpoint: Path, config: Mapping[str, Any], tensors: Mapping[str, Any]) -> _TensorFacts:
    vocoder_root = "vocoder.vocoder." if "bwe" in config["vocoder"] else "vocoder."
    vocoder_in = tensors.get(f"{vocoder_root}conv_pre.weight")
    bwe_in = tensors.get("vocoder.bwe_generator.conv_pre.weight")
    if vocoder_in is None:
        raise CheckpointError(f"{str(checkpoint)!r} has no {vocoder_root}conv_pre.weight for the vocoder")
    projection = next((name for name in _PROJECTION_NAMES if f"{name}.weight" in tensors), None)
    if projection is None:
        raise CheckpointError(f"{str(checkpoint)!r} has no text_embedding_projection weight for the connectors")
    return _TensorFacts(
        vocoder_in_channels=vocoder_in.shape[1],
        bwe_in_channels=None if bwe_in is None else bwe_in.shape[1],
        projection_in_features=tensors[f"{projection}.weight"].shape[1],
        projection_bias=f"{projection}.bias" in tensors,
    )


def _check_loadable(checkpoint: Path, config: Mapping[str, Any], tensors: Mapping[str, Any], refuse: bool) -> None:
    problems = diffusers_load_problems(config, tensors)
    if problems and refuse:
        raise CheckpointError(f"diffusers could not load the folder of {str(checkpoint)!r}: {'; '.join(problems)}")
    for problem in problems:
        logger.warning("diffusers will not load this export: %s", problem)


def _upsampler_folders(upsamplers: Sequence[str | Path]) -> list[tuple[Path, dict[str, Any], str]]:
    """(file, config, folder name) per upsampler file, each checked to be a latent upsampler of its own folder."""
    found = []
    for path in upsamplers:
        config = read_safetensors_header(path).metadata.get("config")
        if not isinstance(config, dict) or config.get("_class_name") != "LatentUpsampler":
            raise CheckpointError(f"--upsampler {str(path)!r} is not a latent upsampler file")
        found.append((Path(path), config, _upsampler_folder_name(config)))
    names = [name for _, _, name in found]
    if len(set(names)) != len(names):
        raise CheckpointError(f"two upsamplers would share a folder name: {names}")
    return found


def _diffusers_components(config: Mapping[str, Any], facts: _TensorFacts) -> dict[str, _Component]:
    t, vae, audio_vae = config["transformer"], config["vae"], config["audio_vae"]
    stft = audio_vae.get("preprocessing", {}).get("stft", {})
    pairs = dc.vae_block_renames(vae)
    transformer = dc.transformer_to_diffusers(
        t,
        vae_scale=dc.vae_scale_factors(vae),
        audio_hop_length=stft.get("hop_length", 160),
        audio_sampling_rate=audio_vae["model"]["params"].get("sampling_rate", 16000),
    )
    connectors = dc.connectors_to_diffusers(
        t,
        text_proj_in_factor=facts.projection_in_features // t["caption_channels"],
        proj_bias=facts.projection_bias,
    )
    vocoder = dc.vocoder_to_diffusers(
        config["vocoder"], in_channels=facts.vocoder_in_channels, bwe_in_channels=facts.bwe_in_channels
    )
    return {
        "transformer": (transformer, dn.transformer_key_to_diffusers),
        "connectors": (connectors, dn.connectors_key_to_diffusers),
        "vae": (dc.video_vae_to_diffusers(vae), lambda key: dn.video_vae_key_to_diffusers(key, pairs)),
        "audio_vae": (dc.audio_vae_to_diffusers(audio_vae), dn.audio_vae_key_to_diffusers),
        "vocoder": (vocoder, dn.vocoder_key_to_diffusers),
    }


def single_file_to_diffusers(
    checkpoint: str | Path,
    out_dir: str | Path,
    *,
    upsamplers: Sequence[str | Path] = (),
    distilled: bool | None = None,
    allow_unloadable: bool = True,
) -> Path:
    """Write the diffusers folder of a single-file checkpoint (and of separate upsampler files).

    `distilled`: the scheduler to write (None: diffusers' converter rule, "distilled" in the file name).
    A file whose folder diffusers' classes would refuse (`diffusers_load_problems`) is written with a
    warning naming why, or refused when `allow_unloadable` is False."""
    checkpoint, out_dir = Path(checkpoint), Path(out_dir)
    header = read_safetensors_header(checkpoint)
    config = _full_config(checkpoint, header.metadata)
    facts = _tensor_facts(checkpoint, config, header.tensors)
    _check_loadable(checkpoint, config, header.tensors, refuse=not allow_unloadable)
    upsampler_folders = _upsampler_folders(upsamplers)
    components = _diffusers_components(config, facts)
    index = {**MODEL_INDEX_CONTENT, "vocoder": ["ltx2", components["vocoder"][0]["_class_name"]]}
    distilled = is_distilled_name(checkpoint) if distilled is None else distilled
    with _atomic_folder(out_dir) as tmp:
        for name, (component_config, rename) in components.items():
            (tmp / name).mkdir()
            _write_json(tmp / name / CONFIG, component_config)
            count = _copy_renamed([checkpoint], rename, tmp / name / WEIGHTS_FILE, {"format": "pt"})
            logger.info("%s: %d tensors", name, count)
        (tmp / "scheduler").mkdir()
        _write_json(tmp / "scheduler" / "scheduler_config.json", scheduler_config(distilled=distilled))
        _write_json(tmp / MODEL_INDEX, index)
        for path, up_config, name in upsampler_folders:
            (tmp / name).mkdir()
            _write_json(tmp / name / CONFIG, dc.upsampler_to_diffusers(up_config))
            _copy_renamed([path], lambda key: key, tmp / name / WEIGHTS_FILE, {"format": "pt"})
    return out_dir


def diffusers_to_single_file(folder: str | Path, out_file: str | Path) -> Path:
    """Write the single file of a diffusers folder, or the upsampler file of a `latent_upsampler*/` folder."""
    folder, out_file = Path(folder), Path(out_file)
    own_config = folder / CONFIG
    if own_config.is_file():  # a component folder: only latent upsamplers stand alone
        raw = json.loads(own_config.read_text())
        if raw.get("_class_name") != dc.UPSAMPLER_CLASS:
            raise CheckpointError(
                f"{str(folder)!r} is a {raw.get('_class_name')!r} component folder; convert the whole model "
                f"folder (with {MODEL_INDEX}), or a latent upsampler folder on its own"
            )
        metadata = {"config": json.dumps(dc.upsampler_from_diffusers(raw))}
        with _atomic_file(out_file) as tmp:
            _copy_renamed(weight_files(folder), lambda key: key, tmp, metadata)
        return out_file
    found = read_diffusers_folder(folder)
    present = [c for c in COMPONENT_FOLDERS if found.has(c)]
    if not present:
        raise CheckpointError(
            f"{str(folder)!r} holds none of {', '.join(f + '/' for fs in COMPONENT_FOLDERS.values() for f in fs)}"
        )
    missing = [f for c in COMPONENT_FOLDERS if not found.has(c) for f in found.missing(c)]
    if missing:
        # A single file of some components is what the reference's own partial files are (its config names
        # only the sections it holds); each loader names what it needs and does not find.
        logger.warning("%s has no %s: the single file holds the other components only", folder, missing)
    metadata = {"config": json.dumps(dict(found.config)), "model_version": found.model_version}
    with _atomic_file(out_file) as tmp:
        tensors = {}
        for component in present:
            source = found.source(component)
            ops = source.key_translation
            assert ops is not None
            for path in source.files:
                with safe_open(str(path), framework="pt", device="cpu") as f:
                    for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                        tensors[ops.rename(key) or key] = f.get_tensor(key)
        save_file(tensors, str(tmp), metadata=metadata)
    return out_file


def single_file_to_gguf(
    checkpoint: str | Path,
    out_file: str | Path,
    *,
    qtype: str = "Q8_0",
    min_quantized_numel: int = MIN_QUANTIZED_NUMEL,
) -> Path:
    """The transformer of a single-file checkpoint as a GGUF file (see the module docstring)."""
    from ltx_core.quantization.gguf import WRITABLE_QTYPES

    if qtype not in WRITABLE_QTYPES:
        raise CheckpointError(f"--qtype {qtype!r} cannot be written; writable: {list(WRITABLE_QTYPES)}")
    header = read_safetensors_header(checkpoint)
    keys = [k for k in header.tensors if k.startswith(TRANSFORMER_PREFIX)]
    if not keys:
        raise CheckpointError(f"{str(checkpoint)!r} holds no transformer tensors ({TRANSFORMER_PREFIX}*)")
    out = Path(out_file)
    with _atomic_file(out) as tmp:
        with safe_open(str(header.path), framework="pt", device="cpu") as f:
            tensors = {k: f.get_tensor(k) for k in keys}
        tmp.unlink()  # GGUFWriter creates the file itself
        stored = write_gguf(tmp, tensors, header.metadata, qtype, min_quantized_numel=min_quantized_numel)
    logger.info("%d of %d tensors stored as %s", sum(v == qtype for v in stored.values()), len(stored), qtype)
    return out


def gemma_folder_to_gguf_file(folder: str | Path, out_file: str | Path, *, qtype: str = "Q8_0") -> Path:
    """The text model of a Gemma 3 folder as a GGUF file in llama.cpp's gemma3 layout (see
    `ltx_core.text_encoders.gemma.gguf_gemma`)."""
    from ltx_core.quantization.gguf import WRITABLE_QTYPES
    from ltx_core.text_encoders.gemma.folder import locate_gemma_folder
    from ltx_core.text_encoders.gemma.gguf_gemma import gemma_folder_to_gguf

    if qtype not in WRITABLE_QTYPES:
        raise CheckpointError(f"--qtype {qtype!r} cannot be written; writable: {list(WRITABLE_QTYPES)}")
    locate_gemma_folder(folder)  # a bad folder is named before the output is created
    out = Path(out_file)
    with _atomic_file(out) as tmp:
        tmp.unlink()  # GGUFWriter creates the file itself
        gemma_folder_to_gguf(folder, tmp, qtype=qtype)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(prog="python -m ltx_core.convert", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    to = commands.add_parser("to-diffusers", help="single-file checkpoint -> diffusers model folder")
    to.add_argument("checkpoint", type=Path)
    to.add_argument("out_dir", type=Path)
    to.add_argument("--upsampler", type=Path, action="append", default=[], help="latent upsampler file (repeatable)")
    to.add_argument(
        "--distilled",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the distilled scheduler (default: when the file name says 'distilled', as diffusers' converter)",
    )
    back = commands.add_parser("from-diffusers", help="diffusers model (or latent upsampler) folder -> single file")
    back.add_argument("folder", type=Path)
    back.add_argument("out_file", type=Path)
    gg = commands.add_parser(
        "to-gguf", help="single-file checkpoint -> GGUF transformer file; Gemma 3 folder -> GGUF Gemma (llama.cpp)"
    )
    gg.add_argument("checkpoint", type=Path, help="a single-file checkpoint, or a Gemma 3 folder")
    gg.add_argument("out_file", type=Path)
    gg.add_argument("--qtype", default="Q8_0", help="ggml type of the large weights: Q8_0 (default), F16, BF16")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "to-diffusers":
            out = single_file_to_diffusers(
                args.checkpoint, args.out_dir, upsamplers=args.upsampler, distilled=args.distilled
            )
        elif args.command == "to-gguf" and args.checkpoint.is_dir():
            out = gemma_folder_to_gguf_file(args.checkpoint, args.out_file, qtype=args.qtype)
        elif args.command == "to-gguf":
            out = single_file_to_gguf(args.checkpoint, args.out_file, qtype=args.qtype)
        else:
            out = diffusers_to_single_file(args.folder, args.out_file)
    except (CheckpointError, FileExistsError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, SafetensorError) as e:
        failure = write_failure(e, args.out_dir if args.command == "to-diffusers" else args.out_file)
        if failure is None:
            raise
        print(f"error: {failure}", file=sys.stderr)
        return 1
    logger.info("wrote %s", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
