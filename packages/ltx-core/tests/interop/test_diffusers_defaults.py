"""A config.json key diffusers' classes do not find means their `__init__` default; `DIFFUSERS_DEFAULTS` must
hold exactly those defaults (diffusers is a test-only dependency; the check skips without it)."""

from __future__ import annotations

import inspect

import pytest

from ltx_core.loader.diffusers_config import DIFFUSERS_DEFAULTS

diffusers = pytest.importorskip("diffusers", reason="diffusers (dev group) is not installed")
# Importing diffusers' LTX-2 classes takes several seconds on 2 cores; the checks themselves are instant.
pytestmark = pytest.mark.slow


def _class(name: str) -> type:
    from diffusers import pipelines

    return getattr(diffusers, name, None) or getattr(pipelines.ltx2, name)


@pytest.mark.parametrize("class_name", sorted(DIFFUSERS_DEFAULTS))
def test_defaults_are_diffusers_own(class_name):
    signature = inspect.signature(_class(class_name).__init__).parameters
    ours = DIFFUSERS_DEFAULTS[class_name]
    unknown = sorted(set(ours) - set(signature))
    assert not unknown, f"{class_name} has no parameters {unknown}"

    def plain(value):  # tuples and lists are the same JSON value
        return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value

    different = {k: (v, signature[k].default) for k, v in ours.items() if plain(v) != plain(signature[k].default)}
    assert not different, different
