"""Finding and checking a Hugging Face Gemma folder (`--gemma-root`: Gemma 3; a dense Gemma 4 serves
as a prompt enhancer) before anything is loaded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_core.loader.errors import CheckpointError

SUPPORTED_MODEL_TYPES = ("gemma3", "gemma4")
CONFIG_FILE = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SINGLE_WEIGHTS_FILE = "model.safetensors"
SHARD_INDEX_FILE = "model.safetensors.index.json"
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
_EXAMPLE = "e.g. gemma-3-12b-it-qat-q4_0-unquantized"


@dataclass(frozen=True)
class GemmaFolder:
    """A checked Gemma folder: where its files are and the sizes that matter to LTX."""

    root: Path
    config: dict[str, Any]
    weight_files: tuple[Path, ...]
    has_image_processor: bool

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type"))

    @property
    def text_config(self) -> dict[str, Any]:
        return self.config.get("text_config") or {}

    def _text_size(self, name: str) -> int:
        value = self.text_config.get(name)
        if value is None:  # configs may leave a size at the library default
            from transformers import Gemma3TextConfig, Gemma4TextConfig

            defaults = Gemma4TextConfig() if self.model_type == "gemma4" else Gemma3TextConfig()
            value = getattr(defaults, name)
        return int(value)

    @property
    def hidden_size(self) -> int:
        return self._text_size("hidden_size")

    @property
    def num_hidden_layers(self) -> int:
        return self._text_size("num_hidden_layers")

    @property
    def num_hidden_states(self) -> int:
        """Decoder layer outputs plus the embedding output."""
        return self.num_hidden_layers + 1


def _problem(root: Path, what: str) -> CheckpointError:
    return CheckpointError(f"Gemma folder {str(root)!r} {what}; expected a Hugging Face Gemma 3 folder ({_EXAMPLE})")


def _model_dir(root: Path) -> Path:
    """`root` itself, or the single folder below it that holds a config.json (a snapshot's parent)."""
    if (root / CONFIG_FILE).is_file():
        return root
    candidates = sorted({p.parent for p in root.rglob(CONFIG_FILE) if (p.parent / TOKENIZER_CONFIG_FILE).exists()})
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        listed = ", ".join(str(c) for c in candidates[:5])
        raise _problem(root, f"holds several model folders ({listed}); pass the one to use")
    raise _problem(root, f"has no {CONFIG_FILE}")


def _read_config(folder: Path) -> dict[str, Any]:
    path = folder / CONFIG_FILE
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _problem(folder, f"has an unreadable {CONFIG_FILE} ({e})") from None
    if not isinstance(config, dict):
        raise _problem(folder, f"has a {CONFIG_FILE} that is not a JSON object")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        hint = " (a text-only Gemma 3; the multimodal model is needed)" if model_type == "gemma3_text" else ""
        raise _problem(
            folder, f"holds a model of type {model_type!r}{hint}; accepted model_type: {list(SUPPORTED_MODEL_TYPES)}"
        )
    if not isinstance(config.get("text_config", {}), dict):
        raise _problem(folder, f"has a {CONFIG_FILE} whose text_config is not a JSON object")
    return config


def _weight_files(folder: Path) -> tuple[Path, ...]:
    index = folder / SHARD_INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted({folder / name for name in weight_map.values()})
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise _problem(folder, f"has an unreadable {SHARD_INDEX_FILE} ({e})") from None
        missing = [p.name for p in shards if not p.is_file()]
        if missing:
            raise _problem(folder, f"lacks weight shards listed in {SHARD_INDEX_FILE}: {missing}")
        return tuple(shards)
    single = folder / SINGLE_WEIGHTS_FILE
    if single.is_file():
        return (single,)
    present = sorted(p.name for p in folder.glob("*.safetensors"))
    raise _problem(
        folder,
        f"has no weights: neither {SINGLE_WEIGHTS_FILE} nor {SHARD_INDEX_FILE} "
        f"(safetensors files present: {present or 'none'})",
    )


def locate_gemma_folder(path: str | Path) -> GemmaFolder:
    """Check that `path` is (or contains exactly one) Gemma 3 folder with config, tokenizer and weights."""
    root = Path(path).expanduser()
    if not root.exists():
        raise _problem(root, "does not exist")
    if not root.is_dir():
        raise _problem(root, "is a file, not a folder")
    folder = _model_dir(root)
    config = _read_config(folder)
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise _problem(folder, f"has no tokenizer (one of {list(TOKENIZER_FILES)})")
    if not (folder / TOKENIZER_CONFIG_FILE).is_file():
        raise _problem(folder, f"has no {TOKENIZER_CONFIG_FILE}")
    return GemmaFolder(
        root=folder,
        config=config,
        weight_files=_weight_files(folder),
        has_image_processor=any((folder / name).is_file() for name in PROCESSOR_FILES),
    )
