"""Distilled two-stage text/image-to-video+audio: `python -m ltx_pipelines.distilled`.

Stage 1 denoises at half resolution with the 8 distilled sigmas; the video latent is upsampled x2
(through the VAE latent statistics); stage 2 re-noises it (and the stage-1 audio) to the first
stage-2 sigma and refines at full resolution with the 3 stage-2 sigmas. No guidance: one
transformer call per step. The transformer is loaded once for both stages.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.loader import LoraSpec
from ltx_core.model.transformer import AV_TRANSFORMER, X0Model
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.cli.runner import DISTILLED_LAYOUT, ParsedRun, PipelineCli
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.loaded_stages import (
    contexts_on,
    decoded_generation,
    encode_conditioning_images,
    upsample_between_stages,
)
from ltx_pipelines.engine.model_loading import Placement, loaded
from ltx_pipelines.engine.noise import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompts import encode_prompt
from ltx_pipelines.engine.stages import ImageCondition, run_denoising_stage

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
        positive = contexts_on(contexts, self.placement)
        encoded = encode_conditioning_images(
            images, self.checkpoint_path, self.placement, [half, full], keep_latent_statistics=True
        )
        stage_1_items, stage_2_items = encoded.per_stage
        assert encoded.latent_statistics is not None

        latents: dict[str, torch.Tensor] = {}
        with loaded(AV_TRANSFORMER, self.checkpoint_path, self.placement, loras=self.loras) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), positive.video, positive.audio)
            stage_1 = run_denoising_stage(
                denoiser, half, distilled_sigmas(), noise, "stage_1", device, dtype,
                conditionings=stage_1_items, progress=self.progress,
            )  # fmt: skip
            latents["stage_1.video_latent"] = stage_1.video_latent
            latents["stage_1.audio_latent"] = stage_1.audio_latent
            # The transformer stays loaded across the upsampling: both stages use the same model.
            upsampled = upsample_between_stages(
                stage_1.video_latent, self.spatial_upsampler_path, encoded.latent_statistics, self.placement
            )
            latents["upsampled_video_latent"] = upsampled
            stage_2 = run_denoising_stage(
                denoiser, full, stage_2_distilled_sigmas(), noise, "stage_2", device, dtype,
                conditionings=stage_2_items, initial_video=upsampled, initial_audio=stage_1.audio_latent,
                progress=self.progress,
            )  # fmt: skip
            latents["stage_2.video_latent"] = stage_2.video_latent
            latents["stage_2.audio_latent"] = stage_2.audio_latent

        return decoded_generation(
            self.checkpoint_path,
            self.placement,
            full,
            stage_2.video_latent,
            stage_2.audio_latent,
            tiling=self.tiling,
            noise=noise,
            latents=latents,
        )


def main(argv: Sequence[str] | None = None) -> int:
    cli = PipelineCli(
        prog="python -m ltx_pipelines.distilled",
        description=__doc__.splitlines()[0] if __doc__ else None,
        layout=DISTILLED_LAYOUT,
    )

    def generate(run: ParsedRun) -> Generation:
        pipeline = DistilledPipeline(
            run.checkpoint_path,
            run.spatial_upsampler_path,
            run.gemma_root,
            loras=run.lora_specs,
            device=run.config.device,
            dtype=run.config.dtype,
        )
        return pipeline(
            run.config.prompt,
            seed=run.config.seed,
            height=run.config.height,
            width=run.config.width,
            num_frames=run.config.num_frames,
            frame_rate=run.config.frame_rate,
            images=run.image_conditions,
            enhance_prompt=run.config.enhance_prompt,
        )

    return cli.run(argv, generate)


if __name__ == "__main__":
    sys.exit(main())
