"""What every test gets: a marker from the folder it lives in, and a hook-error check.

Markers come from folders, not from hand-applied decorators that drift: a test under
``tests/integration/`` is ``integration``, and so on (``pytest -m unit`` runs the fast
ones). ``--strict-markers`` (pyproject.toml) refuses any marker not registered there.

The hooks never raise into an agent: an internal error is swallowed and counted in
``guardtrace.hook_errors``. That makes a broken hook easy to miss in a test that only
checks the verdict, so every test fails on a hook error it did not declare with
``@pytest.mark.expect_hook_errors`` (the tests that inject failures on purpose).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guardtrace.collectors.emit.internal import internal_totals
from guardtrace.schemas import names

TESTS = Path(__file__).resolve().parent
FOLDER_MARKERS = ("unit", "integration", "reliability")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.path)).resolve().relative_to(TESTS).parts[0]
        if folder in FOLDER_MARKERS:
            item.add_marker(folder)


def _hook_errors() -> int:
    return sum(internal_totals(names.METRIC_HOOK_ERRORS).values())


@pytest.fixture(autouse=True)
def no_unexpected_hook_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    before = _hook_errors()
    yield
    if request.node.get_closest_marker("expect_hook_errors"):
        return
    swallowed = _hook_errors() - before
    assert swallowed == 0, (
        f"{swallowed} guardtrace hook error(s) were swallowed during this test "
        f"({internal_totals(names.METRIC_HOOK_ERRORS)}); the log line "
        "'guardtrace hook ... failed and was skipped' names the hook. Mark the test "
        "@pytest.mark.expect_hook_errors if it injects the failure on purpose.")
