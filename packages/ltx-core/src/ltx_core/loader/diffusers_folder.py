"""Reading a diffusers model folder (`model_index.json` + one folder per component) as model files.

    <folder>/model_index.json            pipeline index (`_class_name` LTX2Pipeline, ...)
    <folder>/transformer/                config.json + diffusion_pytorch_model[-0000i-of-0000n].safetensors
    <folder>/connectors/  vae/  audio_vae/  vocoder/  latent_upsampler/  ...

Each component becomes a `ComponentSource`: its weight files, the reference's `config` metadata
translated from the folders' `config.json` (`diffusers_config`), and a key table from diffusers' names to
the single file's (`diffusers_names`), so `build_model` reads it through the same component rules as the
single file. The text embeddings (projection + connectors) come from `connectors/`; the audio VAE
component from `audio_vae/` and `vocoder/` together. Latent upsamplers stay separate sources
(`upsampler_source`).

Nothing is loaded before the folder has been checked: a folder of another model family (its
`model_index.json` names a pipeline that is not LTX-2, or a component's `config.json` another class) and a
requested component whose folder is missing are refused naming what was found.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_core.loader import diffusers_config as dc
from ltx_core.loader import diffusers_names as dn
from ltx_core.loader.component_source import Component, ComponentSource
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.safetensors_header import read_safetensors_header
from ltx_core.loader.sd_ops import SDOps

logger = logging.getLogger(__name__)

MODEL_INDEX = "model_index.json"
CONFIG = "config.json"
WEIGHTS_STEM = "diffusion_pytorch_model"
LTX2_PIPELINE_PREFIX = "LTX2"

# Component of a set of model files -> the diffusers folders it is read from.
COMPONENT_FOLDERS: Mapping[Component, tuple[str, ...]] = {
    Component.TRANSFORMER: ("transformer",),
    Component.TEXT_EMBEDDINGS: ("connectors",),
    Component.VIDEO_VAE: ("vae",),
    Component.AUDIO_VAE: ("audio_vae", "vocoder"),
}
UPSAMPLER_FOLDERS = ("latent_upsampler", "latent_upsampler_x1.5")
DIFFUSION_DECODER_FOLDER = "diffusion_decoder"
DURATION_HEAD_FOLDER = "duration_head"
LTX25_FOLDERS = frozenset({DIFFUSION_DECODER_FOLDER, DURATION_HEAD_FOLDER})
# Every component read from a diffusers folder: those of the single file, and LTX-2.5's duration head.
READ_COMPONENT_FOLDERS: Mapping[Component, tuple[str, ...]] = {
    **COMPONENT_FOLDERS,
    Component.DURATION_HEAD: (DURATION_HEAD_FOLDER,),
}
# An LTX-2.5 `connectors/` carries the reference's text projection and connectors exactly, plus zero FFN
# biases where the reference's connectors have none (`connector_ff_bias: false`; diffusers' class always has
# them). They are read as they are: the connectors are built with those biases (the folder's config states
# no `connector_ff_bias`), and adding a zero bias leaves every output as the bias-free connector's.
# The zero placeholder conv decoder of an LTX-2.5 `vae/` is renamed under this prefix, which no component
# rule reads: only the encoder and the latent statistics are taken from that folder.
PLACEHOLDER_PREFIX = "diffusers_placeholder."
DIFFUSION_VAE_CLASS = "CausalDiffusionVAE"


HF_SCHEME = "hf://"
# What a diffusers folder download needs: the index, every config, safetensors weights (no .bin copies).
HF_FOLDER_PATTERNS = ("model_index.json", "*/config.json", "*/scheduler_config.json", "*/*.safetensors",
                      "*/*.safetensors.index.json")  # fmt: skip


def fetch_diffusers_folder(uri: str, *, cache_dir: str | Path | None = None) -> Path:
    """`hf://<org>/<repo>[@<revision>]` downloaded (safetensors and configs only) through the Hub cache;
    a local path is returned as it is."""
    if not uri.startswith(HF_SCHEME):
        return Path(uri).expanduser()
    repo, _, revision = uri[len(HF_SCHEME) :].strip("/").partition("@")
    if repo.count("/") != 1:
        raise CheckpointError(f"{uri!r}: a diffusers folder on the Hub is hf://<org>/<repo>[@<revision>]")
    from huggingface_hub import snapshot_download

    local = snapshot_download(
        repo_id=repo, revision=revision or None, allow_patterns=list(HF_FOLDER_PATTERNS), cache_dir=cache_dir
    )
    return Path(local)


def is_diffusers_folder(path: str | Path) -> bool:
    """A directory holding a `model_index.json` (how a pipeline recognises the layout)."""
    p = Path(path)
    return p.is_dir() and (p / MODEL_INDEX).is_file()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{str(path)!r} is not readable JSON: {e}") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{str(path)!r} does not hold a JSON object")
    return value


def weight_files(component_dir: Path) -> tuple[Path, ...]:
    """The safetensors weights of one component folder (one file or shards), sorted."""
    files = sorted(component_dir.glob(f"{WEIGHTS_STEM}*.safetensors"))
    if not files:
        found = sorted(p.name for p in component_dir.iterdir()) if component_dir.is_dir() else []
        raise CheckpointError(
            f"{str(component_dir)!r} has no {WEIGHTS_STEM}*.safetensors (found: {found}); "
            "only safetensors weights are read"
        )
    return tuple(files)


def check_family(folder: Path) -> dict[str, Any] | None:
    """The folder's model index, after refusing a pipeline of another model family; None when absent."""
    index_path = folder / MODEL_INDEX
    if not index_path.is_file():
        return None
    index = _read_json(index_path)
    name = str(index.get("_class_name", ""))
    if not name.startswith(LTX2_PIPELINE_PREFIX):
        raise CheckpointError(
            f"{str(folder)!r} is a diffusers folder of {name or 'an unnamed pipeline'!r}, not of LTX-2 "
            f"(accepted: {LTX2_PIPELINE_PREFIX}* pipelines such as LTX2Pipeline)"
        )
    return index


