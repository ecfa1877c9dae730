"""The root conftest keeps the golden fixture folder to parity tests: a test not marked `golden` that
asks for a golden fixture, directly or through another fixture, fails before the fixture is set up,
so `pytest -m "not golden"` runs without ever reading (or needing) the golden folder.

An inner suite runs under a copy of the root conftest, in a subprocess (the root conftest is already
imported in this process under the same module name).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parents[4] / "conftest.py"
REFUSED = "uses the golden fixtures but is not marked golden"

INNER_SUITE = """
import pytest


@pytest.fixture
def helper_of_a_helper(golden_checkpoint):
    return golden_checkpoint


@pytest.fixture
def model_file(helper_of_a_helper):
    return helper_of_a_helper


def test_behaviour_asking_for_the_folder(golden_dir):
    pass


def test_behaviour_reaching_the_folder_through_fixtures(model_file):
    pass


def test_behaviour_on_in_process_models(tmp_path):
    assert tmp_path.is_dir()


@pytest.mark.golden
def test_parity(golden_dir, golden_checkpoint):
    assert (golden_dir / "manifest.json").is_file() and golden_checkpoint.parent == golden_dir
"""


@pytest.fixture
def inner_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    assert ROOT_CONFTEST.is_file(), ROOT_CONFTEST
    pytester.makeconftest(ROOT_CONFTEST.read_text())
    pytester.makeini('[pytest]\nmarkers =\n    golden: parity test\naddopts = -p no:randomly -p no:cacheprovider\n')
    pytester.makepyfile(test_inner=INNER_SUITE)
    return pytester


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """test name -> 'passed' / 'error' / 'failed', from the verbose report lines."""
    lines = (re.match(r"test_inner\.py::(\w+) (PASSED|ERROR|FAILED|SKIPPED)\b", line) for line in result.outlines)
    return {m[1]: m[2].lower() for m in lines if m}


def test_only_golden_tests_reach_the_fixture_folder(inner_suite, tmp_path, monkeypatch):
    folder = tmp_path / "fixtures"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}")
    monkeypatch.setenv("LTX_GOLDEN_DIR", str(folder))
    result = inner_suite.runpytest_subprocess("-v")
    assert _outcomes(result) == {
        "test_behaviour_asking_for_the_folder": "error",
        "test_behaviour_reaching_the_folder_through_fixtures": "error",
        "test_behaviour_on_in_process_models": "passed",
        "test_parity": "passed",
    }, result.stdout.str()
    assert result.stdout.str().count(REFUSED) >= 2


def test_behaviour_tests_are_refused_before_the_folder_is_looked_up(inner_suite, monkeypatch):
    # With no fixture folder at all, the refusal (not the missing folder) is what a misplaced test hits.
    monkeypatch.setenv("LTX_GOLDEN_DIR", "/nonexistent/golden")
    result = inner_suite.runpytest_subprocess("-v", "-m", "not golden")
    assert _outcomes(result) == {
        "test_behaviour_asking_for_the_folder": "error",
        "test_behaviour_reaching_the_folder_through_fixtures": "error",
        "test_behaviour_on_in_process_models": "passed",
    }, result.stdout.str()
    output = result.stdout.str()
    assert output.count(REFUSED) >= 2
    assert "has no manifest.json" not in output, "the golden folder was looked up for a behaviour test"
