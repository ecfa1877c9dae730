"""The DFR keyframe layout: canvas padding and keyframe positions, seam tiles per temporal round, the
stitch and the output length. The golden test replays the fixture's recorded `params.dfr.dfr_layout`;
`data/reference_dfr_rounds.json` holds the reference's own layout for lengths and round counts the fixture
does not cover (its `source` says how it was recorded); the behaviour tests check the rules' edges."""

from __future__ import annotations

import json
from pathlib import Path
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
    plan_rounds,
    plan_tiles,
    round_frames,
    round_tile_count,
    segment_length,
    stitch_tiles,
)

REFERENCE_ROUNDS = Path(__file__).parent / "data" / "reference_dfr_rounds.json"


def _recorded_tiles(recorded: list[dict[str, Any]]) -> tuple[SeamTile, ...]:
    """Tiles in the reference's recorded `TileRange` fields, as ours."""
    return tuple(
        SeamTile(
            pixel_start=t["pixel_start"],
            pixel_end=t["pixel_end"],
            latent_start=t["latent_start"],
            latent_stop=t["latent_end_exclusive"],
            anchors=tuple(t["anchor_kf_global"]),
            slots=tuple(t["slot_kf_global"]),
            drop_prefix=t["drop_latent_prefix"],
        )
        for t in recorded
    )


def _assert_rounds_match(canvas: Canvas, recorded_rounds: list[dict[str, Any]]) -> None:
    planned = plan_rounds(canvas, len(recorded_rounds))
    assert len(planned) == len(recorded_rounds)
    for plan, rec in zip(planned, recorded_rounds, strict=True):
        where = f"round {plan.index} of a {canvas.requested_frames}-frame request"
        assert plan.seams == tuple(rec["seam_positions"]), where
        assert plan.frames == rec["num_frames"], where
        assert round_tile_count(plan.index) == rec["num_tiles_requested"], where
        assert plan.tiles == _recorded_tiles(rec["tiles"]), where


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
    _assert_rounds_match(canvas, layout["tiles"])
    # The recorded tensors agree with the layout: tile latents span their range, the decoded clip has the
    # output length and the decoder's latent is trimmed to it.
    fx = golden_ltx25_fixture("fx_pipeline_ltx25_more")
    last = plan_rounds(canvas, rounds)[-1].tiles if rounds else ()
    for index, tile in enumerate(last):
        assert fx[f"dfr.round_{rounds}.tile_{index}.video_latent"].shape[2] == tile.latent_frames
        assert fx[f"dfr.round_{rounds}.tile_{index}.video_generated_keyframes"].shape[2] == len(tile.slots)
    frames = output_frames(settings["num_frames"], rounds)
    assert fx["dfr.video_frames"].shape[0] == frames
    assert fx["dfr.final_video_latent"].shape[2] == output_latent_frames(frames)
    assert fx["dfr.stage_1.video_generated_keyframes"].shape[2] == len(canvas.positions)


def _reference_cases() -> list[dict[str, Any]]:
    return json.loads(REFERENCE_ROUNDS.read_text())["cases"]


@pytest.mark.parametrize("case", _reference_cases(), ids=lambda c: f"{c['requested_frames']}f-{c['rounds']}r")
def test_rounds_match_the_reference_layout(case):
    """Every round's seams (round 2 on: the previous round's seams and slots, doubled), tiles, anchors and
    slots as the reference lays them out, for 1 to 3 rounds over several clip lengths."""
    canvas = plan_canvas(case["requested_frames"])
    recorded = case["canvas"]
    assert (canvas.frames, canvas.segment, canvas.positions) == (
        recorded["canvas_frames"],
        recorded["segment"],
        tuple(recorded["positions"]),
    )
    _assert_rounds_match(canvas, case["tiles"])


def test_round_two_is_seamed_on_the_first_rounds_seams_and_slots():
    """The issue's example: a 24-frame segment canvas; round 1 seams [48] and generates a slot at 24, so
    round 2 is seamed on [48, 96], not only on the doubled canvas keyframe [96]."""
    first, second = plan_rounds(plan_canvas(9), 2)
    assert (first.seams, first.carried) == ((48,), (24, 48))
    assert second.seams == (48, 96) and second.frames == 97
    assert [(t.anchors, t.slots) for t in second.tiles] == [((48,), (24,)), ((48, 96), (24, 72))]


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
    (plan,) = plan_rounds(plan_canvas(97), 1)
    seams, frames = plan.seams, plan.frames
    assert seams == (64, 128, 192) and frames == 193
    first, second = plan.tiles
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
    (plan,) = plan_rounds(plan_canvas(25), 1)
    assert round_tile_count(1) == 2 and len(plan.tiles) == 1
    assert len(plan_tiles((48, 96, 144), round_frames(73, 1), round_tile_count(2))) == 3
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
