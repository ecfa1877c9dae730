"""The DFR keyframe layout: canvas padding and keyframe positions, seam tiles per temporal round, the
stitch and the output length. The golden test replays the fixture's recorded `params.dfr.dfr_layout`;
the behaviour tests check the rules on lengths the fixture does not cover."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ltx_pipelines.engine.dfr_layout import (
    Canvas,
    SeamTile,
    latent_index,
    output_frames,
    output_latent_frames,
    plan_canvas,
    plan_tiles,
    round_frames,
    round_seams,
    round_tile_count,
    segment_length,
    stitch_tiles,
)


@pytest.fixture(scope="module")
def dfr_params(golden_ltx25_manifest: dict[str, Any]) -> dict[str, Any]:
    return golden_ltx25_manifest["fixtures"]["fx_pipeline_ltx25_more"]["params"]["dfr"]


@pytest.mark.golden
def test_layout_matches_recorded_dfr_layout(dfr_params, golden_ltx25_fixture):
    layout = dfr_params["dfr_layout"]
    settings = dfr_params["settings"]
    rounds = settings["temporal_upsample_rounds"]
    assert len(layout["canvas"]) == 1 and len(layout["tiles"]) == rounds
    recorded = layout["canvas"][0]
    assert recorded["requested_frames"] == settings["num_frames"]
    canvas = plan_canvas(recorded["requested_frames"])
    assert canvas == Canvas(
        requested_frames=recorded["requested_frames"],
        frames=recorded["canvas_frames"],
        segment=recorded["segment"],
        positions=tuple(recorded["positions"]),
    )
    for round_index, rec in enumerate(layout["tiles"], start=1):
        assert round_seams(canvas.positions, round_index) == tuple(rec["seam_positions"])
        assert round_frames(canvas.frames, round_index) == rec["num_frames"]
        assert round_tile_count(round_index) == rec["num_tiles_requested"]
        tiles = plan_tiles(rec["seam_positions"], rec["num_frames"], rec["num_tiles_requested"])
        assert tiles == tuple(
            SeamTile(
                pixel_start=t["pixel_start"],
                pixel_end=t["pixel_end"],
                latent_start=t["latent_start"],
                latent_stop=t["latent_end_exclusive"],
                anchors=tuple(t["anchor_kf_global"]),
                slots=tuple(t["slot_kf_global"]),
                drop_prefix=t["drop_latent_prefix"],
            )
            for t in rec["tiles"]
        )
    # The recorded tensors agree with the layout: tile latents span their range, the decoded clip has the
    # output length and the decoder's latent is trimmed to it.
    fx = golden_ltx25_fixture("fx_pipeline_ltx25_more")
    last = plan_tiles(layout["tiles"][-1]["seam_positions"], layout["tiles"][-1]["num_frames"], 2**rounds)
    for index, tile in enumerate(last):
        assert fx[f"dfr.round_{rounds}.tile_{index}.video_latent"].shape[2] == tile.latent_frames
        assert fx[f"dfr.round_{rounds}.tile_{index}.video_generated_keyframes"].shape[2] == len(tile.slots)
    frames = output_frames(settings["num_frames"], rounds)
    assert fx["dfr.video_frames"].shape[0] == frames
    assert fx["dfr.final_video_latent"].shape[2] == output_latent_frames(frames)
    assert fx["dfr.stage_1.video_generated_keyframes"].shape[2] == len(canvas.positions)


@pytest.mark.parametrize(
    ("content", "segment"),
    [(8, 24), (16, 24), (24, 24), (32, 32), (48, 24), (64, 32), (96, 32), (40, 24), (56, 32)],
)
def test_segment_length_pads_least_and_prefers_longer_on_ties(content, segment):
    assert segment_length(content) == segment


def test_canvas_pads_to_whole_segments_with_a_keyframe_at_each_end():
    canvas = plan_canvas(97)
    assert (canvas.frames, canvas.segment, canvas.positions) == (97, 32, (32, 64, 96))
    canvas = plan_canvas(57)  # 56 content frames: 32 pads by 8, 24 by 16
    assert (canvas.frames, canvas.segment, canvas.positions) == (65, 32, (32, 64))
    assert canvas.requested_frames == 57


@pytest.mark.parametrize("frames", [0, 1, 10, 24])
def test_canvas_refuses_lengths_off_the_latent_grid(frames):
    with pytest.raises(ValueError, match=rf"num_frames must be 8k\+1.*got {frames}"):
        plan_canvas(frames)


def test_two_tiles_share_a_seam_and_the_stitch_covers_every_latent_frame_once():
    canvas = plan_canvas(97)
    seams, frames = round_seams(canvas.positions, 1), round_frames(canvas.frames, 1)
    assert seams == (64, 128, 192) and frames == 193
    first, second = plan_tiles(seams, frames, 2)
    assert (first.pixel_start, first.pixel_end, first.anchors, first.slots, first.drop_prefix) == (
        0,
        128,
        (64, 128),
        (32, 96),
        0,
    )
    # The second tile leads in over the first tile's last segment, anchored on both its seams.
    assert (second.pixel_start, second.pixel_end, second.anchors, second.slots) == (64, 192, (64, 128, 192), (96, 160))
    assert (second.latent_start, second.latent_stop, second.drop_prefix) == (8, 25, 9)
    assert second.local(second.anchors) == (0, 64, 128)
    # Fill each tile with its global latent indices: the stitch must give 0..24 in order.
    latents = [
        torch.arange(t.latent_start, t.latent_stop, dtype=torch.float32).view(1, 1, -1, 1, 1) for t in (first, second)
    ]
    stitched = stitch_tiles(latents, (first, second))
    assert torch.equal(stitched.flatten(), torch.arange(latent_index(frames - 1) + 1, dtype=torch.float32))


def test_tile_count_is_clamped_to_the_segments_and_split_largest_first():
    seams = round_seams((24, 48, 72), 2)
    tiles = plan_tiles(seams, round_frames(73, 2), round_tile_count(2))
    assert len(tiles) == 3
    tiles = plan_tiles((48, 96, 144, 192, 240), 241, 2)
    assert [(t.pixel_start, t.pixel_end) for t in tiles] == [(0, 144), (96, 240)]


@pytest.mark.parametrize(
    ("seams", "frames", "match"),
    [
        ((48,), 50, "last seam must be the final frame 49"),
        ((), 49, "last seam must be the final frame"),
        ((8, 48), 49, "segment 0..8 must increase"),
        ((20, 48), 49, "segment 0..20"),
        ((24, 24, 48), 49, "segment 24..24"),
    ],
)
def test_bad_seams_are_refused_with_the_reason(seams, frames, match):
    with pytest.raises(ValueError, match=match):
        plan_tiles(seams, frames, 2)


def test_stitch_refuses_a_latent_of_the_wrong_length():
    (tile,) = plan_tiles((48,), 49, 2)
    with pytest.raises(ValueError, match=r"must be \(B, C, T=7, H, W\)"):
        stitch_tiles([torch.zeros(1, 1, 6, 1, 1)], [tile])
    with pytest.raises(ValueError, match="one latent per tile"):
        stitch_tiles([], [tile])


def test_output_length_and_trimmed_latent():
    assert output_frames(9, 1) == 17 and output_frames(9, 2) == 33 and output_frames(121, 0) == 121
    assert output_latent_frames(17) == 3 and output_latent_frames(33) == 5
    with pytest.raises(ValueError, match="not on the x8 latent border"):
        latent_index(12)
