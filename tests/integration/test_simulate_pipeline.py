"""The traffic generator through the real pipeline: Tansu, the consumer, embedded ClickHouse.

What the simulator says it emitted must be exactly what lands: span events per name,
payloads, capped agent labels; and the command must end cleanly on SIGTERM and fail
clearly, without hanging, when Kafka is unreachable.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guardtrace import collectors
from guardtrace.schemas import names
from guardtrace.simulator import SimulationConfig, run_simulation
from guardtrace.simulator.agent import EXCHANGE_PAYLOAD_KIND, SPAN_REQUEST
from guardtrace.transport.broker import free_port

from .conftest import Pipeline, wait_for

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

CLI = [sys.executable, "-m", "guardtrace.cli", "simulate"]
RAW_SECRET = re.compile(r"sk-live-[A-Za-z0-9]{16,}|Bearer\s+[A-Za-z0-9]{10,}")


def landed_events(pipeline: Pipeline, prefix: str) -> dict[str, int]:
    return {str(name): int(count) for name, count in pipeline.rows(
        "SELECT name, count() FROM {db}.span_events FINAL "
        "WHERE startsWith(request_id, {p:String}) GROUP BY name", p=prefix)}


def landed_payloads(pipeline: Pipeline, prefix: str) -> int:
    return int(pipeline.scalar(
        "SELECT uniqExact(payload_id) FROM {db}.payloads FINAL "
        "WHERE startsWith(request_id, {p:String})", p=prefix))


def cli_env(pipeline: Pipeline | None = None, bootstrap: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if pipeline is not None:
        env.update(pipeline.topics.environment())
        bootstrap = pipeline.bootstrap
    assert bootstrap is not None
    env["GUARDTRACE_KAFKA_BOOTSTRAP"] = bootstrap
    return env


def summary_of(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.strip().splitlines()[-1])


def test_simulated_traffic_lands_exactly_as_summarised(pipeline: Pipeline) -> None:
    telemetry = collectors.configure(set_global=False, agent_label_cap=5,
                                     **pipeline.collector_settings())
    summary = run_simulation(SimulationConfig(requests=200, rate=None, seed=7),
                             flush=lambda: telemetry.force_flush(30))
    collectors.shutdown()  # the final metric export happens here
    assert summary.ok, summary
    assert summary.requests == 200
    assert set(summary.events) == {*names.GUARD_EVENTS, names.EVENT_EVALUATION_RESULT}

    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0
    prefix = summary.request_id_prefix
    assert landed_events(pipeline, prefix) == summary.events
    assert landed_payloads(pipeline, prefix) == summary.payloads
    assert pipeline.scalar("SELECT count() FROM {db}.spans FINAL WHERE name = {n:String} "
                           "AND startsWith(request_id, {p:String})",
                           n=SPAN_REQUEST, p=prefix) == 200

    # Each request's events share its root span's trace.
    roots = dict(pipeline.rows("SELECT request_id, trace_id FROM {db}.spans FINAL "
                               "WHERE name = {n:String} AND startsWith(request_id, {p:String})",
                               n=SPAN_REQUEST, p=prefix))
    event_traces = pipeline.rows("SELECT DISTINCT request_id, trace_id FROM {db}.span_events "
                                 "FINAL WHERE startsWith(request_id, {p:String})", p=prefix)
    assert event_traces and all(roots[rid] == tid for rid, tid in event_traces)

    # Payloads arrive redacted, within the sizes the issue asks for.
    bodies = pipeline.rows("SELECT kind, body, body_bytes, redactions FROM {db}.payloads FINAL "
                           "WHERE startsWith(request_id, {p:String})", p=prefix)
    assert not [b for _, b, _, _ in bodies if RAW_SECRET.search(b)]
    assert sum(r for *_, r in bodies) > 0
    exchange_sizes = [size for kind, _, size, _ in bodies if kind == EXCHANGE_PAYLOAD_KIND]
    assert len(exchange_sizes) == 200
    assert min(exchange_sizes) >= 1024 and max(size for *_, size, _ in bodies) <= 200 * 1024

    # The long tail of invented names overflows the cap of 5 into __other__.
    overflow = pipeline.scalar(
        "SELECT max(value) FROM {db}.metric_points FINAL WHERE metric_name = {m:String} "
        "AND agent = {a:String}", m=names.METRIC_HALLUCINATIONS, a=names.OVERFLOW_LABEL)
    assert overflow and overflow > 0


def test_cli_run_exits_0_with_a_summary_matching_the_store(pipeline: Pipeline) -> None:
    done = subprocess.run([*CLI, "--requests", "50", "--rate", "unlimited", "--seed", "3"],
                          env=cli_env(pipeline), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = summary_of(done.stdout)
    assert summary["requests"] == 50 and summary["dropped"] == {} and summary["flushed"]
    assert summary["seed"] == 3 and summary["stopped_by"] == "requests"
    assert summary["request_id_prefix"].startswith("sim-")

    pipeline.consume_until_idle()
    assert landed_events(pipeline, summary["request_id_prefix"]) == summary["events"]
    assert landed_payloads(pipeline, summary["request_id_prefix"]) == summary["payloads"]


def test_cli_without_a_limit_runs_until_sigterm_then_exits_0(pipeline: Pipeline,
                                                               tmp_path: Path) -> None:
    # How `guardtrace up --demo` runs it. -v lets the hooks' log lines show that requests
    # are flowing, so the test signals a process that is mid-run, not starting up.
    err = tmp_path / "stderr.log"
    with err.open("w") as err_file:
        process = subprocess.Popen([sys.executable, "-m", "guardtrace.cli", "-v", "simulate",
                                    "--requests", "0", "--rate", "5"],
                                   env=cli_env(pipeline), stdout=subprocess.PIPE,
                                   stderr=err_file, text=True)
        try:
            wait_for(lambda: '"request_id": "sim-' in err.read_text(), timeout_s=60,
                     message="the simulator to send requests")
            process.send_signal(signal.SIGTERM)
            stdout, _ = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0, err.read_text()[-3000:]
    summary = summary_of(stdout)
    assert summary["stopped_by"] == "signal" and summary["requests"] > 0
    assert summary["dropped"] == {} and summary["flushed"]


def test_cli_exits_1_promptly_when_kafka_is_unreachable() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    done = subprocess.run([*CLI, "--requests", "20", "--rate", "unlimited"],
                          env=cli_env(bootstrap=bootstrap), capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 1
    assert "telemetry was dropped or not flushed" in done.stderr
    assert f"is Kafka reachable at {bootstrap}?" in done.stderr
    summary = summary_of(done.stdout)  # printed before the error
    assert summary["requests"] == 20 and summary["dropped"]
