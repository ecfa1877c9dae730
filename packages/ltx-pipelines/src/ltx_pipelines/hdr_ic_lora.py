"""HDR IC-LoRA, SDR video to HDR video: `python -m ltx_pipelines.hdr_ic_lora`.

For each input video (`--input`, a file or a folder of .mp4/.mov) the distilled transformer with the
HDR IC-LoRA fused in regenerates the clip in the LogC3 working space, guided by the input as IC
reference (reflect-padded up to a multiple of 64 and cropped back after decoding). Stage 1 runs at
half resolution; stage 2 refines the x2-upsampled latent tile by tile. The latent is decoded in
float32 and turned into scene-linear light with the inverse LogC3 curve, then written as half-float
EXR frames (`<stem>_exr/frame_00000.exr`, ...) and a 10-bit HEVC HLG master (`<stem>.mp4`, unless
`--skip-mp4`), with a `<stem>.json` sidecar. The text contexts come from a precomputed embeddings file
(`--text-embeddings`); no Gemma is loaded. Video only: no audio is generated.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.conditioning import VideoConditionByReferenceLatent
from ltx_core.latent_tiles import AxisTileCount, LatentTile, TileCounts
from ltx_core.loader import CheckpointError, LoraSpec, read_checkpoint_config, read_safetensors_header
from ltx_core.model.transformer import X0Model
from ltx_core.model.video_vae.tiling import AxisTiling, TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.cli.command import PipelineCommand, Run
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.cli.model_flags import ModelFlags, RunModels
from ltx_pipelines.cli.runtime_flags import RuntimeFlags
from ltx_pipelines.engine.checkpoint_kind import ExpectedKind, check_checkpoint_kind
from ltx_pipelines.engine.decoding import video_frame_chunks
from ltx_pipelines.engine.defaults import PipelineDefaults
from ltx_pipelines.engine.file_steps import (
    contexts_on,
    encode_conditioning_images,
    upsample_between_stages,
)
from ltx_pipelines.engine.generation import _package_versions, describe_model_files
from ltx_pipelines.engine.ic_references import ReferenceFactors, reference_factors
from ltx_pipelines.engine.noise import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stages import run_denoising_stage
from ltx_pipelines.engine.tiled_refinement import run_tiled_video_stage
from ltx_pipelines.io import MediaError, iter_video_frames, probe_video
from ltx_pipelines.io.atomic_files import check_output_path, write_json_atomic
from ltx_pipelines.io.hdr import aligned_size, fit_reflect_pad, logc3_decode, sdr_to_working_space
from ltx_pipelines.io.hdr_outputs import read_exr_frame, write_exr_frames, write_hevc_hlg_master

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["COMMAND", "HDRGeneration", "HDRICLoraPipeline", "SdrClip", "main"]

logger = logging.getLogger(__name__)

DEFAULT_NUM_FRAMES = 161
DEFAULT_SEED = 10
SIZE_MULTIPLE = 64
DEFAULT_SPATIAL_TILE = 1280
SPATIAL_TILE_OVERLAP = 256
TEMPORAL_TILE, TEMPORAL_TILE_OVERLAP = 32, 16
# Stage 2 as the reference runs it: two tiles per axis (latent overlaps 8 frames, 6 cells), and the first
# two stage-2 sigmas, then 0.
STAGE_2_TILES = TileCounts(frames=AxisTileCount(2, 8), height=AxisTileCount(2, 6), width=AxisTileCount(2, 6))
VIDEO_SUFFIXES = (".mp4", ".mov")
TILED_ENCODE_PIXELS = 512 * 768
"""References larger than this (height x width) are VAE-encoded tile by tile."""
DEMO_NUM_FRAMES = 9


def stage_2_sigmas() -> torch.Tensor:
    return torch.cat([stage_2_distilled_sigmas()[:2].float(), torch.zeros(1)])


def decode_tiling(spatial_tile: int) -> TilingConfig:
    """The float32 VAE decode layout: `spatial_tile`-pixel tiles (256 overlap), 32-frame tiles (16 overlap)."""
    spatial = AxisTiling(spatial_tile, SPATIAL_TILE_OVERLAP)
    return TilingConfig(AxisTiling(TEMPORAL_TILE, TEMPORAL_TILE_OVERLAP), spatial, spatial)


@dataclass(frozen=True)
class SdrClip:
    """An SDR input clip: (F, H, W, 3) uint8 Rec.709 frames and their rate."""

    frames: torch.Tensor
    fps: float

    @classmethod
    def from_file(cls, path: str | Path, max_frames: int | None = None) -> SdrClip:
        frames = list(iter_video_frames(path, max_frames=max_frames))
        if not frames:
            raise MediaError(f"no frames decoded from {str(path)!r}")
        return cls(torch.stack(frames), probe_video(path).fps)


@dataclass
class HDRGeneration:
    """Scene-linear Rec.709 frames, decoded: (f, H, W, 3) float32 chunks on the CPU (writing them builds no
    model)."""

    frames: Sequence[torch.Tensor]
    num_frames: int
    height: int
    width: int
    frame_rate: float
    latents: dict[str, torch.Tensor] = field(default_factory=dict)


def _every_other(chunks: Iterator[torch.Tensor]) -> Iterator[torch.Tensor]:
    """Frames 0, 2, 4, ... of a chunked frame stream (the high-quality mode generated twice as many)."""
    seen = 0
    for chunk in chunks:
        yield chunk[(-seen) % 2 :: 2]
        seen += chunk.shape[0]


class HDRICLoraPipeline(PromptPipeline):
    """Two-stage distilled SDR-to-HDR over the HDR IC-LoRA (fused into both stages), from given contexts.

    The reference downscale factor comes from the LoRA's metadata. `hdr_lora` None only runs the
    random-weight demo.
    """

    spatial_multiple = SIZE_MULTIPLE

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        *,
        hdr_lora: LoraSpec | None,
        stage_2_tiles: TileCounts = STAGE_2_TILES,
        **options: Unpack[PipelineOptions],
    ) -> None:
        super().__init__(checkpoint_path, None, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.hdr_lora = hdr_lora
        self.factors: ReferenceFactors = reference_factors([hdr_lora] if hdr_lora is not None else [])
        self.stage_2_tiles = stage_2_tiles

    @property
    def decode_tiling(self) -> TilingConfig:
        """The VAE layout of the float32 decode (and of encoding large references)."""
        return self.tiling if self.tiling is not None else decode_tiling(DEFAULT_SPATIAL_TILE)

    @property
    def size_multiple(self) -> int:
        """Generated sizes are multiples of this: 64 times the reference downscale factor."""
        return SIZE_MULTIPLE * self.factors.downscale

    def _reference_pixels(self, clip: SdrClip, frames: int, height: int, width: int, duplicate: bool) -> torch.Tensor:
        """The clip's first frames in the working space, reflect-padded to (height, width): (1, 3, F, h, w)
        in [-1, 1]; with `duplicate` each frame is repeated twice (high-quality mode)."""
        used = (frames + 1) // 2 if duplicate else frames
        if clip.frames.shape[0] < used:
            raise ValueError(f"the input has {clip.frames.shape[0]} frames; {used} are needed")
        working = sdr_to_working_space(clip.frames[:used])
        video = fit_reflect_pad(working, height, width) * 2.0 - 1.0
        if duplicate:
            video = video.repeat_interleave(2, dim=2)[:, :, :frames]
        return video

    def generate_from_contexts(
        self,
        contexts: TextContexts,
        *,
        clip: SdrClip,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        high_quality: bool = False,
        reference_strength: float = 1.0,
    ) -> HDRGeneration:
        """Both stages and the float32 decode of `num_frames` frames at (height, width) (any size: it is
        generated padded up to `size_multiple` and cropped back)."""
        if num_frames < 1 or (num_frames - 1) % 8:
            raise ValueError(f"num_frames must be 8k+1, got {num_frames}")
        generated = 2 * num_frames - 1 if high_quality else num_frames
        gen_h, gen_w = aligned_size(height, width, self.size_multiple)
        full = self.output_shape(gen_h, gen_w, generated, frame_rate)
        half = VideoPixelShape(1, generated, gen_h // 2, gen_w // 2, frame_rate)
        device, dtype = self.placement.device, self.placement.dtype
        positive = contexts_on(contexts, self.placement)
        scale = self.factors.downscale

        def encode_reference(encoder: torch.nn.Module) -> list[list[Any]]:
            latents = []
            for shape in (half, full):
                pixels = self._reference_pixels(
                    clip, generated, shape.height // scale, shape.width // scale, high_quality
                )
                pixels = pixels.to(device=device, dtype=dtype)
                with torch.no_grad():
                    if pixels.shape[-2] * pixels.shape[-1] > TILED_ENCODE_PIXELS:
                        # Large references are encoded in tiles (the decode layout) to bound activation memory.
                        latents.append(encoder.encode_tiled(pixels, self.decode_tiling).to(dtype))
                    else:
                        latents.append(encoder(pixels))
            return [[latent] for latent in latents]

        encoded = encode_conditioning_images(
            (), self.checkpoint_path, self.placement, [half, full],
            keep_latent_statistics=True, also_encode=encode_reference,
        )  # fmt: skip
        (reference_half,), (reference_full,) = encoded.per_stage
        assert encoded.latent_statistics is not None

        def reference(latent: torch.Tensor) -> VideoConditionByReferenceLatent:
            return VideoConditionByReferenceLatent(latent, downscale_factor=scale, strength=reference_strength)

        def tile_reference(tile: LatentTile) -> list[VideoConditionByReferenceLatent]:
            f, h, w = tile.cells
            cells = (f, slice(h.start // scale, h.stop // scale), slice(w.start // scale, w.stop // scale))
            return [reference(reference_full[(slice(None), slice(None), *cells)])]

        latents: dict[str, torch.Tensor] = {}
        loras = (*self.loras, *([self.hdr_lora] if self.hdr_lora is not None else []))
        with self.transformer(loras) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), positive.video, None)
            stage_1 = run_denoising_stage(
                denoiser, half, distilled_sigmas(), noise, "stage_1", device, dtype,
                conditionings=[reference(reference_half)], with_audio=False, progress=self.progress,
            )  # fmt: skip
            assert stage_1.video_latent is not None
            latents["stage_1.video_latent"] = stage_1.video_latent
            upsampled = upsample_between_stages(
                stage_1.video_latent, self.spatial_upsampler_path, encoded.latent_statistics, self.placement
            )
            latents["upsampled_video_latent"] = upsampled
            refined = run_tiled_video_stage(
                denoiser, upsampled, stage_2_sigmas(), noise, "stage_2", fps=frame_rate, counts=self.stage_2_tiles,
                tile_conditionings=tile_reference, device=device, dtype=dtype, progress=self.progress,
            )  # fmt: skip
        latents["stage_2.video_latent"] = refined

        def linear_frames() -> Iterator[torch.Tensor]:
            # float32 weights and latent: the inverse LogC3 curve amplifies any rounding of the codes.
            placement = replace(self.placement, dtype=torch.float32)
            for chunk in video_frame_chunks(
                self.checkpoint_path, placement, refined.float(), self.decode_tiling, noise
            ):
                # Scene light is never negative; codes below the curve's black level would decode below 0.
                yield logc3_decode(chunk.float()).clamp(min=0.0)[:, :height, :width]

        # Decoded here, before anything is written: the EXR and HEVC writers only encode what they are given.
        chunks = _every_other(linear_frames()) if high_quality else linear_frames()
        frames = tuple(chunk.to("cpu") for chunk in chunks)
        return HDRGeneration(frames, num_frames, height, width, frame_rate, latents)


# ---- command line ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HdrJob:
    """One input video and where its outputs go."""

    input: Path
    exr_dir: Path
    master: Path | None
    sidecar: Path
    height: int
    width: int
    fps: float


@dataclass(frozen=True)
class HdrJobs:
    """The HDR run's own flags, checked: the jobs (one per input video) and how they run."""

    jobs: tuple[HdrJob, ...]
    num_frames: int
    spatial_tile: int
    high_quality: bool
    overwrite: bool
    seed: int
    given: dict[str, Any]
    """The flags as typed (the sidecar records them)."""


