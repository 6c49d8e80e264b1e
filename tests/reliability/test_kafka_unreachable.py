"""Kafka unreachable from the agent: hooks keep their latency, memory stays bounded,
every drop is counted, and the drops become visible on the dashboard once Kafka is back.

The collector is configured against a port nothing listens on (the agent starts during
the outage). The real guard hooks run as an agent calls them: ``FabricationGuard.check``
of a reply claiming an action, ``generate_validated_plan`` with a scripted planner that
invents a tool once, and a ``VerificationLoop`` that nudges once. Their per-call latency
is compared with the same calls with telemetry unconfigured (medians and p99 with a
generous factor: these machines are noisy). Then 100 KB debug payloads are recorded far
beyond the byte-bounded payload queue (``GUARDTRACE_PAYLOAD_QUEUE_BYTES``): traced
memory stays within the bound, and each payload and span is counted as dropped exactly
once. Finally a broker starts on that port: the cumulative drop counters reach
ClickHouse and ``dashboard.queries.collector_drops`` (the health page) shows them.

Extends ``tests/integration/test_pipeline.py::test_kafka_down_hooks_return_promptly_and_
drops_are_counted`` (the bare emit path, at least one drop) to the real hooks.

Sizes: 300 hook turns and 400 payloads of 100 KB (40 MB against a 4 MiB queue) in CI;
3,000 turns and 4,000 payloads (400 MB) with ``GUARDTRACE_RELIABILITY_FULL=1``.
"""

from __future__ import annotations

import logging
import statistics
import time
import tracemalloc
from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace import collectors
from guardtrace.collectors.emit.telemetry import internal_totals
from guardtrace.schemas import names
from guardtrace.store.queries import collector_drops
from guardtrace.transport.broker import EmbeddedBroker, free_port
from guardtrace.transport.topics import ensure_topics
from tests.support.agent_thread import watch_kafka_waits

from .conftest import Pipeline, wait_for
from .scale import FULL, size

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

TURNS = size(ci=300, full=3_000)
PAYLOADS = size(ci=400, full=4_000)
PAYLOAD_BYTES = 100 * 1024
QUEUE_BYTES = 4 * 1024 * 1024
ALLOWED = "Agent: weather-tool-v2 (ID: weather-tool-v2)\n  - Capability: get_current_weather\n"
HOOKS = ("fabrication", "plan", "verification")


def run_turns(count: int, prefix: str) -> dict[str, list[float]]:
    """Call each guard hook ``count`` times as an agent would; seconds per call, by hook."""
    guard = collectors.FabricationGuard()
    latencies: dict[str, list[float]] = {hook: [] for hook in HOOKS}
    clock = time.perf_counter

    def fabrication(i: int) -> None:
        guard.check("I'm deploying the fix to production now.", [], channel=f"chan-{i % 10}",
                    request_id=f"{prefix}-reply-{i}", agent="stratam")

    def plan(i: int) -> None:
        plans = iter([[{"id": "s1", "tool": "time-tool-v1", "inputs": {"tz": "CST"}}],
                      [{"id": "s1", "tool": "weather-tool-v2", "inputs": {"city": "Chicago"}}]])
        collectors.generate_validated_plan("what is the time in CST",
                                           lambda attempt: next(plans), ALLOWED,
                                           request_id=f"{prefix}-plan-{i}")

    def verification(i: int) -> None:
        loop = collectors.VerificationLoop("Which month is spelled with an X?",
                                           request_id=f"{prefix}-verify-{i}", agent="aither")
        assert not loop.on_model_turn(wants_to_finish=True).allow_finish
        loop.on_tool_call("reason")
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
        loop.close()

    calls: dict[str, Callable[[int], None]] = {
        "fabrication": fabrication, "plan": plan, "verification": verification}
    for i in range(count):
        for hook, call in calls.items():
            started = clock()
            call(i)
            latencies[hook].append(clock() - started)
    return latencies


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


def dropped(metric: str) -> int:
    """Process-lifetime total of one of guardtrace's drop counters (all reasons)."""
    return sum(internal_totals(metric).values())


def drained(telemetry: collectors.Telemetry) -> bool:
    """Spans and payloads queued so far have been handled (here: dropped and counted).

    Not ``telemetry.force_flush``: that also exports metrics, whose drops would mix with
    the spans' in the process-local tally (kept per metric and reason, not signal).
    """
    assert telemetry.tracer_provider is not None
    return telemetry.tracer_provider.force_flush(30_000) and telemetry.payload_sink.force_flush(5)


