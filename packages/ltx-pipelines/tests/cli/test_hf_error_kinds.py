"""hf:// failures are told apart: gated repository, not found, disk full, no network (then the cache).

The Hub is never contacted: `hf_hub_download` / `snapshot_download` are replaced by functions raising
huggingface_hub's own exception types, and the cache is a temporary folder.
"""

from __future__ import annotations

import errno

import huggingface_hub
import pytest
from huggingface_hub import errors as hub_errors

from ltx_pipelines.cli.model_resolution import HfPathError, resolve_hf_file, resolve_hf_folder

CACHED_FILE = "hf://Lightricks/LTX-2/ltx-2.3-22b-distilled.safetensors"


def hub_error(cls: type[BaseException], message: str) -> BaseException:
    # The HTTP errors want a live response object; the type and message are what is classified.
    error = cls.__new__(cls)
    error.args = (message,)
    return error


def answering(monkeypatch, name: str, error: BaseException) -> list[bool]:
    """Replace the hub function `name`: online calls raise `error`, cache-only calls use the real one."""
    real = getattr(huggingface_hub, name)
    calls: list[bool] = []

    def fake(**kwargs):
        calls.append(bool(kwargs.get("local_files_only")))
        if not kwargs.get("local_files_only"):
            raise error
        return real(**kwargs)

    monkeypatch.setattr(huggingface_hub, name, fake)
    return calls


def test_gated_repository_says_to_accept_the_licence_and_log_in(hub_cache, monkeypatch):
    calls = answering(monkeypatch, "hf_hub_download", hub_error(hub_errors.GatedRepoError, "403 gated"))
    with pytest.raises(HfPathError) as info:
        resolve_hf_file("hf://google/gemma-3-12b-it/config.json", cache_dir=hub_cache, offline=False)
    message = str(info.value)
    assert "gated repository" in message and "https://huggingface.co/google/gemma-3-12b-it" in message
    assert "hf auth login" in message
    assert calls == [False], "a gated answer is definitive: the cache is not tried"


def test_missing_repository_file_and_revision_are_named(hub_cache, monkeypatch):
    cases = [
        (hub_errors.RepositoryNotFoundError, "hf://nobody/nothing/x.safetensors", "no repository 'nobody/nothing'"),
        (hub_errors.RemoteEntryNotFoundError, "hf://Lightricks/LTX-2/gone.safetensors", "no file 'gone.safetensors'"),
        (hub_errors.RevisionNotFoundError, "hf://Lightricks/LTX-2@v9/x.safetensors", "no revision 'v9'"),
    ]
    for cls, path, fragment in cases:
        with monkeypatch.context() as patch:
            calls = answering(patch, "hf_hub_download", hub_error(cls, "404"))
            with pytest.raises(HfPathError, match="not found on the Hugging Face Hub") as info:
                resolve_hf_file(path, cache_dir=hub_cache, offline=False)
        assert fragment in str(info.value), (cls.__name__, str(info.value))
        assert calls == [False], f"{cls.__name__} must not fall back to the cache"


def test_disk_full_while_downloading_names_the_cache_and_does_not_retry(hub_cache, monkeypatch):
    calls = answering(monkeypatch, "snapshot_download", OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(HfPathError) as info:
        resolve_hf_folder("hf://google/gemma-3-12b-it", cache_dir=hub_cache, offline=False)
    message = str(info.value)
    assert "no space left" in message and str(hub_cache) in message and "HF_HUB_CACHE" in message
    assert calls == [False]


def test_no_network_falls_back_to_the_cache(hub_cache, monkeypatch, caplog):
    # What huggingface_hub raises when it cannot connect, and a plain socket-level failure.
    for error in (
        hub_error(hub_errors.LocalEntryNotFoundError, "cannot reach the Hub and not cached"),
        ConnectionError("Network is unreachable"),
        TimeoutError("timed out"),
    ):
        with monkeypatch.context() as patch:
            calls = answering(patch, "hf_hub_download", error)
            path = resolve_hf_file(CACHED_FILE, cache_dir=hub_cache, offline=False)
        assert path.read_bytes() == b"ckpt"
        assert calls == [False, True], type(error).__name__
    assert "trying the local cache" in caplog.text


def test_no_network_and_not_cached_says_both(hub_cache, monkeypatch):
    answering(monkeypatch, "hf_hub_download", ConnectionError("Network is unreachable"))
    with pytest.raises(HfPathError, match=r"could not be reached.*not in the cache.*network connection"):
        resolve_hf_file("hf://Lightricks/LTX-2/absent.safetensors", cache_dir=hub_cache, offline=False)