class HdrFlags(FlagGroup[HdrJobs]):
    """`--input`, `--output-dir`, `--overwrite`, `--num-frames`, `--spatial-tile`, `--high-quality`,
    `--skip-mp4`, `--seed`."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        parser.allow_abbrev = False  # `--hdr` must never abbreviate to `--hdr-lora`
        group = parser.add_argument_group("inputs and outputs")
        group.add_argument("--input", required=True, help="An SDR .mp4/.mov video, or a folder of them (required).")
        group.add_argument(
            "--output-dir",
            required=True,
            help="Where <stem>_exr/ (EXR frames), <stem>.mp4 (10-bit HLG master) and <stem>.json go (required).",
        )
        group.add_argument("--overwrite", action="store_true", help="Replace existing outputs (refused otherwise).")
        run = parser.add_argument_group("run")
        run.add_argument(
            "--num-frames",
            type=int,
            default=None,
            help=f"Output frames per video, 8k+1; the input must have at least as many (default: {DEFAULT_NUM_FRAMES}"
            f", {DEMO_NUM_FRAMES} with --demo).",
        )
        run.add_argument(
            "--spatial-tile",
            type=int,
            default=DEFAULT_SPATIAL_TILE,
            help=f"Spatial tile of the float32 VAE decode in pixels, a multiple of 32 above {SPATIAL_TILE_OVERLAP} "
            f"(tiles overlap by {SPATIAL_TILE_OVERLAP}); smaller needs less memory (default: {DEFAULT_SPATIAL_TILE}).",
        )
        run.add_argument(
            "--high-quality",
            action="store_true",
            help="Generate 2N-1 frames from each input frame doubled and keep every other one: smoother, ~2x "
            "slower (default: off).",
        )
        run.add_argument("--skip-mp4", action="store_true", help="Write only the EXR frames, no HEVC master.")
        run.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"Random seed (default: {DEFAULT_SEED}).")

    def read(self, args: argparse.Namespace, context: ReadContext) -> HdrJobs:
        n = args.num_frames
        if n is None:
            n = DEMO_NUM_FRAMES if context.demo else DEFAULT_NUM_FRAMES
        if n < 1 or (n - 1) % 8:
            raise FlagError(f"--num-frames {n} is not accepted: it must be 8k+1 (1, 9, ..., 161, ...)")
        tile = args.spatial_tile
        if tile % 32 or tile <= SPATIAL_TILE_OVERLAP:
            raise FlagError(f"--spatial-tile {tile} is not accepted: a multiple of 32 above {SPATIAL_TILE_OVERLAP}")
        if not 0 <= args.seed < 2**63:
            raise FlagError(f"--seed {args.seed} is out of range [0, 2**63)")
        videos = _inputs(args.input)
        infos = {}
        for video in videos:  # decodable, long enough
            try:
                info = probe_video(video)
            except MediaError as e:
                raise FlagError(f"--input {str(video)!r} is not a video that can be decoded: {e}") from None
            if info.frames < n:
                raise FlagError(
                    f"--input {str(video)!r} has {info.frames} frames; --num-frames {n} needs at least {n} "
                    f"(pass --num-frames {max(1, (info.frames - 1) // 8 * 8 + 1)})"
                )
            infos[video] = info
        output_dir = Path(args.output_dir).expanduser()
        if output_dir.exists() and not output_dir.is_dir():
            raise FlagError(f"--output-dir {args.output_dir!r} is not a folder")
        jobs = []
        for video in videos:
            exr_dir = output_dir / f"{video.stem}_exr"
            master = None if args.skip_mp4 else output_dir / f"{video.stem}.mp4"
            sidecar = output_dir / f"{video.stem}.json"
            for target in (exr_dir, master, sidecar):
                if target is not None and target.exists() and not args.overwrite:
                    raise FlagError(f"output {str(target)!r} already exists; pass --overwrite to replace it")
            if master is not None:
                try:
                    check_output_path(master, overwrite=args.overwrite)
                except OSError as e:
                    raise FlagError(f"--output-dir: {e}") from None
            info = infos[video]
            jobs.append(HdrJob(video, exr_dir, master, sidecar, info.height, info.width, info.fps))
        given = {
            name: getattr(args, name)
            for name in ("input", "output_dir", "overwrite", "spatial_tile", "high_quality", "skip_mp4", "seed")
        }
        return HdrJobs(tuple(jobs), n, tile, bool(args.high_quality), bool(args.overwrite), args.seed, given)

    def record(self, value: HdrJobs) -> dict[str, Any]:
        return {**value.given, "num_frames": value.num_frames}


@dataclass(frozen=True)
class HdrModels:
    """As typed when read; local and checked once settled."""

    hdr_lora: str | Path | None
    text_embeddings: str | Path | None


class HdrModelFlags(FlagGroup[HdrModels]):
    """`--hdr-lora` and `--text-embeddings` (both optional with `--demo`); read after the model files."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        group = parser.add_argument_group("HDR model files")
        group.add_argument(
            "--hdr-lora", default=None, help="The HDR IC-LoRA .safetensors, fused at strength 1 (required)."
        )
        group.add_argument(
            "--text-embeddings",
            required=False,
            default=None,
            help="Precomputed text contexts (.safetensors with `video_context`, optionally `audio_context`) "
            "(required; optional with --demo).",
        )

    def read(self, args: argparse.Namespace, context: ReadContext) -> HdrModels:
        for flag, value in (("--hdr-lora", args.hdr_lora), ("--text-embeddings", args.text_embeddings)):
            if value is None and not context.demo:
                raise FlagError(f"{flag} is required (or pass --demo)")
        return HdrModels(args.hdr_lora, args.text_embeddings)

    def settle(self, value: HdrModels, models: RunModels, context: ReadContext) -> HdrModels:
        hdr_lora = None
        if value.hdr_lora is not None:
            hdr_lora = _model_file("--hdr-lora", str(value.hdr_lora), "lora")
            try:
                reference_factors([LoraSpec(hdr_lora, 1.0)])
            except ValueError as e:
                raise FlagError(f"--hdr-lora: {e}") from None
        embeddings = None
        if value.text_embeddings is not None:
            embeddings = _check_embeddings(str(value.text_embeddings), models.checkpoint)
        return HdrModels(hdr_lora, embeddings)

    def record(self, value: HdrModels) -> dict[str, Any]:
        return {"hdr_lora": value.hdr_lora, "text_embeddings": value.text_embeddings}


