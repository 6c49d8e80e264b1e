"""Where the real agent data lives, for the tests that read it.

The data is third-party and stays outside the repository: ``$GUARDTRACE_REALDATA``, else
``shared/realdata`` beside the checkout (``../shared/realdata``), else the workplace's
``/work/shared/realdata`` (where a clean clone elsewhere on this machine finds it). A test
that needs it fails, naming the path, when it is missing: a skip would hide that the
detectors went unmeasured. The rule lives in ``benchmarks/_common.realdata_dir``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _benchmarks_common() -> ModuleType:
    # benchmarks/ is not a package; its _common module holds the one rule for where the
    # real data is, for the benchmarks and these tests alike.
    spec = importlib.util.spec_from_file_location("guardtrace_benchmarks_common",
                                                  REPO / "benchmarks" / "_common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def realdata_dir() -> Path:
    """``$GUARDTRACE_REALDATA``, else ``<repo>/../shared/realdata`` if it exists, else
    ``/work/shared/realdata`` (``benchmarks/_common.realdata_dir``)."""
    return _benchmarks_common().realdata_dir()


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