@pytest.mark.timeout(900 if FULL else 180)
def test_kafka_unreachable_hooks_stay_fast_memory_stays_bounded_drops_are_counted_and_shown(
        pipeline: Pipeline, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from guardtrace.collectors.emit import internal
    # Warnings are rate-limited per process; an earlier test may have used this minute's.
    monkeypatch.setattr(internal, "_last_error_log", {})
    run_turns(20, "warmup")  # regexes compiled, caches filled: part of neither run
    baseline = run_turns(TURNS, "baseline")

    port = free_port()
    payload_drops_before = dropped(names.METRIC_PAYLOADS_DROPPED)
    span_drops_before = dropped(names.METRIC_EXPORT_DROPPED)
    telemetry = collectors.configure(
        set_global=False, kafka_bootstrap=f"127.0.0.1:{port}", exporter="kafka",
        spans_topic=pipeline.consumer_config.spans_topic,
        metrics_topic=pipeline.consumer_config.metrics_topic,
        payloads_topic=pipeline.consumer_config.payloads_topic,
        payload_queue_bytes=QUEUE_BYTES, metric_export_interval_ms=600_000)
    # Sees every span the hooks end, to account for each one as dropped.
    spans = InMemorySpanExporter()
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(spans))

    # What would make a hook wait for Kafka: asking for the producer (it waits up to
    # wait_s for a connection) or a send (max_block_ms) on the agent's own thread.
    waited_on = watch_kafka_waits(monkeypatch)

    with caplog.at_level(logging.WARNING, logger="guardtrace.collectors"):
        down = run_turns(TURNS, "down")
    assert waited_on == [], "a hook asked Kafka for something on the agent's thread"

    # Latency: what the hooks cost with Kafka down, next to no telemetry at all.
    report = {hook: {"baseline_median_ms": statistics.median(baseline[hook]) * 1e3,
                     "down_median_ms": statistics.median(down[hook]) * 1e3,
                     "baseline_p99_ms": p99(baseline[hook]) * 1e3,
                     "down_p99_ms": p99(down[hook]) * 1e3,
                     "down_max_ms": max(down[hook]) * 1e3} for hook in HOOKS}
    print("hook latency, unconfigured vs Kafka unreachable (ms):",
          {h: {k: round(v, 3) for k, v in r.items()} for h, r in report.items()})
    # Medians and p99 with generous factors; the maximum is printed, not asserted: a
    # scheduler pause on this shared host reaches hundreds of milliseconds with or
    # without Kafka. That no call waited for Kafka is asserted above, as behaviour.
    for hook, r in report.items():
        assert r["down_median_ms"] <= 5 * r["baseline_median_ms"] + 1.0, (hook, r)
        assert r["down_p99_ms"] <= 10 * r["baseline_p99_ms"] + 20.0, (hook, r)

    # Every span the hooks ended is dropped and counted, exactly once.
    wait_for(lambda: drained(telemetry), timeout_s=60, message="the span and payload queues")
    span_drops = dropped(names.METRIC_EXPORT_DROPPED) - span_drops_before
    assert span_drops == len(spans.get_finished_spans()) > 0
    hook_payload_drops = dropped(names.METRIC_PAYLOADS_DROPPED) - payload_drops_before
    assert hook_payload_drops >= 2 * TURNS  # the reply and the verification payloads at least

    # Memory: 100 KB payloads far beyond the queue's bound, each body a new string (as an
    # agent's prompts are), so a queue that kept them would show in traced memory.
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(PAYLOADS):
            body = f"{i:08d}" + "p" * (PAYLOAD_BYTES - 8)
            collectors.record_payload(f"down-payload-{i}", "llm_exchange", body)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"{PAYLOADS} payloads of {PAYLOAD_BYTES} B with Kafka down: traced memory grew "
          f"{(current - before) / 2**20:.1f} MiB, peak {(peak - before) / 2**20:.1f} MiB")
    # The queue's bound plus a few bodies in flight (the worker redacts, encodes and
    # compresses one at a time), far below the 40 MB (CI) recorded.
    assert peak - before < QUEUE_BYTES + 8 * 2**20
    # Each payload dropped and counted exactly once (queue full, or Kafka unavailable).
    wait_for(lambda: drained(telemetry), timeout_s=60, message="the payload queue")
    assert dropped(names.METRIC_PAYLOADS_DROPPED) - payload_drops_before == \
        hook_payload_drops + PAYLOADS
    # The outage is in the agent's log, naming where Kafka was expected.
    assert any(f"127.0.0.1:{port}" in r.getMessage() and "cannot reach Kafka" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records][:5]

    # Kafka comes back: the cumulative drop counters reach ClickHouse and the dashboard.
    payload_drops = dropped(names.METRIC_PAYLOADS_DROPPED) - payload_drops_before
    broker = EmbeddedBroker(port).start()
    try:
        config = pipeline.consumer_config
        ensure_topics(broker.bootstrap, config.topic_set, partitions=2)

        def drops_on_the_dashboard() -> dict[str, int] | None:
            telemetry.force_flush(10)  # a metric export, once the producer reconnects
            pipeline.consume_until_idle(idle_s=1.0, bootstrap=broker.bootstrap)
            shown = collector_drops(pipeline.client, pipeline.database)
            return shown if shown[names.METRIC_PAYLOADS_DROPPED] >= payload_drops else None

        shown = wait_for(drops_on_the_dashboard, timeout_s=90, interval_s=0.5,
                         message="the drop counters on the dashboard")
        assert shown[names.METRIC_PAYLOADS_DROPPED] == payload_drops
        assert shown[names.METRIC_EXPORT_DROPPED] >= span_drops
    finally:
        collectors.shutdown()
        broker.stop()