def _inputs(raw: str) -> list[Path]:
    path = Path(raw).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        videos = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
        if not videos:
            raise FlagError(f"--input {raw!r} holds no {'/'.join(VIDEO_SUFFIXES)} videos")
        return videos
    raise FlagError(f"--input {raw!r}: no such file or folder")


def _model_file(flag: str, raw: str, kind: ExpectedKind) -> Path:
    from ltx_pipelines.cli.hf_paths import HfPathError, resolve_model_path

    try:
        path = resolve_model_path(raw)
    except HfPathError as e:
        raise FlagError(f"{flag}: {e}") from None
    if not path.is_file():
        raise FlagError(f"{flag} {raw!r}: no such file")
    try:
        check_checkpoint_kind(path, kind)
    except CheckpointError as e:
        raise FlagError(f"{flag}: {e}") from None
    return path


def _context_width(checkpoint: Path) -> int | None:
    transformer = read_checkpoint_config(checkpoint).get("transformer", {})
    key = "cross_attention_dim" if transformer.get("caption_proj_before_connector") else "caption_channels"
    value = transformer.get(key)
    return int(value) if isinstance(value, int) else None


def _check_embeddings(raw: str, checkpoint: Path) -> Path:
    path = Path(raw).expanduser()
    if not path.is_file():
        raise FlagError(f"--text-embeddings {raw!r}: no such file")
    try:
        tensors = read_safetensors_header(path).tensors
    except CheckpointError as e:
        raise FlagError(f"--text-embeddings {raw!r} is not a safetensors file: {e}") from None
    if "video_context" not in tensors:
        raise FlagError(f"--text-embeddings {raw!r} has no `video_context` tensor (found: {sorted(tensors)})")
    shape = tuple(tensors["video_context"].shape)
    width = _context_width(checkpoint)
    if len(shape) not in (2, 3) or (len(shape) == 3 and shape[0] != 1) or (width is not None and shape[-1] != width):
        raise FlagError(
            f"--text-embeddings {raw!r}: video_context has shape {shape}; expected (1, S, {width}) or (S, {width}) "
            "for this checkpoint"
        )
    return path


