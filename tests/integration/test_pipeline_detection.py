"""Zero-code detection through the real broker, consumer and store.

An OTLP trace request as an agent's SDK or a Collector's Kafka exporter writes it, with no
guardtrace code in the agent: an application span carrying the request id, an
OpenInference LLM span whose reply calls a tool the request did not list, and an
OpenTelemetry GenAI span whose reply claims a booking no tool made. The consumer finds
both, and the request id finds them and the LLM spans, as the CLI and the dashboard read
them. Replaying the same Kafka records changes no count; with detection turned off the
same records are stored as spans only.
"""

from __future__ import annotations

import json

from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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


def otlp_request() -> bytes:
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
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def counts(pipeline: Pipeline) -> tuple[int, list[tuple[str, int]]]:
    distinct = pipeline.scalar("SELECT count() FROM {db}.span_events FINAL")
    rollup = pipeline.rows("SELECT name, uniqMerge(events) FROM {db}.event_rollup_1m "
                           "GROUP BY name ORDER BY name")
    return distinct, rollup


def test_llm_spans_of_an_uninstrumented_agent_become_guard_events(pipeline: Pipeline) -> None:
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    producer.send(pipeline.topics.spans, key=REQUEST_ID.encode(), value=otlp_request())
    producer.flush()
    producer.close()

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
