"""Publishing a finished file with its sidecar: numbered names when the target appears meanwhile,
pairs replaced together under overwrite, flushed before renaming, and the clean-up of temporary files
that killed runs leave behind (only theirs: a running writer's file is locked)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import ltx_pipelines.io.atomic_files as atomic_files
from ltx_pipelines.io.atomic_files import (
    partial_file,
    publish_with_sidecar,
    remove_stale_partials,
)


def sidecar_for(final: Path) -> str:
    return json.dumps({"output": final.name})


def finished(target: Path, data: bytes) -> tuple[Path, object]:
    """A finished temporary file for `target` (its partial_file context kept open by the caller)."""
    context = partial_file(target)
    tmp = context.__enter__()
    tmp.write_bytes(data)
    return tmp, context


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_target_taken_meanwhile_moves_the_pair_to_the_first_free_number(tmp_path, caplog):
    target = tmp_path / "clip.mp4"
    with partial_file(target) as tmp:
        tmp.write_bytes(b"new video")
        target.write_bytes(b"someone else's video")  # appeared while the run was working
        (tmp_path / "clip-1.json").write_text("taken too")
        video, sidecar = publish_with_sidecar(tmp, target, sidecar_for, overwrite=False)
    assert (video.name, sidecar.name) == ("clip-2.mp4", "clip-2.json")
    assert video.read_bytes() == b"new video" and json.loads(sidecar.read_text()) == {"output": "clip-2.mp4"}
    assert target.read_bytes() == b"someone else's video"
    assert (tmp_path / "clip-1.json").read_text() == "taken too" and not (tmp_path / "clip-1.mp4").exists()
    assert not (tmp_path / "clip.json").exists(), "a sidecar was left beside the other file"
    assert leftovers(tmp_path) == []
    assert "clip-2.mp4" in caplog.text and "appeared" in caplog.text


def test_overwrite_replaces_video_and_sidecar_as_a_pair(tmp_path):
    target = tmp_path / "clip.mp4"
    target.write_bytes(b"old video")
    (tmp_path / "clip.json").write_text("old sidecar")
    with partial_file(target) as tmp:
        tmp.write_bytes(b"new video")
        publish_with_sidecar(tmp, target, sidecar_for, overwrite=True)
    assert target.read_bytes() == b"new video"
    assert json.loads((tmp_path / "clip.json").read_text()) == {"output": "clip.mp4"}
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("failing_rename", [1, 2])
def test_an_overwrite_interrupted_between_the_renames_leaves_the_old_pair(tmp_path, monkeypatch, failing_rename):
    target = tmp_path / "clip.mp4"
    target.write_bytes(b"old video")
    (tmp_path / "clip.json").write_text("old sidecar")
    real_replace = os.replace
    count = {"n": 0}

    def interrupted_replace(src, dst):
        # Only the renames that publish (not the restoring ones that follow the interruption).
        if str(src).endswith((".partial.mp4", ".partial.json")):
            count["n"] += 1
            if count["n"] == failing_rename:
                raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(atomic_files.os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt), partial_file(target) as tmp:
        tmp.write_bytes(b"new video")
        publish_with_sidecar(tmp, target, sidecar_for, overwrite=True)
    assert target.read_bytes() == b"old video"
    assert (tmp_path / "clip.json").read_text() == "old sidecar"
    assert leftovers(tmp_path) == [], "backups or temporary files were left"


def test_an_overwrite_without_an_old_sidecar_removes_the_new_one_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "clip.mp4"
    target.write_bytes(b"old video")
    real_replace = os.replace

    def fail_on_sidecar(src, dst):
        if str(src).endswith(".partial.json"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(atomic_files.os, "replace", fail_on_sidecar)
    with pytest.raises(OSError, match="No space"), partial_file(target) as tmp:
        tmp.write_bytes(b"new video")
        publish_with_sidecar(tmp, target, sidecar_for, overwrite=True)
    assert target.read_bytes() == b"old video" and sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]


def test_every_published_file_is_flushed_before_its_rename(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_link, real_replace = atomic_files.fsync_file, os.link, os.replace

    def fsync(path):
        events.append(("fsync", Path(path).name))
        real_fsync(path)

    def link(src, dst):
        events.append(("rename", Path(src).name))
        real_link(src, dst)

    def replace(src, dst):
        events.append(("rename", Path(src).name))
        real_replace(src, dst)

    monkeypatch.setattr(atomic_files, "fsync_file", fsync)
    monkeypatch.setattr(atomic_files.os, "link", link)
    monkeypatch.setattr(atomic_files.os, "replace", replace)
    for overwrite in (False, True):
        events.clear()
        with partial_file(tmp_path / "clip.mp4") as tmp:
            tmp.write_bytes(b"video")
            publish_with_sidecar(tmp, tmp_path / "clip.mp4", sidecar_for, overwrite=overwrite)
        renamed = [name for kind, name in events if kind == "rename" and ".partial" in name]
        assert len(renamed) == 2, events
        for name in renamed:
            assert events.index(("fsync", name)) < events.index(("rename", name)), events


def _stale(path: Path, age_s: float = 3600.0) -> Path:
    path.write_bytes(b"half a video")
    old = time.time() - age_s
    os.utime(path, (old, old))
    return path


def test_partials_of_killed_runs_are_removed_and_reported(tmp_path, caplog):
    stale = _stale(tmp_path / ".clip.mp4.ab12cd34.partial.mp4")
    stale_json = _stale(tmp_path / ".clip.json.zz99yy88.partial.json")
    young = tmp_path / ".other.mp4.qq11ww22.partial.mp4"
    young.write_bytes(b"just created")  # may be a writer that has not locked it yet
    users = [tmp_path / "notes.partial.txt", tmp_path / ".hidden-config"]
    for path in users:
        _stale(path)
    removed = remove_stale_partials(tmp_path)
    assert sorted(removed) == sorted([stale, stale_json])
    assert not stale.exists() and not stale_json.exists()
    assert young.exists() and all(p.exists() for p in users), "files that are not our leftovers were touched"
    assert str(stale) in caplog.text and "interrupted run" in caplog.text


def test_a_partial_another_run_is_writing_is_left_alone(tmp_path):
    target = tmp_path / "clip.mp4"
    with partial_file(target) as live:  # held (locked) by "the other run"
        live.write_bytes(b"in progress")
        old = time.time() - 3600
        os.utime(live, (old, old))  # even when it looks old
        assert remove_stale_partials(tmp_path) == []
        assert live.read_bytes() == b"in progress"
    # Once its writer has finished (or died), a leftover of the same name is removable.
    leftover = _stale(live)
    assert remove_stale_partials(tmp_path) == [leftover]


def test_temporary_files_are_locked_until_their_block_ends(tmp_path):
    fcntl = pytest.importorskip("fcntl")
    with partial_file(tmp_path / "x.bin") as tmp:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert not tmp.exists()
