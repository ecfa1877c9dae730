"""The conditions of a validation sample, checked and turned into what the one-stage pipeline takes.

Each condition type of `validation.samples[i].conditions` maps onto the pipelines' conditioning items
(the semantics of the reference trainer's validation):

- `first_frame`: an image (or a video's first frame) at latent frame 0 (`images=`, as `--image` does).
- `prefix` / `suffix` of a video: the clip fitted to the sample size and VAE-encoded; a prefix's
  latent frames replace the first ones, a suffix's the last ones. A suffix is encoded from the whole
  clip (the encoder is causal in time) and only its last `num_frames / 8` latent frames are kept.
- `prefix` / `suffix` of an audio track: its first (last) `duration` seconds, encoded, pinned to the
  first (last) audio latent steps.
- `spatial_crop` (outpainting): the video encoded over the whole grid, kept inside `spatial_region`
  (pixels y1, x1, y2, x2, in 32-pixel latent cells), generated outside.
- `mask` (inpainting): video - a grayscale image (every frame) or video, mean of RGB, resized to the
  sample, averaged over each 32x32 cell, max over groups of 8 frames, > 0.5 = keep the given video;
  audio - a `.pt` tensor (or a dict with `mask`) or an audio file (|amplitude| mean over channels),
  resampled to the audio latent steps, > 0.5 = keep the given audio.
- `reference` (IC-LoRA): the reference video at size / `downscale_factor`, every `temporal_scale_factor`
  -th frame, appended as clean tokens (or an audio reference appended to the audio tokens);
  `include_in_output` puts the reference to the left of the generated video in the mp4.
- `video_to_audio` / `audio_to_video`: that modality encoded and frozen (denoise mask 0, sigma 0), the
  other generated; the frozen one uses no guidance.

Media problems (missing files, too few frames, a region outside the frame, an unreadable mask) are
found by `check_sample_conditions` before training starts, with the field path in the message.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ltx_core.conditioning import (
    AudioConditionByMask,
    AudioConditionByReferenceLatent,
    ConditioningItem,
    FrozenModality,
    VideoConditionByLatentIndex,
    VideoConditionByMask,
)
from ltx_core.model.audio_vae import AUDIO_ENCODER, encode_audio
from ltx_core.model.video_vae import VIDEO_ENCODER
from ltx_core.types import DEFAULT_SCALE_FACTORS, AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.engine.denoising_stage import ImageCondition, StageConditions
from ltx_pipelines.engine.ic_references import ReferenceFactors, VideoReference, reference_conditionings
from ltx_pipelines.engine.model_loading import Placement, loaded
from ltx_pipelines.engine.source_latents import SOURCE_ENCODE_TILING, conform_latent_frames
from ltx_pipelines.io import MediaError, frames_to_model_input, iter_video_frames, probe_video, read_audio
from ltx_pipelines.io.image import read_image_rgb
from ltx_trainer.config import (
    AudioToVideoInput,
    FirstFrameInput,
    MaskInput,
    PrefixInput,
    ReferenceInput,
    SpatialCropInput,
    SuffixInput,
    ValidationCondition,
    ValidationSample,
    VideoToAudioInput,
)

logger = logging.getLogger(__name__)

SCALE = DEFAULT_SCALE_FACTORS
_VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v", ".gif")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")


@dataclass(frozen=True)
class SampleGeometry:
    """The size, length and frame rate one validation sample is generated at."""

    width: int
    height: int
    frames: int
    fps: float

    @property
    def shape(self) -> VideoPixelShape:
        return VideoPixelShape(1, self.frames, self.height, self.width, self.fps)

    @property
    def duration(self) -> float:
        return self.frames / self.fps

    @property
    def video_latent(self) -> VideoLatentShape:
        return VideoLatentShape.from_pixel_shape(self.shape)

    @property
    def audio_steps(self) -> int:
        return AudioLatentShape.from_video(self.shape).frames


@dataclass(frozen=True, eq=False)
class EncodedSample:
    """A sample's conditions, encoded once (latents on the CPU; the items move them when applied)."""

    images: tuple[ImageCondition, ...]
    conditions: StageConditions
    video_frozen: bool
    audio_frozen: bool
    side_by_side: tuple[torch.Tensor, int] | None = None
    """Reference pixels (F, h, w, 3) in [0, 1] and their temporal factor, shown left of the output."""


