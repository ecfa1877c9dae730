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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipelines.cli.command import PipelineCommand, Run, forward_to
from ltx_pipelines.cli.flag_group import Flag, FlagError, FlagGroup, FlagSection, ReadContext, Reading
from ltx_pipelines.cli.model_flags import ModelFlags
from ltx_pipelines.cli.model_resolution import RunModels
from ltx_pipelines.cli.runtime_flags import RuntimeFlags
from ltx_pipelines.engine.model_versions import (
    DEFAULT_NUM_FRAMES,
    DEFAULT_SEED,
    DEFAULT_SPATIAL_TILE,
    DEMO_NUM_FRAMES,
    SPATIAL_TILE_OVERLAP,
    VIDEO_SUFFIXES,
    PipelineDefaults,
)
from ltx_pipelines.io.atomic_files import check_output_path, write_json_atomic

if TYPE_CHECKING:
    from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
    from ltx_pipelines.engine.model_loading import ExpectedKind
    from ltx_pipelines.pipelines.hdr_ic_lora import HDRGeneration, HDRICLoraPipeline

logger = logging.getLogger(__name__)


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

    sections = (
        FlagSection(
            "inputs and outputs",
            (
                Flag("--input", {"required": True, "help": "An SDR .mp4/.mov video, or a folder of them (required)."}),
                Flag(
                    "--output-dir",
                    {
                        "required": True,
                        "help": "Where <stem>_exr/ (EXR frames), <stem>.mp4 (10-bit HLG master) and <stem>.json go "
                        "(required).",
                    },
                ),
                Flag("--overwrite", {"action": "store_true", "help": "Replace existing outputs (refused otherwise)."}),
            ),
        ),
        FlagSection(
            "run",
            (
                Flag(
                    "--num-frames",
                    {
                        "type": int,
                        "default": None,
                        "help": "Output frames per video, 8k+1; the input must have at least as many (default: "
                        f"{DEFAULT_NUM_FRAMES}, {DEMO_NUM_FRAMES} with --demo).",
                    },
                ),
                Flag(
                    "--spatial-tile",
                    {
                        "type": int,
                        "default": DEFAULT_SPATIAL_TILE,
                        "help": "Spatial tile of the float32 VAE decode in pixels, a multiple of 32 above "
                        f"{SPATIAL_TILE_OVERLAP} (tiles overlap by {SPATIAL_TILE_OVERLAP}); smaller needs less memory "
                        f"(default: {DEFAULT_SPATIAL_TILE}).",
                    },
                ),
                Flag(
                    "--high-quality",
                    {
                        "action": "store_true",
                        "help": "Generate 2N-1 frames from each input frame doubled and keep every other one: "
                        "smoother, ~2x slower (default: off).",
                    },
                ),
                Flag("--skip-mp4", {"action": "store_true", "help": "Write only the EXR frames, no HEVC master."}),
                Flag(
                    "--seed", {"type": int, "default": DEFAULT_SEED, "help": f"Random seed (default: {DEFAULT_SEED})."}
                ),
            ),
        ),
    )

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        parser.allow_abbrev = False

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[HdrJobs]:
        from ltx_pipelines.io import MediaError, probe_video

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
        value = HdrJobs(tuple(jobs), n, tile, bool(args.high_quality), bool(args.overwrite), args.seed, given)
        return Reading(value, record=self._record(value))

    def _record(self, value: HdrJobs) -> dict[str, Any]:
        return {**value.given, "num_frames": value.num_frames}


@dataclass(frozen=True)
class HdrModels:
    """As typed when read; local and checked once settled."""

    hdr_lora: str | Path | None
    text_embeddings: str | Path | None


