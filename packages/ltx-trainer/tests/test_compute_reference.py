"""compute_reference: Canny edge videos beside the clips, recorded in the reference_video column."""

from __future__ import annotations

import json

from ltx_pipelines.io import probe_video, read_video
from ltx_trainer.preprocessing.dataset_file import read_dataset, resolve_roles
from ltx_trainer.preprocessing.reference_videos import compute_references


def test_edges_written_beside_clips_and_added_to_the_dataset(tmp_path, make_clip):
    root = tmp_path / "data"
    make_clip(root / "a.mp4", frames=9, height=64, width=64)
    make_clip(root / "b.mp4", frames=9, height=64, width=64)
    dataset = root / "dataset.json"
    dataset.write_text(json.dumps([{"media_path": "a.mp4", "caption": "x"}]))

    report = compute_references(root, dataset)
    assert report.written == {"reference": 2}
    rows = {r.values["media_path"]: r.values for r in read_dataset(dataset).rows}
    assert rows["a.mp4"] == {"media_path": "a.mp4", "caption": "x", "reference_video": "a_reference.mp4"}
    assert rows["b.mp4"]["reference_video"] == "b_reference.mp4"
    assert resolve_roles(list(rows["a.mp4"]))["reference_video"] == "reference_video"
    assert (root / "dataset.json.bak").is_file()

    info = probe_video(root / "a_reference.mp4")
    assert (info.frames, info.height, info.width) == (9, 64, 64)
    edges = read_video(root / "a_reference.mp4").frames.float().mean(dim=-1)
    # The moving white square's outline is an edge; the flat background is not.
    assert edges[0, 32, 0:8].mean() < 40 and edges.amax() > 200

    stamp = (root / "b_reference.mp4").stat().st_mtime_ns
    again = compute_references(dataset, dataset)
    assert again.skipped == {"reference": 2} and not again.written
    assert (root / "b_reference.mp4").stat().st_mtime_ns == stamp
