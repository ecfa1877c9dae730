"""A tiny, randomly initialised Gemma 3 folder, built offline.

Tests and the pipelines' `--demo` mode need a folder with the same files and classes as a real
Gemma 3 release (config, tokenizer with chat template, image processor, safetensors weights) but
small enough to run anywhere. The tokenizer is a byte-level BPE trained on a few sentences, so any
text tokenizes; the special tokens sit at the ids Gemma uses for them (<pad> 0, <eos> 1, <bos> 2).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltx_core.text_encoders.gemma import system_prompts

logger = logging.getLogger(__name__)

PAD, EOS, BOS, UNK = "<pad>", "<eos>", "<bos>", "<unk>"
START_OF_TURN, END_OF_TURN = "<start_of_turn>", "<end_of_turn>"
START_OF_IMAGE, END_OF_IMAGE, IMAGE_SOFT_TOKEN = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
SPECIAL_TOKENS = (PAD, EOS, BOS, UNK, START_OF_TURN, END_OF_TURN, START_OF_IMAGE, END_OF_IMAGE, IMAGE_SOFT_TOKEN)

_CORPUS = (
    "A red fox trots across a snowy field while wind hisses through the pines.",
    "Style: cinematic. A woman in a grey coat opens an umbrella as rain starts to fall on the street.",
    "The camera slowly pushes in on an old man who says, 'We should have left an hour ago.'",
    "Waves roll onto a pebble beach; gulls call overhead and a dog barks in the distance.",
    "A chef slices onions on a wooden board, the knife tapping steadily, then tosses them into a pan.",
    "Two children laugh as they run through a sunlit park, leaves crunching under their shoes.",
    "Neon signs flicker above a wet alley at night and a distant train rumbles past.",
    "User prompt: a cat sleeping on a windowsill. User request: make the bird fly away.",
)

# Gemma-style turns: the system text opens the first user turn; images become <start_of_image>.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- set ns = namespace(prefix='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{%- set ns.prefix = (message['content'] if message['content'] is string "
    "else message['content'] | map(attribute='text') | join('')) + '\n\n' -%}"
    "{%- else -%}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' + ns.prefix }}"
    "{%- set ns.prefix = '' -%}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{ '<start_of_image>' }}{%- else -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


def build_tiny_tokenizer(vocab_size: int = 1024):
    """A `tokenizers.Tokenizer` (byte-level BPE) with Gemma's special tokens and a <bos> post-processor."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # The enhancement instructions are in the corpus so they take few tokens (fast prefill in tests).
    corpus = (*_CORPUS, system_prompts.TEXT_TO_VIDEO, system_prompts.IMAGE_TO_VIDEO)
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    return tokenizer


def _hf_tokenizer(vocab_size: int):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=build_tiny_tokenizer(vocab_size),
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        boi_token=START_OF_IMAGE,
        eoi_token=END_OF_IMAGE,
        image_token=IMAGE_SOFT_TOKEN,
        chat_template=CHAT_TEMPLATE,
    )


@dataclass(frozen=True)
class _TinyGemmaSizes:
    """The sizes of a tiny Gemma 3 folder's text model and of its image input (the vision tower is fixed)."""

    hidden_size: int
    num_layers: int
    num_attention_heads: int
    image_size: int
    patch_size: int
    image_tokens: int

    def check(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}"
            )
        if self.num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {self.num_layers}")
        side = round(self.image_tokens**0.5)
        grid = self.image_size // self.patch_size
        if side * side != self.image_tokens or grid % side:
            raise ValueError(
                f"image_tokens ({self.image_tokens}) must be a square number whose root divides the patch grid "
                f"side ({grid})"
            )

    def text_config(self, vocab_size: int, ids: dict[str, int]) -> dict[str, Any]:
        head_dim = self.hidden_size // self.num_attention_heads
        return {
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "intermediate_size": 2 * self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": 1,
            "head_dim": head_dim,
            "query_pre_attn_scalar": head_dim,
            "vocab_size": vocab_size,
            # Like the real model: local (sliding-window) layers with a global one last.
            "sliding_window": 64,
            "layer_types": ["sliding_attention"] * (self.num_layers - 1) + ["full_attention"],
            "pad_token_id": ids[PAD],
            "bos_token_id": ids[BOS],
            "eos_token_id": ids[EOS],
        }

    def vision_config(self) -> dict[str, Any]:
        return {
            "model_type": "siglip_vision_model",
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "vision_use_head": False,
        }


def _save_tiny_model(sizes: _TinyGemmaSizes, tokenizer: Any, seed: int, path: Path) -> None:
    """The random multimodal model, its weights drawn from `seed` without touching the global RNG."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    config = Gemma3Config(
        text_config=sizes.text_config(len(tokenizer), ids),
        vision_config=sizes.vision_config(),
        mm_tokens_per_image=sizes.image_tokens,
        boi_token_index=ids[START_OF_IMAGE],
        eoi_token_index=ids[END_OF_IMAGE],
        image_token_index=ids[IMAGE_SOFT_TOKEN],
        pad_token_id=ids[PAD],
        bos_token_id=ids[BOS],
        eos_token_id=[ids[EOS], ids[END_OF_TURN]],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Gemma3ForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = [ids[EOS], ids[END_OF_TURN]]
    model.generation_config.pad_token_id = ids[PAD]
    model.save_pretrained(path)


def _save_tiny_processor(sizes: _TinyGemmaSizes, tokenizer: Any, path: Path) -> None:
    from transformers import Gemma3Processor
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    image_processor = Gemma3ImageProcessorPil(
        size={"height": sizes.image_size, "width": sizes.image_size},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        do_pan_and_scan=False,
    )
    processor = Gemma3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
        image_seq_length=sizes.image_tokens,
    )
    processor.save_pretrained(path)


def build_tiny_gemma_folder(
    path: str | Path,
    *,
    hidden_size: int = 24,
    num_layers: int = 3,
    num_attention_heads: int = 2,
    seed: int = 0,
    vocab_size: int = 1024,
    image_size: int = 32,
    patch_size: int = 8,
    image_tokens: int = 4,
) -> Path:
    """Write a random Gemma 3 (multimodal) folder at `path` and return it.

    `hidden_size` and `num_layers` size the text model (the LTX text projection expects
    hidden_size * (num_layers + 1) features); the vision tower is always tiny. The weights depend
    only on `seed`; the global RNG is left as it was.
    """
    sizes = _TinyGemmaSizes(hidden_size, num_layers, num_attention_heads, image_size, patch_size, image_tokens)
    sizes.check()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = _hf_tokenizer(vocab_size)
    _save_tiny_model(sizes, tokenizer, seed, path)
    _save_tiny_processor(sizes, tokenizer, path)
    logger.info("wrote a tiny Gemma 3 (hidden %d, %d layers, seed %d) to %s", hidden_size, num_layers, seed, path)
    return path