class HdrModelFlags(FlagGroup[HdrModels]):
    """`--hdr-lora` and `--text-embeddings` (both optional with `--demo`); read after the model files."""

    sections = (
        FlagSection(
            "HDR model files",
            (
                Flag(
                    "--hdr-lora",
                    {"default": None, "help": "The HDR IC-LoRA .safetensors, fused at strength 1 (required)."},
                ),
                Flag(
                    "--text-embeddings",
                    {
                        "required": False,
                        "default": None,
                        "help": "Precomputed text contexts (.safetensors with `video_context`, optionally "
                        "`audio_context`) (required; optional with --demo).",
                    },
                ),
            ),
        ),
    )

    def read(self, args: argparse.Namespace, context: ReadContext) -> Reading[HdrModels]:
        for flag, value in (("--hdr-lora", args.hdr_lora), ("--text-embeddings", args.text_embeddings)):
            if value is None and not context.demo:
                raise FlagError(f"{flag} is required (or pass --demo)")
        value = HdrModels(args.hdr_lora, args.text_embeddings)
        # The value depends on the model files: settled once they are known.
        return Reading(value, record=self._record(value), settle=True)

    def settle(self, value: HdrModels, models: RunModels, context: ReadContext) -> Reading[HdrModels]:
        value = self._settled(value, models, context)
        return Reading(value, record=self._record(value))

    def _settled(self, value: HdrModels, models: RunModels, context: ReadContext) -> HdrModels:
        from ltx_core.loader import LoraSpec
        from ltx_pipelines.engine.ic_references import reference_factors

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

    def _record(self, value: HdrModels) -> dict[str, Any]:
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
    from ltx_core.loader import CheckpointError
    from ltx_pipelines.cli.model_resolution import HfPathError, resolve_model_path
    from ltx_pipelines.engine.model_loading import check_checkpoint_kind

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


def _check_embeddings(raw: str, checkpoint: Path) -> Path:
    from ltx_core.loader import CheckpointError, read_safetensors_header
    from ltx_pipelines.pipelines.hdr_ic_lora import _context_width

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
    import torch

    from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
    from ltx_pipelines.pipelines.hdr_ic_lora import _context_width

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


@dataclass(frozen=True, kw_only=True)
class HdrCommand(PipelineCommand["HDRICLoraPipeline"]):
    """The command of a pipeline that writes its own outputs: `generate` yields each job's HDR frames and
    `write` turns them into EXR frames, an HEVC master and a sidecar (no latents file: the run is from stored
    contexts and has no decode step of its own)."""

    write: Callable[[Run, Any], Path]

    def produce(self, pipeline: HDRICLoraPipeline, run: Run, saved: list[Path]) -> None:
        self.write(run, self.generate(pipeline, run))


def _build(run: Run) -> HDRICLoraPipeline:
    from ltx_core.loader import LoraSpec
    from ltx_pipelines.pipelines.hdr_ic_lora import HDRICLoraPipeline, decode_tiling

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
    from ltx_pipelines.engine.denoising_stage import SeededNoise
    from ltx_pipelines.pipelines.hdr_ic_lora import SdrClip

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
    import torch

    from ltx_pipelines.engine.generation import _package_versions, describe_model_files
    from ltx_pipelines.io.hdr_outputs import read_exr_frame, write_exr_frames, write_hevc_hlg_master

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


COMMAND = HdrCommand(
    prog="python -m ltx_pipelines.hdr_ic_lora",
    description=__doc__.splitlines()[0] if __doc__ else None,
    groups=(
        HdrFlags(),
        # The HDR IC-LoRA is made for LTX-2.3: its demo runs on the LTX-2.3 demo files only.
        ModelFlags.distilled_two_stage(gemma=False, loras=False, demo_families=("ltx-2.3",)),
        HdrModelFlags(),
        RuntimeFlags(memory=False),
    ),
    build=_build,
    generate=_generate,
    write=_write,
)


main = COMMAND.main


__getattr__ = forward_to("ltx_pipelines.pipelines.hdr_ic_lora")


if __name__ == "__main__":
    sys.exit(main())
