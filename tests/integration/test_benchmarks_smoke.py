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


def test_hook_overhead_smoke_ends_with_its_json_line() -> None:
    # One round of fresh-interpreter imports (--quick does 7, four interpreters each):
    # every section still runs and reports, which is all this checks.
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "hook_overhead.py"), "--quick",
         "--calls", "400", "--guard-calls", "40", "--import-runs", "1"],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    record = json.loads(run.stdout.strip().splitlines()[-1])
    assert record["benchmark"] == "hook_overhead"
    names = {target["name"] for target in record["targets"]}
    assert "emit path median / bare OTel median" in names
    assert record["figures"]["emit"]["calls"] == 400
    assert all(isinstance(target["met"], bool) for target in record["targets"])


def run_without(module: str, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a benchmark script with ``module`` hidden, as on a machine without it."""
    path = REPO / "benchmarks" / script
    code = (f"import runpy, sys; sys.modules[{module!r}] = None; "
            f"sys.path.insert(0, {str(path.parent)!r}); "
            f"sys.argv = [{str(path)!r}, *{list(args)!r}]; "
            f"runpy.run_path({str(path)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


@pytest.mark.parametrize("script", ["pipeline_throughput.py", "payload_throughput.py"])
def test_profile_without_pyinstrument_is_refused_before_any_work(script: str) -> None:
    # pyinstrument comes with the bench extra, not the test extra; hide it either way.
    run = run_without("pyinstrument", script, "--profile", "profile.txt")
    assert run.returncode == 2, run.stderr[-2000:]
    assert "--profile needs pyinstrument" in run.stderr
    assert "pip install -e '.[bench]'" in run.stderr
    assert run.stdout == ""  # refused before the broker started or anything was emitted


def test_the_emit_baseline_without_its_exporter_is_refused_before_any_work() -> None:
    # The OTLP/HTTP span exporter comes with the bench extra (make bench installs it);
    # without it the emit phase used to fail only after guardtrace's side had run.
    run = run_without("opentelemetry.exporter.otlp.proto.http", "pipeline_throughput.py",
                      "--emit-only", "--events", "100")
    assert run.returncode == 2, run.stderr[-2000:]
    assert "OTLP/HTTP baseline needs opentelemetry.exporter.otlp.proto.http" in run.stderr
    assert "--skip-otlp-http" in run.stderr and "pip install -e '.[bench]'" in run.stderr
    assert run.stdout == ""  # refused before the broker started or anything was emitted
