"""The benchmark scripts run and end with one JSON line (the figures are not checked here).

Benchmarks are run by `make bench`, never by the test suite; this only keeps the
cheapest of them, hook_overhead at a tiny size, from rotting.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_hook_overhead_smoke_ends_with_its_json_line() -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "hook_overhead.py"), "--quick",
         "--calls", "400", "--guard-calls", "40"],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    record = json.loads(run.stdout.strip().splitlines()[-1])
    assert record["benchmark"] == "hook_overhead"
    names = {target["name"] for target in record["targets"]}
    assert "emit path median / bare OTel median" in names
    assert record["figures"]["emit"]["calls"] == 400
    assert all(isinstance(target["met"], bool) for target in record["targets"])