def modalities(sample: ValidationSample, generate_video: bool, generate_audio: bool) -> tuple[bool, bool]:
    """Whether the video and the audio streams take part: generated, or frozen as a condition."""
    kinds = {c.type for c in sample.conditions}
    return generate_video or "video_to_audio" in kinds, generate_audio or "audio_to_video" in kinds


def _conditioned_stream(condition: ValidationCondition) -> str | None:
    """The stream a condition edits (None: it freezes a stream of its own)."""
    if isinstance(condition, (FirstFrameInput, SpatialCropInput)):
        return "video"
    if isinstance(condition, (PrefixInput, SuffixInput, MaskInput, ReferenceInput)):
        return "video" if condition.video is not None else "audio"
    return None


# -- checks before training -----------------------------------------------------------------------


def check_sample_conditions(
    sample: ValidationSample, index: int, geometry: SampleGeometry, *, generate_video: bool, generate_audio: bool
) -> None:
    """Refuse conditions whose media cannot be used for this sample, naming the condition's field path."""
    with_video, with_audio = modalities(sample, generate_video, generate_audio)
    for j, condition in enumerate(sample.conditions):
        where = f"validation.samples.{index}.conditions.{j}"
        stream = _conditioned_stream(condition)
        present = {"video": with_video, "audio": with_audio}
        if stream is not None and not present[stream]:
            raise ValueError(
                f"{where}: a {condition.type!r} condition on the {stream} needs the {stream} stream, but "
                f"validation.generate_{stream} is false"
            )
        try:
            _check_condition(condition, geometry)
        except (ValueError, MediaError, OSError, RuntimeError) as error:
            raise ValueError(f"{where} ({condition.type}): {error}") from None


def _video_frames(path: Path) -> int:
    if not path.is_file():
        raise ValueError(f"video file not found: {str(path)!r}")
    frames = probe_video(path).frames
    if frames < 1:
        raise ValueError(f"no frames in {str(path)!r}")
    return frames


def _audio_seconds(path: Path) -> float:
    if not path.is_file():
        raise ValueError(f"audio file not found: {str(path)!r}")
    clip = read_audio(path)
    return clip.waveform.shape[-1] / clip.sample_rate


def _check_condition(c: ValidationCondition, g: SampleGeometry) -> None:
    """The condition's files exist, are readable and fit the sample's frames, duration and frame size."""
    if isinstance(c, FirstFrameInput):
        _check_first_frame(c)
    elif isinstance(c, (PrefixInput, SuffixInput)):
        if c.video is not None:
            _check_video_prefix_suffix(c, g)
        else:
            _check_audio_prefix_suffix(c, g)
    elif isinstance(c, SpatialCropInput):
        _check_spatial_crop(c, g)
    elif isinstance(c, MaskInput):
        _check_mask(c, g)
    elif isinstance(c, ReferenceInput):
        _check_reference(c, g)
    elif isinstance(c, VideoToAudioInput):
        _check_covers_sample(c.video, g)
    elif isinstance(c, AudioToVideoInput):
        _audio_seconds(c.audio)


def _check_covers_sample(video: Path, g: SampleGeometry) -> None:
    have = _video_frames(video)
    if have < g.frames:
        raise ValueError(f"{str(video)!r} has {have} frames, fewer than the sample's {g.frames}")


def _check_first_frame(c: FirstFrameInput) -> None:
    if not c.image_or_video.is_file():
        raise ValueError(f"file not found: {str(c.image_or_video)!r}")
    if c.image_or_video.suffix.lower() in _VIDEO_SUFFIXES:
        _video_frames(c.image_or_video)
    else:
        read_image_rgb(c.image_or_video)


def _check_video_prefix_suffix(c: PrefixInput | SuffixInput, g: SampleGeometry) -> None:
    assert c.video is not None
    latent_frames = g.video_latent.frames
    if c.duration is not None:
        raise ValueError("duration applies to an audio track; a video prefix/suffix takes num_frames")
    have = _video_frames(c.video)
    wanted = c.num_frames if c.num_frames is not None else min(have, g.frames)
    if isinstance(c, PrefixInput) and wanted > g.frames:
        raise ValueError(f"num_frames {wanted} is more than the sample's {g.frames} frames")
    if isinstance(c, SuffixInput):
        if c.num_frames is not None and c.num_frames // SCALE.time > latent_frames - 1:
            raise ValueError(
                f"num_frames {c.num_frames} leaves no frame to generate in the sample's {g.frames} "
                f"frames (at most {(latent_frames - 1) * SCALE.time})"
            )
        wanted = (c.num_frames or 0) + 1  # the clip must reach past the kept frames' first group
    if have < wanted:
        raise ValueError(f"{str(c.video)!r} has {have} frames, fewer than the {wanted} needed")


