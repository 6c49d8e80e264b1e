"""Zero-code detection through the real broker, consumer and store.

An OTLP trace request as an agent's SDK or a Collector's Kafka exporter writes it, with no
guardtrace code in the agent: an application span carrying the request id, an
OpenInference LLM span whose reply calls a tool the request did not list, and an
OpenTelemetry GenAI span whose reply claims a booking no tool made. The consumer finds
both, and the request id finds them and the LLM spans, as the CLI and the dashboard read
them. Replaying the same Kafka records changes no count; with detection turned off the
same records are stored as spans only. When the application span with the request id
reaches Kafka in a later message than the LLM spans, the findings are filed under the
trace id (the consumer keeps no state) and the request's reads, in the store, the CLI and
the HTTP API, still show each of them once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace import cli
from guardtrace.api import paths
from guardtrace.api.handlers import QueryApi
from guardtrace.api.store_link import StoreLink
from guardtrace.consumers.decode import decode_spans
from guardtrace.consumers.pipeline_detection import PipelineDetection
from guardtrace.schemas import names
from guardtrace.store.request_queries import request_trace, require_request

from .conftest import Pipeline

REQUEST_ID = "trip-7f3a"
SEARCH = {"type": "function", "function": {
    "name": "search_flights", "description": "Search flights",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}}

# openinference-instrumentation-openai's keys: the reply calls "book_hotel", not listed.
OPENINFERENCE_SPAN = {
    "openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1-2025-04-14",
    "llm.tools.0.tool.json_schema": json.dumps(SEARCH),
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "Find me a hotel in Paris",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_9",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "book_hotel",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
        '{"city": "Paris"}',
}
# opentelemetry-util-genai's keys (content captured on spans): only a search ran, and the
# reply says the booking is done.
GENAI_SPAN = {
    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
    "gen_ai.agent.name": "travel-bot",
    "gen_ai.tool.definitions": json.dumps([{**SEARCH["function"], "type": "function"}]),
    "gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "Book AF123 to Paris"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1",
                                         "name": "search_flights", "arguments": {"to": "Paris"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1",
                                    "response": '[{"flight": "AF123"}]'}]}]),
    "gen_ai.output.messages": json.dumps([
        {"role": "assistant", "finish_reason": "stop",
         "parts": [{"type": "text", "content": "I've booked AF123 for you."}]}]),
}


def trace_spans() -> Any:
    """The application span with the request id, and the two LLM spans below it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "trip-planner"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = provider.get_tracer("trip-planner")
    with app.start_as_current_span("plan trip", attributes={"request_id": REQUEST_ID}):
        with provider.get_tracer("openinference.instrumentation.openai").start_as_current_span(
                "ChatCompletion", attributes=OPENINFERENCE_SPAN):
            pass
        with provider.get_tracer("opentelemetry.instrumentation.openai_v2") \
                .start_as_current_span("chat gpt-4.1", attributes=GENAI_SPAN):
            pass
    return exporter.get_finished_spans()


def otlp_request(spans: Any = None, split: bool = False) -> list[bytes]:
    """The trace as one OTLP request, or (``split``) the LLM spans in a first request and
    the application span with the request id in a second, as a SimpleSpanProcessor or a
    batch boundary exports them."""
    spans = trace_spans() if spans is None else spans
    parts = [spans[:-1], spans[-1:]] if split else [spans]  # children end first
    return [encode_spans(part).SerializeToString() for part in parts]


