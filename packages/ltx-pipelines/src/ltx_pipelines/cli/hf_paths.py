"""`hf://` model paths: files and folders on the Hugging Face Hub, fetched through its local cache.

    hf://<org>/<repo>/<path/in/repo>          one file (checkpoints, upsamplers, LoRAs)
    hf://<org>/<repo>[/<subfolder>]           a folder (the Gemma text encoder)
    hf://<org>/<repo>@<revision>/...          a branch, tag or commit (URL-quote a '/' in it)
    hf://datasets/<org>/<repo>/...            dataset (or `spaces/`) repositories

Downloads land in the hub cache (HF_HOME / HF_HUB_CACHE, or `cache_dir`). With HF_HUB_OFFLINE
set, or `offline=True`, only the cache is used; when the Hub cannot be reached the cached copy
is used as well, and only a file absent from the cache is an error.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from ltx_core.write_errors import is_disk_full

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

HF_SCHEME = "hf://"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_REPO_TYPES = {"datasets": "dataset", "spaces": "space", "models": "model"}
_TRUE = {"1", "on", "yes", "true"}

# Weights in formats the loaders never read; skipping them keeps a folder download to what is used.
DEFAULT_FOLDER_IGNORE = ("*.bin", "*.pt", "*.pth", "*.gguf", "*.h5", "*.msgpack", "*.onnx", "*.ckpt", "original/*")


class HfPathError(ValueError):
    """An hf:// path that is malformed or cannot be resolved (not on the Hub and not in the cache)."""


@dataclass(frozen=True)
class HfPath:
    repo_id: str
    path_in_repo: str | None = None
    revision: str | None = None
    repo_type: str = "model"

    def __str__(self) -> str:
        prefix = {"model": ""}.get(self.repo_type, f"{self.repo_type}s/")
        rev = f"@{quote(self.revision, safe='')}" if self.revision else ""
        tail = f"/{self.path_in_repo}" if self.path_in_repo else ""
        return f"{HF_SCHEME}{prefix}{self.repo_id}{rev}{tail}"


def is_hf_path(value: str | os.PathLike[str]) -> bool:
    return isinstance(value, str) and value.startswith(HF_SCHEME)


def parse_hf_path(value: str) -> HfPath:
    """'hf://org/repo@rev/dir/file' -> HfPath('org/repo', 'dir/file', 'rev'); raises HfPathError naming the form."""
    form = "expected hf://<org>/<repo>[@<revision>][/<path in repo>]"
    if not is_hf_path(value):
        raise HfPathError(f"{value!r} is not an hf:// path; {form}")
    parts = [p for p in value[len(HF_SCHEME) :].split("/")]
    repo_type = "model"
    if parts and parts[0] in _REPO_TYPES:
        repo_type = _REPO_TYPES[parts.pop(0)]
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise HfPathError(f"{value!r} names no repository; {form}")
    org, name = parts[0], parts[1]
    revision = None
    if "@" in name:
        name, revision = name.split("@", 1)
        revision = unquote(revision)
        if not revision:
            raise HfPathError(f"{value!r} has an empty revision after '@'; {form}")
    if not _NAME.match(org) or not _NAME.match(name):
        raise HfPathError(f"{value!r}: {org!r}/{name!r} is not a valid repository id; {form}")
    rest = parts[2:]
    if rest and rest[-1] == "":
        rest = rest[:-1]  # a trailing slash names a folder
    if any(p in ("", ".", "..") for p in rest):
        raise HfPathError(f"{value!r} has an empty, '.' or '..' path component; {form}")
    return HfPath(f"{org}/{name}", "/".join(rest) or None, revision, repo_type)


def hub_offline() -> bool:
    """HF_HUB_OFFLINE from the environment now (the hub library reads it once, at import)."""
    from huggingface_hub import constants as hub_constants

    env = os.environ.get("HF_HUB_OFFLINE")
    if env is not None:
        return env.strip().lower() in _TRUE
    return bool(getattr(hub_constants, "HF_HUB_OFFLINE", False))


def _hub_error(cls_name: str) -> type[BaseException]:
    """An error class of huggingface_hub by name; a never-raised placeholder where this version lacks it."""
    from huggingface_hub import errors as hub_errors

    return getattr(hub_errors, cls_name, None) or type(f"_Absent{cls_name}", (Exception,), {})


