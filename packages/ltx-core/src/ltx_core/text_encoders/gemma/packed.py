"""The Gemma 4 text encoder packed in one safetensors file (LTX-2.5's `gemma4-*-with-proj-*.safetensors`).

The file carries everything a Hugging Face folder would: the model config as JSON metadata
(`gemma_config`), the tokenizer and other assets as uint8 tensors (`tokenizer_json`,
`hf_asset__<file name>`), the language model under Comfy-flat keys (`model.layers.*`,
`model.embed_tokens.*`, `model.norm.*`; or the HF names `model.language_model.*`), the vision /
audio embedders (`vision_model.*`, `multi_modal_projector.*`, `audio_projector.*`) and, for LTX,
the text projection (`text_embedding_projection.*`, read by the text embeddings stage, not here).

The model is transformers' `Gemma4UnifiedForConditionalGeneration` built from that config with
its parameters on the meta device (its computed buffers, rotary frequencies and embedding scale,
are made for real), then given the file's weights. Encoding needs no image processor, so nothing
here imports torchvision.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_headers import FileHeaders
from ltx_core.loader.sd_ops import SDOps
from ltx_core.loader.state_dict import load_files

logger = logging.getLogger(__name__)

PACKED_MODEL_TYPES = ("gemma4_unified",)
CONFIG_METADATA_KEY = "gemma_config"
TOKENIZER_TENSOR = "tokenizer_json"
ASSET_PREFIX = "hf_asset__"
TEXT_PROJECTION_PREFIX = "text_embedding_projection."

# File keys -> transformers module keys. The Comfy-flat and HF namings both occur in the wild.
_COMFY_FLAT_KEYS = (
    SDOps("gemma4_packed_comfy")
    .keeping(prefix="model.layers.")
    .keeping(prefix="model.embed_tokens.")
    .keeping(prefix="model.norm.")
    .keeping(prefix="vision_model.")
    .keeping(prefix="multi_modal_projector.")
    .keeping(prefix="audio_projector.")
    .renaming_prefix("model.", "model.language_model.")
    .renaming_prefix("vision_model.", "model.embed_vision.")
    .renaming_prefix("multi_modal_projector.", "model.embed_vision.multimodal_embedder.")
    .renaming_prefix("audio_projector.", "model.embed_audio.")
)
_HF_KEYS = (
    SDOps("gemma4_packed_hf")
    .keeping(prefix="model.")
    # Released HF checkpoints name the vision embedder and its projection apart from the module tree.
    .renaming_prefix(
        "model.embed_vision.embedding_projection.", "model.embed_vision.multimodal_embedder.embedding_projection."
    )
    .renaming_prefix("model.vision_embedder.", "model.embed_vision.")
)


@dataclass(frozen=True)
class PackedGemma:
    """A checked packed text-encoder file: its HF config and the sizes that matter to LTX."""

    path: Path
    config: dict[str, Any]
    comfy_flat: bool
    headers: FileHeaders = field(default_factory=FileHeaders, compare=False, repr=False)
    """Where the file's header is read through: once, by `read_packed_gemma`, for the checks, the assets and
    the weights alike."""

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type"))

    @property
    def gemma_version(self) -> str | None:
        value = self.config.get("gemma_version")
        return str(value) if value is not None else None

    @property
    def text_config(self) -> dict[str, Any]:
        return dict(self.config.get("text_config") or {})

    @property
    def hidden_size(self) -> int:
        return int(self.text_config["hidden_size"])

    @property
    def num_hidden_states(self) -> int:
        return int(self.text_config["num_hidden_layers"]) + 1

    @property
    def key_rules(self) -> SDOps:
        return _COMFY_FLAT_KEYS if self.comfy_flat else _HF_KEYS


def _problem(path: Path, what: str) -> CheckpointError:
    return CheckpointError(
        f"{str(path)!r} {what}; expected a packed Gemma 4 text encoder such as "
        "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"
    )


def read_packed_gemma(path: str | Path, headers: FileHeaders | None = None) -> PackedGemma:
    """Check a packed text-encoder file from its header alone (config, tokenizer, language-model keys); the
    header through `headers` when given (a set of model files' store that read it already)."""
    headers = headers if headers is not None else FileHeaders()
    header = headers.header(path)
    p = header.path
    config = header.metadata.get(CONFIG_METADATA_KEY)
    if not isinstance(config, dict):
        raise _problem(p, f"has no {CONFIG_METADATA_KEY!r} metadata")
    if config.get("model_type") not in PACKED_MODEL_TYPES:
        raise _problem(p, f"holds a model of type {config.get('model_type')!r}; accepted: {list(PACKED_MODEL_TYPES)}")
    text = config.get("text_config")
    if not isinstance(text, dict) or "hidden_size" not in text or "num_hidden_layers" not in text:
        raise _problem(p, "has a gemma_config without text_config.hidden_size / num_hidden_layers")
    if TOKENIZER_TENSOR not in header.tensors:
        raise _problem(p, f"has no {TOKENIZER_TENSOR!r} tensor (the packed tokenizer)")
    comfy_flat = any(k.startswith("model.layers.") for k in header.tensors)
    if not comfy_flat and not any(k.startswith("model.language_model.") for k in header.tensors):
        raise _problem(p, "has no language-model weights (model.layers.* or model.language_model.*)")
    return PackedGemma(path=p, config=config, comfy_flat=comfy_flat, headers=headers)


def _read_bytes(path: Path, name: str) -> bytes:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as f:
        return f.get_tensor(name).to(torch.uint8).numpy().tobytes()


def packed_asset(packed: PackedGemma, file_name: str) -> bytes | None:
    """An HF asset stored in the file (`hf_asset__<file_name>`), or None when absent."""
    name = ASSET_PREFIX + file_name
    if name not in packed.headers.header(packed.path).tensors:
        return None
    return _read_bytes(packed.path, name)


def load_packed_tokenizer(packed: PackedGemma) -> Any:
    """The HF fast tokenizer from the packed `tokenizer.json` and `tokenizer_config.json`."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(_read_bytes(packed.path, TOKENIZER_TENSOR).decode("utf-8"))
    raw = packed_asset(packed, "tokenizer_config.json")
    settings: dict[str, Any] = json.loads(raw.decode("utf-8")) if raw else {}
    special = {
        k: settings[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if isinstance(settings.get(k), str)
    }
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, padding_side=settings.get("padding_side", "left"), **special
    )


def _gemma4_unified_classes(packed: PackedGemma) -> tuple[Any, Any]:
    try:
        from transformers import Gemma4UnifiedConfig, Gemma4UnifiedForConditionalGeneration
    except ImportError as e:
        import transformers

        raise CheckpointError(
            f"{str(packed.path)!r} is a Gemma 4 (gemma4_unified) text encoder, which needs transformers >= 5.10.1 "
            f"(the first release with the Gemma4Unified* classes); installed: transformers {transformers.__version__}"
        ) from e
    return Gemma4UnifiedForConditionalGeneration, Gemma4UnifiedConfig


def load_packed_gemma_model(packed: PackedGemma, *, dtype: torch.dtype, device: torch.device) -> Any:
    """transformers' Gemma 4 (unified) model with the file's weights, in eval mode on `device`."""
    from accelerate import init_empty_weights

    Gemma4UnifiedForConditionalGeneration, Gemma4UnifiedConfig = _gemma4_unified_classes(packed)
    config = Gemma4UnifiedConfig.from_dict(packed.config)
    # Parameters on meta; buffers (rotary frequencies, embedding scale) computed on the CPU as usual.
    with init_empty_weights(include_buffers=False):
        model = Gemma4UnifiedForConditionalGeneration(config)
    state_dict = load_files([(packed.path, packed.key_rules)], dtype=dtype, headers=packed.headers)
    expected = model.state_dict()
    tied = {k for k in expected if k == "lm_head.weight"}  # the output layer shares embed_tokens
    missing = sorted(k for k in expected if k not in state_dict and k not in tied)
    unexpected = sorted(k for k in state_dict if k not in expected)
    if missing or unexpected:
        raise CheckpointError(
            f"{str(packed.path)!r} does not fit its gemma_config: missing {missing[:10]}, unexpected {unexpected[:10]}"
        )
    model.load_state_dict(state_dict, strict=False, assign=True)
    model.tie_weights()
    leftover = [n for n, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if leftover:
        raise CheckpointError(f"{str(packed.path)!r}: Gemma tensors left without values: {leftover[:10]}")
    model = model.to(device=device, dtype=dtype)
    logger.info("loaded packed %s text encoder from %s (%s, %s)", packed.model_type, packed.path.name, dtype, device)
    return model.eval().requires_grad_(False)


def packed_gemma_weights(packed: PackedGemma) -> Any:
    """The `GemmaWeights` of a packed file, for the text-encoder modes loaded tensor by tensor (fp8,
    streaming); computed buffers are cast to the run dtype as `load_packed_gemma_model` casts them."""
    from ltx_core.text_encoders.gemma.gemma_weights import GemmaWeights

    model_class, config_class = _gemma4_unified_classes(packed)
    config = config_class.from_dict(packed.config)
    return GemmaWeights(
        files=(packed.path,),
        ops=packed.key_rules,
        layers="model.language_model.layers",
        make_model=lambda: model_class(config),
        cast_buffers=True,
    )
