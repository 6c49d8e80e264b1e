"""The distribution installs one namespace, guardtrace.*, and ships its SQL and CLI."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_installs_only_the_guardtrace_namespace(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path),
         str(ROOT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    wheel = next(tmp_path.glob("guardtrace-*.whl"))
    files = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in files}
    assert top_level == {"guardtrace", next(t for t in top_level if t.endswith(".dist-info"))}
    for module in ("collectors", "consumers", "dashboard", "schemas"):
        assert f"guardtrace/{module}/__init__.py" in files
    assert any(f.startswith("guardtrace/schemas/migrations/0001_") for f in files)
    entry_points = next(f for f in files if f.endswith("entry_points.txt"))
    assert "guardtrace = guardtrace.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