def _definitive_hub_error(error: BaseException, hf: HfPath, cache_dir: str | Path | None) -> HfPathError | None:
    """An answer the cache cannot improve on, worded with what to do; None for errors that may be the
    network's (the cache is tried then)."""
    from huggingface_hub import constants as hub_constants

    repo_url = f"https://huggingface.co/{'' if hf.repo_type == 'model' else hf.repo_type + 's/'}{hf.repo_id}"
    if isinstance(error, _hub_error("GatedRepoError")):
        return HfPathError(
            f"{hf}: {hf.repo_id} is a gated repository; accept its licence at {repo_url} (logged in), then log in "
            "here with `hf auth login` (or set HF_TOKEN)"
        )
    if isinstance(error, _hub_error("RepositoryNotFoundError")):
        return HfPathError(
            f"{hf} not found on the Hugging Face Hub: there is no repository {hf.repo_id!r} (a private one needs "
            "`hf auth login`); check the <org>/<repo> part"
        )
    if isinstance(error, _hub_error("RevisionNotFoundError")):
        return HfPathError(f"{hf} not found on the Hugging Face Hub: {hf.repo_id} has no revision {hf.revision!r}")
    if isinstance(error, _hub_error("RemoteEntryNotFoundError")):
        return HfPathError(
            f"{hf} not found on the Hugging Face Hub: {hf.repo_id} has no file {hf.path_in_repo!r}; "
            f"see the file list at {repo_url}/tree/{hf.revision or 'main'}"
        )
    if isinstance(error, _hub_error("HFValidationError")):
        return HfPathError(f"{hf} is not a valid Hugging Face path: {error}")
    if is_disk_full(error):
        cache = cache_dir or hub_constants.HF_HUB_CACHE
        return HfPathError(
            f"{hf}: no space left on the disk holding the Hugging Face cache ({cache}); free some space or point "
            "HF_HUB_CACHE (or HF_HOME) at a disk with room"
        )
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status == 401:
        return HfPathError(f"{hf}: the Hub refused the token (HTTP 401); log in again with `hf auth login`")
    return None


def _call_hub(fn: Any, hf: HfPath, *, offline: bool | None, cache_dir: str | Path | None, **kwargs: Any) -> str:
    """Call a hub download function online, falling back to the cache when the Hub cannot be reached."""
    if offline is None:
        offline = hub_offline()
    if offline:
        try:
            return fn(local_files_only=True, cache_dir=cache_dir, **kwargs)
        except Exception as e:
            raise HfPathError(f"{hf} is not in the Hugging Face cache and offline mode is on ({e})") from e
    try:
        return fn(cache_dir=cache_dir, **kwargs)
    except Exception as online_error:
        definitive = _definitive_hub_error(online_error, hf, cache_dir)
        if definitive is not None:
            raise definitive from online_error
        logger.warning("could not reach the Hugging Face Hub for %s (%s); trying the local cache", hf, online_error)
        try:
            return fn(local_files_only=True, cache_dir=cache_dir, **kwargs)
        except Exception as cache_error:
            raise HfPathError(
                f"{hf}: the Hub could not be reached ({online_error}) and the file is not in the cache "
                f"({cache_error}); check the network connection (or a proxy), then try again"
            ) from online_error


def resolve_hf_file(
    path: str | HfPath,
    *,
    cache_dir: str | Path | None = None,
    offline: bool | None = None,
    token: str | bool | None = None,
) -> Path:
    """Local path of the file an hf:// path names, downloading it into the cache if needed."""
    import huggingface_hub

    hf = parse_hf_path(path) if isinstance(path, str) else path
    if not hf.path_in_repo:
        raise HfPathError(f"{str(hf)!r} names a repository, not a file; expected hf://<org>/<repo>/<file>")
    local = _call_hub(
        huggingface_hub.hf_hub_download,
        hf,
        offline=offline,
        repo_id=hf.repo_id,
        filename=hf.path_in_repo,
        revision=hf.revision,
        repo_type=hf.repo_type,
        cache_dir=cache_dir,
        token=token,
    )
    return Path(local)


def resolve_hf_folder(
    path: str | HfPath,
    *,
    cache_dir: str | Path | None = None,
    offline: bool | None = None,
    token: str | bool | None = None,
    ignore_patterns: tuple[str, ...] = DEFAULT_FOLDER_IGNORE,
) -> Path:
    """Local folder for hf://<org>/<repo>[/<subfolder>] (a snapshot in the cache, downloaded if needed)."""
    import huggingface_hub

    hf = parse_hf_path(path) if isinstance(path, str) else path
    allow = [f"{hf.path_in_repo}/*"] if hf.path_in_repo else None
    snapshot = _call_hub(
        huggingface_hub.snapshot_download,
        hf,
        offline=offline,
        repo_id=hf.repo_id,
        revision=hf.revision,
        repo_type=hf.repo_type,
        cache_dir=cache_dir,
        token=token,
        allow_patterns=allow,
        ignore_patterns=list(ignore_patterns) or None,
    )
    folder = Path(snapshot) / hf.path_in_repo if hf.path_in_repo else Path(snapshot)
    if not folder.is_dir():
        raise HfPathError(f"{str(hf)!r}: {hf.path_in_repo!r} is not a folder of {hf.repo_id}")
    return folder


def resolve_model_path(
    value: str | os.PathLike[str],
    *,
    folder: bool = False,
    cache_dir: str | Path | None = None,
    offline: bool | None = None,
) -> Path:
    """A local path as given (user-expanded, absolute), or the cached copy of an hf:// file or folder."""
    if is_hf_path(value):
        resolve = resolve_hf_folder if folder else resolve_hf_file
        return resolve(str(value), cache_dir=cache_dir, offline=offline)
    return Path(value).expanduser().absolute()


def cached_hf_file(path: str | HfPath, *, cache_dir: str | Path | None = None) -> Path | None:
    """The cached copy of an hf:// file without any network access, or None when it is not cached."""
    import huggingface_hub

    hf = parse_hf_path(path) if isinstance(path, str) else path
    if not hf.path_in_repo:
        return None
    found = huggingface_hub.try_to_load_from_cache(
        hf.repo_id, hf.path_in_repo, cache_dir=cache_dir, revision=hf.revision, repo_type=hf.repo_type
    )
    return Path(found) if isinstance(found, str) else None
