"""Gemma 3 text encoders in GGUF files: the layout llama.cpp writes (and ComfyUI-GGUF users download),
read as the text model of transformers' Gemma 3; and `to-gguf` from a Gemma 3 folder.

Tensor names are llama.cpp's for the `gemma3` architecture (the `gguf` package's tensor map):
`token_embd`, `output_norm`, and per decoder layer `blk.N.` + `attn_q` / `attn_k` / `attn_v` /
`attn_output`, `attn_q_norm` / `attn_k_norm`, `attn_norm` (input norm), `post_attention_norm`,
`ffn_norm` (pre-feed-forward norm), `post_ffw_norm`, `ffn_gate` / `ffn_up` / `ffn_down`. llama.cpp
stores Gemma's RMSNorm weights shifted by +1 (its norm multiplies by the weight, transformers' by
1 + weight), so every `*norm.weight` is shifted back on reading and forward on writing. The vision tower
is not in these files (llama.cpp keeps it in a separate mmproj file): the model built is the text-only
`Gemma3ForCausalLM`, whose decoder gives the same hidden states for a text prompt.

Config: our files carry transformers' text config as JSON (`ltx.gemma_text_config`); a file without it
(llama.cpp's) gets one from its `gemma3.*` fields, with llama.cpp's fixed Gemma 3 rules for what those
fields do not say (a full-attention layer every sixth, local rope base 10000, the 27B's query scale).

Tokenizer: our files carry `tokenizer.json` and the special tokens (`ltx.tokenizer_json`,
`ltx.tokenizer_config`); for a llama.cpp file, a `tokenizer.json` next to it is used (llama.cpp's
SentencePiece vocabulary is not turned into a Hugging Face tokenizer here).

Weights: block-quantized tensors (Q8_0, Q4_K, Q5_K, Q6_K, ...) stay quantized in memory and are
dequantized per layer call (`GGUFLinear`); the token embedding is dequantized once at load (an
embedding lookup is not a matmul). Writing supports F16, BF16 and Q8_0 (the `gguf` package cannot
quantize the K-quants); reading supports every type the package dequantizes.

Accuracy: each tensor reads back within its format's own rounding (F16 / BF16 relative 2^-11 / 2^-8;
Q8_0 half a step of its block's scale plus the float16 rounding of that scale; norms exactly but for
float32's rounding of the shift). Contexts (Gemma, then the connectors) of a Q8_0 file against its source
folder, bf16 run: relative Frobenius error measured 0.012 (video) / 0.014 (audio) on a tiny random
Gemma 3 (hidden 64, 6 layers); tests hold it under `GGUF_Q8_0_CONTEXT_RTOL` = 0.05.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.sd_ops import SDOps

logger = logging.getLogger(__name__)

GGUF_GEMMA_ARCHITECTURE = "gemma3"
# Bound of a Q8_0 Gemma's contexts against the source model's (relative Frobenius error), see the docstring.
GGUF_Q8_0_CONTEXT_RTOL = 0.05
CONFIG_FIELD = "ltx.gemma_text_config"
TOKENIZER_FIELD = "ltx.tokenizer_json"
TOKENIZER_CONFIG_FIELD = "ltx.tokenizer_config"
# llama.cpp's Gemma norm weights are transformers' + NORM_SHIFT.
NORM_SHIFT = 1.0
# llama.cpp's fixed Gemma 3 rules (not stored in its files).
SLIDING_WINDOW_PATTERN = 6
LOCAL_ROPE_THETA = 10000.0
GEMMA3_27B_LAYERS = 62

# llama.cpp name inside a block -> transformers name inside a Gemma 3 decoder layer.
LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
LAYERS = "model.layers"


def _unshift_norm(key: str, value: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    return [(key, value.float() - NORM_SHIFT)]


def gguf_gemma_key_rules() -> SDOps:
    """llama.cpp gemma3 tensor names -> `Gemma3ForCausalLM` keys, norms shifted back."""
    ops = SDOps("gguf_gemma3").keeping(prefix="blk.")
    for gg in TOP_NAMES:
        ops = ops.keeping(prefix=f"{gg}.")
    ops = ops.renaming_prefix("blk.", f"{LAYERS}.")
    # Longest names first: `attn_q_norm` before `attn_q` (both are matched with their dots anyway).
    for gg, hf in sorted(LAYER_NAMES.items(), key=lambda item: -len(item[0])):
        ops = ops.replacing(f".{gg}.", f".{hf}.")
    for gg, hf in TOP_NAMES.items():
        ops = ops.renaming_prefix(f"{gg}.", f"{hf}.")
    return ops.with_value_op(_unshift_norm, suffix="norm.weight")


def gguf_name(text_key: str) -> str | None:
    """The llama.cpp name of a Gemma 3 text-model key (`layers.N.self_attn.q_proj.weight`,
    `embed_tokens.weight`, `norm.weight`, as under `model.language_model.`), None for keys without one."""
    head, _, leaf = text_key.rpartition(".")
    if head.startswith("layers."):
        _, index, inner = head.split(".", 2)
        for gg, hf in LAYER_NAMES.items():
            if inner == hf:
                return f"blk.{index}.{gg}.{leaf}"
        return None
    for gg, hf in TOP_NAMES.items():
        if f"model.{head}" == hf:
            return f"{gg}.{leaf}"
    return None


# -- reading ----------------------------------------------------------------------------------------
def _fields(path: Path) -> dict[str, Any]:
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path, "r")
    except (ValueError, OSError, IndexError) as e:
        raise CheckpointError(f"{str(path)!r} is not a readable GGUF file ({e})") from None
    fields = {name: field.contents() for name, field in reader.fields.items()}
    fields["__token_embd_shape__"] = next(
        (tuple(int(d) for d in reversed(t.shape.tolist())) for t in reader.tensors if t.name == "token_embd.weight"),
        None,
    )
    return fields


def is_gguf_gemma(path: str | Path) -> bool:
    from ltx_core.loader.gguf_file import is_gguf

    return is_gguf(path) and _fields(Path(path)).get("general.architecture") == GGUF_GEMMA_ARCHITECTURE


def text_config_from_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """transformers' Gemma 3 text config of a llama.cpp file, from its `gemma3.*` fields."""

    def need(name: str) -> Any:
        value = fields.get(f"{GGUF_GEMMA_ARCHITECTURE}.{name}")
        if value is None:
            raise CheckpointError(f"the GGUF Gemma has no {GGUF_GEMMA_ARCHITECTURE}.{name} field")
        return value

    layers = int(need("block_count"))
    hidden = int(need("embedding_length"))
    heads = int(need("attention.head_count"))
    head_dim = int(fields.get(f"{GGUF_GEMMA_ARCHITECTURE}.attention.key_length") or hidden // heads)
    embd = fields.get("__token_embd_shape__")
    if embd is None:
        raise CheckpointError("the GGUF Gemma has no token_embd.weight tensor")
    full_rope: dict[str, Any] = {"rope_type": "default", "rope_theta": float(need("rope.freq_base"))}
    if fields.get(f"{GGUF_GEMMA_ARCHITECTURE}.rope.scaling.type") == "linear":
        full_rope = {**full_rope, "rope_type": "linear", "factor": float(need("rope.scaling.factor"))}
    return {
        "model_type": "gemma3_text",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": int(need("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(need("attention.head_count_kv")),
        "head_dim": head_dim,
        "rms_norm_eps": float(need("attention.layer_norm_rms_epsilon")),
        "sliding_window": int(need("attention.sliding_window")),
        "max_position_embeddings": int(need("context_length")),
        "vocab_size": int(embd[0]),
        "query_pre_attn_scalar": hidden // heads if layers == GEMMA3_27B_LAYERS else head_dim,
        "layer_types": [
            "full_attention" if (i + 1) % SLIDING_WINDOW_PATTERN == 0 else "sliding_attention" for i in range(layers)
        ],
        "rope_parameters": {
            "full_attention": full_rope,
            "sliding_attention": {"rope_type": "default", "rope_theta": LOCAL_ROPE_THETA},
        },
    }


def gguf_gemma_text_config(path: str | Path) -> dict[str, Any]:
    """The text config of a GGUF Gemma 3: ours as written, else derived from llama.cpp's fields."""
    path = Path(path)
    fields = _fields(path)
    architecture = fields.get("general.architecture")
    if architecture != GGUF_GEMMA_ARCHITECTURE:
        raise CheckpointError(
            f"{str(path)!r} is a GGUF file of architecture {architecture!r}; a Gemma text encoder is "
            f"{GGUF_GEMMA_ARCHITECTURE!r} (e.g. gemma-3-12b-it-Q8_0.gguf)"
        )
    stored = fields.get(CONFIG_FIELD)
    return json.loads(stored) if isinstance(stored, str) else text_config_from_fields(fields)


def gguf_gemma_tokenizer(path: str | Path) -> Any:
    """The Hugging Face tokenizer of a GGUF Gemma (see the module docstring for where it comes from)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    path = Path(path)
    fields = _fields(path)
    text = fields.get(TOKENIZER_FIELD)
    beside = path.parent / "tokenizer.json"
    if isinstance(text, str):
        backend = Tokenizer.from_str(text)
    elif beside.is_file():
        backend = Tokenizer.from_file(str(beside))
    else:
        raise CheckpointError(
            f"the GGUF Gemma {str(path)!r} carries no Hugging Face tokenizer and there is no {str(beside)!r}; "
            "put the tokenizer.json of the Gemma 3 release next to it, or write the file with "
            "`python -m ltx_core.convert to-gguf GEMMA_FOLDER OUT.gguf`"
        )
    settings = json.loads(fields[TOKENIZER_CONFIG_FIELD]) if isinstance(fields.get(TOKENIZER_CONFIG_FIELD), str) else {}
    special: dict[str, str] = {k: v for k, v in settings.items() if k.endswith("_token") and isinstance(v, str)}
    for name, field in (
        ("bos_token", "bos_token_id"),
        ("eos_token", "eos_token_id"),
        ("pad_token", "padding_token_id"),
    ):
        token_id = fields.get(f"tokenizer.ggml.{field}")
        if name not in special and token_id is not None and backend.id_to_token(int(token_id)) is not None:
            special[name] = backend.id_to_token(int(token_id))
    return PreTrainedTokenizerFast(tokenizer_object=backend, padding_side="left", **special)


def gguf_gemma_weights(path: str | Path) -> Any:
    """The `GemmaWeights` of a GGUF Gemma 3 (text model)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from ltx_core.text_encoders.gemma.gemma_weights import GemmaWeights

    config = gguf_gemma_text_config(path)

    def make_model() -> Any:
        return Gemma3ForCausalLM(Gemma3TextConfig(**config))

    return GemmaWeights(files=(Path(path),), ops=gguf_gemma_key_rules(), layers=LAYERS, make_model=make_model)


# -- writing ----------------------------------------------------------------------------------------
_TEXT_PREFIXES = ("model.language_model.", "language_model.model.")


def _text_tensors(folder: Any) -> dict[str, torch.Tensor]:
    """The folder's text-model tensors by their name under the text model (`layers.0...`)."""
    from safetensors import safe_open

    out: dict[str, torch.Tensor] = {}
    for shard in folder.weight_files:
        with safe_open(str(shard), framework="pt", device="cpu") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                prefix = next((p for p in _TEXT_PREFIXES if key.startswith(p)), None)
                if prefix is not None:
                    out[key[len(prefix) :]] = f.get_tensor(key)
    return out


def _llama_cpp_fields(writer: Any, config: dict[str, Any], vocab_rows: int) -> None:
    arch = GGUF_GEMMA_ARCHITECTURE
    writer.add_uint32(f"{arch}.context_length", int(config.get("max_position_embeddings", 131072)))
    writer.add_uint32(f"{arch}.embedding_length", int(config["hidden_size"]))
    writer.add_uint32(f"{arch}.block_count", int(config["num_hidden_layers"]))
    writer.add_uint32(f"{arch}.feed_forward_length", int(config["intermediate_size"]))
    writer.add_uint32(f"{arch}.attention.head_count", int(config["num_attention_heads"]))
    writer.add_uint32(f"{arch}.attention.head_count_kv", int(config["num_key_value_heads"]))
    writer.add_uint32(f"{arch}.attention.key_length", int(config["head_dim"]))
    writer.add_uint32(f"{arch}.attention.value_length", int(config["head_dim"]))
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", float(config["rms_norm_eps"]))
    writer.add_uint32(f"{arch}.attention.sliding_window", int(config["sliding_window"]))
    full = (config.get("rope_parameters") or {}).get("full_attention") or {}
    writer.add_float32(f"{arch}.rope.freq_base", float(full.get("rope_theta", 1_000_000.0)))
    if full.get("rope_type") == "linear":
        writer.add_string(f"{arch}.rope.scaling.type", "linear")
        writer.add_float32(f"{arch}.rope.scaling.factor", float(full["factor"]))
    writer.add_uint32(f"{arch}.vocab_size", vocab_rows)


def gemma_folder_to_gguf(
    folder_path: str | Path,
    out_file: Path,
    *,
    qtype: str = "Q8_0",
    ltx_fields: bool = True,
    overrides: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, str]:
    """Write the text model of a Gemma 3 folder to the GGUF file `out_file` (which must not exist: the
    caller writes to a temporary name) in llama.cpp's gemma3 layout; returns name -> stored ggml type.
    `ltx_fields=False` leaves out our config and tokenizer fields (a file as llama.cpp's converter
    describes it, for tests of that path). `overrides`: tensors written instead of the folder's, by
    llama.cpp name (e.g. `GGUFTensor` K-quant blocks made elsewhere; written as they are)."""
    from transformers import AutoTokenizer, Gemma3TextConfig

    from ltx_core.loader.gguf_file import write_gguf
    from ltx_core.text_encoders.gemma.folder import locate_gemma_folder

    folder = locate_gemma_folder(folder_path)
    if folder.model_type != "gemma3":
        raise CheckpointError(
            f"{str(folder.root)!r} holds a {folder.model_type!r} model; to-gguf writes Gemma 3 folders"
        )
    config = Gemma3TextConfig(**folder.text_config).to_dict()
    tensors: dict[str, torch.Tensor] = {}
    for key, value in _text_tensors(folder).items():
        name = gguf_name(key)
        if name is None:
            raise CheckpointError(f"{str(folder.root)!r}: text-model tensor {key!r} has no llama.cpp gemma3 name")
        tensors[name] = value.float() + NORM_SHIFT if name.endswith("norm.weight") else value
    unknown = sorted(set(overrides or {}) - set(tensors))
    if unknown:
        raise ValueError(f"overrides name tensors the folder does not have: {unknown[:10]}")
    tensors.update(overrides or {})
    if "token_embd.weight" not in tensors:
        raise CheckpointError(f"{str(folder.root)!r} holds no Gemma 3 text-model weights ({_TEXT_PREFIXES[0]}*)")
    tokenizer = AutoTokenizer.from_pretrained(folder.root, local_files_only=True)
    special = {
        name: str(getattr(tokenizer, name))
        for name in ("bos_token", "eos_token", "pad_token", "unk_token")
        if getattr(tokenizer, name, None) is not None
    }
    vocab_rows = int(tensors["token_embd.weight"].shape[0])

    def fields(writer: Any) -> None:
        _llama_cpp_fields(writer, config, vocab_rows)
        if ltx_fields:
            writer.add_string(CONFIG_FIELD, json.dumps(config))
            writer.add_string(TOKENIZER_FIELD, tokenizer.backend_tokenizer.to_str())
            writer.add_string(TOKENIZER_CONFIG_FIELD, json.dumps(special))
        for name, field in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("pad", "pad_token_id")):
            token_id = getattr(tokenizer, field, None)
            if token_id is not None:
                writer.add_uint32(f"tokenizer.ggml.{'padding' if name == 'pad' else name}_token_id", int(token_id))

    stored = write_gguf(out_file, tensors, {}, qtype, architecture=GGUF_GEMMA_ARCHITECTURE, fields=fields)
    logger.info("%d of %d Gemma tensors stored as %s", sum(v == qtype for v in stored.values()), len(stored), qtype)
    return stored
