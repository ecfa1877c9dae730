"""Shared pytest fixtures: the golden parity fixtures beside the repository, and the guard that keeps
them to parity tests (tests marked `golden`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

# `pytester` runs small inner suites under this conftest, to test the golden-marker guard below.
pytest_plugins = ("pytester",)

_REPO_ROOT = Path(__file__).resolve().parent


VENDORED_GOLDEN_DIR = _REPO_ROOT / "tests" / "golden"


def golden_dir_is_vendored(directory: Path) -> bool:
    """Whether `directory` is the vendored set, which holds every case: nothing in it may be missing."""
    return directory.resolve() == VENDORED_GOLDEN_DIR.resolve()


def lacking_in(directory: Path, what: str) -> None:
    """A fixture set lacks `what` (a file, a tensor, a case): a failure for the vendored set, which is
    complete, else a skip naming what is missing (another set of the same schema may omit optional cases)."""
    message = f"{what} is not in the golden set {directory}"
    if golden_dir_is_vendored(directory):
        pytest.fail(f"{message}: the vendored set must hold every case", pytrace=False)
    pytest.skip(message)


def find_golden_dir() -> Path:
    """`LTX_GOLDEN_DIR` when set (another fixture set of the same schema), else the vendored set."""
    env = os.environ.get("LTX_GOLDEN_DIR")
    return Path(env) if env else VENDORED_GOLDEN_DIR


@dataclass(frozen=True)
class GoldenFixture:
    """One fixture file: its tensors, `params`, `roles` and description, read from the file itself."""

    path: Path
    tensors: dict[str, torch.Tensor]
    params: dict[str, Any]
    roles: dict[str, str]
    description: str

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.tensors[name]

    def __contains__(self, name: str) -> bool:
        return name in self.tensors


def load_golden_fixture(path: Path) -> GoldenFixture:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is not a mapping
    return GoldenFixture(
        path=path,
        tensors=tensors,
        params=json.loads(meta.get("params", "{}")),
        roles=json.loads(meta.get("roles", "{}")),
        description=meta.get("description", ""),
    )


def assert_close_to_golden(
    got: torch.Tensor, want: torch.Tensor, *, atol: float = 1e-4, rtol: float = 1e-4, name: str = ""
) -> None:
    """Elementwise |got - want| <= atol + rtol * |want| (the golden README's acceptance rule)."""
    assert tuple(got.shape) == tuple(want.shape), f"{name}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    got64 = got.detach().to(torch.float64).cpu()
    want64 = want.detach().to(torch.float64).cpu()
    err = (got64 - want64).abs()
    bound = atol + rtol * want64.abs()
    worst = float((err - bound).max()) if err.numel() else 0.0
    assert worst <= 0, f"{name}: max |diff| {float(err.max()):.3e} exceeds atol {atol} + rtol {rtol}*|want|"


# Every golden fixture reaches the folder through `golden_dir`, so it stands for all of them.
GOLDEN_ROOT_FIXTURE = "golden_dir"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuse, before any fixture is set up, a test that needs the golden folder but is not marked `golden`.

    `item.fixturenames` is the closure of everything the test requests, fixtures of fixtures included,
    so a behaviour test cannot reach the golden files through a helper fixture either; it then fails
    here, in every run, with or without a fixture folder. Hence `pytest -m "not golden"` never touches
    the golden folder, and `LTX_GOLDEN_DIR=/nonexistent pytest -m "not golden"` passes.
    """
    if GOLDEN_ROOT_FIXTURE in getattr(item, "fixturenames", ()) and item.get_closest_marker("golden") is None:
        pytest.fail(
            f"{item.nodeid} uses the golden fixtures but is not marked golden: a behaviour test builds its "
            "tiny models in-process; only a parity test (@pytest.mark.golden) reads the golden folder",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    d = find_golden_dir()
    if not (d / "manifest.json").is_file():
        # A wrong LTX_GOLDEN_DIR must fail loudly, not turn every parity test into a skip.
        pytest.fail(f"golden fixture folder {d} has no manifest.json (LTX_GOLDEN_DIR or tests/golden)", pytrace=False)
    return d


@pytest.fixture(scope="session")
def golden_manifest(golden_dir: Path) -> dict[str, Any]:
    return json.loads((golden_dir / "manifest.json").read_text())


@pytest.fixture(scope="session")
def golden_checkpoint(golden_dir: Path) -> Path:
    return golden_dir / "checkpoint.safetensors"


@pytest.fixture(scope="session")
def golden_fixture(golden_dir: Path) -> Callable[[str], GoldenFixture]:
    """`golden_fixture("fx_transformer")` -> GoldenFixture (cached per session)."""
    cache: dict[str, GoldenFixture] = {}

    def get(stem: str) -> GoldenFixture:
        if stem not in cache:
            path = golden_dir / f"{stem}.safetensors"
            if not path.is_file():
                lacking_in(golden_dir, f"golden fixture {path.name}")
            cache[stem] = load_golden_fixture(path)
        return cache[stem]

    return get


@pytest.fixture(scope="session")
def golden_lacks(golden_dir: Path) -> Callable[[str], None]:
    """`golden_lacks("fx_x: the 'lora' run")`: fail on the vendored set, else skip naming what is missing."""

    def lacks(what: str) -> None:
        lacking_in(golden_dir, what)

    return lacks


@pytest.fixture(scope="session")
def assert_golden_close() -> Callable[..., None]:
    """The acceptance check as a fixture, since test modules cannot import conftest."""
    return assert_close_to_golden
