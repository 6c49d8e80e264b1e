"""Guard events per second through the real pipeline, into ClickHouse, with zero lost.

    .venv/bin/python benchmarks/pipeline_throughput.py            # 1,000,000 events
    .venv/bin/python benchmarks/pipeline_throughput.py --quick    # 50,000 (smoke)
    .venv/bin/python benchmarks/pipeline_throughput.py --emit-only --events 200000 \
        --emit-rounds 3 --profile-emit emit.prof.txt              # the agent's side alone

1. Emit: guard events through the real collectors (``configure()`` + ``GuardTelemetry``
   ``event`` + ``count``, as the guards call them), inside one span per agent request,
   exported by the SDK's BatchSpanProcessor (default batch size) and the Kafka exporters
   to a real Tansu broker. The span queue is bounded and drops when full (by design);
   the emitter flushes the spans every ``--flush-every`` requests so it never does (the
   metrics go out once, at the end, as within an export interval), and any drop
   the SDK or the exporters report fails the zero-lost check. The agent's cost is the
   process's CPU over the phase (every thread: the agent's, the export worker's, the
   Kafka client's) per guard event.
   Baseline, same run: the same spans (same events and attributes, no counters, no
   redaction) through the standard OTLP/HTTP span exporter to a local endpoint that
   discards them (benchmarks/_http_sink.py, its own process). ``--emit-rounds`` runs
   both several times in alternating order.
2. Consume: ``guardtrace``'s consumer (``TelemetryConsumer`` + ``ClickHouseWriter``) in
   its own process, its RSS sampled from /proc, into a fresh store of each kind that
   ``--store`` names (default both, one after the other, over the same records):
   ``embedded``, ClickHouse (chDB) inside the consumer's process; ``server``, ClickHouse
   over HTTP in another process, as in a deployment (the HTTP stand-in of
   tests/support/clickhouse_http_standin.py: no server binary is to be had here). The
   rate is events stored / (last batch written - partitions assigned): the records are
   all in Kafka by then, so this is the consume -> ClickHouse phase alone.
3. Baseline, same run, same data, same store: a bare kafka-python consume of the same
   topics -> clickhouse-connect insert of the raw values, same batch size, same
   consumer settings.
4. Verify, for each store: distinct event ids in ClickHouse == events emitted.

Targets (DESIGN.md): >= 30,000 events/s into ClickHouse; >= 0.8 of the bare loop;
consumer peak RSS < 300 MB with the embedded engine, < 150 MB against a server (issue
17); zero lost. Emit side (issue 17): >= 30,000 events/s from one agent process, at less
CPU per event than the OTLP/HTTP exporter's.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    Report,
    SdkDropCounter,
    add_profile_argument,
    check_module,
    check_profile_argument,
    collector_settings,
    log,
    percentile,
    services,
)
from _consume_stores import (
    EMBEDDED,
    SERVER,
    STORE_CHOICES,
    STORE_LABELS,
    ConsumerRun,
    consume,
    stores_of,
)

from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names

TARGET_EVENTS_PER_S = 30_000
# One agent process's emit side (issue 17): guard events through the collectors to Kafka.
TARGET_EMIT_EVENTS_PER_S = 30_000
TARGET_BARE_RATIO = 0.8
# The consumer's peak RSS with the embedded engine in its process, and against a server.
TARGET_RSS_MB = 300
TARGET_SERVER_RSS_MB = 150


@dataclass(frozen=True)
class Shape:
    """One kind of guard event, with the attributes and counter its guard emits."""

    module: str
    event: str
    metric: str
    attributes: dict[str, Any]
    labels: dict[str, str] | None = None


# The four events an agent turn most often produces, with the attributes the guards set
# (collectors/fabrication.py, plan_retry.py, verification.py).
SHAPES = (
    Shape(names.MODULE_REPLIES, names.EVENT_FABRICATION_DETECTED, names.METRIC_FABRICATIONS,
          {names.ATTR_TIER: names.TIER_ACTION, names.ATTR_MATCHED_PHRASE: "I'm deploying",
           names.ATTR_TOOLS_FIRED: ["read_file", "search_docs"], names.ATTR_CHANNEL: "c-17"},
          {names.ATTR_TIER: names.TIER_ACTION}),
    Shape(names.MODULE_PLANNING, names.EVENT_HALLUCINATION_DETECTED,
          names.METRIC_HALLUCINATIONS,
          {names.ATTR_HALLUCINATED_AGENT: "deploy_service_v2",
           names.ATTR_HALLUCINATED_CAPABILITY: "rollback", names.ATTR_ALLOWED_AGENT_COUNT: 12,
           names.ATTR_HALL_RETRY: 0, names.ATTR_MAX_HALL_RETRIES: 2,
           names.ATTR_SUGGESTED_TOOLS: ["deploy_service", "rollback_service"]}),
    Shape(names.MODULE_VERIFICATION, names.EVENT_VERIFICATION_REQUIRED,
          names.METRIC_VERIFICATION_REQUIRED,
          {names.ATTR_TRIGGER_PATTERN: r"\bhow many\b", names.ATTR_DEPTH: "deep",
           names.ATTR_SCORE: 0.9, names.ATTR_FAMILY: "counting"}),
    Shape(names.MODULE_VERIFICATION, names.EVENT_VERIFICATION_COMPLETED,
          names.METRIC_VERIFICATION_COMPLETED,
          {names.ATTR_TOOL_CALLS_USED: 2, names.ATTR_MIN_TOOL_CALLS: 1,
           names.ATTR_TURNS_USED: 3}),
)


# -- emit phase: guardtrace's collectors, and the standard OTLP/HTTP exporter -----------
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each of this process's live threads, by thread name (from /proc)."""
    out: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue  # ended since enumerate(), or no /proc: left out of the breakdown
        fields = stat.rsplit(")", 1)[1].split()  # utime and stime are fields 14 and 15
        name = thread.name.rstrip("0123456789-_")  # kafka-python numbers its threads
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return out


