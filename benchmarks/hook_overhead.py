"""What a guard costs the agent per call, and what emitting costs next to bare OTel.

    .venv/bin/python benchmarks/hook_overhead.py            # 20,000 emit calls per case
    .venv/bin/python benchmarks/hook_overhead.py --quick    # 3,000 (smoke)

Every call is timed on its own (``perf_counter_ns``), with telemetry configured against
a real Tansu broker:

* guards: ``FabricationGuard.check`` of a 2 KB reply with 3 replies of history on the
  channel (a clean reply, and one that claims an action no tool performed, which also
  emits); ``FabricationGuard.check_conversation`` of a 2 KB reply at the end of a
  20-message conversation with tool calls and results (target: median at most 1 ms),
  and the same on real replies of 1-3 KB of the dev set (../shared/realdata), each with
  the 19 messages before it (no target; printed when the data is on the machine);
  ``validate_plan`` on a 50-step plan (valid, and with one invented tool); the
  criticality gate on a mix of questions.
* adversarial input: 1 MB of crafted text (runs of claim openers, money, JSON and tag
  starts, quotes, sentence ends ...) through every detector, best of three; target:
  under 1 s each, however the text is built.
* emit path: ``GuardTelemetry.event`` + ``count`` + ``payload`` (span event, counter,
  payload enqueue), against the baseline of a bare OTel ``span.add_event`` +
  ``counter.add`` with the same attributes on the same providers. The two are timed
  alternately on the same spans, so load and background export threads hit both alike.
  Target: median at most 1.5x the baseline.
* export-side redaction: what redacting every span costs the export thread, per span,
  against the unredacted export as baseline (the same Kafka span exporter, the same
  batches of 512 spans, timed alternately; the producer is flushed between batches,
  untimed), and the cost redaction adds: the median of the difference between the two
  exports of one batch, back to back, which cancels the drift of the load. The spans
  are another instrumentation's, as an LLM client and an HTTP client record them: a
  chat span with a 1 KB prompt and a 1 KB completion (one in ten raising an error, so
  with an exception event; one in twenty quoting an API key), an HTTP span and a tool
  span. The redaction alone is printed beside it: what a span processor would have
  cost the agent's thread (the wrapper costs it nothing). No target: the export
  thread is not the agent's.
* Kafka unreachable: the same emit path with the collector pointed at a port nothing
  listens on (queues fill, drops are counted). Target: p99 within 2x of the reachable
  case; the hot path never waits for Kafka.
* import: ``import guardtrace.collectors`` in fresh interpreters, timed inside each one
  around the import alone (median of ``--import-runs``), next to ``import json`` timed
  the same way and the wall time of ``python -c pass`` (interpreter start). Bytecode is
  cached first, as an installed package has it. Target: median under 100 ms, and no
  Kafka client module loaded by the import. The guard families load on first use, so the
  import with all three loaded is printed beside it (no target: what an agent using every
  guard pays before its first call).

Long because every case shares one set of configured providers and one broker, so
the cases are timed side by side in one process.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import (
    Report,
    collector_settings,
    log,
    percentile,
    realdata_dir,
    services,
    summarize_ns,
)

from guardtrace.schemas import names
from guardtrace.transport.broker import free_port

TARGET_EMIT_RATIO = 1.5
TARGET_CONVERSATION_MEDIAN_US = 1000.0
# Real conversations of the dev set (../shared/realdata), when present: how many windows.
REAL_WINDOWS = 300
REAL_WINDOWS_CASE = "check_conversation, real dev-set replies of 1-3 KB, 20 messages"
TARGET_ADVERSARIAL_S = 1.0
ADVERSARIAL_BYTES = 1 << 20
TARGET_UNREACHABLE_P99_RATIO = 2.0
TARGET_IMPORT_MEDIAN_MS = 100.0
HOOKS_MODULE = "guardtrace.collectors"
# Run in a fresh interpreter: the import alone, timed from inside, and whether it loaded
# the Kafka client.
_IMPORT_PROGRAM = """
import sys, time
started = time.perf_counter()
import {module}
elapsed = time.perf_counter() - started
print(elapsed * 1000, sum(name.split(".")[0] == "kafka" for name in sys.modules))
"""
# The same, then every guard family loaded too (they load on first use): what an agent
# that uses all three guards pays before its first call. Reported beside the target.
_FAMILIES_PROGRAM = """
import time
started = time.perf_counter()
from guardtrace.collectors import FabricationGuard, VerificationLoop, validate_plan
print((time.perf_counter() - started) * 1000)
"""

# Words of random letters: replies share few character 4-shingles, as real replies
# do, so the repetition tier fires only on the replies meant to repeat.
_WORD_RNG = random.Random(11)
_WORDS = ["".join(_WORD_RNG.choice("abcdefghijklmnopqrstuvwxyz")
                  for _ in range(_WORD_RNG.randint(2, 9))) for _ in range(5000)]


def _reply(rng: random.Random, size: int = 2048, claim: str = "") -> str:
    words: list[str] = [claim] if claim else []
    length = len(claim)
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word + ("." if rng.random() < 0.08 else ""))
        length += len(word) + 1
    return " ".join(words)[:size]


def _time_calls(call: Callable[[int], Any], count: int) -> list[int]:
    samples = []
    clock = time.perf_counter_ns
    for i in range(count):
        started = clock()
        call(i)
        samples.append(clock() - started)
    return samples


def bench_guards(calls: int) -> dict[str, Any]:
    from guardtrace.collectors import FabricationGuard, validate_plan
    from guardtrace.collectors.questions.criticality import default_gate

    rng = random.Random(7)
    results: dict[str, Any] = {}

    guard = FabricationGuard()
    clean = [_reply(rng) for _ in range(64)]
    claims = [_reply(rng, claim="I'm deploying the fix to production now.") for _ in range(64)]
    for i in range(3):  # 3 replies of history on each channel
        for c in range(8):
            guard.check(clean[(i * 8 + c) % 64], [], channel=f"chan-{c}")
    flagged = {"clean": 0, "claim": 0}

    def check(kind: str, replies: list[str]) -> Callable[[int], Any]:
        def call(i: int) -> None:
            verdict = guard.check(replies[i % 64], [], channel=f"chan-{i % 8}",
                                  request_id=f"req-{i}", agent="bench-agent")
            flagged[kind] += verdict.flagged
        return call

    results["fabrication check, 2 KB clean reply"] = summarize_ns(
        _time_calls(check("clean", clean), calls))
    results["fabrication check, 2 KB reply claiming an action (emits)"] = summarize_ns(
        _time_calls(check("claim", claims), calls))
    results["_flagged"] = {k: v / calls for k, v in flagged.items()}

    tools = [f"{verb}_{noun}" for verb in ("get", "search", "create", "update", "delete")
             for noun in ("ticket", "user", "invoice", "deploy", "report", "calendar")]
    plan = [{"id": f"s{i}", "tool": tools[i % len(tools)],
             "depends_on": [f"s{j}" for j in range(max(0, i - 3), i)]} for i in range(50)]
    invented = [dict(step) for step in plan]
    invented[25]["tool"] = "deploy_service_v2"
    results["validate_plan, 50 steps, valid"] = summarize_ns(
        _time_calls(lambda i: validate_plan(plan, tools), calls))
    results["validate_plan, 50 steps, one invented tool"] = summarize_ns(
        _time_calls(lambda i: validate_plan(invented, tools), calls))

    conversation, catalog = _conversation(random.Random(5))
    conversation_flags: list[bool] = []
    results["check_conversation, 2 KB reply, 20 messages"] = summarize_ns(_time_calls(
        lambda i: conversation_flags.append(guard.check_conversation(
            conversation, catalog, request_id=f"conv-{i}", agent="bench-agent").flagged),
        calls))
    results["_conversation_flagged"] = sum(conversation_flags) / max(len(conversation_flags), 1)
    windows = _real_windows()
    if windows:
        # Each window once, in conversation order: as an agent checks after each reply.
        results[REAL_WINDOWS_CASE] = summarize_ns(_time_calls(
            lambda i: guard.check_conversation(*windows[i], request_id=f"real-{i}",
                                               agent="bench-agent"), len(windows)))

    gate = default_gate()
    questions = ["How many r's are in strawberry?", "Spell 'necessary' backwards.",
                 "Which planet has the most moons?", "Summarise this thread for me.",
                 "Does the word 'banana' contain the letter n?",
                 "Write a haiku about deployment pipelines and the weekend."]
    results["criticality gate"] = summarize_ns(
        _time_calls(lambda i: gate.assess(questions[i % len(questions)]), calls * 5))
    return results


_CATALOG = [("get_user_details", "Get the details of a user."),
            ("get_reservation_details", "Get the details of a reservation."),
            ("search_direct_flight", "Search direct flights between two cities."),
            ("update_reservation_flights", "Update the flights of a reservation."),
            ("update_reservation_baggages", "Update the baggage of a reservation."),
            ("cancel_reservation", "Cancel the whole reservation."),
            ("book_reservation", "Book a reservation."),
            ("transfer_to_human_agents", "Transfer the user to a human agent."),
            ("calculate", "Calculate a mathematical expression.")]


def _conversation(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A 20-message support conversation (policy, 6 lookups with JSON results) and its
    2 KB last reply, which states values the results gave, as real replies do."""
    import json

    catalog = [{"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {"reservation_id": {"type": "string"}}}}}
        for name, description in _CATALOG]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "# Airline policy\n" + (
        "Confirm the details with the user before any change. Each extra bag costs $50. ")
        * 14}]
    facts: list[str] = []
    for i in range(6):
        reservation = f"R{i:04d}Q"
        flights = [{"flight_number": f"HAT{rng.randint(100, 999)}", "date": f"2024-05-2{i}",
                    "price": rng.randint(80, 900)} for _ in range(3)]
        messages += [
            {"role": "user", "content": f"Can you look up reservation {reservation}? I may "
                                        f"want a later flight on the same day."},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call-{i}", "type": "function", "function": {
                    "name": "get_reservation_details",
                    "arguments": json.dumps({"reservation_id": reservation})}}]},
            {"role": "tool", "tool_call_id": f"call-{i}", "content": json.dumps({
                "reservation_id": reservation, "flights": flights, "cabin": "economy",
                "payment_history": [{"payment_id": "credit_card_4421486",
                                     "amount": sum(f["price"] for f in flights)}]})}]
        facts += [f"Flight {f['flight_number']} on {f['date']} costs ${f['price']}."
                  for f in flights]
    text = "I've checked reservation R0005Q for you. "
    while len(text) < 2048:
        text += rng.choice(facts + [
            "Your payment was made with the card on file.",
            "If you'd like, I can search for a later flight on the same day.",
            "Please confirm which option you prefer, and I'll update the reservation."]) + " "
    messages = messages[:19] + [{"role": "assistant", "content": text[:2048]}]
    return messages, catalog