def produce(pipeline: Pipeline, messages: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for message in messages:  # one key: one partition, in this order
        producer.send(pipeline.topics.spans, key=REQUEST_ID.encode(), value=message)
    producer.flush()
    producer.close()


def counts(pipeline: Pipeline) -> tuple[int, list[tuple[str, int]]]:
    distinct = pipeline.scalar("SELECT count() FROM {db}.span_events FINAL")
    rollup = pipeline.rows("SELECT name, uniqMerge(events) FROM {db}.event_rollup_1m "
                           "GROUP BY name ORDER BY name")
    return distinct, rollup


def test_llm_spans_of_an_uninstrumented_agent_become_guard_events(pipeline: Pipeline) -> None:
    produce(pipeline, otlp_request())

    stats = pipeline.consume_until_idle(idle_s=1.0)
    assert stats.dead_letters == 0
    assert stats.pipeline_detection["llm_spans"] == 2

    # What `guardtrace trace` and the dashboard's request page read.
    trace = request_trace(pipeline.client, pipeline.database,
                          require_request(pipeline.client, pipeline.database, REQUEST_ID))
    found = sorted((e.name, e.module, e.agent, e.tier, e.attributes.get(names.ATTR_FOUND_IN))
                   for e in trace.events)
    assert found == sorted([
        (names.EVENT_HALLUCINATION_DETECTED, names.MODULE_PLANNING, "book_hotel", "",
         names.FOUND_IN_PIPELINE),
        (names.EVENT_EVALUATION_RESULT, names.MODULE_PLANNING, "trip-planner", "",
         names.FOUND_IN_PIPELINE),
        (names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES, "travel-bot",
         names.TIER_ACTION, names.FOUND_IN_PIPELINE),
        (names.EVENT_EVALUATION_RESULT, names.MODULE_REPLIES, "travel-bot", "",
         names.FOUND_IN_PIPELINE),
    ])
    labels = {e.attributes[names.ATTR_EVALUATION_NAME]:
              e.attributes[names.ATTR_EVALUATION_SCORE_LABEL]
              for e in trace.events if e.name == names.EVENT_EVALUATION_RESULT}
    assert labels == {names.EVALUATION_PLAN_TOOLS: names.EVALUATION_FAIL,
                      names.EVALUATION_FABRICATION: names.EVALUATION_FAIL}
    llm_spans = {s.span_id for s in trace.spans if s.name != "plan trip"}
    assert {e.span_id for e in trace.events} == llm_spans and len(llm_spans) == 2
    stored_ids = set(pipeline.rows(
        "SELECT DISTINCT request_id FROM {db}.spans FINAL WHERE name != 'plan trip'"))
    assert stored_ids == {(REQUEST_ID,)}

    # The same records again (another group reads the topic from the start): every row
    # is written again, and nothing the rollup counts moves.
    before = counts(pipeline)
    again = pipeline.consume_until_idle(
        idle_s=1.0, group_id=f"{pipeline.consumer_config.group_id}-replay")
    assert again.records == stats.records
    assert again.rows_written == stats.rows_written
    distinct, rollup = counts(pipeline)
    assert (distinct, rollup) == before

    # Turned off, the consumer stores the spans as they came and judges nothing.
    off = pipeline.consume_until_idle(
        idle_s=1.0, group_id=f"{pipeline.consumer_config.group_id}-off",
        pipeline_detection=False)
    assert off.rows_written == {"spans": stats.rows_written["spans"]}
    assert off.pipeline_detection == {}
    assert dict(rollup) == {names.EVENT_EVALUATION_RESULT: 2,
                            names.EVENT_FABRICATION_DETECTED: 1,
                            names.EVENT_HALLUCINATION_DETECTED: 1}


FINDINGS = sorted([
    (names.EVENT_HALLUCINATION_DETECTED, "book_hotel"),
    (names.EVENT_EVALUATION_RESULT, "trip-planner"),
    (names.EVENT_FABRICATION_DETECTED, "travel-bot"),
    (names.EVENT_EVALUATION_RESULT, "travel-bot"),
])


def request_reads(pipeline: Pipeline, chdb_dir: Path,
                  capsys: pytest.CaptureFixture[str]) -> dict[str, list[tuple[str, str]]]:
    """The request's events as the store's request reads (the dashboard's request page),
    the HTTP API and `guardtrace trace` give them: (name, agent), sorted."""
    request = require_request(pipeline.client, pipeline.database, REQUEST_ID)
    trace = request_trace(pipeline.client, pipeline.database, request)
    # The summary names what the events filed under the trace id add.
    assert {names.EVENT_HALLUCINATION_DETECTED, names.EVENT_FABRICATION_DETECTED} <= set(
        trace.request.event_names)
    assert {names.MODULE_PLANNING, names.MODULE_REPLIES} <= set(trace.request.modules)
    assert {e.span_id for e in trace.events} <= {s.span_id for s in trace.spans}
    answer = QueryApi(StoreLink(pipeline.store, pipeline.client)).answer(
        "GET", paths.request_path(paths.REQUEST, REQUEST_ID), {}, "127.0.0.1")
    assert answer.status == 200
    assert set(answer.body["request"]["event_names"]) == set(trace.request.event_names)
    code = cli.main(["trace", REQUEST_ID, "--json", "--clickhouse-url", f"chdb://{chdb_dir}",
                     "--database", pipeline.database])
    out, err = capsys.readouterr()
    assert code == 0, err
    timeline: list[dict[str, Any]] = json.loads(out)["timeline"]
    return {"store": sorted((e.name, e.agent) for e in trace.events),
            "api": sorted((e["name"], e["agent"]) for e in answer.body["events"]),
            "cli": sorted((item["name"], item["agent"]) for item in timeline
                          if item["type"] == "event")}


def test_a_request_id_in_a_later_message_still_finds_the_findings_once(
        pipeline: Pipeline, chdb_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans = trace_spans()
    produce(pipeline, otlp_request(spans, split=True))
    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0 and stats.pipeline_detection["llm_spans"] == 2, stats

    # No state in the consumer: the LLM spans' message had no request id, so the
    # findings are filed under the trace id; the request's reads join them.
    stored = pipeline.rows("SELECT DISTINCT request_id, trace_id FROM {db}.span_events FINAL")
    assert len(stored) == 1 and stored[0][0] == stored[0][1]
    assert require_request(pipeline.client, pipeline.database, REQUEST_ID).trace_ids == (
        stored[0][1],)
    assert request_reads(pipeline, chdb_dir, capsys) == dict.fromkeys(
        ("store", "api", "cli"), FINDINGS)

    # The whole trace again in one message (a resend batched otherwise), decoded and
    # written as the consumer does: the same findings under the request id now, with the
    # same ids. Each is still read once.
    (whole,) = otlp_request(spans)
    pipeline.opened.writer().write(PipelineDetection(decode_spans)(whole))
    rows, ids = pipeline.rows(
        "SELECT count(), uniqExact(event_id) FROM {db}.span_events FINAL")[0]
    assert (rows, ids) == (8, 4)
    assert request_reads(pipeline, chdb_dir, capsys) == dict.fromkeys(
        ("store", "api", "cli"), FINDINGS)
