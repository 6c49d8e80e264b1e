"""Guard events per second through the real pipeline, into ClickHouse, with zero lost.

    .venv/bin/python benchmarks/pipeline_throughput.py            # 1,000,000 events
    .venv/bin/python benchmarks/pipeline_throughput.py --quick    # 50,000 (smoke)

1. Emit: guard events through the real collectors (``configure()`` + ``GuardTelemetry``
   ``event`` + ``count``, as the guards call them), inside one span per agent request,
   exported by the SDK's BatchSpanProcessor (default batch size) and the Kafka exporters
   to a real Tansu broker. The span queue is bounded and drops when full (by design);
   the emitter flushes every ``--flush-every`` requests so it never does, and any drop
   the SDK or the exporters report fails the zero-lost check.
2. Consume: ``guardtrace``'s consumer (``TelemetryConsumer`` + ``ClickHouseWriter``) in
   its own process into a fresh embedded ClickHouse (chDB) store, its RSS sampled from
   /proc. The rate is events stored / (last batch written - partitions assigned): the
   records are all in Kafka by then, so this is the consume -> ClickHouse phase alone.
3. Baseline, same run, same data: a bare kafka-python consume of the same topics ->
   clickhouse-connect insert of the raw values, same batch size, same consumer settings.
4. Verify: distinct event ids in ClickHouse == events emitted.

Targets (DESIGN.md): >= 30,000 events/s into ClickHouse; >= 0.8 of the bare loop;
consumer peak RSS < 300 MB; zero lost.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from _common import (
    Report,
    SdkDropCounter,
    add_profile_argument,
    check_profile_argument,
    collector_settings,
    consumer_args,
    log,
    run_consumer_process,
    services,
)

from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names

TARGET_EVENTS_PER_S = 30_000
TARGET_BARE_RATIO = 0.8
TARGET_RSS_MB = 300


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


def emit(bootstrap: str, topics: Any, events: int, per_span: int, flush_every: int,
         agents: int) -> dict[str, Any]:
    """Emit ``events`` guard events through the real collectors; return counts and timing."""
    from guardtrace import collectors
    from guardtrace.collectors.emit.telemetry import GuardTelemetry, internal_totals

    telemetry = collectors.configure(
        set_global=False, **collector_settings(bootstrap, topics, capture_payloads=False))
    tracer = telemetry.tracer_provider.get_tracer("bench-agent")
    guards = {shape.module: GuardTelemetry(shape.module, "bench") for shape in SHAPES}
    run = uuid.uuid4().hex[:8]
    spans = emitted = 0
    flush_s = 0.0
    with SdkDropCounter().installed() as sdk_drops:
        started = time.perf_counter()
        while emitted < events:
            request_id = f"req-{run}-{spans}"
            agent = f"agent-{spans % agents}"
            with tracer.start_as_current_span("agent.turn",
                                              attributes={names.ATTR_REQUEST_ID: request_id}):
                for k in range(min(per_span, events - emitted)):
                    shape = SHAPES[k % len(SHAPES)]
                    guard = guards[shape.module]
                    guard.event(shape.event, request_id,
                                {**shape.attributes, names.ATTR_AGENT: agent})
                    guard.count(shape.metric, agent=agent, labels=shape.labels)
                    emitted += 1
            spans += 1
            if spans % flush_every == 0:
                flush_started = time.perf_counter()
                telemetry.force_flush(60)
                flush_s += time.perf_counter() - flush_started
                if spans % (flush_every * 50) == 0:
                    log(f"emitted {emitted:,} events")
        flushed = telemetry.force_flush(60)
        elapsed = time.perf_counter() - started
    collectors.shutdown(30)
    dropped = {**internal_totals(names.METRIC_EXPORT_DROPPED),
               **internal_totals(names.METRIC_PAYLOADS_DROPPED)}
    return {"events": emitted, "spans": spans, "seconds": elapsed, "flush_seconds": flush_s,
            "flushed": flushed, "sdk_dropped": sdk_drops.dropped, "export_dropped": dropped}


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
    add_profile_argument(parser)
    args = parser.parse_args(argv)
    check_profile_argument(parser, args)
    if args.quick:
        args.events = min(args.events, 50_000)
    batch_rows = args.batch_rows or env.read_int(env.BATCH_MAX_ROWS, minimum=1)
    report = Report("pipeline_throughput", {
        "events": args.events, "events_per_span": args.events_per_span,
        "flush_every": args.flush_every, "batch_rows": batch_rows, "agents": args.agents})

    with services() as (broker, topics, tmp):
        log(f"broker {broker.bootstrap}; emitting {args.events:,} events")
        emitted = emit(broker.bootstrap, topics, args.events, args.events_per_span,
                       args.flush_every, args.agents)
        log(f"emitted in {emitted['seconds']:.1f} s; consuming with guardtrace's consumer")
        timeout = 600 + args.events / 2000
        extra = ["--profile", args.profile] if args.profile else []
        ours, ours_rss, ours_anon = run_consumer_process(consumer_args(
            "guardtrace", tmp / "store-guardtrace", broker.bootstrap, topics,
            batch_rows=batch_rows, extra=extra), timeout)
        bare = bare_rss = bare_anon = None
        if not args.skip_bare:
            log("consuming with the bare kafka-python -> clickhouse-connect loop")
            bare, bare_rss, bare_anon = run_consumer_process(consumer_args(
                "bare", tmp / "store-bare", broker.bootstrap, topics,
                batch_rows=batch_rows), timeout)

    events = emitted["events"]
    ev = phase(ours, "span_events")
    stored = ours["verify"]["distinct_event_ids"]
    lost = events - stored
    drops = emitted["sdk_dropped"] + sum(emitted["export_dropped"].values())
    emit_rate = events / emitted["seconds"]
    fig = report.figures
    fig.update({
        "events_emitted": events, "spans_emitted": emitted["spans"],
        "emit_seconds": round(emitted["seconds"], 2),
        "emit_events_per_s": round(emit_rate),
        "emit_drops": drops, "emit_flushed": emitted["flushed"],
        "consume_seconds": round(ev["seconds"], 3),
        "events_per_s": round(ev["rate"]), "steady_events_per_s": round(ev["steady_rate"])
        if ev["steady_rate"] == ev["steady_rate"] else None,
        "clickhouse_write_seconds": round(ev["write_seconds"], 3),
        "batches": ev.get("batches", 0), "consumer_cpu_s": ours["cpu_s"],
        "events_stored_distinct": stored, "event_rows": ours["verify"]["event_rows"],
        "lost": lost, "dead_letters": ours["verify"]["dead_letters"],
        "consumer_peak_rss_mb": round(ours_rss, 1),
        "consumer_peak_anon_rss_mb": round(ours_anon, 1),
        "consumer_stats": ours["stats"],
    })
    rows = [["emit (collectors -> Kafka)", events, emitted["seconds"], emit_rate, "-"],
            ["guardtrace consumer -> ClickHouse", stored, ev["seconds"], ev["rate"],
             f"{ours_rss:.0f} ({ours_anon:.0f})"]]
    if bare is not None:
        bp = phase(bare, "bare_raw")
        bare_rate = events / bp["seconds"] if bp["seconds"] > 0 else float("nan")
        ratio = ev["rate"] / bare_rate
        fig.update({"bare_seconds": round(bp["seconds"], 3),
                    "bare_events_per_s": round(bare_rate), "bare_records": bp["rows"],
                    "bare_cpu_s": bare["cpu_s"], "bare_peak_rss_mb": round(bare_rss, 1),
                    "bare_peak_anon_rss_mb": round(bare_anon, 1),
                    "ratio_vs_bare": round(ratio, 3)})
        rows.append(["bare loop (raw values) -> ClickHouse", events, bp["seconds"], bare_rate,
                     f"{bare_rss:.0f} ({bare_anon:.0f})"])
    report.table(f"pipeline_throughput: {events:,} guard events, {args.events_per_span} per "
                 f"request span, batch {batch_rows:,} rows",
                 ["phase", "events", "seconds", "events/s", "peak RSS MB (anon)"], rows)
    report.target("events/s into ClickHouse", ev["rate"], ">=", TARGET_EVENTS_PER_S, "events/s")
    if bare is not None:
        report.target("ratio vs bare loop", fig["ratio_vs_bare"], ">=", TARGET_BARE_RATIO)
    report.target("consumer peak RSS", ours_rss, "<", TARGET_RSS_MB, "MB")
    report.target("events lost", lost, "==", 0, "events")
    report.target("drops on the emit side", drops, "==", 0, "events")
    report.notes.append(
        "peak RSS counts the embedded ClickHouse engine (chDB maps ~220 MB of engine code "
        "into any process that opens a store); (anon) is the private part"
        + (f"; the bare loop, same engine, peaked at {bare_rss:.0f} MB" if bare_rss else ""))
    if args.quick:
        report.notes.append("--quick size: a smoke run, not the benchmark's figures")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