def load_contexts(run: Run) -> TextContexts:
    """The embeddings file's contexts, or (demo without one) seeded random contexts of the right width."""
    embeddings = run[HdrModelFlags].text_embeddings
    if embeddings is not None:
        from safetensors.torch import load_file

        tensors = load_file(str(embeddings))
        video = tensors["video_context"]
        video = video.unsqueeze(0) if video.dim() == 2 else video
    else:
        width = _context_width(run.models.checkpoint) or 1
        video = torch.randn(1, 128, width, generator=torch.Generator().manual_seed(run[HdrFlags].seed))
    return TextContexts(video=video.float(), audio=None, mask=torch.ones(video.shape[:2], dtype=torch.int64))


def _build(run: Run) -> HDRICLoraPipeline:
    hdr_lora = run[HdrModelFlags].hdr_lora
    return HDRICLoraPipeline(
        run.models.checkpoint,
        run.models.spatial_upsampler,
        hdr_lora=None if hdr_lora is None else LoraSpec(Path(hdr_lora), 1.0),
        device=run.runtime.device,
        dtype=run.runtime.dtype,
        tiling=decode_tiling(run[HdrFlags].spatial_tile),
    )


def _generate(pipeline: HDRICLoraPipeline, run: Run) -> Iterator[tuple[HdrJob, HDRGeneration]]:
    """Each job's generation, made as the writer asks for it (one clip in memory at a time)."""
    contexts = load_contexts(run)
    hdr = run[HdrFlags]
    for job in hdr.jobs:
        logger.info("HDR IC-LoRA: %s (%dx%d, %d frames)", job.input, job.width, job.height, hdr.num_frames)
        clip = SdrClip.from_file(job.input, max_frames=hdr.num_frames)
        yield job, pipeline.generate_from_contexts(
            contexts, clip=clip, height=job.height, width=job.width, num_frames=hdr.num_frames,
            frame_rate=job.fps, noise=SeededNoise(hdr.seed), high_quality=hdr.high_quality,
        )  # fmt: skip


