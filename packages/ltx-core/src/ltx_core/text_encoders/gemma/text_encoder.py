"""The Gemma text encoder: a user's Hugging Face Gemma 3 folder, or a packed Gemma 4 file (LTX-2.5),
loaded through `transformers`.

The multimodal class is loaded (not the text-only one) so the same weights serve image-aware
prompt enhancement. Encoding keeps every hidden state - the embedding output and each decoder
layer's output - because the LTX feature extractor mixes all of them.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltx_core.devices import resolve_device
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_headers import FileHeaders
from ltx_core.loader.gguf_file import is_gguf
from ltx_core.loader.sd_ops import SDOps
from ltx_core.text_encoders.gemma.folder import GemmaFolder, locate_gemma_folder
from ltx_core.text_encoders.gemma.packed import (
    PackedGemma,
    load_packed_gemma_model,
    load_packed_tokenizer,
    packed_gemma_weights,
    read_packed_gemma,
)
from ltx_core.text_encoders.gemma.tokenizer import DEFAULT_MAX_LENGTH, GemmaPromptTokenizer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GemmaHiddenStates:
    """One Gemma forward: `hidden_states` (L tensors (B, S, H), embedding output first) and the
    tokenizer's `attention_mask` (B, S) int64, 1 = real token."""

    hidden_states: tuple[torch.Tensor, ...]
    attention_mask: torch.Tensor


def _load_model(folder: GemmaFolder, dtype: torch.dtype, device: torch.device, load_in_8bit: bool = False) -> Any:
    from transformers import Gemma3ForConditionalGeneration, Gemma4ForConditionalGeneration

    model_class = Gemma4ForConditionalGeneration if folder.model_type == "gemma4" else Gemma3ForConditionalGeneration
    extra: dict[str, Any] = {}
    if load_in_8bit:
        from ltx_core.text_encoders.gemma.eight_bit import gemma_8bit_config

        extra["quantization_config"] = gemma_8bit_config()
    model, info = model_class.from_pretrained(
        folder.root,
        dtype=dtype,
        device_map={"": device},
        local_files_only=True,
        output_loading_info=True,
        **extra,
    )
    # transformers fills absent weights with random values and only logs it; that would silently
    # give random prompts, so any missing or mismatched tensor is an error here.
    problems = {k: sorted(info.get(k) or ()) for k in ("missing_keys", "mismatched_keys")}
    problems = {k: v for k, v in problems.items() if v}
    if problems:
        listed = "; ".join(f"{k}: {v[:10]}{' ...' if len(v) > 10 else ''}" for k, v in problems.items())
        raise CheckpointError(f"Gemma weights in {str(folder.root)!r} do not fit its config.json ({listed})")
    return model.eval().requires_grad_(False)


def _folder_weights(folder: GemmaFolder) -> Any:
    """The `GemmaWeights` of a Gemma 3 / dense Gemma 4 folder, for the modes loaded tensor by tensor."""
    from transformers import AutoConfig, Gemma3ForConditionalGeneration, Gemma4ForConditionalGeneration

    from ltx_core.text_encoders.gemma.gemma_weights import GemmaWeights

    model_class = Gemma4ForConditionalGeneration if folder.model_type == "gemma4" else Gemma3ForConditionalGeneration
    config = AutoConfig.from_pretrained(folder.root, local_files_only=True)
    return GemmaWeights(
        files=folder.weight_files,
        ops=FOLDER_KEY_RULES,
        layers="model.language_model.layers",
        make_model=lambda: model_class(config),
    )


# Checkpoint keys of a Gemma folder -> transformers module keys. Released Gemma 3 folders use the older
# names (`language_model.model.*`, `vision_tower.*`, ...); folders saved by transformers 5 the module's own.
FOLDER_KEY_RULES = (
    SDOps("gemma_folder")
    .keeping(prefix="model.")
    .keeping(prefix="lm_head.")
    .keeping(prefix="language_model.")
    .keeping(prefix="vision_tower.")
    .keeping(prefix="multi_modal_projector.")
    .renaming_prefix("language_model.model.", "model.language_model.")
    .renaming_prefix("language_model.lm_head.", "lm_head.")
    .renaming_prefix("vision_tower.", "model.vision_tower.")
    .renaming_prefix("multi_modal_projector.", "model.multi_modal_projector.")
)


