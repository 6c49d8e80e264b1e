"""Pipeline detection across SIGKILLed consumers: every finding stored once, none missing.

LLM spans of agents with no guardtrace code, in OpenInference's and the OpenTelemetry
GenAI conventions' shapes (as ``benchmarks/pipeline_detection.py`` builds them: an
airline agent's conversation, its tools, a reply), are on the spans topic in OTLP trace
requests before ``guardtrace consume`` starts in a process of its own. One reply in three
calls a tool the request did not list, one claims a booking no tool made, one answers
cleanly. Judging them keeps the consumer busy, and it is killed with SIGKILL at seeded
random moments while it does (a batch half judged, written and not committed, or
mid-insert), then started again; a last consumer runs ``--until-idle``.

The same records judged in this process are the oracle: every event id they give is
stored exactly once (``FINAL``), no other is, and the per-minute rollup counts each
event name as often as the oracle. The seed is in the test id;
``GUARDTRACE_RELIABILITY_SEED=N`` replays a kill schedule.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace.consumers.decode import decode_spans
from guardtrace.consumers.pipeline_detection import PipelineDetection
from guardtrace.schemas import names
from guardtrace.transport.broker import EmbeddedBroker
from guardtrace.transport.topics import TopicSet, ensure_topics
from tests.support.consumer_process import ConsumerProcess, store_env
from tests.support.llm_span_attributes import genai_attributes as genai_span
from tests.support.llm_span_attributes import openinference_attributes as openinference_span
from tests.support.services import wait_for
from tests.support.store_query import query_store

from .scale import size
from .test_consumer_sigkill import committed_offsets

MESSAGES = size(ci=100, full=2_000)
SPANS_PER_MESSAGE = 10
KILLS = 2
KILL_AFTER_S = (0.0, 0.5)  # after its first commit
SEED = int(os.environ.get("GUARDTRACE_RELIABILITY_SEED") or random.SystemRandom().randrange(2**31))

TOOLS = [("search_flights", "Search direct flights between two airports on a date.",
          ["origin", "destination", "date"]),
         ("book_reservation", "Book a reservation for the user.", ["flight_number"])]
KINDS = ("invented", "claimed", "clean")


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def conversation(n: int, kind: str) -> dict[str, Any]:
    """One LLM call of an airline agent: messages, the reply, the tools shown."""
    flight = f"HAT{100 + n % 900}"
    found = [{"flight_number": flight, "departure": f"{6 + n % 15:02d}:05", "price": 120 + n}]
    messages = [
        {"role": "system", "content": "You are an airline agent. Use the tools to look "
                                      "things up and to book."},
        {"role": "user", "content": "Find me a flight from SFO to JFK next Friday."},
        {"role": "assistant", "content": "", "tool_calls": [_call(
            "call_1", "search_flights", {"origin": "SFO", "destination": "JFK",
                                         "date": "2025-05-16"})]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(found)},
    ]
    reply: dict[str, Any] = {"role": "assistant",
                             "content": f"{flight} leaves SFO at {found[0]['departure']} and "
                                        f"costs ${found[0]['price']}. Shall I book it?"}
    if kind == "invented":
        reply = {"role": "assistant", "content": "",
                 "tool_calls": [_call("call_2", "hold_seat", {"flight_number": flight})]}
    elif kind == "claimed":
        reply["content"] = (f"I've booked {flight} for you and sent the confirmation to "
                            "your e-mail.")
    tools = [{"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in params},
                       "required": params}}} for name, description, params in TOOLS]
    return {"messages": messages, "output": reply, "tools": tools}


def openinference_attributes(call: dict[str, Any]) -> dict[str, Any]:
    return openinference_span(call["messages"], call["output"], call["tools"])


def genai_attributes(call: dict[str, Any]) -> dict[str, Any]:
    return genai_span(call["messages"], call["output"], call["tools"], agent="airline-agent")


def llm_messages(count: int) -> tuple[list[bytes], Counter[str]]:
    """``count`` OTLP trace requests of LLM spans (each its own trace, with a request id),
    and the kinds of reply planted."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "airline-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    shapes = (("openinference.instrumentation.openai", openinference_attributes),
              ("opentelemetry.util.genai.handler", genai_attributes))
    planted: Counter[str] = Counter()
    for n in range(count * SPANS_PER_MESSAGE):
        kind = KINDS[n % len(KINDS)]
        scope, attributes = shapes[(n // len(KINDS)) % len(shapes)]
        planted[kind] += 1
        provider.get_tracer(scope).start_span("chat", attributes={
            **attributes(conversation(n, kind)), names.ATTR_REQUEST_ID: f"llm-{n}"}).end()
    spans = exporter.get_finished_spans()
    provider.shutdown()
    return [encode_spans(spans[i:i + SPANS_PER_MESSAGE]).SerializeToString()
            for i in range(0, len(spans), SPANS_PER_MESSAGE)], planted


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [SEED], ids=lambda seed: f"seed={seed}")
def test_findings_of_a_killed_consumer_are_stored_once_and_none_is_lost(
        broker: EmbeddedBroker, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    suffix = uuid.uuid4().hex[:10]
    store = tmp_path / "store"
    # Small batches (a few records each): a kill finds some written and committed, one
    # being judged, one being inserted or written and not committed yet.
    env = store_env(broker.bootstrap, store, suffix, GUARDTRACE_BATCH_MAX_SECONDS="0.2",
                    GUARDTRACE_BATCH_MAX_ROWS="100")
    spans_topic, group = env["GUARDTRACE_SPANS_TOPIC"], env["GUARDTRACE_CONSUMER_GROUP"]
    ensure_topics(broker.bootstrap, TopicSet.resolve(environ=env), partitions=2)

    messages, planted = llm_messages(MESSAGES)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for number, message in enumerate(messages):
        producer.send(spans_topic, key=str(number).encode(), value=message)
    producer.flush()
    producer.close()
    # The oracle: the same records judged here.
    expected = Counter[str]()
    expected_ids: set[str] = set()
    detect = PipelineDetection(decode_spans, {})
    for message in messages:
        for row in detect(message).span_events:
            expected[row[2]] += 1
            expected_ids.add(row[0])
    assert expected[names.EVENT_HALLUCINATION_DETECTED] == planted["invented"]
    assert expected[names.EVENT_FABRICATION_DETECTED] == planted["claimed"]
    assert len(expected_ids) == sum(expected.values())

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    kills: list[dict[str, Any]] = []
    try:
        committed = 0
        while len(kills) < KILLS:
            consumer = ConsumerProcess(env, tmp_path / f"consumer-{len(kills)}.log",
                                       ["--migrate"] if not kills else [])
            joined_s = consumer.wait_assigned()
            # Killed once it has committed a batch of its own, a random moment later:
            # while it judges, inserts or commits the batches after it.
            wait_for(lambda before=committed: committed_offsets(admin, group, spans_topic)
                     > before, timeout_s=60, interval_s=0.05,
                     message="the consumer's first commit")
            delay_s = rng.uniform(*KILL_AFTER_S)
            time.sleep(delay_s)
            consumer.kill()
            committed = committed_offsets(admin, group, spans_topic)
            kills.append({"joined_s": round(joined_s, 2), "killed_after_s": round(delay_s, 2),
                          "committed": committed})
    finally:
        admin.close()
    context = f"seed={seed} kills={kills}"
    assert kills[-1]["committed"] < len(messages), context  # the last one left work

    final = ConsumerProcess(env, tmp_path / "consumer-final.log", ["--until-idle", "2"])
    summary = final.wait(timeout_s=300)
    print(f"{context} final={summary}")

    per_id, rollup, spans, dead = query_store(
        f"chdb://{store}", "guardtrace",
        "SELECT event_id, count() FROM {db}.span_events FINAL GROUP BY event_id",
        "SELECT name, uniqMerge(events) FROM {db}.event_rollup_1m GROUP BY name",
        "SELECT count(), uniqExact(trace_id, span_id) FROM {db}.spans FINAL",
        "SELECT count() FROM {db}.dead_letters FINAL")
    stored = dict(per_id)
    assert set(stored) == expected_ids, context  # none missing, none extra
    assert set(stored.values()) == {1}, context  # each once
    assert dict(rollup) == dict(expected), context
    assert spans[0] == [len(messages) * SPANS_PER_MESSAGE] * 2, context
    assert dead[0][0] == 0 and summary["dead_letters"] == 0, context