@dataclass(frozen=True)
class DiffusersFolder:
    """A checked diffusers folder: which component folders it has and the reference config they mean."""

    root: Path
    folders: frozenset[str]
    config: Mapping[str, Any]  # the reference's `config` metadata (sections for the folders present)
    model_version: str
    # (reference prefix, diffusers prefix) of the video VAE blocks (`diffusers_config.vae_block_renames`).
    vae_block_pairs: tuple[tuple[str, str], ...] = ()
    # Components whose files state their own config, as their released file does (the duration head's
    # context widths), instead of the folder's shared one.
    own_configs: Mapping[Component, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def is_ltx25(self) -> bool:
        """An LTX-2.5 conversion: diffusers carries its diffusion decoder and duration head in folders of
        their own, and its `vae/` keeps a conv decoder of zero placeholders (see docs/interop.md)."""
        return bool(self.folders & LTX25_FOLDERS)

    def component_folders(self, component: Component) -> tuple[str, ...]:
        """The folders `component` is read from. An LTX-2.5 video VAE: `vae/` (encoder) and
        `diffusion_decoder/` (the decoder), whichever are there."""
        if component is Component.VIDEO_VAE and self.is_ltx25:
            present = tuple(f for f in ("vae", DIFFUSION_DECODER_FOLDER) if f in self.folders)
            return present or ("vae",)
        return READ_COMPONENT_FOLDERS.get(component, ())

    def config_folders(self, component: Component) -> tuple[str, ...]:
        """The folders whose `config.json` the component's config is translated from (the transformer's
        includes the text connectors', whose sizes are part of its description)."""
        if component in (Component.TRANSFORMER, Component.TEXT_EMBEDDINGS):
            return ("transformer", "connectors")
        return self.component_folders(component)

    def has(self, component: Component) -> bool:
        wanted = self.component_folders(component)
        if not wanted:
            return False
        return all(f in self.folders for f in wanted)

    def missing(self, component: Component) -> list[str]:
        return [f for f in self.component_folders(component) if f not in self.folders]

    def source(self, component: Component) -> ComponentSource:
        """The component's files, reference config and key table; raises naming missing folders."""
        missing = self.missing(component)
        if missing:
            raise CheckpointError(
                f"the diffusers folder {str(self.root)!r} has no {', '.join(f + '/' for f in missing)} "
                f"folder, needed for the {component.value}"
            )
        tables: list[tuple[Path, dict[str, str]]] = []
        for name in self.component_folders(component):
            rename = self._key_function(name)
            for path in weight_files(self.root / name):
                tables.append((path, {key: rename(key) for key in read_safetensors_header(path).tensors}))
        config = self.own_configs.get(component, self.config)
        metadata = {"config": dict(config), "model_version": self.model_version}
        files = tuple(path for path, _ in tables)
        configs = tuple(
            self.root / f / CONFIG for f in self.config_folders(component) if (self.root / f / CONFIG).is_file()
        )
        name = f"diffusers_{component.value}"
        keys = [key for _, table in tables for key in table]
        if len(keys) == len(set(keys)):
            combined = {key: target for _, table in tables for key, target in table.items()}
            ops = SDOps(name).keeping().renaming_keys(combined)
            return ComponentSource(component, files, metadata=metadata, key_translation=ops, config_files=configs)
        # Folders whose key names overlap (LTX-2.5 `vae/` and `diffusion_decoder/` both hold the latent
        # statistics): each file is translated by its own table.
        per_file = tuple(
            (path, SDOps(f"{name}_{path.parent.name}").keeping().renaming_keys(table)) for path, table in tables
        )
        return ComponentSource(component, files, metadata=metadata, file_translations=per_file, config_files=configs)

    def _key_function(self, folder: str) -> Callable[[str], str]:
        if folder == "transformer":
            return dn.transformer_key_to_reference
        if folder == "connectors":
            return dn.connectors_key_to_reference
        if folder == "vae":
            pairs = list(self.vae_block_pairs)
            if self.is_ltx25:
                # The latent statistics are the decoder's when `diffusion_decoder/` holds them too.
                shadowed = ("decoder.", *(dn.STAT_NAMES if DIFFUSION_DECODER_FOLDER in self.folders else ()))
                return lambda key: (
                    PLACEHOLDER_PREFIX + key if key.startswith(shadowed) else dn.video_vae_key_to_reference(key, pairs)
                )
            return lambda key: dn.video_vae_key_to_reference(key, pairs)
        if folder == DIFFUSION_DECODER_FOLDER:
            return dn.diffusion_decoder_key_to_reference
        if folder == DURATION_HEAD_FOLDER:
            return dn.duration_head_key_to_reference
        if folder == "audio_vae":
            return dn.audio_vae_key_to_reference
        if folder == "vocoder":
            return dn.vocoder_key_to_reference
        raise CheckpointError(f"no key translation for the diffusers folder {folder!r}")


def _folder_config(root: Path, name: str) -> dict[str, Any] | None:
    path = root / name / CONFIG
    return _read_json(path) if path.is_file() else None


@contextmanager
def _translating(*paths: Path) -> Iterator[None]:
    """A config.json the reference's models cannot express (a refused value, a missing or mistyped field)
    is refused naming the file(s) it was read from."""
    try:
        yield
    except (CheckpointError, ValueError, KeyError, TypeError) as e:
        detail = f"no {e} entry" if isinstance(e, KeyError) else str(e)
        where = " + ".join(repr(str(p)) for p in paths)
        raise CheckpointError(f"{where}: {detail}") from None


def read_diffusers_folder(folder: str | Path) -> DiffusersFolder:
    """Check a local diffusers folder and translate its component configs (no weight is read)."""
    root = fetch_diffusers_folder(str(folder))
    if not root.is_dir():
        raise CheckpointError(f"diffusers folder {str(root)!r} does not exist or is not a folder")
    index = check_family(root)
    present = {p.name for p in root.iterdir() if p.is_dir() and (p / CONFIG).is_file()}
    if index is None and "transformer" not in present:
        raise CheckpointError(
            f"{str(root)!r} is not a diffusers model folder: no {MODEL_INDEX} and no transformer/{CONFIG}"
        )
    if index is not None:  # a component the index names but the folder lacks is reported when requested
        named = {k for k, v in index.items() if isinstance(v, list) and v and v[0] is not None}
        logger.debug("diffusers folder %s: index names %s, folders %s", root, sorted(named), sorted(present))
    config: dict[str, Any] = {}
    transformer = _folder_config(root, "transformer")
    connectors = _folder_config(root, "connectors")
    if transformer is not None:
        if connectors is None:
            raise CheckpointError(
                f"the diffusers folder {str(root)!r} has transformer/ but no connectors/ folder: the text "
                "connectors' sizes are part of the transformer's description"
            )
        with _translating(root / "transformer" / CONFIG, root / "connectors" / CONFIG):
            config["transformer"] = dc.transformer_from_diffusers(transformer, connectors)
    ltx25 = bool(present & LTX25_FOLDERS)
    vae = _folder_config(root, "vae")
    pairs: tuple[tuple[str, str], ...] = ()
    if vae is not None:
        with _translating(root / "vae" / CONFIG):
            flat = dc.video_vae_from_diffusers(vae)
            pairs = tuple(dc.vae_block_renames(flat))
        # LTX-2.5: only the encoder of `vae/` is real; the reference describes it inside its diffusion
        # VAE's section, beside the diffusion decoder of `diffusion_decoder/`.
        config["vae"] = _ltx25_encoder_section(flat) if ltx25 else flat
    diffusion_decoder = _folder_config(root, DIFFUSION_DECODER_FOLDER)
    if diffusion_decoder is not None:
        with _translating(root / DIFFUSION_DECODER_FOLDER / CONFIG):
            decoder = dc.diffusion_decoder_from_diffusers(diffusion_decoder)
        section = config.setdefault("vae", {"_class_name": DIFFUSION_VAE_CLASS})
        section.update(decoder, latent_channels=section.get("latent_channels", decoder["decoder"]["in_channels"]))
    own_configs: dict[Component, Mapping[str, Any]] = {}
    duration_head = _folder_config(root, DURATION_HEAD_FOLDER)
    if duration_head is not None:
        with _translating(root / DURATION_HEAD_FOLDER / CONFIG):
            own_configs[Component.DURATION_HEAD] = dc.duration_head_from_diffusers(duration_head)
        config["duration_head"] = own_configs[Component.DURATION_HEAD]["duration_head"]
    # Folders whose config.json translates on its own into the reference section of the same name.
    for name, translate in (("audio_vae", dc.audio_vae_from_diffusers), ("vocoder", dc.vocoder_from_diffusers)):
        raw = _folder_config(root, name)
        if raw is not None:
            with _translating(root / name / CONFIG):
                config[name] = translate(raw)
    # No version string in a diffusers folder: the 2.3 text path (per-modality projections) marks LTX-2.3.
    v2 = connectors is not None and bool(connectors.get("per_modality_projections"))
    version = "2.5.0" if ltx25 else "2.3.0" if v2 else "2.0.0"
    return DiffusersFolder(
        root=root, folders=frozenset(present), config=config, model_version=version, vae_block_pairs=pairs,
        own_configs=own_configs,
    )  # fmt: skip


def _ltx25_encoder_section(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's LTX-2.5 `vae` section for its convolutional encoder (no decoder description)."""
    encoder = {k: flat[k] for k in ("dims", "in_channels", "patch_size", "norm_layer", "latent_log_var")}
    encoder.update(
        out_channels=flat["latent_channels"],
        spatial_padding_mode=flat.get("spatial_padding_mode", flat.get("encoder_spatial_padding_mode", "zeros")),
        blocks=flat["encoder_blocks"],
    )
    return {"_class_name": DIFFUSION_VAE_CLASS, "latent_channels": flat["latent_channels"], "encoder": encoder}


def upsampler_source(folder: str | Path) -> ComponentSource:
    """A latent upsampler folder (`latent_upsampler/`: config.json + weights) as a standalone source;
    diffusers keeps the reference's key names, so only the config is translated."""
    path = Path(folder).expanduser()
    config_path = path / CONFIG
    if not config_path.is_file():
        raise CheckpointError(f"latent upsampler folder {str(path)!r} has no {CONFIG}")
    config = dc.upsampler_from_diffusers(_read_json(config_path))
    return ComponentSource(None, weight_files(path), metadata={"config": config})
