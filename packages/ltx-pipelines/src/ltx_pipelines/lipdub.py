"""Lip-dub (Dub-It) video-to-video, distilled two-stage: `python -m ltx_pipelines.lipdub`.

One lip-dub IC-LoRA (`--lora`, exactly once) is fused into the distilled transformer used by both
stages. The `--reference-video` conditions both: its frames as IC reference tokens (at
`--reference-strength`), and its audio track, VAE-encoded, as reference audio tokens placed just
before the clip's start (negative times), so the new speech follows the reference's timing. The
frame count is the reference's, snapped down to 8k+1; the frame rate is its container's. Stage 2
refines the video with the stage-1 audio held fixed; the stage-1 audio is the one written.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.conditioning import AudioConditionByReferenceLatent, FrozenModality
from ltx_core.loader import LoraSpec, ModelFiles
from ltx_core.model.audio_vae import AUDIO_ENCODER, encode_audio
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.cli.command import PipelineCommand, Run
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.cli.model_flags import ModelFlags, RunModels
from ltx_pipelines.cli.tiling_flags import TilingFlags
from ltx_pipelines.engine.defaults import TWO_STAGE_SPATIAL_MULTIPLE, PipelineDefaults
from ltx_pipelines.engine.file_steps import contexts_on, encode_conditioning_images, upsample_between_stages
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.ic_references import VideoReference, reference_conditionings, reference_factors
from ltx_pipelines.engine.model_loading import loaded
from ltx_pipelines.engine.noise import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stages import ImageCondition, run_denoising_stage
from ltx_pipelines.io import AudioClip, MediaError, probe_video, read_audio

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "COMMAND",
    "LipDubFlags",
    "LipDubPipeline",
    "LipDubReference",
    "generate_lip_dub",
    "main",
    "reference_timing",
]

logger = logging.getLogger(__name__)

DEFAULT_REFERENCE_STRENGTH = 1.0


def snap_to_frame_grid(frames: int) -> int:
    """The largest 8k+1 frame count <= `frames` (at least 1)."""
    return max(1, (frames - 1) // 8 * 8 + 1)


def reference_timing(path: str | Path) -> tuple[int, float]:
    """(frame count snapped down to 8k+1, frame rate of the container) of a reference video."""
    info = probe_video(path)
    if info.frames < 1 or info.fps <= 0:
        raise MediaError(f"{str(path)!r}: {info.frames} frames at {info.fps} fps; need frames and a frame rate")
    return snap_to_frame_grid(info.frames), info.fps


@dataclass(frozen=True)
class LipDubReference:
    """The reference clip: its video (a file or prepared pixels, see `VideoReference`) and its audio
    (`audio` given, else the video file's first audio track)."""

    video: VideoReference
    audio: AudioClip | None = None

    def load_audio(self) -> AudioClip:
        if self.audio is not None:
            return self.audio
        if self.video.path is None:
            raise ValueError("a lip-dub reference needs its audio: give `audio` or a video file with an audio track")
        return read_audio(self.video.path)


def _stereo_or_mono(waveform: torch.Tensor) -> torch.Tensor:
    """(channels, N) -> (1, 1 or 2, N): more than two channels are mixed down to mono."""
    if waveform.shape[0] > 2:
        logger.warning("reference audio has %d channels; mixing it down to mono", waveform.shape[0])
        waveform = waveform.mean(dim=0, keepdim=True)
    return waveform.unsqueeze(0)


class LipDubPipeline(PromptPipeline):
    """Distilled two-stage lip-dub over one lip-dub IC-LoRA, fused into the transformer of both stages.

    `loras` (the options) are fused as well. The reference downscale factor comes from the LoRA's
    metadata (1 where absent).
    """

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        lip_dub_lora: LoraSpec | None,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`lip_dub_lora` None only runs the random-weight demo (the reference conditions a model not
        trained for it)."""
        super().__init__(checkpoint_path, gemma_root, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.lip_dub_lora = lip_dub_lora
        self.factors = reference_factors([lip_dub_lora] if lip_dub_lora is not None else [])
        if lip_dub_lora is None:
            logger.warning("no lip-dub IC-LoRA: the reference conditions a transformer not trained for it")

    def stage_loras(self) -> tuple[LoraSpec, ...]:
        """The LoRAs of the one transformer both stages share."""
        return (*self.loras, *([self.lip_dub_lora] if self.lip_dub_lora is not None else []))

    def encode_reference_audio(self, clip: AudioClip) -> torch.Tensor:
        """The reference waveform as an audio latent (1, 8, T, 16)."""
        with loaded(AUDIO_ENCODER, self.checkpoint_path, self.placement) as encoder, torch.no_grad():
            return encode_audio(_stereo_or_mono(clip.waveform).to(self.placement.dtype), clip.sample_rate, encoder)

    def generate(
        self,
        prompt: str,
        *,
        reference: LipDubReference,
        seed: int,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        images: Sequence[ImageCondition] = (),
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """Dub `reference` from a prompt (no guidance); the same seed gives the same result."""
        self.output_shape(height, width, num_frames, frame_rate)
        (contexts,), final_prompt = self.encode_prompts([prompt], seed=seed, images=images, enhance=enhance_prompt)
        final = self.latents_from_contexts(
            contexts, height=height, width=width, num_frames=num_frames, frame_rate=frame_rate,
            noise=SeededNoise(seed), reference=reference, images=images,
        )  # fmt: skip
        return replace(final, prompt=final_prompt)

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        *,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        reference: LipDubReference,
        images: Sequence[ImageCondition] = (),
    ) -> FinalLatents:
        """Both stages, from given contexts, the reference and a noise source.

        `num_frames` / `frame_rate` are the reference's (see `reference_timing`); its frames beyond
        `num_frames` are not used.
        """
        full = self.output_shape(height, width, num_frames, frame_rate)
        half = VideoPixelShape(1, num_frames, height // 2, width // 2, frame_rate)
        device, dtype = self.placement.device, self.placement.dtype
        positive = contexts_on(contexts, self.placement)
        reference_audio = self.encode_reference_audio(reference.load_audio())

        def encode_references(encoder: torch.nn.Module) -> list[list[Any]]:
            # Unlike IC-LoRA video-to-video, the reference video guides both stages, each at its size.
            return [
                reference_conditionings(
                    [reference.video],
                    encoder,
                    height=shape.height,
                    width=shape.width,
                    num_frames=num_frames,
                    factors=self.factors,
                    device=device,
                    dtype=dtype,
                )
                for shape in (half, full)
            ]

        encoded = encode_conditioning_images(
            images, self.checkpoint_path, self.placement, [half, full],
            keep_latent_statistics=True, also_encode=encode_references,
        )  # fmt: skip
        stage_1_items, stage_2_items = encoded.per_stage
        assert encoded.latent_statistics is not None

        latents: dict[str, torch.Tensor] = {}
        with self.transformer(self.stage_loras()) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), positive.video, positive.audio)
            stage_1 = run_denoising_stage(
                denoiser, half, distilled_sigmas(), noise, "stage_1", device, dtype,
                conditionings=stage_1_items,
                audio_conditionings=[AudioConditionByReferenceLatent.preceding(reference_audio)],
                progress=self.progress,
            )  # fmt: skip
            latents.update(stage_1.named("stage_1"))
            upsampled = upsample_between_stages(
                stage_1.video_latent, self.spatial_upsampler_path, encoded.latent_statistics, self.placement
            )
            latents["upsampled_video_latent"] = upsampled
            # Stage 2 holds the stage-1 audio fixed (frozen after the reference is appended, so the
            # reference tokens are frozen too); as in the reference, the stage-1 audio is its reference.
            assert stage_1.audio_latent is not None
            stage_2 = run_denoising_stage(
                denoiser, full, stage_2_distilled_sigmas(), noise, "stage_2", device, dtype,
                conditionings=stage_2_items,
                audio_conditionings=[AudioConditionByReferenceLatent.preceding(stage_1.audio_latent), FrozenModality()],
                initial_video=upsampled, initial_audio=stage_1.audio_latent, progress=self.progress,
            )  # fmt: skip
            latents.update(stage_2.named("stage_2"))
        return self.finished(full, stage_2.video_latent, stage_1.audio_latent, noise, latents)


# ---- command line ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LipDubInputs:
    """The lip-dub flags, checked: the output size and the reference clip with its timing."""

    height: int
    width: int
    reference: Path
    reference_given: str
    num_frames: int
    frame_rate: float
    reference_strength: float


class LipDubFlags(FlagGroup[LipDubInputs]):
    """Output size and the reference clip (frame count and rate come from the reference)."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        group = parser.add_argument_group("lip-dub")
        height, width = defaults.two_stage_height, defaults.two_stage_width
        multiple = TWO_STAGE_SPATIAL_MULTIPLE
        group.add_argument(
            "--height", type=int, default=None, help=f"Video height, a multiple of {multiple} (default: {height})."
        )
        group.add_argument(
            "--width", type=int, default=None, help=f"Video width, a multiple of {multiple} (default: {width})."
        )
        group.add_argument(
            "--reference-video",
            type=str,
            required=True,
            help="The clip to dub: its frames are the IC reference and its audio track the reference audio. The "
            "output has its frame count (snapped down to 8k+1) and its container's frame rate (required).",
        )
        group.add_argument(
            "--reference-strength",
            type=float,
            default=DEFAULT_REFERENCE_STRENGTH,
            help=f"How clean the reference video tokens are, in [0, 1] (default: {DEFAULT_REFERENCE_STRENGTH}).",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> LipDubInputs:
        multiple = TWO_STAGE_SPATIAL_MULTIPLE
        sizes = []
        defaults = context.defaults
        for flag, given, default in (
            ("--height", args.height, defaults.two_stage_height),
            ("--width", args.width, defaults.two_stage_width),
        ):
            value = default if given is None else given
            if value < multiple or value % multiple:
                raise FlagError(
                    f"{flag} {value} is not accepted: it must be a positive multiple of {multiple} "
                    f"(e.g. {max(multiple, value // multiple * multiple)} or {(value // multiple + 1) * multiple})"
                )
            sizes.append(int(value))
        loras = context.value(ModelFlags).loras
        if len(loras) != 1 and not (context.demo and not loras):
            raise FlagError(
                f"--lora was given {len(loras)} times; the lip-dub pipeline takes exactly one lip-dub IC-LoRA "
                "(--lora PATH [STRENGTH])"
            )
        strength = args.reference_strength
        if not (math.isfinite(strength) and 0.0 <= strength <= 1.0):
            raise FlagError(f"--reference-strength {strength} is not accepted: it must be in [0, 1]")
        raw = args.reference_video
        path = Path(raw).expanduser()
        if not path.is_file():
            raise FlagError(
                f"--reference-video {raw!r}: no such file"
                if not path.exists()
                else f"--reference-video {raw!r} is not a file"
            )
        try:
            info = probe_video(path)
            num_frames, fps = reference_timing(path)
        except MediaError as e:
            raise FlagError(f"--reference-video {raw!r} is not a video that can be decoded: {e}") from None
        if not info.has_audio:
            raise FlagError(f"--reference-video {raw!r} has no audio track; the lip-dub reference needs its speech")
        return LipDubInputs(sizes[0], sizes[1], path, raw, num_frames, fps, strength)

    def settle(self, value: LipDubInputs, models: RunModels, context: ReadContext) -> LipDubInputs:
        try:
            reference_factors(list(models.loras))
        except ValueError as e:
            raise FlagError(f"--lora: {e}") from None
        return value

    def record(self, value: LipDubInputs) -> dict[str, Any]:
        return {
            "height": value.height,
            "width": value.width,
            "reference_video": value.reference_given,
            "reference_strength": value.reference_strength,
        }


def generate_lip_dub(pipeline: LipDubPipeline, run: Run) -> FinalLatents:
    """The prompt call with the lip-dub group's settings (shared with `ltx_pipelines.dubit`)."""
    inputs = run[LipDubFlags]
    return pipeline.generate(
        run.prompt.text,
        seed=run.prompt.seed,
        height=inputs.height,
        width=inputs.width,
        num_frames=inputs.num_frames,
        frame_rate=inputs.frame_rate,
        enhance_prompt=run.prompt.enhance,
        reference=LipDubReference(VideoReference(inputs.reference_strength, inputs.reference)),
    )


def lip_dub_command(
    module_name: str,
    doc: str | None,
    make: Callable[..., LipDubPipeline],
    *,
    lora_name: str,
    demo_families: tuple[str, ...],
    demo_ic_lora: str | None = None,
) -> PipelineCommand[Any]:
    """The command line of a lip-dub module (`lipdub` for LTX-2.3, `dubit` for LTX-2.5): `make(checkpoint,
    upsampler, gemma_root, lora, **options)` builds its pipeline; `--lora` names its one IC-LoRA (with --demo on
    the LTX-2.5 files and no `--lora`: the demo set's `demo_ic_lora`)."""
    return PipelineCommand.for_module(
        module_name,
        doc,
        models=ModelFlags(
            distilled=True,
            two_stage=True,
            demo_families=demo_families,
            demo_ic_lora=demo_ic_lora,
            lora_help=(
                f"The {lora_name} IC-LoRA, fused into the transformer of both stages, with an optional strength "
                "(default 1.0); exactly once (required; optional with --demo)."
            ),
        ),
        groups=(LipDubFlags(), TilingFlags(size_from=LipDubFlags)),
        # --lora names the IC-LoRA here, not plain LoRAs.
        build=lambda run: make(
            run.models.checkpoint,
            run.models.spatial_upsampler,
            run.models.gemma_root,
            run.models.loras[0] if run.models.loras else None,
            **{**run.pipeline_options(), "loras": ()},
        ),
        generate=generate_lip_dub,
    )


COMMAND = lip_dub_command(
    __name__,
    __doc__,
    lambda checkpoint, upsampler, gemma, lora, **options: LipDubPipeline(
        checkpoint, upsampler, gemma, lip_dub_lora=lora, **options
    ),
    lora_name="lip-dub",
    demo_families=("ltx-2.3",),  # the LTX-2.5 name of this pipeline is ltx_pipelines.dubit
)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