def _drive(tracer: Any, record: Callable[[Shape, str, str], None], flush: Callable[[], bool],
           finish: Callable[[], bool], events: int, per_span: int, flush_every: int,
           agents: int) -> dict[str, Any]:
    """The agent's loop, the same for guardtrace and the baseline: ``per_span`` guard
    events inside each request span, the spans flushed every ``flush_every`` requests
    (the span queue would otherwise drop) and everything at the end (``finish``: with
    guardtrace, the metrics and the Kafka producer too; an agent's metrics go out at
    their export interval, not at each span flush). Returns counts, wall seconds and the
    process's CPU seconds over the phase (every thread: the agent's, the export
    worker's, the Kafka client's), with the CPU of each thread that lived to the end."""
    run = uuid.uuid4().hex[:8]
    spans = emitted = 0
    flush_s = 0.0
    threads_before = _thread_cpu()
    cpu_started = time.process_time()
    started = time.perf_counter()
    while emitted < events:
        request_id = f"req-{run}-{spans}"
        agent = f"agent-{spans % agents}"
        with tracer.start_as_current_span("agent.turn",
                                          attributes={names.ATTR_REQUEST_ID: request_id}):
            for k in range(min(per_span, events - emitted)):
                record(SHAPES[k % len(SHAPES)], request_id, agent)
                emitted += 1
        spans += 1
        if spans % flush_every == 0:
            flush_started = time.perf_counter()
            flush()
            flush_s += time.perf_counter() - flush_started
            if spans % (flush_every * 50) == 0:
                log(f"emitted {emitted:,} events")
    flushed = finish()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    threads = {name: seconds - threads_before.get(name, 0.0)
               for name, seconds in _thread_cpu().items()}
    return {"events": emitted, "spans": spans, "seconds": elapsed, "flush_seconds": flush_s,
            "flushed": flushed, "cpu_seconds": cpu,
            "thread_cpu_seconds": {k: round(v, 2) for k, v in sorted(threads.items())}}