def _real_windows() -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """The dev set's real replies of 1-3 KB, each with the 19 messages before it and its
    conversation's tools (none when the data is not on this machine)."""
    import json

    path = realdata_dir() / "conversations.jsonl"
    if not path.is_file():
        return []
    windows = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            conversation = json.loads(line)
            messages = conversation["messages"]
            for i, message in enumerate(messages):
                text = message.get("content")
                if (message["role"] == "assistant" and isinstance(text, str)
                        and 1024 <= len(text) <= 3072 and not message.get("x-canned")):
                    windows.append((messages[max(0, i - 19):i + 1], conversation["tools"]))
    return windows[::max(1, len(windows) // REAL_WINDOWS)]


def bench_adversarial() -> dict[str, float]:
    """Seconds for 1 MB of crafted text through each detector (best of three)."""
    from guardtrace.collectors import validate_plan
    from guardtrace.collectors.questions.criticality import default_gate
    from guardtrace.collectors.replies.conversation_guard import judge_conversation
    from guardtrace.collectors.tool_catalog import read_tool_specs

    catalog = [{"type": "function", "function": {"name": n, "parameters": {}}}
               for n, _ in _CATALOG]
    units = ["I'm ", "I have been ", "let me ", "$1,", "12:", '{"name": "', "<tool_call>",
             "cancel_reservation(", "- **a:** ", "A1", "a", "if you ", ". ", "`", '"',
             "Action: ", "123 ", "I've updated it. ", "$5 has been charged. ", "in your ",
             "I can transfer you to a human agent. "]
    gate = default_gate()
    detectors = {
        "conversation (reply, user message and tool result of 1 MB each)":
            lambda t: judge_conversation([
                {"role": "user", "content": t},
                {"role": "assistant", "content": None, "tool_calls": [{
                    "id": "c", "type": "function",
                    "function": {"name": "cancel_reservation", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": t},
                {"role": "assistant", "content": t}], catalog),
        # The loop rules read a reply only beside an earlier one.
        "loops (two replies of 1 MB each, the user insisting between)":
            lambda t: judge_conversation([
                {"role": "user", "content": "Change my flight."},
                {"role": "assistant", "content": t},
                {"role": "user", "content": "Is there any other way?"},
                {"role": "assistant", "content": t}], catalog),
        "criticality gate": gate.assess,
        "validate_plan (a 1 MB tool name)": lambda t: validate_plan(
            [{"id": "s1", "tool": t.replace(" ", "_")}], [n for n, _ in _CATALOG]),
        "tool catalog (a 1 MB description)": lambda t: read_tool_specs(
            [{"name": "x", "description": t, "input_schema": {}}]),
    }
    worst: dict[str, float] = {}
    for name, detector in detectors.items():
        for unit in units:
            text = (unit * (ADVERSARIAL_BYTES // len(unit) + 1))[:ADVERSARIAL_BYTES]
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                detector(text)
                best = min(best, time.perf_counter() - started)
            worst[name] = max(worst.get(name, 0.0), best)
    return worst


def bench_emit(bootstrap: str, topics: Any, calls: int, flush: bool) -> dict[str, Any]:
    """Emit path and bare OTel baseline, timed alternately on the same spans."""
    from guardtrace import collectors
    from guardtrace.collectors.emit.telemetry import GuardTelemetry, internal_totals

    telemetry = collectors.configure(set_global=False, **collector_settings(bootstrap, topics))
    tracer = telemetry.tracer_provider.get_tracer("bench-agent")
    bare_counter = telemetry.meter_provider.get_meter("bench-bare").create_counter("bench.bare")
    guard = GuardTelemetry(names.MODULE_REPLIES, "bench")
    rng = random.Random(3)
    payload_reply = _reply(rng, 1500)
    attributes = {names.ATTR_TIER: names.TIER_ACTION, names.ATTR_MATCHED_PHRASE: "I'm deploying",
                  names.ATTR_TOOLS_FIRED: ["read_file"], names.ATTR_CHANNEL: "chan-3"}
    clock = time.perf_counter_ns
    emit_ns: list[int] = []
    bare_ns: list[int] = []
    for i in range(calls):
        request_id = f"req-{i}"
        agent = f"agent-{i % 20}"
        with tracer.start_as_current_span("agent.turn") as span:
            bare_attrs = {names.ATTR_REQUEST_ID: request_id, names.ATTR_MODULE: "replies",
                          **attributes, names.ATTR_AGENT: agent}
            labels = {names.ATTR_MODULE: "replies", names.ATTR_AGENT: agent,
                      names.ATTR_TIER: names.TIER_ACTION}
            for first in ((True, False) if i % 2 else (False, True)):
                started = clock()
                if first:
                    span.add_event(names.EVENT_FABRICATION_DETECTED, bare_attrs)
                    bare_counter.add(1, labels)
                    bare_ns.append(clock() - started)
                else:
                    guard.event(names.EVENT_FABRICATION_DETECTED, request_id,
                                {**attributes, names.ATTR_AGENT: agent})
                    guard.count(names.METRIC_FABRICATIONS, agent=agent,
                                labels={names.ATTR_TIER: names.TIER_ACTION})
                    guard.payload(request_id, names.PAYLOAD_KIND_FABRICATION,
                                  {"reply": payload_reply, "tiers": ["action"]}, agent=agent)
                    emit_ns.append(clock() - started)
        if flush and (i + 1) % 1000 == 0:
            telemetry.force_flush(30)  # untimed; keeps the bounded span queue from dropping
    if flush:
        telemetry.force_flush(30)
    collectors.shutdown(5 if flush else 0.5)
    dropped = {**internal_totals(names.METRIC_EXPORT_DROPPED),
               **internal_totals(names.METRIC_PAYLOADS_DROPPED)}
    return {"emit": summarize_ns(emit_ns), "bare": summarize_ns(bare_ns), "dropped": dropped}


EXPORT_BATCH = 512  # the BatchSpanProcessor's default batch
# Each batch is exported this many times each way (alternating which goes first).
EXPORT_ROUNDS = 5


def _foreign_spans(turns: int) -> list[Any]:
    """Finished spans of another instrumentation (LLM client, HTTP, tool), three a turn."""
    import string

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    rng = random.Random(17)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    llm = provider.get_tracer("opentelemetry.instrumentation.openai")
    http = provider.get_tracer("opentelemetry.instrumentation.httpx")
    tools = provider.get_tracer("agent.tools")
    for turn in range(turns):
        key = "sk-proj-" + "".join(rng.choice(string.ascii_letters + string.digits)
                                   for _ in range(40))
        prompt = _reply(rng, 1024, claim=f"Use {key} for this. " if turn % 20 == 0 else "")
        try:
            with llm.start_as_current_span("chat gpt-4o") as span:
                span.set_attributes({
                    "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 250 + turn % 50,
                    "gen_ai.usage.output_tokens": 240, "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": prompt,
                    "gen_ai.completion.0.content": _reply(rng, 1024)})
                with http.start_as_current_span("POST") as call:
                    call.set_attributes({"http.request.method": "POST",
                                         "url.full": "https://api.openai.com/v1/chat/completions",
                                         "server.address": "api.openai.com",
                                         "http.response.status_code": 200})
                if turn % 10 == 0:
                    raise RuntimeError(f"upstream returned 429 for turn {turn}: rate limited")
            with tools.start_as_current_span("tool get_reservation_details") as tool:
                tool.set_attributes({"tool.name": "get_reservation_details",
                                     "tool.arguments": f'{{"reservation_id": "R{turn:05d}Q"}}'})
        except RuntimeError:
            pass
    return list(memory.get_finished_spans())


def bench_export_redaction(bootstrap: str, topics: Any, spans_wanted: int) -> dict[str, Any]:
    """Per span: the Kafka span export unredacted (baseline) and redacted, timed
    alternately on the same batches; and the redaction alone."""
    from guardtrace.collectors.emit.export_redaction import RedactingSpanExporter, redact_span
    from guardtrace.collectors.emit.redaction import Redactor
    from guardtrace.collectors.export.kafka_exporters import KafkaSpanExporter
    from guardtrace.collectors.export.kafka_producer import LazyProducer

    spans = _foreign_spans(max(1, spans_wanted // 3))
    batches = [spans[i:i + EXPORT_BATCH] for i in range(0, len(spans), EXPORT_BATCH)]
    producer = LazyProducer(bootstrap, 1_000_000)
    plain = KafkaSpanExporter(producer, topics.spans)
    redactor = Redactor()
    redacting = RedactingSpanExporter(plain, redactor)
    plain.export(batches[0])  # connect, and warm the encoder and the rules, untimed
    redacting.export(batches[0])
    producer.flush(30)
    clock = time.perf_counter_ns
    per_span: dict[str, list[float]] = {"plain": [], "redacted": [], "added": [],
                                        "redaction": []}
    for round_ in range(EXPORT_ROUNDS):
        for index, batch in enumerate(batches):
            order = ("plain", "redacted") if (index + round_) % 2 else ("redacted", "plain")
            pair: dict[str, float] = {}
            for case in order:
                exporter = plain if case == "plain" else redacting
                started = clock()
                exporter.export(batch)
                pair[case] = (clock() - started) / len(batch)
                per_span[case].append(pair[case])
                producer.flush(30)  # untimed: the next batch starts with an empty buffer
            # The same batch, back to back: the difference cancels the drift of the load.
            per_span["added"].append(pair["redacted"] - pair["plain"])
            started = clock()
            for span in batch:
                redact_span(span, redactor)
            per_span["redaction"].append((clock() - started) / len(batch))
    producer.close(5)
    summary: dict[str, Any] = {
        case: {"median_us": round(percentile(values, 50) / 1000, 3),
               "p90_us": round(percentile(values, 90) / 1000, 3), "batches": len(values)}
        for case, values in per_span.items()}
    summary["spans"] = len(spans)
    return summary


def bench_import(runs: int) -> dict[str, Any]:
    """Medians, in ms, of importing the hooks (alone, and with every guard family loaded)
    and ``json`` in fresh interpreters, and of starting an interpreter at all
    (``python -c pass``, wall time)."""
    # A checkout writes its bytecode on first import, an installed package has it from
    # pip: allow the cache and warm it once, so every timed run reads bytecode.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def fresh(program: str) -> str:
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                              text=True, timeout=60, check=True)
        return done.stdout

    fresh(_IMPORT_PROGRAM.format(module=HOOKS_MODULE))
    hooks_ms: list[float] = []
    families_ms: list[float] = []
    json_ms: list[float] = []
    start_ms: list[float] = []
    kafka_modules = 0
    for _ in range(runs):  # interleaved, so load drifts hit all three alike
        elapsed, kafka = fresh(_IMPORT_PROGRAM.format(module=HOOKS_MODULE)).split()
        hooks_ms.append(float(elapsed))
        kafka_modules = max(kafka_modules, int(kafka))
        families_ms.append(float(fresh(_FAMILIES_PROGRAM)))
        json_ms.append(float(fresh(_IMPORT_PROGRAM.format(module="json")).split()[0]))
        started = time.perf_counter()
        fresh("pass")
        start_ms.append((time.perf_counter() - started) * 1000)
    return {"hooks_ms": round(percentile(hooks_ms, 50), 1),
            "hooks_p90_ms": round(percentile(hooks_ms, 90), 1),
            "with_all_families_ms": round(percentile(families_ms, 50), 1),
            "json_ms": round(percentile(json_ms, 50), 1),
            "interpreter_start_ms": round(percentile(start_ms, 50), 1),
            "kafka_modules_loaded": kafka_modules, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="emit calls per case")
    parser.add_argument("--guard-calls", type=int, default=2_000, help="calls per guard case")
    parser.add_argument("--import-runs", type=int, default=21,
                        help="fresh interpreters per import case")
    parser.add_argument("--quick", action="store_true", help="smoke size")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.guard_calls = min(args.calls, 3_000), min(args.guard_calls, 300)
        args.import_runs = min(args.import_runs, 7)
    report = Report("hook_overhead", {"calls": args.calls, "guard_calls": args.guard_calls,
                                      "import_runs": args.import_runs})
    log(f"import {HOOKS_MODULE} in fresh interpreters")
    imports = bench_import(args.import_runs)
    # The guards' structured log lines are built as in an agent, then discarded here.
    guard_logs = logging.getLogger("guardtrace")
    guard_logs.addHandler(logging.NullHandler())
    guard_logs.propagate = False

    with services() as (broker, topics, _tmp):
        log("guards")
        guards = bench_guards(args.guard_calls)
        log("1 MB of adversarial text through each detector")
        adversarial = bench_adversarial()
        log("emit path vs bare OTel, Kafka reachable")
        reachable = bench_emit(broker.bootstrap, topics, args.calls, flush=True)
        log("export-side redaction vs the unredacted span export")
        export = bench_export_redaction(broker.bootstrap, topics,
                                        max(3 * EXPORT_BATCH, args.calls // 4))
    log("emit path, Kafka unreachable")
    nowhere = f"127.0.0.1:{free_port()}"
    unreachable = bench_emit(nowhere, topics, args.calls, flush=False)

    flagged = guards.pop("_flagged")
    conversation_flagged = guards.pop("_conversation_flagged")
    rows = [[name, s["median_us"], s["p99_us"], s["mean_us"], s["calls"]]
            for name, s in guards.items()]
    rows += [["bare OTel add_event + counter.add (baseline)", *_cells(reachable["bare"])],
             ["emit path: event + count + payload enqueue", *_cells(reachable["emit"])],
             ["bare baseline, Kafka unreachable", *_cells(unreachable["bare"])],
             ["emit path, Kafka unreachable", *_cells(unreachable["emit"])]]
    report.table("hook_overhead: per call, microseconds",
                 ["call", "median us", "p99 us", "mean us", "calls"], rows)
    report.table("1 MB of adversarial text, worst over 21 constructions (best of 3 each)",
                 ["detector", "seconds"], [[name, s] for name, s in adversarial.items()])
    redaction_ratio = export["redacted"]["median_us"] / export["plain"]["median_us"]
    report.table(f"span export per span, microseconds ({export['spans']} foreign spans, "
                 f"batches of {EXPORT_BATCH}, median over batches)",
                 ["case", "median us", "p90 us", "batches"],
                 [["Kafka span export, unredacted (baseline)", *_export_cells(export["plain"])],
                  ["Kafka span export, redacted (export thread)",
                   *_export_cells(export["redacted"])],
                  ["added by redaction (redacted - unredacted, same batch back to back)",
                   *_export_cells(export["added"])],
                  ["redaction alone (a span processor's cost to the agent; the wrapper's: 0)",
                   *_export_cells(export["redaction"])]])
    report.table(f"import, fresh interpreters, median of {imports['runs']}",
                 ["case", "median ms"],
                 [["python -c pass (interpreter start, wall; baseline)",
                   imports["interpreter_start_ms"]],
                  ["import json (baseline)", imports["json_ms"]],
                  [f"import {HOOKS_MODULE}", imports["hooks_ms"]],
                  ["... and load all three guard families (not a target)",
                   imports["with_all_families_ms"]]])
    ratio = reachable["emit"]["median_us"] / reachable["bare"]["median_us"]
    p99_ratio = unreachable["emit"]["p99_us"] / reachable["emit"]["p99_us"]
    report.figures.update({
        "guards": guards, "flagged_fraction": flagged,
        "conversation_flagged_fraction": conversation_flagged,
        "adversarial_1mb_s": {k: round(v, 3) for k, v in adversarial.items()},
        "emit": reachable["emit"], "bare": reachable["bare"],
        "emit_vs_bare_median": round(ratio, 3),
        "emit_unreachable": unreachable["emit"], "bare_unreachable": unreachable["bare"],
        "unreachable_vs_reachable_p99": round(p99_ratio, 3),
        "dropped_reachable": reachable["dropped"], "dropped_unreachable": unreachable["dropped"],
        "import": imports,
        "export_redaction": export,
        "export_redacted_vs_plain_median": round(redaction_ratio, 3),
    })
    report.target("check_conversation median, 2 KB reply, 20 messages",
                  guards["check_conversation, 2 KB reply, 20 messages"]["median_us"], "<=",
                  TARGET_CONVERSATION_MEDIAN_US, "us")
    for name, seconds in adversarial.items():
        report.target(f"1 MB adversarial: {name}", seconds, "<", TARGET_ADVERSARIAL_S, "s")
    report.target("emit path median / bare OTel median", ratio, "<=", TARGET_EMIT_RATIO, "x")
    report.target("emit p99, Kafka unreachable / reachable", p99_ratio, "<=",
                  TARGET_UNREACHABLE_P99_RATIO, "x")
    report.target("drops with Kafka reachable", sum(reachable["dropped"].values()), "==", 0)
    report.target(f"import {HOOKS_MODULE}, median", imports["hooks_ms"], "<",
                  TARGET_IMPORT_MEDIAN_MS, "ms")
    report.target(f"kafka modules loaded by import {HOOKS_MODULE}",
                  imports["kafka_modules_loaded"], "==", 0)
    if args.quick:
        report.notes.append("--quick size: a smoke run, not the benchmark's figures")
    return report.finish()


def _export_cells(summary: dict[str, float]) -> list[Any]:
    return [summary["median_us"], summary["p90_us"], summary["batches"]]


def _cells(summary: dict[str, float]) -> list[Any]:
    return [summary["median_us"], summary["p99_us"], summary["mean_us"], summary["calls"]]


if __name__ == "__main__":
    sys.exit(main())
