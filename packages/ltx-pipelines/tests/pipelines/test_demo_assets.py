"""The `--demo` model cache: files in the released formats, permissions from the umask, verified reuse,
repair of damaged or half-built caches, and one build when several callers start at once."""

from __future__ import annotations

import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file

import ltx_pipelines.demo.ltx23 as ltx23
from ltx_pipelines.demo import MANIFEST_NAME, DemoAssets, demo_assets_at, ensure_demo_assets, stale_parts
from ltx_pipelines.engine.model_loading import check_checkpoint_kind

pytestmark = pytest.mark.slow

BUILDERS = ("write_demo_checkpoint", "write_demo_upsampler", "write_demo_gemma")
UMASK = 0o027


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> DemoAssets:
    """One demo cache, built under a restrictive umask."""
    root = tmp_path_factory.mktemp("demo") / "cache"
    previous = os.umask(UMASK)
    try:
        return ensure_demo_assets(root)
    finally:
        os.umask(previous)


@pytest.fixture
def counted_builds(monkeypatch) -> Counter:
    """Count calls of each part builder (still building for real)."""
    calls: Counter = Counter()

    def counting(name: str, real: Callable[..., None]) -> Callable[..., None]:
        def build(*args: Any, **kwargs: Any) -> None:
            calls[name] += 1
            real(*args, **kwargs)

        return build

    for name in BUILDERS:
        monkeypatch.setattr(ltx23, name, counting(name, getattr(ltx23, name)))
    return calls


def _copy_cache(assets: DemoAssets, to: Path) -> DemoAssets:
    shutil.copytree(assets.checkpoint.parent, to)
    return demo_assets_at(to)


def test_demo_files_are_the_kinds_the_cli_expects(built):
    check_checkpoint_kind(built.checkpoint, "ltx_checkpoint")
    check_checkpoint_kind(built.spatial_upsampler, "upsampler")
    assert (built.gemma_root / "config.json").is_file()
    assert next(built.gemma_root.glob("*.safetensors"), None) is not None


def test_demo_files_get_the_permissions_the_umask_gives(built):
    root = built.checkpoint.parent
    for path in [root, *root.rglob("*")]:
        expected = (0o777 if path.is_dir() else 0o666) & ~UMASK
        assert path.stat().st_mode & 0o777 == expected, f"{path}: {oct(path.stat().st_mode & 0o777)}"
    assert not [p.name for p in root.iterdir() if ".partial" in p.name], "temporary files were left"


def test_complete_cache_is_reused_without_building(built, counted_builds):
    stamps = {p: p.stat().st_mtime_ns for p in built.checkpoint.parent.rglob("*")}
    assert ensure_demo_assets(built.checkpoint.parent) == built
    assert not counted_builds
    assert {p: p.stat().st_mtime_ns for p in built.checkpoint.parent.rglob("*")} == stamps


def test_truncated_checkpoint_is_rebuilt_alone_with_the_same_weights(built, counted_builds, tmp_path):
    assets = _copy_cache(built, tmp_path / "cache")
    size = assets.checkpoint.stat().st_size
    with assets.checkpoint.open("r+b") as f:
        f.truncate(size // 2)
    assert ensure_demo_assets(assets.checkpoint.parent) == assets
    assert counted_builds == Counter({"write_demo_checkpoint": 1})
    assert assets.checkpoint.stat().st_size == size
    original, rebuilt = load_file(built.checkpoint), load_file(assets.checkpoint)
    assert original.keys() == rebuilt.keys()
    assert all(original[k].equal(rebuilt[k]) for k in original), "the demo weights depend only on the seed"


def test_changed_upsampler_and_partial_gemma_folder_are_rebuilt(built, counted_builds, tmp_path):
    assets = _copy_cache(built, tmp_path / "cache")
    with assets.spatial_upsampler.open("r+b") as f:  # same size, different bytes
        f.seek(-4, os.SEEK_END)
        f.write(b"\0\1\2\3")
    weights = next(assets.gemma_root.glob("*.safetensors"))
    weights.unlink()
    ensure_demo_assets(assets.checkpoint.parent)
    assert counted_builds == Counter({"write_demo_upsampler": 1, "write_demo_gemma": 1})
    assert weights.is_file()
    assert sorted(p.name for p in assets.checkpoint.parent.iterdir() if ".partial" in p.name) == []


def test_missing_manifest_and_leftovers_of_a_killed_build_are_cleaned_up(built, counted_builds, tmp_path):
    assets = _copy_cache(built, tmp_path / "cache")
    root = assets.checkpoint.parent
    (root / MANIFEST_NAME).unlink()
    (root / ".ltx-demo-distilled.safetensors.999-deadbeef.partial").write_bytes(b"half a file")
    (root / ".gemma-3-demo.999-deadbeef.partial").mkdir()
    ensure_demo_assets(root)
    assert set(counted_builds) == set(BUILDERS)
    assert not [p.name for p in root.iterdir() if ".partial" in p.name]
    assert (root / MANIFEST_NAME).is_file()


def test_callers_starting_together_build_once(counted_builds, tmp_path):
    root = tmp_path / "cache"
    start = threading.Barrier(3)
    results: list[DemoAssets] = []
    errors: list[BaseException] = []

    def call() -> None:
        start.wait()
        try:
            results.append(ensure_demo_assets(root))
        except BaseException as e:  # reported below; a thread cannot fail the test itself
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 3 and len(set(results)) == 1
    assert counted_builds == Counter(dict.fromkeys(BUILDERS, 1))
    assert stale_parts(root, results[0]) == []