def emit(bootstrap: str, topics: Any, events: int, per_span: int, flush_every: int,
         agents: int, profile: Any = None) -> dict[str, Any]:
    """Emit ``events`` guard events through the real collectors; return counts and timing."""
    from guardtrace import collectors
    from guardtrace.collectors.emit.telemetry import GuardTelemetry, internal_totals

    telemetry = collectors.configure(
        set_global=False, **collector_settings(bootstrap, topics, capture_payloads=False))
    tracer = telemetry.tracer_provider.get_tracer("bench-agent")
    guards = {shape.module: GuardTelemetry(shape.module, "bench") for shape in SHAPES}

    def record(shape: Shape, request_id: str, agent: str) -> None:
        guard = guards[shape.module]
        guard.event(shape.event, request_id, {**shape.attributes, names.ATTR_AGENT: agent})
        guard.count(shape.metric, agent=agent, labels=shape.labels)

    dropped_before = _emit_drops(internal_totals)
    with SdkDropCounter().installed() as sdk_drops, _profiled(profile):
        result = _drive(tracer, record, lambda: telemetry.tracer_provider.force_flush(60_000),
                        lambda: telemetry.force_flush(60), events, per_span, flush_every,
                        agents)
    collectors.shutdown(30)
    dropped = {key: total - dropped_before.get(key, 0)
               for key, total in _emit_drops(internal_totals).items()}
    return {**result, "sdk_dropped": sdk_drops.dropped, "export_dropped": dropped}


def _emit_drops(internal_totals: Callable[[str], dict[str, int]]) -> dict[str, int]:
    return {**internal_totals(names.METRIC_EXPORT_DROPPED),
            **internal_totals(names.METRIC_PAYLOADS_DROPPED)}


