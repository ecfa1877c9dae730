"""Distilled two-stage text/image-to-video+audio: `python -m ltx_pipelines.distilled`.

Stage 1 denoises at half resolution with the 8 distilled sigmas; the video latent is upsampled x2
(through the VAE latent statistics); stage 2 re-noises it (and the stage-1 audio) to the first
stage-2 sigma and refines at full resolution with the 3 stage-2 sigmas. No guidance: one
transformer call per step. The transformer is loaded once for both stages.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.loader import LoraSpec
from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER
from ltx_core.model.transformer import AV_TRANSFORMER, X0Model
from ltx_core.model.upsampler import LATENT_UPSAMPLER, upsample_video_latent
from ltx_core.model.video_vae import VIDEO_DECODER, VIDEO_ENCODER
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.utils.cli import PipelineCli, encode_prompt, gc_skips_loaded_modules
from ltx_pipelines.utils.generation import Generation
from ltx_pipelines.utils.model_loading import Placement, loaded, release
from ltx_pipelines.utils.noise import NoiseSource, SeededNoise
from ltx_pipelines.utils.stages import (
    ImageCondition,
    decode_audio_waveform,
    decode_video_frames,
    image_conditionings,
    run_denoising_stage,
)

logger = logging.getLogger(__name__)


class DistilledPipeline:
    """The distilled pipeline over one distilled checkpoint, an x2 spatial upsampler and Gemma."""

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        loras: Sequence[LoraSpec] = (),
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.bfloat16,
        tiling: TilingConfig | None = None,
        progress: bool = True,
    ) -> None:
        from ltx_core.devices import resolve_device

        self.checkpoint_path = Path(checkpoint_path)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.gemma_root = Path(gemma_root) if gemma_root is not None else None
        self.loras = tuple(loras)
        self.placement = Placement(resolve_device(device), dtype)
        self.tiling = tiling if tiling is not None else TilingConfig.default()
        self.progress = progress

    def __call__(
        self,
        prompt: str,
        *,
        seed: int,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        images: Sequence[ImageCondition] = (),
        enhance_prompt: bool = False,
    ) -> Generation:
        VideoPixelShape(1, num_frames, height, width, frame_rate).check(spatial_multiple=64)
        if self.gemma_root is None:
            raise ValueError("a Gemma folder (gemma_root) is needed to encode prompts")
        contexts, final_prompt = encode_prompt(
            [prompt],
            gemma_root=self.gemma_root,
            checkpoint=self.checkpoint_path,
            placement=self.placement,
            enhance=enhance_prompt,
            images=images,
            seed=seed,
        )
        generation = self.generate_from_contexts(
            contexts,
            height=height,
            width=width,
            num_frames=num_frames,
            frame_rate=frame_rate,
            noise=SeededNoise(seed),
            images=images,
        )
        generation.prompt = final_prompt
        return generation

    def generate_from_contexts(
        self,
        contexts: TextContexts,
        *,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        images: Sequence[ImageCondition] = (),
    ) -> Generation:
        """Both stages and decoding from given text contexts and a noise source (the parity seam)."""
        full = VideoPixelShape(1, num_frames, height, width, frame_rate)
        full.check(spatial_multiple=64)
        half = VideoPixelShape(1, num_frames, height // 2, width // 2, frame_rate)
        device, dtype = self.placement.device, self.placement.dtype
        video_context = contexts.video.to(device=device, dtype=dtype)
        audio_context = contexts.audio.to(device=device, dtype=dtype) if contexts.audio is not None else None

        with loaded(VIDEO_ENCODER, self.checkpoint_path, self.placement) as encoder:
            stage_1_items = image_conditionings(images, encoder, half, device, dtype)
            stage_2_items = image_conditionings(images, encoder, full, device, dtype)
            latent_stats = copy.deepcopy(encoder.per_channel_statistics)

        latents: dict[str, torch.Tensor] = {}
        with loaded(AV_TRANSFORMER, self.checkpoint_path, self.placement, loras=self.loras) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), video_context, audio_context)
            stage_1 = run_denoising_stage(
                denoiser, half, distilled_sigmas(), noise, "stage_1", device, dtype,
                conditionings=stage_1_items, progress=self.progress,
            )  # fmt: skip
            latents["stage_1.video_latent"] = stage_1.video_latent
            latents["stage_1.audio_latent"] = stage_1.audio_latent
            with loaded(LATENT_UPSAMPLER, self.spatial_upsampler_path, self.placement) as upsampler, torch.no_grad():
                upsampled = upsample_video_latent(stage_1.video_latent, upsampler, latent_stats)
            latents["upsampled_video_latent"] = upsampled
            stage_2 = run_denoising_stage(
                denoiser, full, stage_2_distilled_sigmas(), noise, "stage_2", device, dtype,
                conditionings=stage_2_items, initial_video=upsampled, initial_audio=stage_1.audio_latent,
                progress=self.progress,
            )  # fmt: skip
            latents["stage_2.video_latent"] = stage_2.video_latent
            latents["stage_2.audio_latent"] = stage_2.audio_latent

        # The vocoder always runs in float32.
        with (
            loaded(AUDIO_DECODER, self.checkpoint_path, self.placement) as audio_decoder,
            loaded(VOCODER, self.checkpoint_path, self.placement, dtype=torch.float32) as vocoder,
        ):
            waveform = decode_audio_waveform(audio_decoder, vocoder, stage_2.audio_latent)
            sample_rate = int(vocoder.output_sample_rate)

        return Generation(
            frames=self._decode(stage_2.video_latent, noise),
            num_frames=num_frames,
            height=height,
            width=width,
            frame_rate=frame_rate,
            audio=waveform,
            audio_sample_rate=sample_rate,
            prompt="",
            latents=latents,
        )

    def _decode(self, latent: torch.Tensor, noise: NoiseSource) -> Iterator[torch.Tensor]:
        # Decoding is lazy: the decoder is loaded when the first chunk is asked for and freed after the last.
        decoder = None
        try:
            from ltx_core.loader import build_model

            decoder = build_model(
                VIDEO_DECODER, self.checkpoint_path, dtype=self.placement.dtype, device=self.placement.device
            )
            yield from decode_video_frames(decoder, latent, self.tiling, noise)
        finally:
            release(decoder)


def main(argv: Sequence[str] | None = None) -> int:
    cli = PipelineCli(
        prog="python -m ltx_pipelines.distilled",
        description=__doc__.splitlines()[0] if __doc__ else None,
        distilled=True,
        two_stage=True,
        guidance=False,
        distilled_lora=False,
        sampling_steps=False,
    )
    run = cli.parse(argv)
    pipeline = DistilledPipeline(
        run.checkpoint_path,
        run.spatial_upsampler_path,
        run.gemma_root,
        loras=run.lora_specs,
        device=run.config.device,
        dtype=run.config.dtype,
    )
    with gc_skips_loaded_modules():
        generation = pipeline(
            run.config.prompt,
            seed=run.config.seed,
            height=run.config.height,
            width=run.config.width,
            num_frames=run.config.num_frames,
            frame_rate=run.config.frame_rate,
            images=run.image_conditions,
            enhance_prompt=run.config.enhance_prompt,
        )
        cli.write(run, generation)  # the video is decoded while it is written
    return 0


if __name__ == "__main__":
    sys.exit(main())
