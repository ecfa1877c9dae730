"""The Gemma text encoder: a user's Hugging Face Gemma 3 folder, or a packed Gemma 4 file (LTX-2.5),
loaded through `transformers`.

The multimodal class is loaded (not the text-only one) so the same weights serve image-aware
prompt enhancement. Encoding keeps every hidden state - the embedding output and each decoder
layer's output - because the LTX feature extractor mixes all of them.
"""

from __future__ import annotations

import gc
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltx_core.devices import resolve_device
from ltx_core.loader.errors import CheckpointError
from ltx_core.text_encoders.gemma.folder import GemmaFolder, locate_gemma_folder
from ltx_core.text_encoders.gemma.packed import (
    PackedGemma,
    load_packed_gemma_model,
    load_packed_tokenizer,
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


GEMMA_OFFLOAD_CHOICES = ("none", "cpu", "disk")


def _offload(model: Any, offload: str, device: torch.device) -> str | None:
    """Keep Gemma's weights off the device: each module's weights are brought to `device` for its own
    forward only (accelerate's hooks), from host RAM (`cpu`) or from files in a temporary folder
    (`disk`, returned so it can be removed on release). Same outputs, a few layers resident."""
    from accelerate import cpu_offload, disk_offload

    if offload == "cpu":
        cpu_offload(model, execution_device=device)
        return None
    folder = tempfile.mkdtemp(prefix="ltx-gemma-offload-")
    disk_offload(model, offload_dir=folder, execution_device=device)
    return folder


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
        self._execution_device: torch.device | None = None  # set when the weights are offloaded
        self._offload_dir: str | None = None
        self.is_8bit = False

    @classmethod
    def from_folder(
        cls,
        path: str | Path,
        *,
        dtype: torch.dtype = torch.bfloat16,
        device: str | torch.device | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        offload: str = "none",
        load_in_8bit: bool = False,
    ) -> GemmaTextEncoder:
        """Load tokenizer and model from a Gemma 3 folder, checking its files first.

        `offload` (none | cpu | disk): keep the weights in host RAM or in a temporary folder and bring
        each layer to `device` only for its forward - the 12B Gemma then fits beside little memory.
        `load_in_8bit`: LLM.int8() Linear layers through bitsandbytes (CUDA only; see `eight_bit`)."""
        if offload not in GEMMA_OFFLOAD_CHOICES:
            raise ValueError(f"Gemma offload {offload!r} is not supported; accepted: {GEMMA_OFFLOAD_CHOICES}")
        from transformers import AutoTokenizer

        device = resolve_device(device)
        if load_in_8bit:
            from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit

            require_gemma_8bit(device, "load_in_8bit")
            if offload != "none":
                raise ValueError(f"an 8-bit Gemma is not offloaded (got offload {offload!r}); use one or the other")
        folder = locate_gemma_folder(path)
        try:
            hf_tokenizer = AutoTokenizer.from_pretrained(folder.root, local_files_only=True)
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot load the Gemma tokenizer from {str(folder.root)!r}: {e}") from e
        tokenizer = GemmaPromptTokenizer(hf_tokenizer, max_length=max_length)
        logger.info("loading Gemma from %s (%s, %s%s)", folder.root, dtype, device, ", 8-bit" if load_in_8bit else "")
        model = _load_model(folder, dtype, device if offload == "none" else torch.device("cpu"), load_in_8bit)
        encoder = cls(model, tokenizer, folder)
        encoder.is_8bit = load_in_8bit
        if offload != "none":
            encoder._offload_dir = _offload(model, offload, device)
            encoder._execution_device = device
            logger.info("Gemma weights offloaded to %s; layers run on %s", offload, device)
        return encoder

    @classmethod
    def from_packed_file(
        cls,
        path: str | Path,
        *,
        dtype: torch.dtype = torch.bfloat16,
        device: str | torch.device | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        offload: str = "none",
        load_in_8bit: bool = False,
    ) -> GemmaTextEncoder:
        """Load tokenizer and model from a packed Gemma 4 file (config, tokenizer and weights in one
        safetensors file), checking its header first. `offload` as in `from_folder`; the 8-bit form
        is for Gemma 3 folders only."""
        if offload not in GEMMA_OFFLOAD_CHOICES:
            raise ValueError(f"Gemma offload {offload!r} is not supported; accepted: {GEMMA_OFFLOAD_CHOICES}")
        if load_in_8bit:
            raise ValueError(f"8-bit loading is for Gemma 3 folders; {str(path)!r} is a packed text encoder file")
        device = resolve_device(device)
        packed = read_packed_gemma(path)
        tokenizer = GemmaPromptTokenizer(load_packed_tokenizer(packed), max_length=max_length)
        model = load_packed_gemma_model(
            packed, dtype=dtype, device=device if offload == "none" else torch.device("cpu")
        )
        encoder = cls(model, tokenizer, packed=packed)
        if offload != "none":
            encoder._offload_dir = _offload(model, offload, device)
            encoder._execution_device = device
        return encoder

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> GemmaTextEncoder:
        """A Gemma 3 folder (`from_folder`) or a packed Gemma 4 file (`from_packed_file`), by what `path` is."""
        if Path(path).expanduser().is_file():
            return cls.from_packed_file(path, **options)
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
        if self._execution_device is not None:
            from accelerate.hooks import remove_hook_from_module

            remove_hook_from_module(self._model, recurse=True)
        if not self.is_8bit:
            # bitsandbytes' int8 parameters cannot be moved to the meta device; an 8-bit model is freed
            # when its last reference goes, below.
            self._model.to(torch.device("meta"))
        self._model = None
        if self._offload_dir is not None:
            shutil.rmtree(self._offload_dir, ignore_errors=True)
            self._offload_dir = None
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
