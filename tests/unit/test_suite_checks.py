"""The suite's own checks (tests/conftest.py) do what they promise, run on throwaway tests."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).resolve().parents[1] / "conftest.py").read_text()

BROKEN_HOOK = """
import pytest
from guardtrace.collectors.emit.telemetry import guarded

@guarded(lambda: "fallback")
def broken_hook():
    raise RuntimeError("internal bug")

def test_unmarked():
    assert broken_hook() == "fallback"

@pytest.mark.expect_hook_errors
def test_marked():
    assert broken_hook() == "fallback"

def test_quiet():
    assert True
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    # No plugin auto-loading, as in pyproject.toml: each run here is a fresh pytest
    # process, and the installed SDKs' plugins cost it ~4 s of start-up.
    pytester.makeini("""
[pytest]
addopts = --strict-markers -p no:cacheprovider --disable-plugin-autoload
markers =
    unit: u
    integration: i
    reliability: r
    expect_hook_errors: e
""")
    return pytester


def test_a_swallowed_hook_error_fails_the_test_unless_declared(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_hooks=BROKEN_HOOK)
    result = suite.runpytest_subprocess()
    # test_unmarked itself passes; the check fails it at teardown.
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_unmarked*",
                                 "*1 guardtrace hook error(s) were swallowed*"])


def test_an_unregistered_marker_is_refused(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_typo="""
import pytest

@pytest.mark.integraton
def test_typo():
    pass
""")
    result = suite.runpytest_subprocess()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'integraton' not found in `markers` configuration option*"])


def test_markers_come_from_the_folder(suite: pytest.Pytester) -> None:
    suite.mkpydir("unit")
    suite.mkpydir("integration")
    (suite.path / "unit" / "test_fast.py").write_text("def test_fast():\n    pass\n")
    (suite.path / "integration" / "test_slow.py").write_text("def test_slow():\n    pass\n")
    result = suite.runpytest_subprocess("-m", "unit", "-v")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*unit/test_fast.py::test_fast PASSED*"])
