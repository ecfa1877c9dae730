"""A tiny, randomly initialised packed Gemma 4 text-encoder file (the LTX-2.5 layout), built offline.

Same layout as the released `gemma4-*-with-proj-*.safetensors`: HF config in `gemma_config`
metadata, the tokenizer as uint8 tensors, Comfy-flat language-model keys, the vision / audio
embedders, and optionally the LTX text projection (`text_embedding_projection.*`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from ltx_core.text_encoders.gemma.packed import ASSET_PREFIX, CONFIG_METADATA_KEY, TOKENIZER_TENSOR
from ltx_core.text_encoders.gemma.tiny import BOS, EOS, PAD, UNK, build_tiny_tokenizer

logger = logging.getLogger(__name__)

TINY_GEMMA4_VERSION = "gemma4-tiny-ltx-test"

# transformers module prefix -> Comfy-flat file prefix (most specific first).
_TO_FILE = (
    ("model.language_model.", "model."),
    ("model.embed_vision.multimodal_embedder.", "multi_modal_projector."),
    ("model.embed_vision.", "vision_model."),
    ("model.embed_audio.", "audio_projector."),
)


def _file_key(key: str) -> str | None:
    if key == "lm_head.weight":
        return None  # tied to the token embedding
    for old, new in _TO_FILE:
        if key.startswith(old):
            return new + key[len(old) :]
    raise ValueError(f"no packed-file name for Gemma 4 tensor {key!r}")


def _bytes_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()


def tiny_gemma4_config(
    vocab_size: int, hidden_size: int, num_layers: int, ids: dict[str, int], gemma_version: str
) -> dict[str, Any]:
    return {
        "architectures": ["Gemma4UnifiedForConditionalGeneration"],
        "model_type": "gemma4_unified",
        "gemma_version": gemma_version,
        "text_config": {
            "model_type": "gemma4_unified_text",
            "hidden_size": hidden_size,
            "intermediate_size": 2 * hidden_size,
            "num_hidden_layers": num_layers,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": hidden_size // 2,
            "global_head_dim": hidden_size,
            "sliding_window": 8,
            "layer_types": ["sliding_attention"] * (num_layers - 1) + ["full_attention"],
            "vocab_size": vocab_size,
            "max_position_embeddings": 2048,
            "pad_token_id": ids[PAD],
            "eos_token_id": ids[EOS],
            "bos_token_id": ids[BOS],
        },
        "vision_config": {
            "model_type": "gemma4_unified_vision",
            "patch_size": 4,
            "pooling_kernel_size": 2,
            "mm_embed_dim": 8,
            "mm_posemb_size": 8,
            "output_proj_dims": hidden_size,
        },
        "audio_config": {"model_type": "gemma4_unified_audio", "audio_embed_dim": 8},
    }


def build_tiny_packed_gemma4(
    path: str | Path,
    *,
    hidden_size: int = 16,
    num_layers: int = 2,
    seed: int = 0,
    vocab_size: int = 256,
    projection_widths: tuple[int, int] | None = None,
    gemma_version: str = TINY_GEMMA4_VERSION,
    model_out: list[Any] | None = None,
) -> Path:
    """Write a random packed Gemma 4 file at `path`. `projection_widths` = (video, audio) adds the LTX
    text projection (`*_aggregate_embed`, from hidden_size * (num_layers + 1) features). The model
    written is appended to `model_out` when given (tests compare against it). Weights depend only on
    `seed`; the global RNG is left as it was."""
    from safetensors.torch import save_file
    from transformers import Gemma4UnifiedConfig, Gemma4UnifiedForConditionalGeneration

    if num_layers < 1 or hidden_size % 2:
        raise ValueError(f"need num_layers >= 1 and an even hidden_size, got {num_layers} and {hidden_size}")
    tokenizer = build_tiny_tokenizer(vocab_size)
    ids = {t: tokenizer.token_to_id(t) for t in (PAD, EOS, BOS, UNK)}
    config = tiny_gemma4_config(tokenizer.get_vocab_size(), hidden_size, num_layers, ids, gemma_version)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Gemma4UnifiedForConditionalGeneration(Gemma4UnifiedConfig.from_dict(config)).eval()
        tensors: dict[str, torch.Tensor] = {}
        for key, value in model.state_dict().items():
            name = _file_key(key)
            if name is not None:
                tensors[name] = value.to(torch.bfloat16 if value.is_floating_point() else value.dtype).contiguous()
        if projection_widths is not None:
            features = hidden_size * (num_layers + 1)
            for stream, width in zip(("video", "audio"), projection_widths):
                layer = torch.nn.Linear(features, width)
                prefix = f"text_embedding_projection.{stream}_aggregate_embed."
                tensors[prefix + "weight"] = layer.weight.detach().to(torch.bfloat16)
                tensors[prefix + "bias"] = layer.bias.detach().to(torch.bfloat16)
    tensors[TOKENIZER_TENSOR] = _bytes_tensor(tokenizer.to_str().encode("utf-8"))
    tokenizer_config = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "unk_token": UNK, "padding_side": "left"}
    tensors[ASSET_PREFIX + "tokenizer_config.json"] = _bytes_tensor(json.dumps(tokenizer_config).encode("utf-8"))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    save_file(tensors, str(partial), metadata={CONFIG_METADATA_KEY: json.dumps(config), "format": "pt"})
    partial.replace(path)
    if model_out is not None:
        model_out.append(model)
    logger.info(
        "wrote a tiny packed Gemma 4 (hidden %d, %d layers, seed %d) to %s", hidden_size, num_layers, seed, path
    )
    return path
