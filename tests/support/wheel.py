"""The wheel built from this checkout, once per test session.

Both the packaging unit test (what the wheel contains) and the install tests (what
installing it gives) need it, and ``pip wheel`` takes ~7 s here (an isolated build
environment each time). Each suite imports the fixture, so pytest registers it once per
importing module; the build itself is cached for the process, as the session services
in :mod:`tests.support.services` are.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["guardtrace_wheel_fixture"]

ROOT = Path(__file__).resolve().parents[2]
_built: dict[str, Path] = {}


@pytest.fixture(scope="session", name="guardtrace_wheel")
def guardtrace_wheel_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``guardtrace-*.whl`` that ``pip wheel --no-deps`` builds from the checkout."""
    if "wheel" not in _built:
        out = tmp_path_factory.mktemp("wheel")
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                               "-w", str(out), str(ROOT)], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        _built["wheel"] = next(out.glob("guardtrace-*.whl"))
    return _built["wheel"]
