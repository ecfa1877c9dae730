"""Tiled data parallelism: each tile is the model run on that part of the frame as a clip of its own,
the shared bands are the ramped mixture of the tiles, and 2 or 3 gloo ranks give what one process gives."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from rank_jobs import tiled_data_parallel_forward_job

from ltx_core.latent_tiles import AxisTileCount, TileCounts, balanced_tile_counts
from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.model.transformer import Modality, ModelVariant, configure_transformer
from ltx_core.multigpu.launch import run_ranks
from ltx_core.multigpu.tiled_data_parallel import TiledDataParallelTransformer
from ltx_core.types import VideoPixelShape

from ..transformer.conftest import TINY_TRANSFORMER, randomize_

FPS = 24.0
FRAMES, HEIGHT, WIDTH = 2, 3, 6  # latent grid: 9 pixel frames, 96 x 192 pixels
VIDEO_CONTEXT, AUDIO_CONTEXT = 16, 8


def _model():
    config = {"transformer": copy.deepcopy(TINY_TRANSFORMER)}
    return randomize_(configure_transformer(config, ModelVariant.AUDIO_VIDEO), seed=5)


def _pixel_shape(frames: int, height: int, width: int) -> VideoPixelShape:
    return VideoPixelShape(1, (frames - 1) * 8 + 1, height * 32, width * 32, FPS)


def _video(latent: torch.Tensor, sigma: float, context: torch.Tensor) -> Modality:
    """A (1, C, F, H, W) latent as the pipelines hand it to the model: raster tokens, positions from zero."""
    _, _, f, h, w = latent.shape
    tools = VideoLatentTools.from_pixel_shape(_pixel_shape(f, h, w), channels=latent.shape[1])
    tokens = tools.patchify(latent)
    return Modality(
        latent=tokens,
        timesteps=torch.full((1, tokens.shape[1], 1), sigma),
        sigma=torch.tensor([sigma]),
        positions=tools.positions(),
        context=context,
    )


def _inputs(seed: int = 0) -> tuple[torch.Tensor, Modality, Modality]:
    g = torch.Generator().manual_seed(seed)
    latent = torch.randn(1, 16, FRAMES, HEIGHT, WIDTH, generator=g)
    video = _video(latent, 0.6, torch.randn(1, 4, VIDEO_CONTEXT, generator=g))
    audio_tools = AudioLatentTools.from_video(_pixel_shape(FRAMES, HEIGHT, WIDTH))
    steps = audio_tools.token_count
    audio = Modality(
        latent=torch.randn(1, steps, 8, generator=g),
        timesteps=torch.full((1, steps, 1), 0.6),
        sigma=torch.tensor([0.6]),
        positions=audio_tools.positions(),
        context=torch.randn(1, 4, AUDIO_CONTEXT, generator=g),
    )
    return latent, video, audio


def _tokens_at(video_out: torch.Tensor, w: slice, width: int = WIDTH) -> torch.Tensor:
    """The tokens of columns `w` of a (1, F*H*W, C) output, as (F, H, w, C)."""
    return video_out.reshape(FRAMES, HEIGHT, width, -1)[:, :, w]


def test_one_tile_is_the_plain_forward():
    model = _model()
    _, video, audio = _inputs()
    with torch.inference_mode():
        want_v, want_a = model(video, audio)
        got_v, got_a = TiledDataParallelTransformer(model, (FRAMES, HEIGHT, WIDTH), TileCounts())(video, audio)
    assert torch.equal(got_v, want_v) and torch.equal(got_a, want_a)


def test_tiles_are_clips_of_their_own_and_bands_are_ramped_mixtures():
    """Two width tiles sharing 2 columns: columns only one tile covers are that tile run alone as a
    clip (its own positions from zero); the shared columns mix the two tiles 2/3-1/3 then 1/3-2/3;
    the audio is the mean of the two tile forwards."""
    model = _model()
    latent, video, audio = _inputs()
    counts = TileCounts(width=AxisTileCount(2, overlap=2))  # columns [0, 4) and [2, 6)
    with torch.inference_mode():
        got_v, got_a = TiledDataParallelTransformer(model, (FRAMES, HEIGHT, WIDTH), counts)(video, audio)
        left_v, left_a = model(_video(latent[..., 0:4], 0.6, video.context), audio)
        right_v, right_a = model(_video(latent[..., 2:6], 0.6, video.context), audio)
    left, right = left_v.reshape(FRAMES, HEIGHT, 4, -1), right_v.reshape(FRAMES, HEIGHT, 4, -1)
    torch.testing.assert_close(_tokens_at(got_v, slice(0, 2)), left[:, :, 0:2], rtol=0, atol=1e-6)
    torch.testing.assert_close(_tokens_at(got_v, slice(4, 6)), right[:, :, 2:4], rtol=0, atol=1e-6)
    band = _tokens_at(got_v, slice(2, 4))
    torch.testing.assert_close(band[:, :, 0], 2 / 3 * left[:, :, 2] + 1 / 3 * right[:, :, 0], rtol=0, atol=1e-6)
    torch.testing.assert_close(band[:, :, 1], 1 / 3 * left[:, :, 3] + 2 / 3 * right[:, :, 1], rtol=0, atol=1e-6)
    torch.testing.assert_close(got_a, (left_a + right_a) / 2, rtol=0, atol=1e-6)
    # The approximation is real: the full-frame forward differs from the blend.
    with torch.inference_mode():
        full_v, _ = model(video, audio)
    assert float((full_v - got_v).abs().max()) > 1e-3


class _Recorder(torch.nn.Module):
    """Wraps a model and records the token positions of every video stream it is given."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.seen: list[torch.Tensor] = []

    def forward(self, video, audio, perturbations=None):
        self.seen.append(video.positions.clone())
        return self.model(video, audio, perturbations)