def _check_audio_prefix_suffix(c: PrefixInput | SuffixInput, g: SampleGeometry) -> None:
    assert c.audio is not None
    if c.num_frames is not None:
        raise ValueError("num_frames applies to a video; an audio prefix/suffix takes duration (seconds)")
    seconds = _audio_seconds(c.audio)
    wanted = c.duration if c.duration is not None else g.duration
    if wanted > g.duration + 1e-6:
        raise ValueError(f"duration {wanted} s is longer than the sample's {g.duration:.3f} s")
    if c.duration is not None and seconds + 1e-3 < c.duration:
        raise ValueError(f"{str(c.audio)!r} lasts {seconds:.3f} s, less than duration {c.duration} s")


def _check_spatial_crop(c: SpatialCropInput, g: SampleGeometry) -> None:
    _check_covers_sample(c.video, g)
    _, _, y2, x2 = c.spatial_region
    if y2 > g.height or x2 > g.width:
        raise ValueError(f"spatial_region {list(c.spatial_region)} reaches outside the {g.width}x{g.height} frame")
    if not spatial_crop_cells(c.spatial_region, g.video_latent).any():
        raise ValueError(
            f"spatial_region {list(c.spatial_region)} covers no whole {SCALE.height}x{SCALE.width}-pixel latent cell"
        )


def _check_mask(c: MaskInput, g: SampleGeometry) -> None:
    if not c.mask.is_file():
        raise ValueError(f"mask file not found: {str(c.mask)!r}")
    if c.video is None:
        assert c.audio is not None
        _audio_seconds(c.audio)
        audio_mask_steps(c.mask, g)
        return
    _check_covers_sample(c.video, g)
    latent_frames = g.video_latent.frames
    cells = video_mask_cells(c.mask, g)
    if tuple(cells.shape[1:]) != (latent_frames, g.video_latent.height, g.video_latent.width):
        raise ValueError(
            f"mask {str(c.mask)!r} covers {cells.shape[1]} latent frames; the sample needs {latent_frames} "
            f"(give an image, or a video of at least {g.frames} frames)"
        )


def _check_reference(c: ReferenceInput, g: SampleGeometry) -> None:
    if c.video is None:
        assert c.audio is not None
        if c.downscale_factor != 1 or c.temporal_scale_factor != 1 or c.include_in_output:
            raise ValueError("downscale_factor, temporal_scale_factor and include_in_output apply to a video")
        _audio_seconds(c.audio)
        return
    _video_frames(c.video)
    ref_h, ref_w = g.height // c.downscale_factor, g.width // c.downscale_factor
    divisible = not (g.height % c.downscale_factor or g.width % c.downscale_factor)
    if not divisible or ref_h % SCALE.height or ref_w % SCALE.width:
        raise ValueError(
            f"downscale_factor {c.downscale_factor}: the reference size {g.width}x{g.height} / "
            f"{c.downscale_factor} must be whole multiples of {SCALE.width}x{SCALE.height} pixels"
        )


# -- masks ----------------------------------------------------------------------------------------