class GemmaTextEncoder:
    """Holds the Gemma model, its prompt tokenizer and (loaded on first use) its image processor.

    Call `release()` (or use it as a context manager) once prompts are encoded: the pipelines
    encode first and then need the memory for the diffusion model.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: GemmaPromptTokenizer,
        folder: GemmaFolder | None = None,
        packed: PackedGemma | None = None,
    ) -> None:
        self._model = model
        self.tokenizer = tokenizer
        self.folder = folder
        self.packed = packed
        self._processor: Any = None
        self._execution_device: torch.device | None = None  # set when the layers are streamed
        self._streamers: list[Any] = []
        self.is_8bit = False
        self.mode = "full"

    @classmethod
    def from_folder(
        cls,
        path: str | Path,
        *,
        dtype: torch.dtype = torch.bfloat16,
        device: str | torch.device | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        mode: str = "full",
        load_in_8bit: bool = False,
    ) -> GemmaTextEncoder:
        """Load tokenizer and model from a Gemma 3 folder, checking its files first.

        `mode` (see `ltx_core.text_encoders.gemma.modes`): full, fp8 (float8 layer weights), stream-ram or
        stream-disk (one decoder layer on the device at a time, from host RAM or from the files).
        `load_in_8bit`: LLM.int8() Linear layers through bitsandbytes (CUDA only; see `eight_bit`)."""
        from transformers import AutoTokenizer

        from ltx_core.text_encoders.gemma.modes import check_text_encoder_mode, load_gemma_weights

        check_text_encoder_mode(mode)
        device = resolve_device(device)
        if load_in_8bit:
            from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit

            require_gemma_8bit(device, "load_in_8bit")
            if mode != "full":
                raise ValueError(
                    f"an 8-bit Gemma is loaded whole (got text encoder mode {mode!r}); use one or the other"
                )
        folder = locate_gemma_folder(path)
        try:
            hf_tokenizer = AutoTokenizer.from_pretrained(folder.root, local_files_only=True)
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot load the Gemma tokenizer from {str(folder.root)!r}: {e}") from e
        tokenizer = GemmaPromptTokenizer(hf_tokenizer, max_length=max_length)
        logger.info("loading Gemma from %s (%s, %s, %s%s)", folder.root, dtype, device, mode, ", 8-bit" * load_in_8bit)
        if mode == "full":
            encoder = cls(_load_model(folder, dtype, device, load_in_8bit), tokenizer, folder)
            encoder.is_8bit = load_in_8bit
            return encoder
        loaded = load_gemma_weights(_folder_weights(folder), mode, dtype=dtype, device=device)
        return cls(loaded.model, tokenizer, folder)._with(loaded.streamers, mode, device)

    @classmethod
    def from_packed_file(
        cls,
        path: str | Path,
        *,
        dtype: torch.dtype = torch.bfloat16,
        device: str | torch.device | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        mode: str = "full",
        load_in_8bit: bool = False,
        headers: FileHeaders | None = None,
    ) -> GemmaTextEncoder:
        """Load tokenizer and model from a packed Gemma 4 file (config, tokenizer and weights in one
        safetensors file), checking its header first. `mode` as in `from_folder`; the 8-bit form
        is for Gemma 3 folders only. `headers`: the run's store (its header is not read again)."""
        from ltx_core.text_encoders.gemma.modes import check_text_encoder_mode, load_gemma_weights

        check_text_encoder_mode(mode)
        if load_in_8bit:
            raise ValueError(f"8-bit loading is for Gemma 3 folders; {str(path)!r} is a packed text encoder file")
        device = resolve_device(device)
        packed = read_packed_gemma(path, headers)
        tokenizer = GemmaPromptTokenizer(load_packed_tokenizer(packed), max_length=max_length)
        if mode == "full":
            return cls(load_packed_gemma_model(packed, dtype=dtype, device=device), tokenizer, packed=packed)
        loaded = load_gemma_weights(packed_gemma_weights(packed), mode, dtype=dtype, device=device)
        return cls(loaded.model, tokenizer, packed=packed)._with(loaded.streamers, mode, device)

    @classmethod
    def from_gguf(
        cls,
        path: str | Path,
        *,
        dtype: torch.dtype = torch.bfloat16,
        device: str | torch.device | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        mode: str = "full",
        load_in_8bit: bool = False,
    ) -> GemmaTextEncoder:
        """Load a Gemma 3 text model from a GGUF file (llama.cpp's layout; see `gguf_gemma`): its quantized
        Linears stay quantized and are dequantized per call. `mode`: full, stream-ram or stream-disk."""
        from ltx_core.text_encoders.gemma.gguf_gemma import gguf_gemma_tokenizer, gguf_gemma_weights
        from ltx_core.text_encoders.gemma.modes import check_text_encoder_mode, load_gemma_weights

        check_text_encoder_mode(mode)
        if load_in_8bit:
            raise ValueError(f"8-bit loading is for Gemma 3 folders; {str(path)!r} is a GGUF file")
        device = resolve_device(device)
        weights = gguf_gemma_weights(path)
        tokenizer = GemmaPromptTokenizer(gguf_gemma_tokenizer(path), max_length=max_length)
        loaded = load_gemma_weights(weights, mode, dtype=dtype, device=device)
        return cls(loaded.model, tokenizer)._with(loaded.streamers, mode, device)

    def _with(self, streamers: list[Any], mode: str, device: torch.device) -> GemmaTextEncoder:
        self._streamers = list(streamers)
        self.mode = mode
        if streamers:
            self._execution_device = device
        return self

    @classmethod
    def load(cls, path: str | Path, *, headers: FileHeaders | None = None, **options: Any) -> GemmaTextEncoder:
        """A Gemma 3 folder (`from_folder`), a GGUF Gemma 3 (`from_gguf`) or a packed Gemma 4 file
        (`from_packed_file`, its header read through `headers` when given), by what `path` is."""
        if Path(path).expanduser().is_file():
            if is_gguf(Path(path).expanduser()):
                return cls.from_gguf(path, **options)
            return cls.from_packed_file(path, headers=headers, **options)
        return cls.from_folder(path, **options)

    # -- properties ----------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        if self._model is None:
            raise RuntimeError("this Gemma text encoder was released; load it again to encode prompts")
        return self._model

    @property
    def is_released(self) -> bool:
        return self._model is None

    @property
    def model_type(self) -> str:
        """`gemma3`, `gemma4` (dense, a prompt enhancer) or `gemma4_unified` (the packed LTX-2.5 encoder)."""
        return str(self.model.config.model_type)

    @property
    def text_config(self) -> Any:
        return self.model.config.get_text_config()

    @property
    def hidden_size(self) -> int:
        return int(self.text_config.hidden_size)

    @property
    def num_hidden_states(self) -> int:
        """Hidden states one forward returns: the embedding output plus one per decoder layer."""
        return int(self.text_config.num_hidden_layers) + 1

    @property
    def device(self) -> torch.device:
        return self._execution_device if self._execution_device is not None else self.model.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    def processor(self) -> Any:
        """The multimodal processor (tokenizer + image preprocessing), loaded from the folder once."""
        if self._processor is None:
            from transformers import AutoProcessor

            if self.packed is not None:
                raise CheckpointError(
                    f"the packed text encoder {str(self.packed.path)!r} has no image processor here; "
                    "image-aware prompt enhancement needs a Gemma 3 folder"
                )
            if self.folder is None or not self.folder.has_image_processor:
                where = repr(str(self.folder.root)) if self.folder is not None else "this encoder"
                raise CheckpointError(
                    f"Gemma folder {where} has no processor_config.json / preprocessor_config.json; "
                    "image-aware prompt enhancement needs the image processor of the Gemma 3 release"
                )
            self._processor = AutoProcessor.from_pretrained(self.folder.root, local_files_only=True)
        return self._processor

    # -- encoding ------------------------------------------------------------------------------
    @torch.inference_mode()
    def encode(self, prompts: Sequence[str]) -> GemmaHiddenStates:
        """All hidden states for a batch of prompts in a single forward (e.g. positive and negative)."""
        tokens = self.tokenizer(prompts)
        device = self.device
        input_ids = tokens.input_ids.to(device)
        attention_mask = tokens.attention_mask.to(device)
        # The inner multimodal model skips the vocabulary projection, which encoding does not need.
        outputs = self.model.model(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, use_cache=False
        )
        hidden_states = tuple(outputs.hidden_states)
        if len(hidden_states) != self.num_hidden_states:
            raise RuntimeError(f"Gemma returned {len(hidden_states)} hidden states, expected {self.num_hidden_states}")
        return GemmaHiddenStates(hidden_states=hidden_states, attention_mask=attention_mask)

    # -- memory --------------------------------------------------------------------------------
    def release(self) -> None:
        """Free the model's weights now, even where other references to the module remain."""
        if self._model is None:
            return
        device = self.device
        for streamer in self._streamers:
            streamer.close()
        self._streamers = []
        if not self.is_8bit:
            # bitsandbytes' int8 parameters cannot be moved to the meta device; an 8-bit model is freed
            # when its last reference goes, below.
            self._model.to(torch.device("meta"))
        self._model = None
        self._processor = None
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        elif device.type == "mps":
            torch.mps.empty_cache()
        logger.info("released Gemma (%s)", device)

    def __enter__(self) -> GemmaTextEncoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def build_text_encoder(
    path: str | Path,
    mode: str = "full",
    *,
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device | None = None,
    max_length: int | None = None,
) -> GemmaTextEncoder:
    """The text encoder at `path` (a Gemma 3 folder, a GGUF Gemma 3, or a packed Gemma 4 file) held as
    `mode` says (one of `TEXT_ENCODER_MODES`). Release it (`.release()` or `with`) once prompts are encoded."""
    from ltx_core.text_encoders.gemma.modes import check_text_encoder_mode

    check_text_encoder_mode(mode)
    options = {} if max_length is None else {"max_length": max_length}
    return GemmaTextEncoder.load(path, mode=mode, dtype=dtype, device=device, **options)
