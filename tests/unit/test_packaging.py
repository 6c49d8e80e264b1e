"""The distribution installs one namespace, guardtrace.*, and ships its SQL and CLI."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.support.wheel import guardtrace_wheel_fixture  # noqa: F401 - the guardtrace_wheel fixture


def test_wheel_installs_only_the_guardtrace_namespace(guardtrace_wheel: Path) -> None:
    wheel = guardtrace_wheel
    files = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in files}
    assert top_level == {"guardtrace", next(t for t in top_level if t.endswith(".dist-info"))}
    for module in ("collectors", "consumers", "dashboard", "schemas"):
        assert f"guardtrace/{module}/__init__.py" in files
    assert any(f.startswith("guardtrace/schemas/migrations/0001_") for f in files)
    entry_points = next(f for f in files if f.endswith("entry_points.txt"))
    assert "guardtrace = guardtrace.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