def _write(run: Run, generations: Iterator[tuple[HdrJob, HDRGeneration]]) -> Path:
    """Every job's EXR frames, HEVC master (unless `--skip-mp4`) and sidecar; returns the output folder."""
    hdr, resolved = run[HdrFlags], run[HdrModelFlags]
    files = describe_model_files(
        {
            "checkpoint": run.models.checkpoint,
            "spatial_upsampler": run.models.spatial_upsampler,
            "hdr_lora": resolved.hdr_lora,
            "text_embeddings": resolved.text_embeddings,
        }
    )
    for job, generation in generations:
        count = write_exr_frames(job.exr_dir, generation.frames, overwrite=hdr.overwrite)
        if job.master is not None:
            # Encoded from the written frames, so the long decode is not held in memory twice.
            written = sorted(job.exr_dir.glob("frame_*.exr"))
            frames = (torch.from_numpy(read_exr_frame(p).astype("float32"))[None] for p in written)
            fps = Fraction(job.fps).limit_denominator(1001)
            write_hevc_hlg_master(job.master, frames, fps=fps, overwrite=hdr.overwrite)
        parameters = {
            **run.sidecar_parameters(),
            "input": str(job.input),
            "frame_rate": job.fps,
            "height": job.height,
            "width": job.width,
        }
        sidecar = {
            "output": {"exr_frames": job.exr_dir.name, "hevc_master": None if job.master is None else job.master.name},
            "prompt": None,
            "parameters": parameters,
            "video": {"num_frames": count, "height": job.height, "width": job.width, "frame_rate": job.fps},
            "audio": None,
            "exr": {"pixel_type": "half", "channels": "RGB", "transfer": "scene-linear Rec.709 (inverse LogC3)"},
            "hevc": None
            if job.master is None
            else {
                "pix_fmt": "yuv420p10le",
                "primaries": "bt2020",
                "transfer": "arib-std-b67 (HLG)",
                "matrix": "bt2020nc",
            },
            "model_files": files,
            "versions": _package_versions(),
        }
        write_json_atomic(job.sidecar, sidecar, overwrite=hdr.overwrite)
    return hdr.jobs[0].exr_dir.parent


COMMAND = PipelineCommand(
    prog="python -m ltx_pipelines.hdr_ic_lora",
    description=__doc__.splitlines()[0] if __doc__ else None,
    groups=(
        HdrFlags(),
        # The HDR IC-LoRA is made for LTX-2.3: its demo runs on the LTX-2.3 demo files only.
        ModelFlags(distilled=True, two_stage=True, gemma=False, loras=False, demo_families=("ltx-2.3",)),
        HdrModelFlags(),
        RuntimeFlags(memory=False),
    ),
    build=_build,
    generate=_generate,
    write=_write,
)
main = COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