def emit_otlp_http(events: int, per_span: int, flush_every: int,
                   agents: int) -> dict[str, Any]:
    """The baseline: the same spans, with the same events and attributes, recorded with
    the OTel API and sent by the standard OTLP/HTTP exporter (protobuf, the SDK's
    BatchSpanProcessor at its defaults) to a local endpoint that discards them, in a
    process of its own. No counters, no redaction: the standard cost of exporting them."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    with _http_sink() as (endpoint, received):
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "guardtrace-bench"}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        tracer = provider.get_tracer("bench-agent")

        def record(shape: Shape, request_id: str, agent: str) -> None:
            trace.get_current_span().add_event(shape.event, {
                names.ATTR_REQUEST_ID: request_id, names.ATTR_MODULE: shape.module,
                **shape.attributes, names.ATTR_AGENT: agent})

        with SdkDropCounter().installed() as sdk_drops:
            result = _drive(tracer, record, lambda: provider.force_flush(60_000),
                            lambda: provider.force_flush(60_000), events, per_span,
                            flush_every, agents)
        provider.shutdown()
        counts = received()
    return {**result, "sdk_dropped": sdk_drops.dropped,
            "received_events": counts["events"], "received_spans": counts["spans"]}


@contextmanager
def _http_sink() -> Iterator[tuple[str, Callable[[], dict[str, int]]]]:
    """benchmarks/_http_sink.py in a process of its own: ``(endpoint, counts())``."""
    sink = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_http_sink.py"))],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        port = int(sink.stdout.readline())
        base = f"http://127.0.0.1:{port}"

        def counts() -> dict[str, int]:
            with urllib.request.urlopen(f"{base}/count", timeout=10) as reply:
                return dict(json.load(reply))

        yield f"{base}/v1/traces", counts
    finally:
        if sink.stdin is not None:
            sink.stdin.close()
        try:
            sink.wait(10)
        except subprocess.TimeoutExpired:
            sink.kill()
            sink.wait()


@contextmanager
def _profiled(path: str | None) -> Iterator[None]:
    """cProfile of the agent's thread and of the span export worker (the exporter's
    ``export`` on the batch processor's thread; a flush exports on the agent's thread,
    in its profile), written to ``path`` by total time. Timed in each thread's CPU time:
    wall time would charge a function for the GIL waits of whatever released it."""
    if not path:
        yield
        return
    from guardtrace.collectors.emit.export_redaction import RedactingSpanExporter

    agent = cProfile.Profile(time.thread_time_ns, 1e-9)
    worker = cProfile.Profile(time.thread_time_ns, 1e-9)
    original = RedactingSpanExporter.export
    agent_thread = threading.current_thread()

    def export(self: Any, spans: Any) -> Any:
        if threading.current_thread() is agent_thread:
            return original(self, spans)
        worker.enable()
        try:
            return original(self, spans)
        finally:
            worker.disable()

    RedactingSpanExporter.export = export
    agent.enable()
    try:
        yield
    finally:
        agent.disable()
        RedactingSpanExporter.export = original
        out = io.StringIO()
        for title, profile in (("agent thread", agent), ("span export worker", worker)):
            out.write(f"== {title} ==\n")
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(35)
        Path(path).write_text(out.getvalue())


def emit_rounds(bootstrap: str, topics: Any, args: argparse.Namespace
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``--emit-rounds`` rounds of guardtrace and the OTLP/HTTP baseline, in alternating
    order (the machine is shared: a load change then hits both)."""
    ours: list[dict[str, Any]] = []
    otlp: list[dict[str, Any]] = []
    if args.profile_emit:
        # A round of its own: a profiler costs several times the work it watches, so the
        # profiled round is left out of the rates (its events still count as emitted).
        log(f"profiling round: emitting {args.events:,} events through guardtrace")
        ours.append({**emit(bootstrap, topics, args.events, args.events_per_span,
                            args.flush_every, args.agents, args.profile_emit),
                     "profiled": True})
    for round_no in range(args.emit_rounds):
        sides = ["guardtrace", "otlp_http"]
        if args.skip_otlp_http:
            sides.remove("otlp_http")
        for side in sides if round_no % 2 == 0 else sides[::-1]:
            log(f"round {round_no + 1}: emitting {args.events:,} events through {side}")
            if side == "guardtrace":
                ours.append(emit(bootstrap, topics, args.events, args.events_per_span,
                                 args.flush_every, args.agents, None))
            else:
                otlp.append(emit_otlp_http(args.events, args.events_per_span,
                                           args.flush_every, args.agents))
    return ours, otlp


def _cpu_us(run: dict[str, Any]) -> float:
    return run["cpu_seconds"] / run["events"] * 1e6


def _median(values: list[float]) -> float:
    return percentile(values, 50)


