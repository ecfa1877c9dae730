"""Precomputed latents -> previews: mp4 (video), png (1-frame samples), wav (audio)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ltx_pipelines.io import write_audio, write_video
from ltx_pipelines.io.atomic_files import atomic_output
from ltx_pipelines.io.progress import progress
from ltx_trainer.preprocessing.drop_report import RunReport
from ltx_trainer.preprocessing.models import PREPROCESS_TILING, LazyModels, decode_waveform
from ltx_trainer.preprocessing.precomputed import find_samples, load_sample, require_tensors

logger = logging.getLogger(__name__)


def _video_latents(sample) -> tuple[torch.Tensor, float]:
    latents = sample.tensors["latents"]
    if latents.ndim == 2:  # the reference's legacy patchified [seq, C] layout
        f, h, w = (int(sample.scalar(k)) for k in ("num_frames", "height", "width"))
        latents = latents.T.reshape(latents.shape[1], f, h, w)
    fps = sample.scalar("fps") if "fps" in sample.tensors else 24.0
    return latents, fps


@torch.inference_mode()
def decode_video_folder(
    latents_dir: str | Path,
    output_dir: str | Path,
    models: LazyModels,
    *,
    report: RunReport,
    vae_tiling: bool = False,
    seed: int = 42,
    overwrite: bool = False,
    stage: str = "decode video",
) -> None:
    """Decode every video latents file under `latents_dir` into `output_dir`, mirroring the names."""
    root, out_root = Path(latents_dir), Path(output_dir)
    files = find_samples(root)
    for path in progress(files, desc=stage, total=len(files), unit="sample"):
        sample = load_sample(path)
        require_tensors(path, sample, ["latents"])
        latents, fps = _video_latents(sample)
        single = latents.shape[1] == 1
        target = (out_root / path.relative_to(root)).with_suffix(".png" if single else ".mp4")
        if target.exists() and not overwrite:
            report.skip(stage)
            continue
        decoder = models.video_decoder()
        weight = next(decoder.parameters())  # either decoder class (the diffusion decoder has no conv_in)
        generator = torch.Generator(device=weight.device).manual_seed(seed)
        tiling = PREPROCESS_TILING if vae_tiling else None
        x = latents.unsqueeze(0).to(device=weight.device, dtype=weight.dtype)
        chunks = [(c.float().cpu() * 255.0).round().to(torch.uint8) for c in decoder.decode_video(x, tiling, generator)]
        frames = torch.cat(chunks, dim=0)  # (F, H, W, 3)
        target.parent.mkdir(parents=True, exist_ok=True)
        if single:
            with atomic_output(target, overwrite=overwrite) as tmp:
                Image.fromarray(np.ascontiguousarray(frames[0].numpy())).save(tmp, format="PNG")
        else:
            write_video(target, frames, fps=fps, overwrite=overwrite)
        report.wrote(stage)


@torch.inference_mode()
def decode_audio_folder(
    latents_dir: str | Path,
    output_dir: str | Path,
    models: LazyModels,
    *,
    report: RunReport,
    overwrite: bool = False,
    stage: str = "decode audio",
) -> None:
    root, out_root = Path(latents_dir), Path(output_dir)
    files = find_samples(root)
    for path in progress(files, desc=stage, total=len(files), unit="sample"):
        target = (out_root / path.relative_to(root)).with_suffix(".wav")
        if target.exists() and not overwrite:
            report.skip(stage)
            continue
        sample = load_sample(path)
        require_tensors(path, sample, ["latents"])
        latents = sample.tensors["latents"]
        decoder, vocoder = models.audio_decoder_and_vocoder()
        wave, rate = decode_waveform(decoder, vocoder, latents)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_audio(target, wave.clamp(-1.0, 1.0), rate, overwrite=overwrite)
        report.wrote(stage)