def _with_appended(video: Modality, extra_positions: torch.Tensor, seed: int = 9) -> Modality:
    """`video` with clean conditioning tokens appended at `extra_positions` (1, 3, E, 2) and an attention mask."""
    g = torch.Generator().manual_seed(seed)
    e = extra_positions.shape[2]
    t = video.latent.shape[1] + e
    mask = torch.rand(1, t, t, generator=g).clamp(min=0.2)
    return replace(
        video,
        latent=torch.cat([video.latent, torch.randn(1, e, 16, generator=g)], 1),
        timesteps=torch.cat([video.timesteps, torch.zeros(1, e, 1)], 1),
        positions=torch.cat([video.positions, extra_positions], 2),
        attention_mask=mask,
    )


def test_appended_tokens_go_to_the_tiles_they_overlap_and_references_to_all():
    model = _model()
    _, video, audio = _inputs()
    grid_pos = video.positions.reshape(1, 3, FRAMES, HEIGHT, WIDTH, 2)
    # A guiding keyframe token over column 0 (tile 0 only) and a reference token at negative time.
    keyframe = grid_pos[:, :, 1, 0, 0][:, :, None]
    reference = grid_pos[:, :, 0, 0, 5][:, :, None].clone()
    reference[:, 0] -= 10.0
    conditioned = _with_appended(video, torch.cat([keyframe, reference], 2))
    recorder = _Recorder(model)
    counts = TileCounts(width=AxisTileCount(2, overlap=2))
    with torch.inference_mode():
        out_v, _ = TiledDataParallelTransformer(recorder, (FRAMES, HEIGHT, WIDTH), counts)(conditioned, audio)
    tile_tokens = FRAMES * HEIGHT * 4
    assert [p.shape[2] for p in recorder.seen] == [tile_tokens + 2, tile_tokens + 1]
    # The right tile's positions start at zero (shifted by its first column), its reference kept.
    right = recorder.seen[1]
    assert float(right[:, 1:, :tile_tokens, 0].amin()) == 0.0
    assert float(right[0, 0, -1, 0]) < 0
    assert out_v.shape == conditioned.latent.shape


def _cases() -> list[tuple[Modality, Modality]]:
    _, video, audio = _inputs(seed=1)
    grid_pos = video.positions.reshape(1, 3, FRAMES, HEIGHT, WIDTH, 2)
    keyframe = grid_pos[:, :, 1, 1, 2][:, :, None]
    _, plain, plain_audio = _inputs(seed=2)
    return [(plain, plain_audio), (_with_appended(video, keyframe), audio)]


@pytest.mark.parametrize("world", [2, 3])
def test_tiled_forward_over_ranks_equals_one_process(world, tmp_path):
    """Six tiles (2 x 3, overlap 1) dealt round-robin: every rank ends with the one-process blend."""
    model = _model()
    counts = TileCounts(height=AxisTileCount(2, 1), width=AxisTileCount(3, 1))
    cases = _cases()
    out_path = tmp_path / "tdp.pt"
    grid = (FRAMES, HEIGHT, WIDTH)
    run_ranks(tiled_data_parallel_forward_job, world, args=(model, grid, counts, cases, str(out_path)), timeout_s=120)
    parallel = torch.load(out_path)
    single = TiledDataParallelTransformer(model, grid, counts)
    with torch.inference_mode():
        for (video, audio), (got_v, got_a) in zip(cases, parallel, strict=True):
            want_v, want_a = single(video, audio)
            torch.testing.assert_close(got_v, want_v, rtol=0, atol=1e-6)
            torch.testing.assert_close(got_a, want_a, rtol=0, atol=1e-6)


def test_more_ranks_than_tiles_is_refused_on_every_rank(monkeypatch):
    """A 1-cell-wide grid is one tile: two ranks are refused when the wrapper is built (the layout is the
    same on every rank, so all of them refuse; none waits in a collective)."""
    import ltx_core.multigpu.tiled_data_parallel as tdp

    monkeypatch.setattr(tdp, "world_rank", lambda group=None: (2, 0))
    with pytest.raises(ValueError, match="1x1x1 latent grid splits into 1 tiles, fewer than the 2 ranks"):
        TiledDataParallelTransformer(_model(), (1, 1, 1), balanced_tile_counts(2, 1, 1))


@pytest.mark.parametrize(
    ("tiles", "height", "width", "want"),
    [(1, 4, 4, (1, 1)), (2, 4, 8, (1, 2)), (2, 8, 4, (2, 1)), (4, 6, 6, (2, 2)), (6, 4, 9, (2, 3)), (8, 8, 4, (4, 2))],
)
def test_balanced_tile_counts_put_more_tiles_along_the_longer_side(tiles, height, width, want):
    counts = balanced_tile_counts(tiles, height, width, overlap=5)
    assert (counts.height.tiles, counts.width.tiles) == want
    assert counts.frames.tiles == 1 and counts.height.overlap == 5