def report_emit(report: Report, ours: list[dict[str, Any]],
                otlp: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures, table and targets of the emit phase; returns the guardtrace totals the
    consume phase checks against (events and drops over every round)."""
    emitted = {"events": sum(r["events"] for r in ours), "spans": sum(r["spans"] for r in ours),
               "seconds": sum(r["seconds"] for r in ours),
               "flushed": all(r["flushed"] for r in ours),
               "sdk_dropped": sum(r["sdk_dropped"] for r in ours),
               "export_dropped": {k: sum(r["export_dropped"].get(k, 0) for r in ours)
                                  for r0 in ours for k in r0["export_dropped"]}}
    timed = [r for r in ours if not r.get("profiled")]
    rate = _median([r["events"] / r["seconds"] for r in timed])
    cpu_us = _median([_cpu_us(r) for r in timed])
    drops = emitted["sdk_dropped"] + sum(emitted["export_dropped"].values())
    fig = report.figures
    fig.update({"events_emitted": emitted["events"], "spans_emitted": emitted["spans"],
                "emit_seconds": round(emitted["seconds"], 2), "emit_events_per_s": round(rate),
                "emit_drops": drops, "emit_flushed": emitted["flushed"],
                "emit_events_per_s_rounds": [round(r["events"] / r["seconds"]) for r in timed],
                "emit_cpu_us_per_event": round(cpu_us, 2),
                "emit_cpu_us_per_event_rounds": [round(_cpu_us(r), 2) for r in timed],
                "emit_thread_cpu_seconds": [r["thread_cpu_seconds"] for r in timed]})
    rows = [[f"guardtrace, round {i + 1}", r["events"], r["seconds"],
             r["events"] / r["seconds"], _cpu_us(r)] for i, r in enumerate(timed)]
    rows += [["guardtrace, profiled (not in the figures)", r["events"], r["seconds"],
              r["events"] / r["seconds"], _cpu_us(r)] for r in ours if r.get("profiled")]
    if otlp:
        otlp_rate = _median([r["events"] / r["seconds"] for r in otlp])
        otlp_cpu_us = _median([_cpu_us(r) for r in otlp])
        fig.update({"otlp_http_events_per_s": round(otlp_rate),
                    "otlp_http_cpu_us_per_event": round(otlp_cpu_us, 2),
                    "otlp_http_cpu_us_per_event_rounds": [round(_cpu_us(r), 2) for r in otlp],
                    "otlp_http_thread_cpu_seconds": [r["thread_cpu_seconds"] for r in otlp],
                    "otlp_http_events_received": [r["received_events"] for r in otlp],
                    "emit_cpu_ratio_vs_otlp_http": round(cpu_us / otlp_cpu_us, 3)})
        rows += [[f"OTLP/HTTP exporter, round {i + 1}", r["events"], r["seconds"],
                  r["events"] / r["seconds"], _cpu_us(r)] for i, r in enumerate(otlp)]
    report.table("emit: one agent process, guard events -> Kafka (guardtrace) or -> a "
                 "local OTLP/HTTP endpoint (the standard exporter, same spans); CPU is the "
                 "whole process's", ["emitter", "events", "seconds", "events/s",
                                     "CPU us/event"], rows)
    report.target("emit events/s, one agent process", rate, ">=", TARGET_EMIT_EVENTS_PER_S,
                  "events/s")
    if otlp:
        report.target("emit CPU per event / OTLP/HTTP exporter's", cpu_us / otlp_cpu_us, "<",
                      1.0)
        lost = sum(r["events"] - r["received_events"] for r in otlp)
        report.target("OTLP/HTTP baseline events not received", lost, "==", 0, "events")
    report.target("drops on the emit side", drops, "==", 0, "events")
    return emitted


def phase(result: dict[str, Any], table: str) -> dict[str, float]:
    """Rows written to ``table`` and the phase timing of one consumer run."""
    writes = result["writes"]
    rows = sum(w[2].get(table, 0) for w in writes)
    if not writes:
        return {"rows": 0, "seconds": float("nan"), "steady_rate": float("nan"),
                "write_seconds": 0.0}
    seconds = writes[-1][1] - result["assigned_at"]
    # Steady state: from the end of the first batch to the end of the last one.
    later = sum(w[2].get(table, 0) for w in writes[1:])
    steady_s = writes[-1][1] - writes[0][1]
    return {"rows": rows, "seconds": seconds,
            "rate": rows / seconds if seconds > 0 else float("nan"),
            "steady_rate": later / steady_s if steady_s > 0 and later else float("nan"),
            "write_seconds": sum(w[1] - w[0] for w in writes), "batches": len(writes)}


# Figures of the embedded store keep the names they had before the server store existed;
# the server store's carry this prefix.
FIGURE_PREFIX = {EMBEDDED: "", SERVER: "server_"}


def consume_rows(store: str, ours: ConsumerRun, bare: ConsumerRun | None,
                 events: int) -> list[list[Any]]:
    """The table's rows of one store: guardtrace's consumer, then the bare loop."""
    ev = phase(ours.result, "span_events")
    rows = [[f"guardtrace consumer -> {STORE_LABELS[store]}",
             ours.result["verify"]["distinct_event_ids"], ev["seconds"], ev["rate"],
             f"{ours.peak_rss_mb:.0f} ({ours.peak_anon_mb:.0f})"]]
    if bare is not None:
        bp = phase(bare.result, "bare_raw")
        rows.append([f"bare loop (raw values) -> {STORE_LABELS[store]}", events,
                     bp["seconds"], _bare_rate(bp, events),
                     f"{bare.peak_rss_mb:.0f} ({bare.peak_anon_mb:.0f})"])
    return rows


def _bare_rate(bare_phase: dict[str, float], events: int) -> float:
    return events / bare_phase["seconds"] if bare_phase["seconds"] > 0 else float("nan")


def report_consume(report: Report, events: int,
                   runs: dict[str, tuple[ConsumerRun, ConsumerRun | None]]) -> None:
    """Figures, targets and notes of the consume phase, for each store consumed into."""
    fig = report.figures
    for store, (ours, bare) in runs.items():
        prefix = FIGURE_PREFIX[store]
        ev = phase(ours.result, "span_events")
        verify = ours.result["verify"]
        lost = events - verify["distinct_event_ids"]
        fig.update({f"{prefix}{key}": value for key, value in {
            "consume_seconds": round(ev["seconds"], 3),
            "events_per_s": round(ev["rate"]), "steady_events_per_s": round(ev["steady_rate"])
            if ev["steady_rate"] == ev["steady_rate"] else None,
            "clickhouse_write_seconds": round(ev["write_seconds"], 3),
            "batches": ev.get("batches", 0), "consumer_cpu_s": ours.result["cpu_s"],
            "events_stored_distinct": verify["distinct_event_ids"],
            "event_rows": verify["event_rows"],
            "lost": lost, "dead_letters": verify["dead_letters"],
            "consumer_peak_rss_mb": round(ours.peak_rss_mb, 1),
            "consumer_peak_anon_rss_mb": round(ours.peak_anon_mb, 1),
            "consumer_stats": ours.result["stats"],
        }.items()})
        if ours.server_peak_rss_mb is not None:
            fig["standin_server_peak_rss_mb"] = round(ours.server_peak_rss_mb, 1)
        if bare is not None:
            bp = phase(bare.result, "bare_raw")
            bare_rate = _bare_rate(bp, events)
            fig.update({f"{prefix}{key}": value for key, value in {
                "bare_seconds": round(bp["seconds"], 3),
                "bare_events_per_s": round(bare_rate), "bare_records": bp["rows"],
                "bare_cpu_s": bare.result["cpu_s"],
                "bare_peak_rss_mb": round(bare.peak_rss_mb, 1),
                "bare_peak_anon_rss_mb": round(bare.peak_anon_mb, 1),
                "ratio_vs_bare": round(ev["rate"] / bare_rate, 3)}.items()})
        if store == EMBEDDED:
            # The throughput targets: against the stand-in the rate also pays for the
            # stand-in's own HTTP and engine work on the same two CPUs.
            report.target("events/s into ClickHouse", ev["rate"], ">=", TARGET_EVENTS_PER_S,
                          "events/s")
            if bare is not None:
                report.target("ratio vs bare loop", fig["ratio_vs_bare"], ">=",
                              TARGET_BARE_RATIO)
            report.target("consumer peak RSS", ours.peak_rss_mb, "<", TARGET_RSS_MB, "MB")
            report.target("events lost", lost, "==", 0, "events")
            report.notes.append(
                "embedded: peak RSS counts the ClickHouse engine (chDB maps ~220 MB of "
                "engine code into any process that opens a store); (anon) is the private "
                "part" + (f"; the bare loop, same engine, peaked at {bare.peak_rss_mb:.0f} MB"
                          if bare is not None else ""))
        else:
            report.target("consumer peak RSS against a server", ours.peak_rss_mb, "<",
                          TARGET_SERVER_RSS_MB, "MB")
            report.target("events lost (server)", lost, "==", 0, "events")
            report.notes.append(
                "server: the consumer process holds only clickhouse-connect's HTTP client; "
                "the server is the HTTP stand-in (ClickHouse's HTTP interface backed by "
                "chDB, its own process, peak RSS "
                f"{ours.server_peak_rss_mb or float('nan'):.0f} MB), whose work shares the "
                "two CPUs, so its rate is no server's")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="smoke size: 50,000 events")
    parser.add_argument("--events-per-span", type=int, default=4,
                        help="guard events per agent request span (default 4)")
    parser.add_argument("--flush-every", type=int, default=1000,
                        help="force_flush every N requests (the span queue holds 2048)")
    parser.add_argument("--batch-rows", type=int, default=None,
                        help="consumer batch size (default: GUARDTRACE_BATCH_MAX_ROWS)")
    parser.add_argument("--agents", type=int, default=50, help="distinct agent labels")
    parser.add_argument("--skip-bare", action="store_true", help="no baseline run")
    parser.add_argument("--store", choices=STORE_CHOICES, default="both",
                        help="consume into the embedded engine, a server over HTTP (the "
                             "stand-in), or both in turn (default)")
    parser.add_argument("--emit-only", action="store_true",
                        help="the emit phase alone (guardtrace and the OTLP/HTTP baseline)")
    parser.add_argument("--emit-rounds", type=int, default=1,
                        help="emit rounds, guardtrace and baseline alternating (default 1)")
    parser.add_argument("--skip-otlp-http", action="store_true",
                        help="no OTLP/HTTP exporter baseline in the emit phase")
    parser.add_argument("--profile-emit", default=None, metavar="FILE",
                        help="write a cProfile of the emit phase (agent thread and span "
                             "export worker) to FILE, from a round of its own before the "
                             "timed ones (not in the figures)")
    add_profile_argument(parser)
    args = parser.parse_args(argv)
    check_profile_argument(parser, args)
    if not args.skip_otlp_http:
        check_module(parser, "opentelemetry.exporter.otlp.proto.http",
                     "the emit phase's OTLP/HTTP baseline", ", or pass --skip-otlp-http")
    if args.emit_rounds < 1:
        parser.error("--emit-rounds must be at least 1")
    if args.quick:
        args.events = min(args.events, 50_000)
    batch_rows = args.batch_rows or env.read_int(env.BATCH_MAX_ROWS, minimum=1)
    report = Report("pipeline_throughput", {
        "events": args.events, "events_per_span": args.events_per_span,
        "flush_every": args.flush_every, "batch_rows": batch_rows, "agents": args.agents,
        "emit_rounds": args.emit_rounds, "store": args.store})

    with services() as (broker, topics, tmp):
        log(f"broker {broker.bootstrap}; emitting {args.events:,} events")
        emitted = report_emit(report, *emit_rounds(broker.bootstrap, topics, args))
        if args.emit_only:
            return report.finish()
        log(f"emitted in {emitted['seconds']:.1f} s; consuming")
        timeout = 600 + args.events / 2000
        extra = ["--profile", args.profile] if args.profile else []
        runs: dict[str, tuple[ConsumerRun, ConsumerRun | None]] = {}
        for store in stores_of(args.store):
            log(f"consuming into {STORE_LABELS[store]} with guardtrace's consumer")
            ours = consume(store, "guardtrace", tmp, broker.bootstrap, topics,
                           batch_rows=batch_rows, timeout_s=timeout, extra=extra)
            bare = None
            if not args.skip_bare:
                log("... and with the bare kafka-python -> clickhouse-connect loop")
                bare = consume(store, "bare", tmp, broker.bootstrap, topics,
                               batch_rows=batch_rows, timeout_s=timeout)
            runs[store] = (ours, bare)

    report_consume(report, emitted["events"], runs)
    report.table(f"pipeline_throughput: {emitted['events']:,} guard events, "
                 f"{args.events_per_span} per request span, batch {batch_rows:,} rows",
                 ["phase", "events", "seconds", "events/s", "peak RSS MB (anon)"],
                 [["emit (collectors -> Kafka)", emitted["events"], emitted["seconds"],
                   emitted["events"] / emitted["seconds"], "-"],
                  *(row for store in runs for row in consume_rows(store, *runs[store],
                                                                   emitted["events"]))])
    if args.quick:
        report.notes.append("--quick size: a smoke run, not the benchmark's figures")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
