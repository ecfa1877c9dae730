"""hf:// parsing and resolution against a hub cache laid out in a temporary folder (no network)."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub.errors import RepositoryNotFoundError

from ltx_pipelines.cli.model_resolution import (
    HfPath,
    HfPathError,
    cached_hf_file,
    hub_offline,
    is_hf_path,
    parse_hf_path,
    resolve_hf_file,
    resolve_hf_folder,
    resolve_model_path,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hf://Lightricks/LTX-2/ltx-2.3.safetensors", HfPath("Lightricks/LTX-2", "ltx-2.3.safetensors")),
        ("hf://Lightricks/LTX-2/sub/dir/f.safetensors", HfPath("Lightricks/LTX-2", "sub/dir/f.safetensors")),
        ("hf://google/gemma-3-12b-it", HfPath("google/gemma-3-12b-it")),
        ("hf://google/gemma-3-12b-it/", HfPath("google/gemma-3-12b-it")),
        ("hf://org/repo@v1.1/f.bin", HfPath("org/repo", "f.bin", "v1.1")),
        ("hf://org/repo@refs%2Fpr%2F3/f.bin", HfPath("org/repo", "f.bin", "refs/pr/3")),
        ("hf://datasets/org/data/clips/a.mp4", HfPath("org/data", "clips/a.mp4", None, "dataset")),
    ],
)
def test_parse(text, expected):
    assert parse_hf_path(text) == expected
    assert parse_hf_path(str(expected)) == expected  # str() gives back an equivalent path


@pytest.mark.parametrize(
    "text",
    [
        "hf://",
        "hf://org",
        "hf://org/",
        "hf:///repo/f",
        "hf://org/re po/f",
        "hf://org/repo@/f",
        "hf://org/repo/a//b",
        "hf://o/r/../x",
        "/local/path",
    ],
)
def test_parse_rejects(text):
    with pytest.raises(HfPathError, match=r"hf://<org>/<repo>"):
        parse_hf_path(text)


def test_is_hf_path():
    assert is_hf_path("hf://a/b")
    assert not is_hf_path("/models/a.safetensors")
    assert not is_hf_path(Path("hf:/a/b"))


def test_resolve_file_and_folder_from_cache(hub_cache):
    ckpt = resolve_hf_file("hf://Lightricks/LTX-2/ltx-2.3-22b-distilled.safetensors", cache_dir=hub_cache)
    assert ckpt.read_bytes() == b"ckpt"
    nested = resolve_hf_file("hf://Lightricks/LTX-2/loras/style.safetensors", cache_dir=hub_cache, offline=True)
    assert nested.read_bytes() == b"lora"
    folder = resolve_hf_folder("hf://google/gemma", cache_dir=hub_cache)
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    sub = resolve_hf_folder("hf://Lightricks/LTX-2/loras", cache_dir=hub_cache)
    assert sub.name == "loras" and (sub / "style.safetensors").is_file()
    assert cached_hf_file("hf://Lightricks/LTX-2/loras/style.safetensors", cache_dir=hub_cache) == nested
    assert cached_hf_file("hf://Lightricks/LTX-2/other.safetensors", cache_dir=hub_cache) is None


def test_offline_cache_miss_is_a_clear_error(hub_cache):
    with pytest.raises(HfPathError, match=r"not in the Hugging Face cache.*offline"):
        resolve_hf_file("hf://Lightricks/LTX-2/missing.safetensors", cache_dir=hub_cache)
    with pytest.raises(HfPathError, match="names a repository, not a file"):
        resolve_hf_file("hf://Lightricks/LTX-2", cache_dir=hub_cache)


def test_network_failure_falls_back_to_the_cache(hub_cache, monkeypatch):
    real = huggingface_hub.hf_hub_download
    calls = []

    def flaky(**kwargs):
        calls.append(kwargs.get("local_files_only", False))
        if not kwargs.get("local_files_only"):
            raise ConnectionError("network is unreachable")
        return real(**kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", flaky)
    path = resolve_hf_file(
        "hf://Lightricks/LTX-2/ltx-2.3-22b-distilled.safetensors", cache_dir=hub_cache, offline=False
    )
    assert path.read_bytes() == b"ckpt"
    assert calls == [False, True]
    with pytest.raises(HfPathError, match=r"could not be reached.*not in the cache"):
        resolve_hf_file("hf://Lightricks/LTX-2/absent.safetensors", cache_dir=hub_cache, offline=False)


def test_definitive_hub_answers_do_not_fall_back(hub_cache, monkeypatch):
    def missing_repo(**kwargs):
        error = RepositoryNotFoundError.__new__(RepositoryNotFoundError)
        error.args = ("Repository Not Found for url: .../nobody/nothing",)
        raise error

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", missing_repo)
    with pytest.raises(HfPathError, match="not found on the Hugging Face Hub"):
        resolve_hf_file("hf://nobody/nothing/x.safetensors", cache_dir=hub_cache, offline=False)


def test_hub_offline_reads_the_environment(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not hub_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "true")
    assert hub_offline()


def test_resolve_model_path_passes_local_paths_through(tmp_path, monkeypatch, hub_cache):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_model_path("~/m.safetensors") == tmp_path / "m.safetensors"
    assert resolve_model_path("hf://google/gemma", folder=True, cache_dir=hub_cache).name == COMMIT
