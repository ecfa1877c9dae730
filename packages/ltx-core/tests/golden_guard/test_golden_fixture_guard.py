"""The root conftest keeps the golden fixture folder to parity tests: a test not marked `golden` that
asks for a golden fixture, directly or through another fixture, fails before the fixture is set up,
so `pytest -m "not golden"` runs without ever reading (or needing) the golden folder.

An inner suite runs under a copy of the root conftest, in a subprocess (the root conftest is already
imported in this process under the same module name), with no fixture folder at all.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

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


def _setup_errors(report: Path) -> dict[str, str]:
    """test name -> its setup error message ('' when it passed), from the inner run's JUnit report."""
    errors = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        problem = case.find("error")
        if problem is None:
            problem = case.find("failure")
        errors[case.get("name")] = "" if problem is None else problem.get("message", "") + (problem.text or "")
    return errors


def test_only_golden_tests_reach_the_fixture_folder(pytester: pytest.Pytester, monkeypatch):
    assert ROOT_CONFTEST.is_file(), ROOT_CONFTEST
    pytester.makeconftest(ROOT_CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    golden: parity test\naddopts = -p no:randomly -p no:cacheprovider\n")
    pytester.makepyfile(test_inner=INNER_SUITE)
    # No fixture folder at all: a test that looks it up fails saying so, which tells the two refusals apart.
    monkeypatch.setenv("LTX_GOLDEN_DIR", "/nonexistent/golden")
    report = pytester.path / "report.xml"
    pytester.runpytest_subprocess(f"--junitxml={report}")
    errors = _setup_errors(report)
    assert set(errors) == {
        "test_behaviour_asking_for_the_folder",
        "test_behaviour_reaching_the_folder_through_fixtures",
        "test_behaviour_on_in_process_models",
        "test_parity",
    }, errors
    # Behaviour tests that ask for the folder are refused before it is looked up ...
    for name in ("test_behaviour_asking_for_the_folder", "test_behaviour_reaching_the_folder_through_fixtures"):
        assert REFUSED in errors[name] and "has no manifest.json" not in errors[name], errors[name]
    # ... one that does not runs, and the parity test is let through to the lookup (which fails: no folder).
    assert errors["test_behaviour_on_in_process_models"] == ""
    assert "has no manifest.json" in errors["test_parity"] and REFUSED not in errors["test_parity"]
