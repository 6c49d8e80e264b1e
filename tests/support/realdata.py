"""Where the real agent data lives, for the tests that read it.

The data is third-party and stays outside the repository: ``$GUARDTRACE_REALDATA``, else
``shared/realdata`` beside the checkout (``../shared/realdata``), else the workplace's
``/work/shared/realdata`` (where a clean clone elsewhere on this machine finds it). A test
that needs it fails, naming the path, when it is missing: a skip would hide that the
detectors went unmeasured. ``benchmarks/_common.realdata_dir`` looks in the same places.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


_WORKPLACE_REALDATA = Path("/work/shared/realdata")


def realdata_dir() -> Path:
    """``$GUARDTRACE_REALDATA``, else ``<repo>/../shared/realdata`` if it exists, else
    ``/work/shared/realdata``."""
    if os.environ.get("GUARDTRACE_REALDATA"):
        return Path(os.environ["GUARDTRACE_REALDATA"])
    beside = REPO.parent / "shared" / "realdata"
    return beside if beside.is_dir() or not _WORKPLACE_REALDATA.is_dir() else _WORKPLACE_REALDATA


def data_file(name: str) -> Path:
    """The real-data file ``name``; fails the test, naming the path, when it is missing."""
    path = realdata_dir() / name
    if not path.is_file():
        pytest.fail(f"real agent data missing: {path} (set GUARDTRACE_REALDATA to the folder "
                    f"holding {name})")
    return path


@functools.cache
def conversations() -> dict[str, dict[str, Any]]:
    """The dev conversations by id."""
    with data_file("conversations.jsonl").open(encoding="utf-8") as lines:
        return {c["id"]: c for c in map(json.loads, lines)}
