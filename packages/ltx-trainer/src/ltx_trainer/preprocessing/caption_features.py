"""Captions -> Gemma features under `.precomputed/conditions/`.

What is stored is the text encoder's output after the checkpoint's feature extractor and before
the embeddings connectors (`EmbeddingsProcessor.extract_features`): training runs the connectors
itself, so they can be trained. Tokens are in the tokenizer's order (left padding, fixed length).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import torch

from ltx_core.loader import ModelFiles, build_model
from ltx_core.text_encoders.gemma import GemmaTextEncoder
from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit
from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec
from ltx_pipelines.io.progress import progress
from ltx_trainer.model_files import training_model_files
from ltx_trainer.preprocessing.dataset_file import DatasetFile
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.precomputed import sample_path, save_sample
from ltx_trainer.preprocessing.sample_loop import Columns, RowItem, shard_items
from ltx_trainer.preprocessing.sharding import Shard

logger = logging.getLogger(__name__)

# Openings vision-language captioners like to add; they carry no content and would all map to one
# phrase the model then associates with everything.
LLM_PREFIXES = (
    "the video shows",
    "this video shows",
    "the video depicts",
    "this video depicts",
    "the video features",
    "this video features",
    "the video captures",
    "this video captures",
    "the clip shows",
    "this clip shows",
    "the scene shows",
    "the image shows",
    "this image shows",
    "the image depicts",
    "in the video,",
    "in this video,",
    "in the clip,",
    "in this clip,",
    "in the image,",
    "in this image,",
    "video caption:",
    "caption:",
    "description:",
)


def remove_llm_prefixes(caption: str) -> str:
    """Strip leading boilerplate ("This video shows", "Caption:" ...) repeatedly, then re-capitalise."""
    text = caption.strip()
    changed = True
    while changed:
        changed = False
        lowered = text.lower()
        for prefix in LLM_PREFIXES:
            if lowered.startswith(prefix):
                text = re.sub(r"^[\s,:;.-]+", "", text[len(prefix) :])
                changed = True
                break
    return text[:1].upper() + text[1:] if text else text


def prepare_caption(caption: str, *, lora_trigger: str | None, strip_prefixes: bool) -> str:
    text = remove_llm_prefixes(caption) if strip_prefixes else caption.strip()
    if lora_trigger:
        text = f"{lora_trigger.strip()} {text}"
    return text


def compute_caption_features(
    dataset: DatasetFile,
    caption_column: str,
    key_column: Columns,
    output_dir: str | Path,
    *,
    checkpoint: str | Path | ModelFiles,
    text_encoder_path: str | Path,
    report: RunReport,
    lora_trigger: str | None = None,
    strip_prefixes: bool = False,
    batch_size: int = 1,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    overwrite: bool = False,
    shard: Shard | None = None,
    stage: str = "caption",
    load_in_8bit: bool = False,
) -> None:
    """Encode the captions of this rank's rows; Gemma is loaded only when some caption needs encoding
    (`load_in_8bit`: its 8-bit form, which needs CUDA and bitsandbytes - checked before anything else).

    `checkpoint` with `text_encoder_path`: a single file with a Gemma 3 folder, or the LTX-2.5 transformer
    file with the packed Gemma 4 file (whose text projection the features go through); or the set as
    `ModelFiles`."""
    if batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1; got {batch_size}")
    files = checkpoint if isinstance(checkpoint, ModelFiles) else training_model_files(checkpoint, text_encoder_path)
    from ltx_core.devices import resolve_device

    where = resolve_device(device)
    if load_in_8bit:
        require_gemma_8bit(where, "--load-text-encoder-in-8bit")
    out_root = Path(output_dir)
    pending = _rows_to_encode(dataset, caption_column, key_column, out_root, report, overwrite, shard, stage)
    if not pending:
        return
    from ltx_trainer.preprocessing.models import default_dtype

    dtype = dtype or default_dtype(where)
    with GemmaTextEncoder.load(text_encoder_path, dtype=dtype, device=where, load_in_8bit=load_in_8bit) as gemma:
        spec = text_embeddings_spec(gemma.hidden_size, gemma.num_hidden_states)
        processor = build_model(spec, files, dtype=dtype, device=where)
        batches = [pending[i : i + batch_size] for i in range(0, len(pending), batch_size)]
        for batch in progress(batches, desc="caption features", total=len(batches), unit="batch"):
            prompts = [
                prepare_caption(item.value, lora_trigger=lora_trigger, strip_prefixes=strip_prefixes) for item in batch
            ]
            hidden = gemma.encode(prompts)
            with torch.inference_mode():
                states = [h.to(device=where, dtype=dtype) for h in hidden.hidden_states]
                video, audio = processor.extract_features(states, hidden.attention_mask.to(where))
            for i, item in enumerate(batch):
                tensors = _sample_features(i, video, audio, hidden.attention_mask)
                meta = {"caption": prompts[i], "source": str(item.key), "lora_trigger": lora_trigger or ""}
                save_sample(sample_path(out_root, "", item.key), tensors, meta)
                report.wrote(stage)
        from ltx_core.loader import free_model_weights

        free_model_weights(processor)


def _rows_to_encode(
    dataset: DatasetFile, caption_column: str, key_column: Columns, out_root: Path, report: RunReport,
    overwrite: bool, shard: Shard | None, stage: str,
) -> list[RowItem]:  # fmt: skip
    """This rank's rows whose features are not written yet (all of them with `overwrite`)."""
    pending: list[RowItem] = []
    for item in shard_items(dataset, caption_column, key_column=key_column, shard=shard):
        if sample_path(out_root, "", item.key).exists() and not overwrite:
            report.skip(stage)
        else:
            pending.append(item)
    return pending


def _sample_features(
    i: int, video: torch.Tensor, audio: torch.Tensor | None, mask: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Row `i` of a batch's features, under the names the trainer reads from `conditions/`."""
    tensors = {"video_prompt_embeds": video[i], "prompt_attention_mask": mask[i].bool()}
    if audio is not None:
        tensors["audio_prompt_embeds"] = audio[i]
    return tensors
