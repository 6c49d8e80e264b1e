"""LLM spans per second through the spans decoder, with zero-code detection and without.

    .venv/bin/python benchmarks/pipeline_detection.py            # 5,000 LLM spans
    .venv/bin/python benchmarks/pipeline_detection.py --quick    # 2,000 (smoke)

The records are OTLP trace requests (``ExportTraceServiceRequest`` bytes, as an OTel SDK
or a Collector's Kafka exporter writes them) built by the real OpenTelemetry SDK: spans
of a TracerProvider, encoded by the OTLP exporter's encoder. Each request holds
``--spans-per-request`` LLM spans, half in OpenInference's shape (flattened
``llm.input_messages.N.message.*`` keys, ``llm.tools.N.tool.json_schema``), half in the
OpenTelemetry GenAI conventions (``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.tool.definitions`` JSON), the attributes exactly as
``openinference-instrumentation-openai`` and ``opentelemetry-util-genai`` write them.

Each span is one call of a travel agent with four tools: a system prompt, the user's
question, a search call and its JSON result, the agent's earlier answer, a follow-up
question and a second call with its result, then the reply: about 2 KB of text quoting
the results (flight codes, times, prices). Conversations are drawn from
``--conversations`` distinct ones (tools repeat byte for byte, as an agent's do). Most
replies make no claim and call only listed tools; one in ten claims a booking no tool
made, one in ten also calls a tool the request did not list.

Timed: ``decode_spans`` alone (the baseline), and the consumer's spans decoder with
detection (``PipelineDetection``), over the same records, in alternating rounds (so the
machine's load hits both alike); the figure is the median round. Target (the issue): at
least 5,000 LLM spans per second per consumer process with detection. The findings of
the detection rounds are counted and checked against what was planted. Beside it, with
no target, the same spans in an agent loop's mix, where two calls in three only call a
listed tool (no text to judge), and where the time of a span goes: the reader and the
fabrication engine are timed on their own in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from _common import Report, log
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace.consumers.decode import decode_spans
from guardtrace.consumers.genai_exchange import read_exchange
from guardtrace.consumers.pipeline_detection import PipelineDetection, judge_reply
from guardtrace.schemas import names

TARGET_SPANS_PER_S = 5_000
REPLY_CHARS = 2048

TOOLS = [
    ("search_flights", "Search direct flights between two airports on a date.",
     {"origin": "string", "destination": "string", "date": "string"}),
    ("get_reservation_details", "Get the details of a reservation.",
     {"reservation_id": "string"}),
    ("book_reservation", "Book a reservation for the user.",
     {"user_id": "string", "flight_number": "string", "cabin": "string"}),
    ("get_weather", "Current weather and forecast for a city.", {"city": "string"}),
]
CITIES = [("SFO", "San Francisco"), ("JFK", "New York"), ("ORD", "Chicago"),
          ("SEA", "Seattle"), ("BOS", "Boston"), ("LAX", "Los Angeles")]
SYSTEM = ("You are a helpful airline agent. Use the tools to look things up and to book; "
          "never state a flight, time or price that a tool did not return.")


def _openai_tool(name: str, description: str, params: dict[str, str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object",
                       "properties": {k: {"type": v} for k, v in params.items()},
                       "required": list(params)}}}


def _flights(rng: random.Random, origin: str, destination: str) -> list[dict[str, Any]]:
    return [{"flight_number": f"HAT{rng.randint(100, 999)}", "origin": origin,
             "destination": destination, "departure": f"{rng.randint(6, 21):02d}:{m:02d}",
             "price": rng.randint(120, 900), "seats_left": rng.randint(1, 9)}
            for m in rng.sample(range(0, 60, 5), 3)]


def _answer(rng: random.Random, flights: list[dict[str, Any]], city: str) -> str:
    """About 2 KB quoting the results: what an agent that read them says."""
    lines = [f"Here is what I found for your trip to {city}."]
    for f in flights:
        lines.append(f"- {f['flight_number']} leaves {f['origin']} at {f['departure']} "
                     f"and costs ${f['price']} in economy, with {f['seats_left']} seats left.")
    filler = [
        "Morning departures tend to be the most reliable, since delays build up during the "
        "day, so if your schedule allows it the earliest option is usually the safest one.",
        "Economy fares on this route include one personal item and a carry-on; checked bags "
        "are extra unless you hold a status with the airline or travel in business.",
        "Prices on this route move quickly when seats run low, so the fares above may "
        "change before you decide, and the cheapest option may not stay available for long.",
        f"The weather in {city} this week looks mild, so there should be little reason to "
        "expect weather delays, although the forecast can still change closer to the date.",
        "Let me know which flight you prefer, whether you want economy or business, and the "
        "name of every passenger, and I will take it from there with the booking tools.",
    ]
    text = "\n".join(lines)
    while len(text) < REPLY_CHARS:
        text += "\n\n" + rng.choice(filler)
    return text[:REPLY_CHARS]


def conversation(rng: random.Random, kind: str) -> dict[str, Any]:
    """One LLM call: the conversation sent, the reply and its calls, in OpenAI chat shape."""
    (origin, _), (destination, city) = rng.sample(CITIES, 2)
    first, second = _flights(rng, origin, destination), _flights(rng, origin, destination)
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Find me a flight from {origin} to {destination} "
                                    f"next Friday."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {
                "name": "search_flights", "arguments": json.dumps(
                    {"origin": origin, "destination": destination, "date": "2025-05-16"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(first)},
        {"role": "assistant", "content": _answer(rng, first, city)},
        {"role": "user", "content": "Anything the Saturday after?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_2", "type": "function", "function": {
                "name": "search_flights", "arguments": json.dumps(
                    {"origin": origin, "destination": destination, "date": "2025-05-17"})}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": json.dumps(second)},
    ]
    reply = _answer(rng, second, city)
    calls = []
    if kind == "fabricated":
        reply = (f"I've booked {second[0]['flight_number']} for you and sent the "
                 f"confirmation to your e-mail.\n\n" + reply)[:REPLY_CHARS]
    elif kind == "invented_tool":
        calls = [{"id": "call_3", "type": "function", "function": {
            "name": "hold_seat", "arguments": json.dumps(
                {"flight_number": second[0]["flight_number"]})}}]
    elif kind == "tool_step":  # a step of the agent loop: a listed tool called, no text
        reply = ""
        calls = [{"id": "call_3", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": city})}}]
    output = {"role": "assistant", "content": reply}
    if calls:
        output["tool_calls"] = calls
    return {"messages": messages, "output": output,
            "tools": [_openai_tool(*tool) for tool in TOOLS]}


# -- the two conventions' span attributes, as the instrumentations write them ------------

def openinference_attributes(call: dict[str, Any]) -> dict[str, Any]:
    """As openinference-instrumentation-openai records a chat completion."""
    attrs: dict[str, Any] = {"llm.provider": "openai", "llm.system": "openai",
                             "openinference.span.kind": "LLM",
                             "llm.model_name": "gpt-4.1-2025-04-14",
                             "llm.invocation_parameters": '{"model": "gpt-4.1"}'}

    def put(prefix: str, message: dict[str, Any]) -> None:
        attrs[f"{prefix}.message.role"] = message["role"]
        if message.get("content"):
            attrs[f"{prefix}.message.content"] = message["content"]
        if "tool_call_id" in message:
            attrs[f"{prefix}.message.tool_call_id"] = message["tool_call_id"]
        for m, tool_call in enumerate(message.get("tool_calls", ())):
            at = f"{prefix}.message.tool_calls.{m}.tool_call"
            attrs[f"{at}.id"] = tool_call["id"]
            attrs[f"{at}.function.name"] = tool_call["function"]["name"]
            attrs[f"{at}.function.arguments"] = tool_call["function"]["arguments"]

    for n, tool in enumerate(call["tools"]):
        attrs[f"llm.tools.{n}.tool.json_schema"] = json.dumps(tool)
    for n, message in enumerate(call["messages"]):
        put(f"llm.input_messages.{n}", message)
    put("llm.output_messages.0", call["output"])
    attrs.update({"llm.token_count.prompt": 1450, "llm.token_count.completion": 520,
                  "llm.token_count.total": 1970, "llm.finish_reason": "stop"})
    return attrs


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message["role"] == "tool":
        return [{"response": message["content"], "id": message["tool_call_id"],
                 "type": "tool_call_response"}]
    for tool_call in message.get("tool_calls", ()):
        parts.append({"arguments": json.loads(tool_call["function"]["arguments"]),
                      "name": tool_call["function"]["name"], "id": tool_call["id"],
                      "type": "tool_call"})
    if message.get("content"):
        parts.append({"content": message["content"], "type": "text"})
    return parts


def genai_attributes(call: dict[str, Any]) -> dict[str, Any]:
    """As opentelemetry-util-genai records an inference with content capture on spans."""
    compact = {"separators": (",", ":"), "ensure_ascii": False}
    system, *rest = call["messages"]
    return {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
        "gen_ai.provider.name": "openai", "gen_ai.response.model": "gpt-4.1-2025-04-14",
        "gen_ai.response.id": "chatcmpl-BvA1kQz7", "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 1450, "gen_ai.usage.output_tokens": 520,
        "gen_ai.agent.name": "travel-agent", "gen_ai.conversation.id": "conv-42",
        "gen_ai.system_instructions": json.dumps([{"content": system["content"],
                                                   "type": "text"}], **compact),
        "gen_ai.tool.definitions": json.dumps(
            [{"name": t["function"]["name"], "description": t["function"]["description"],
              "parameters": t["function"]["parameters"], "type": "function"}
             for t in call["tools"]], **compact),
        "gen_ai.input.messages": json.dumps(
            [{"role": m["role"], "parts": _parts(m)} for m in rest], **compact),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": _parts(call["output"]),
              "finish_reason": "tool_calls" if call["output"].get("tool_calls") else "stop"}],
            **compact),
    }


# The target's mix: every reply 2 KB of text, one in ten claiming a booking, one in ten
# also calling an unlisted tool. And an agent loop's (no target): two calls in three
# are steps that only call a listed tool, the third answers with 2 KB.
REPLIES_MIX = ("clean",) * 8 + ("fabricated", "invented_tool")
AGENT_LOOP_MIX = ("tool_step", "tool_step", "clean")


def build_records(spans: int, per_request: int, conversations: int, seed: int,
                  kinds: tuple[str, ...] = REPLIES_MIX) -> tuple[list[bytes], dict[str, int]]:
    """OTLP trace requests of ``spans`` LLM spans, and the findings planted in them."""
    rng = random.Random(seed)
    calls = [(kind := kinds[n % len(kinds)], conversation(rng, kind))
             for n in range(conversations)]
    planted = {"fabricated": 0, "invented_tool": 0}
    records: list[bytes] = []
    for scope, attributes in (("openinference.instrumentation.openai", openinference_attributes),
                              ("opentelemetry.instrumentation.openai_v2", genai_attributes)):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "travel-agent"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer(scope)
        for n in range(spans // 2):
            kind, call = calls[n % len(calls)]
            planted[kind] = planted.get(kind, 0) + 1
            with tracer.start_as_current_span("ChatCompletion",
                                              attributes=attributes(call)):
                pass
        finished = exporter.get_finished_spans()
        for start in range(0, len(finished), per_request):
            records.append(encode_spans(finished[start:start + per_request])
                           .SerializeToString())
        provider.shutdown()
    rng.shuffle(records)
    return records, planted


def _round(decoder: Any, records: list[bytes]) -> tuple[float, int, int]:
    started = time.perf_counter()
    spans = events = 0
    for raw in records:
        rows = decoder(raw)
        spans += len(rows.spans)
        events += len(rows.span_events)
    return time.perf_counter() - started, spans, events


def stages(attrs: list[dict[str, str]]) -> tuple[float, float]:
    """Seconds spent reading the exchanges of ``attrs``, and judging their replies."""
    started = time.perf_counter()
    exchanges = [read_exchange(a) for a in attrs]
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    for exchange in exchanges:
        assert exchange is not None and exchange.messages is not None
        for reply in exchange.output or ():
            judge_reply(exchange.messages, reply, exchange.tools or None,
                        system=exchange.system)
    return read_s, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=5_000, help="LLM spans per round")
    parser.add_argument("--spans-per-request", type=int, default=50,
                        help="LLM spans per OTLP request (Kafka record)")
    parser.add_argument("--conversations", type=int, default=500,
                        help="distinct conversations the spans are drawn from")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating rounds of each decoder")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="smoke size")
    args = parser.parse_args(argv)
    if args.quick:
        args.spans, args.rounds = min(args.spans, 2_000), min(args.rounds, 3)
        args.conversations = min(args.conversations, 100)
    report = Report("pipeline_detection", {
        "spans": args.spans, "spans_per_request": args.spans_per_request,
        "conversations": args.conversations, "rounds": args.rounds,
        "reply_chars": REPLY_CHARS})
    log(f"building {args.spans} LLM spans in OTLP requests")
    records, planted = build_records(args.spans, args.spans_per_request,
                                     args.conversations, args.seed)
    loop_records, _ = build_records(args.spans, args.spans_per_request, args.conversations,
                                    args.seed, AGENT_LOOP_MIX)
    counts: dict[str, int] = {}
    detecting = PipelineDetection(decode_spans, counts)
    loop_detecting = PipelineDetection(decode_spans, {})
    # Warm both paths (caches, lazily built patterns) before timing anything.
    _round(decode_spans, records[:5])
    _round(detecting, records[:5])
    counts.clear()
    attrs = [row[13] for raw in records for row in decode_spans(raw).spans]
    plain_s: list[float] = []
    detect_s: list[float] = []
    read_s: list[float] = []
    judge_s: list[float] = []
    loop_s: list[float] = []
    spans = events = loop_spans = 0
    for number in range(args.rounds):
        log(f"round {number + 1}/{args.rounds}")
        seconds, spans, _ = _round(decode_spans, records)
        plain_s.append(seconds)
        seconds, _, events = _round(detecting, records)
        detect_s.append(seconds)
        # Where the time goes, in the same round: the reader and the engine on their own.
        reading, judging = stages(attrs)
        read_s.append(reading)
        judge_s.append(judging)
        seconds, loop_spans, _ = _round(loop_detecting, loop_records)
        loop_s.append(seconds)
    plain_rate = spans / statistics.median(plain_s)
    detect_rate = spans / statistics.median(detect_s)
    loop_rate = loop_spans / statistics.median(loop_s)
    stage_us = {"read_exchange_us": round(statistics.median(read_s) / spans * 1e6, 1),
                "judge_replies_us": round(statistics.median(judge_s) / spans * 1e6, 1)}
    per_round = {k: v // args.rounds for k, v in counts.items()}
    bytes_per_span = sum(len(r) for r in records) / spans
    report.table(
        f"spans decoder, {spans} LLM spans in {len(records)} OTLP requests "
        f"({bytes_per_span:.0f} bytes a span), median of {args.rounds} rounds",
        ["decoder", "LLM spans/s", "us/span", "rows per round"],
        [["decode_spans (baseline)", round(plain_rate), round(1e6 / plain_rate, 1), spans],
         ["decode_spans + pipeline detection", round(detect_rate), round(1e6 / detect_rate, 1),
          spans + events],
         ["the same, an agent loop's mix (2 of 3 calls only call a tool; no target)",
          round(loop_rate), round(1e6 / loop_rate, 1), ""]])
    decode_us, total_us = 1e6 / plain_rate, 1e6 / detect_rate
    rest_us = (total_us - decode_us - stage_us["read_exchange_us"]
               - stage_us["judge_replies_us"])
    report.table("where the time goes, microseconds per LLM span",
                 ["stage", "us/span", "share"],
                 [[name, round(us, 1), f"{us / total_us:.0%}"] for name, us in (
                     ("decode_spans (OTLP bytes -> rows)", decode_us),
                     ("read_exchange (attributes -> messages, tools)",
                      stage_us["read_exchange_us"]),
                     ("judge_reply (the fabrication engine, tiers that can fire)",
                      stage_us["judge_replies_us"]),
                     ("the rest (tool-call check, rows, request ids)", rest_us))])
    findings = per_round.get("findings", 0)
    report.table("what detection counted per round",
                 ["count", "value"], sorted(per_round.items()))
    report.figures.update({
        "decode_spans_per_s": round(plain_rate), "detect_spans_per_s": round(detect_rate),
        "agent_loop_detect_spans_per_s": round(loop_rate),
        "detect_vs_decode": round(detect_rate / plain_rate, 4),
        "us_per_span_detection_added": round(1e6 / detect_rate - 1e6 / plain_rate, 1),
        "records": len(records), "bytes_per_span": round(bytes_per_span),
        "planted": planted, "counts_per_round": per_round, "stages_us": stage_us,
        "rounds_s": {"decode": [round(s, 3) for s in plain_s],
                     "detect": [round(s, 3) for s in detect_s],
                     "agent_loop_detect": [round(s, 3) for s in loop_s]},
    })
    report.target("LLM spans/s with detection", detect_rate, ">=", TARGET_SPANS_PER_S,
                  "spans/s")
    # One hallucination per invented tool, and at least the planted booking claim (an
    # invented call's reply is judged too) per fabricated reply.
    report.target("findings per round >= planted", findings, ">=",
                  planted["fabricated"] + planted["invented_tool"])
    report.target("LLM spans not read", spans - per_round.get("llm_spans", 0), "==", 0)
    if args.quick:
        report.notes.append("--quick size: a smoke run, not the benchmark's figures")
    report.notes.append(f"event names written: {names.EVENT_HALLUCINATION_DETECTED}, "
                        f"{names.EVENT_FABRICATION_DETECTED}, "
                        f"{names.EVENT_EVALUATION_RESULT}")
    return report.finish()


if __name__ == "__main__":
    raise SystemExit(main())