def spatial_crop_cells(region: tuple[int, int, int, int], latent: VideoLatentShape) -> torch.Tensor:
    """(1, F, H, W) latent cells kept by a pixel region (y1, x1, y2, x2): 1 inside, 0 outside."""
    y1, x1, y2, x2 = region

    def cell(v: int, scale: int, size: int) -> int:
        return max(0, min(v // scale, size))

    keep = torch.zeros(latent.height, latent.width)
    keep[cell(y1, SCALE.height, latent.height) : cell(y2, SCALE.height, latent.height),
         cell(x1, SCALE.width, latent.width) : cell(x2, SCALE.width, latent.width)] = 1.0  # fmt: skip
    return keep.expand(1, latent.frames, -1, -1).contiguous()


def video_mask_cells(path: Path, g: SampleGeometry) -> torch.Tensor:
    """A mask image or video -> (1, F', H', W') latent cells, 1 = keep the given video."""
    if path.suffix.lower() in _IMAGE_SUFFIXES:
        gray = torch.from_numpy(read_image_rgb(path)).float().mean(dim=-1) / 255.0  # (H, W)
        frames = gray.unsqueeze(0)
    else:
        frames = torch.stack(list(iter_video_frames(path, max_frames=g.frames))).float().mean(dim=-1) / 255.0
        if frames.shape[0] == 0:
            raise MediaError(f"no frames decoded from mask {str(path)!r}")
    pixels = F.interpolate(frames.unsqueeze(1), size=(g.height, g.width), mode="nearest")  # (F, 1, H, W)
    if pixels.shape[0] == 1:
        pixels = pixels.expand(g.frames, -1, -1, -1)
    cells = F.avg_pool2d(pixels, kernel_size=(SCALE.height, SCALE.width))[:, 0]  # (F, H', W')
    # Time: groups of 8 pixel frames from frame 0 (padded at the end), any kept frame keeps the group.
    pad = (-cells.shape[0]) % SCALE.time
    cells = F.pad(cells, (0, 0, 0, 0, 0, pad))
    cells = cells.reshape(-1, SCALE.time, *cells.shape[1:]).amax(dim=1)[: g.video_latent.frames]
    return (cells > 0.5).float().unsqueeze(0)


def audio_mask_steps(path: Path, g: SampleGeometry) -> torch.Tensor:
    """A `.pt` mask (tensor, or dict with `mask`) or an audio file -> (1, T) over the audio latent steps."""
    if path.suffix == ".pt":
        try:
            raw = torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError) as error:
            raise ValueError(
                f"mask {str(path)!r} is not a tensor file torch.load reads with weights_only=True "
                f"({str(error).splitlines()[0][:120]})"
            ) from None
        if isinstance(raw, dict):
            if not raw:
                raise ValueError(f"mask {str(path)!r} holds an empty dict")
            raw = raw.get("mask", next(iter(raw.values())))
        if not isinstance(raw, torch.Tensor) or raw.numel() == 0:
            raise ValueError(f"mask {str(path)!r} must hold a non-empty tensor (or a dict with 'mask')")
        values = raw.float().flatten()
    else:
        values = read_audio(path).waveform.abs().mean(dim=0)
    steps = F.interpolate(values.view(1, 1, -1), size=g.audio_steps, mode="nearest").view(-1)
    return (steps > 0.5).float().unsqueeze(0)


# -- encoding -------------------------------------------------------------------------------------


class _Encoders:
    """The VAE encoders, each loaded on first use and freed when the context ends."""

    def __init__(self, checkpoint: Path, placement: Placement, stack: contextlib.ExitStack) -> None:
        self.checkpoint, self.placement, self.stack = checkpoint, placement, stack
        self._video = self._audio = None

    @property
    def video(self) -> torch.nn.Module:
        if self._video is None:
            self._video = self.stack.enter_context(loaded(VIDEO_ENCODER, self.checkpoint, self.placement))
        return self._video

    @property
    def audio(self) -> torch.nn.Module:
        if self._audio is None:
            self._audio = self.stack.enter_context(loaded(AUDIO_ENCODER, self.checkpoint, self.placement))
        return self._audio

    def encode_video(self, pixels: torch.Tensor) -> torch.Tensor:
        """(1, 3, F, H, W) in [-1, 1], F cut to 8k+1 -> latent on the CPU."""
        pixels = pixels[:, :, : (pixels.shape[2] - 1) // SCALE.time * SCALE.time + 1]
        with torch.no_grad():
            latent = self.video.encode_tiled(
                pixels.to(device=self.placement.device, dtype=self.placement.dtype), SOURCE_ENCODE_TILING
            )
        return latent.float().cpu()

    def encode_audio(self, waveform: torch.Tensor, sample_rate: int) -> torch.Tensor:
        """(channels, N) -> latent (1, 8, T, 16) on the CPU."""
        wave = waveform.unsqueeze(0).float()
        if wave.shape[1] > 2:  # the audio VAE takes stereo: fold surround channels into mono
            wave = wave.mean(dim=1, keepdim=True)
        with torch.no_grad():
            latent = encode_audio(wave, sample_rate, self.audio)
        return latent.float().cpu()


def _clip(path: Path, g: SampleGeometry, max_frames: int) -> torch.Tensor:
    """The first `max_frames` frames of a video fitted (cover + centre crop) to the sample: (1, 3, F, H, W)."""
    frames = list(iter_video_frames(path, max_frames=max_frames))
    if not frames:
        raise MediaError(f"no frames decoded from {str(path)!r}")
    return frames_to_model_input(torch.stack(frames), g.height, g.width)


def _first_frame(c: FirstFrameInput, g: SampleGeometry) -> ImageCondition:
    if c.image_or_video.suffix.lower() not in _VIDEO_SUFFIXES:
        return ImageCondition(frame_idx=0, strength=1.0, path=c.image_or_video)
    pixels = _clip(c.image_or_video, g, max_frames=1)
    return ImageCondition(frame_idx=0, strength=1.0, pixels={(g.height, g.width): pixels})


@dataclass
class _Collected:
    images: list[ImageCondition]
    video: list[ConditioningItem]
    audio: list[ConditioningItem]
    initial_video: torch.Tensor | None = None
    initial_audio: torch.Tensor | None = None
    side_by_side: tuple[torch.Tensor, int] | None = None


def encode_sample(
    sample: ValidationSample,
    g: SampleGeometry,
    checkpoint: Path,
    placement: Placement,
    *,
    generate_video: bool,
    generate_audio: bool,
) -> EncodedSample:
    """Read and VAE-encode the media of a sample's conditions and build the pipeline's stage conditions."""
    with_video, with_audio = modalities(sample, generate_video, generate_audio)
    out = _Collected(images=[], video=[], audio=[])
    video_frozen = audio_frozen = False
    with contextlib.ExitStack() as stack:
        encoders = _Encoders(checkpoint, placement, stack)
        for c in sample.conditions:
            if isinstance(c, FirstFrameInput):
                out.images.append(_first_frame(c, g))
            elif isinstance(c, VideoToAudioInput):
                latent = encoders.encode_video(_clip(c.video, g, g.frames))
                out.initial_video = conform_latent_frames(latent, g.video_latent.frames)
                video_frozen = True
            elif isinstance(c, AudioToVideoInput):
                clip = read_audio(c.audio, max_duration=g.duration)
                latent = encoders.encode_audio(clip.waveform, clip.sample_rate)
                out.initial_audio = conform_latent_frames(latent, g.audio_steps)
                audio_frozen = True
            else:
                _encode_edit(c, g, encoders, placement, out)
    # A frozen stream is pinned whole, after every other item (it zeroes the mask of all its tokens).
    if video_frozen:
        out.video.append(FrozenModality())
    if audio_frozen:
        out.audio.append(FrozenModality())
    conditions = StageConditions(
        video=tuple(out.video) if with_video else (),
        audio=tuple(out.audio) if with_audio else (),
        initial_video=out.initial_video,
        initial_audio=out.initial_audio,
        with_video=with_video,
        with_audio=with_audio,
    )
    return EncodedSample(
        images=tuple(out.images) if with_video else (),
        conditions=conditions,
        video_frozen=video_frozen,
        audio_frozen=audio_frozen,
        side_by_side=out.side_by_side,
    )


def _encode_edit(
    c: ValidationCondition, g: SampleGeometry, encoders: _Encoders, placement: Placement, out: _Collected
) -> None:
    """Items of the conditions that edit a generated stream (prefix, suffix, crop, mask, reference)."""
    latent_frames = g.video_latent.frames
    if isinstance(c, (PrefixInput, SuffixInput)) and c.video is not None:
        if isinstance(c, PrefixInput):
            latent = encoders.encode_video(_clip(c.video, g, c.num_frames or g.frames))
            out.video.append(VideoConditionByLatentIndex(latent, 1.0, 0))
        else:
            # The encoder is causal in time: encode the whole clip, keep the suffix's latent frames.
            latent = encoders.encode_video(_clip(c.video, g, g.frames))
            if c.num_frames is not None:
                latent = latent[:, :, -(c.num_frames // SCALE.time) :]
            latent = latent[:, :, -latent_frames:]
            out.video.append(VideoConditionByLatentIndex(latent, 1.0, latent_frames - latent.shape[2]))
    elif isinstance(c, (PrefixInput, SuffixInput)):
        assert c.audio is not None
        seconds = c.duration if c.duration is not None else g.duration
        clip = read_audio(c.audio)
        samples = min(round(seconds * clip.sample_rate), clip.waveform.shape[-1])
        wave = clip.waveform[:, :samples] if isinstance(c, PrefixInput) else clip.waveform[:, -samples:]
        latent = encoders.encode_audio(wave, clip.sample_rate)[:, :, : g.audio_steps]
        start = 0 if isinstance(c, PrefixInput) else g.audio_steps - latent.shape[2]
        out.audio.append(AudioConditionByMask.span(latent, g.audio_steps, start))
    elif isinstance(c, SpatialCropInput):
        latent = encoders.encode_video(_clip(c.video, g, g.frames))
        out.video.append(VideoConditionByMask(latent, spatial_crop_cells(c.spatial_region, g.video_latent)))
    elif isinstance(c, MaskInput) and c.video is not None:
        latent = encoders.encode_video(_clip(c.video, g, g.frames))
        out.video.append(VideoConditionByMask(latent, video_mask_cells(c.mask, g)))
    elif isinstance(c, MaskInput):
        assert c.audio is not None
        clip = read_audio(c.audio, max_duration=g.duration)
        latent = encoders.encode_audio(clip.waveform, clip.sample_rate)
        have = min(latent.shape[2], g.audio_steps)
        keep = audio_mask_steps(c.mask, g)
        keep[:, have:] = 0.0  # steps the audio does not reach are generated
        out.audio.append(AudioConditionByMask(conform_latent_frames(latent, g.audio_steps), keep))
    elif isinstance(c, ReferenceInput) and c.video is not None:
        factors = ReferenceFactors(downscale=c.downscale_factor, temporal=c.temporal_scale_factor)
        reference = VideoReference(strength=1.0, path=c.video)
        (item,) = reference_conditionings(
            [reference], encoders.video, height=g.height, width=g.width, num_frames=g.frames, factors=factors,
            device=placement.device, dtype=placement.dtype,
        )  # fmt: skip
        out.video.append(item)
        if c.include_in_output:
            size = (g.height // factors.downscale, g.width // factors.downscale)
            pixels = reference.load(*size, g.frames, factors.temporal)
            shown = ((pixels[0].permute(1, 2, 3, 0) + 1.0) / 2.0).clamp(0.0, 1.0)  # (F, h, w, 3)
            out.side_by_side = (shown, factors.temporal)
    elif isinstance(c, ReferenceInput):
        assert c.audio is not None
        clip = read_audio(c.audio, max_duration=g.duration)
        out.audio.append(AudioConditionByReferenceLatent(encoders.encode_audio(clip.waveform, clip.sample_rate)))
    else:  # pragma: no cover - the schema's union is exhausted above
        raise TypeError(f"unexpected validation condition {type(c).__name__}")


# -- output ---------------------------------------------------------------------------------------


def with_reference_beside(
    chunks: Iterator[torch.Tensor], reference: torch.Tensor, temporal: int, num_frames: int
) -> Iterator[torch.Tensor]:
    """Frame chunks (f, H, W, 3) with the reference (F', h, w, 3) to their left, scaled to height H and
    stretched in time to `num_frames` (frame 0 once, then each reference frame `temporal` times)."""
    have = reference.shape[0]
    if temporal > 1:
        index = torch.tensor([0] + [1 + (i - 1) // temporal for i in range(1, num_frames)])
    else:
        index = torch.linspace(0, have - 1, num_frames).round().long()
    index = index.clamp(max=have - 1)
    done = 0
    for chunk in chunks:
        height = chunk.shape[1]
        ref = reference[index[done : done + chunk.shape[0]]].permute(0, 3, 1, 2)  # (f, 3, h, w)
        if ref.shape[2] != height:
            width = round(ref.shape[3] * height / ref.shape[2])
            ref = F.interpolate(ref, size=(height, width), mode="bicubic", align_corners=False).clamp(0.0, 1.0)
        yield torch.cat([ref.permute(0, 2, 3, 1).to(chunk), chunk], dim=2)
        done += chunk.shape[0]
