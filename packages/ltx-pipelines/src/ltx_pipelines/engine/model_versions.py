"""The released model versions a pipeline runs on, as its command line declares them (`ModelFlags.model_versions`)
and README's pipeline table names them: "2" (LTX-2 19B), "2.3" (LTX-2.3 22B), "2.5" (LTX-2.5, one file per
component).

A checkpoint says which one it is in its `model_version` metadata; LTX-2 files carry none.
"""

from __future__ import annotations

RELEASED_MODEL_VERSIONS: tuple[str, ...] = ("2", "2.3", "2.5")

# From which declared `model_version` on a file counts as each release. Files from 2.4 on already carry LTX-2.5's
# differences (the image CRF of 18, `engine/defaults.py`), so the 2.4 pre-release files count as 2.5.
_RELEASE_SINCE: tuple[tuple[tuple[int, ...], str], ...] = (((2, 4), "2.5"), ((2, 3), "2.3"))


def released_model_version(model_version: tuple[int, ...]) -> str:
    """The release (one of `RELEASED_MODEL_VERSIONS`) a checkpoint's parsed `model_version` belongs to; none
    declared (`()`) is LTX-2."""
    for since, release in _RELEASE_SINCE:
        if model_version >= since:
            return release
    return "2"


def model_version_problem(model_version: tuple[int, ...], accepted: tuple[str, ...]) -> str | None:
    """Why a checkpoint of `model_version` is not one of the `accepted` releases, or None."""
    release = released_model_version(model_version)
    if release in accepted:
        return None
    declared = ".".join(map(str, model_version)) if model_version else "none"
    names = ", ".join(f"LTX-{v}" for v in accepted)
    return f"an LTX-{release} model (model_version {declared}); this pipeline runs on {names} files only"
