"""One LLM call read from OpenInference and OpenTelemetry GenAI span attributes.

The shapes are the instrumentations' own: OpenInference's are produced here by the real
``openinference-instrumentation-openai`` on a real OpenAI client (answered offline);
the GenAI ones are pinned as ``opentelemetry-instrumentation-openai-v2`` 2.4b0 and
``opentelemetry-util-genai`` 1.1b0 wrote them with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` (span) and
``span_and_event`` (log event), after the consumers' text conversion
(:func:`~guardtrace.consumers.otlp_values.attributes_map`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace.consumers.genai_exchange import (
    CONVENTION_GENAI,
    CONVENTION_OPENINFERENCE,
    PROBLEM_BAD_JSON,
    PROBLEM_MISSING_INDEX,
    PROBLEM_NOT_CAPTURED,
    PROBLEM_UNEXPECTED_SHAPE,
    read_exchange,
)
from guardtrace.consumers.otlp_values import attributes_map
from tests.support.llm_wire import ScriptedAPI, chat_completion

SEARCH_TOOL = {"type": "function", "function": {
    "name": "search_flights", "description": "Search flights",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}}
CONVERSATION = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "Book me a flight to Paris"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "search_flights", "arguments": '{"to": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '[{"flight": "AF123"}]'},
    {"role": "user", "content": [{"type": "text", "text": "ok book it"}]},
]
SEARCH_CALL = {"id": "call_1", "type": "function",
               "function": {"name": "search_flights", "arguments": '{"to": "Paris"}'}}

# opentelemetry-instrumentation-openai-v2 2.4b0 (util-genai 1.1b0), span_only, the same
# call: the system prompt travels as a message, and the user's content list was not
# captured (parts: []).
V2_SPAN = {
    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
    "gen_ai.provider.name": "openai", "gen_ai.response.finish_reasons": '["tool_calls"]',
    "gen_ai.response.model": "gpt-4.1-2025-04-14", "gen_ai.response.id": "chatcmpl-BvA1kQz7",
    "gen_ai.usage.input_tokens": "85", "gen_ai.usage.output_tokens": "18",
    "gen_ai.input.messages": (
        '[{"role":"system","parts":[{"content":"You are a travel agent.","type":"text"}]},'
        '{"role":"user","parts":[{"content":"Book me a flight to Paris","type":"text"}]},'
        '{"role":"assistant","parts":[{"arguments":{"to":"Paris"},"name":"search_flights",'
        '"id":"call_1","type":"tool_call"}]},{"role":"tool","parts":[{"response":'
        '"[{\\"flight\\": \\"AF123\\"}]","id":"call_1","type":"tool_call_response"}]},'
        '{"role":"user","parts":[]}]'),
    "gen_ai.output.messages": (
        '[{"role":"assistant","parts":[{"arguments":{"city":"Paris"},"name":"book_hotel",'
        '"id":"call_9","type":"tool_call"},{"content":"I have booked the flight for you.",'
        '"type":"text"}],"finish_reason":"tool_calls"}]'),
    "openai.response.service_tier": "default",
    "openai.response.system_fingerprint": "fp_b3f1157249",
}
# opentelemetry-util-genai 1.1b0's TelemetryHandler, span_and_event: system instructions
# and tool definitions apart from the messages; the log event carries the same keys,
# its arrays of maps stored as JSON with the default separators.
UTIL_SPAN = {
    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
    "gen_ai.provider.name": "openai", "gen_ai.response.finish_reasons": '["stop"]',
    "gen_ai.input.messages": (
        '[{"role":"user","parts":[{"content":"Book me a flight to Paris","type":"text"}]},'
        '{"role":"assistant","parts":[{"arguments":{"to":"Paris"},"name":"search_flights",'
        '"id":"call_1","type":"tool_call"}]},{"role":"tool","parts":[{"response":'
        '"[{\\"flight\\": \\"AF123\\"}]","id":"call_1","type":"tool_call_response"}]},'
        '{"role":"user","parts":[{"content":"Book it","type":"text"}]}]'),
    "gen_ai.output.messages": ('[{"role":"assistant","parts":[{"content":"I have booked '
                               'AF123 for you.","type":"text"}],"finish_reason":"stop"}]'),
    "gen_ai.system_instructions": '[{"content":"You are a travel agent.","type":"text"}]',
    "gen_ai.tool.definitions": (
        '[{"name":"search_flights","description":"Search flights","parameters":'
        '{"type":"object","properties":{"to":{"type":"string"}}},"type":"function"}]'),
}
UTIL_LOG_EVENT = {key: json.dumps(json.loads(value)) if key in (
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
    "gen_ai.tool.definitions") else value for key, value in UTIL_SPAN.items()}


@pytest.fixture
def openinference_spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()


def stored_attributes(exporter: InMemorySpanExporter) -> dict[str, str]:
    """The one span's attributes as the consumers store them (OTLP, then text)."""
    (span,) = exporter.get_finished_spans()
    request = encode_spans([span])
    return attributes_map(request.resource_spans[0].scope_spans[0].spans[0].attributes)


def test_openinference_span_of_a_real_client_reads_as_the_call_it_recorded(
        openinference_spans: InMemorySpanExporter) -> None:
    api = ScriptedAPI(chat_completion("I have booked the flight for you.",
                                      [("call_9", "book_hotel", {"city": "Paris"})]))
    client = openai.OpenAI(api_key="sk-test", max_retries=0, http_client=api.http_client())
    client.chat.completions.create(model="gpt-4.1", tools=[SEARCH_TOOL], messages=CONVERSATION)

    attrs = stored_attributes(openinference_spans)
    assert attrs["openinference.span.kind"] == "LLM"
    assert "llm.input_messages.4.message.contents.0.message_content.text" in attrs
    exchange = read_exchange(attrs)

    assert exchange is not None and exchange.problems == ()
    assert exchange.convention == CONVENTION_OPENINFERENCE
    assert exchange.messages == [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Book me a flight to Paris"},
        {"role": "assistant", "tool_calls": [SEARCH_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '[{"flight": "AF123"}]'},
        {"role": "user", "content": "ok book it"},  # a content list, flattened by kind
    ]
    assert exchange.output == [{"role": "assistant",
                                "content": "I have booked the flight for you.",
                                "tool_calls": [{"id": "call_9", "type": "function", "function": {
                                    "name": "book_hotel", "arguments": '{"city": "Paris"}'}}]}]
    assert exchange.tools == [SEARCH_TOOL]
    assert exchange.model == "gpt-4.1-2025-04-14"


def test_genai_v2_span_reads_as_the_same_call() -> None:
    exchange = read_exchange(V2_SPAN)

    assert exchange is not None and exchange.problems == ()
    assert exchange.convention == CONVENTION_GENAI
    assert exchange.messages == [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Book me a flight to Paris"},
        {"role": "assistant", "content": "", "tool_calls": [
            {**SEARCH_CALL, "function": {"name": "search_flights",
                                         "arguments": '{"to": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '[{"flight": "AF123"}]'},
        {"role": "user", "content": ""},
    ]
    assert exchange.output == [{"role": "assistant",
                                "content": "I have booked the flight for you.",
                                "tool_calls": [{"id": "call_9", "type": "function", "function": {
                                    "name": "book_hotel", "arguments": '{"city": "Paris"}'}}]}]
    # v2 records no tool definitions: the tools are empty, not unknown.
    assert exchange.tools == []
    assert (exchange.model, exchange.response_id) == ("gpt-4.1-2025-04-14",
                                                      "chatcmpl-BvA1kQz7")


@pytest.mark.parametrize("attrs", [UTIL_SPAN, UTIL_LOG_EVENT], ids=["span", "log_event"])
def test_genai_system_instructions_and_tool_definitions_are_read(attrs: dict[str, str]) -> None:
    exchange = read_exchange({**attrs, "gen_ai.agent.name": "travel-bot",
                              "gen_ai.conversation.id": "conv-7"})

    assert exchange is not None and exchange.problems == ()
    assert exchange.system == "You are a travel agent."
    assert exchange.tools == [{"name": "search_flights", "description": "Search flights",
                               "parameters": SEARCH_TOOL["function"]["parameters"],  # type: ignore[index]
                               "type": "function"}]
    assert exchange.messages is not None and exchange.messages[-1] == {
        "role": "user", "content": "Book it"}
    assert exchange.output == [{"role": "assistant", "content": "I have booked AF123 for you."}]
    assert (exchange.agent_name, exchange.conversation_id) == ("travel-bot", "conv-7")


def test_a_log_record_without_an_operation_name_is_read_by_its_messages() -> None:
    attrs = {k: v for k, v in UTIL_LOG_EVENT.items() if k != "gen_ai.operation.name"}
    exchange = read_exchange(attrs)
    assert exchange is not None and exchange.output is not None


@pytest.mark.parametrize("attrs", [
    {"http.request.method": "POST", "url.full": "https://api.openai.com/v1/chat"},
    {"openinference.span.kind": "CHAIN", "llm.input_messages.0.message.role": "user"},
    {"openinference.span.kind": "TOOL", "tool.name": "search_flights"},
    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel-bot",
     "gen_ai.output.messages": UTIL_SPAN["gen_ai.output.messages"]},
    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_flights"},
    {"gen_ai.operation.name": "embeddings"},
    {},
], ids=["http", "oi_chain", "oi_tool", "invoke_agent", "execute_tool", "embeddings", "empty"])
def test_what_is_no_llm_call_reads_as_none(attrs: dict[str, str]) -> None:
    assert read_exchange(attrs) is None


def oi(**fields: str) -> dict[str, str]:
    """OpenInference LLM span attributes from ``in0_role="user"``-style shorthands."""
    attrs = {"openinference.span.kind": "LLM"}
    for short, value in fields.items():
        head, field = short.split("_", 1)
        where, number = head.rstrip("0123456789"), head.lstrip("inout")
        prefix = {"in": "llm.input_messages", "out": "llm.output_messages"}[where]
        attrs[f"{prefix}.{number}.message.{field}"] = value
    return attrs


@pytest.mark.parametrize(("attrs", "problem", "unread"), [
    ({**V2_SPAN, "gen_ai.input.messages": '[{"role": "user", "parts": [{"content": "hi'},
     PROBLEM_BAD_JSON, "messages"),
    ({**V2_SPAN, "gen_ai.output.messages": "not json"}, PROBLEM_BAD_JSON, "output"),
    ({**V2_SPAN, "gen_ai.tool.definitions": "[{"}, PROBLEM_BAD_JSON, "tools"),
    ({**V2_SPAN, "gen_ai.input.messages": '{"role": "user"}'},
     PROBLEM_UNEXPECTED_SHAPE, "messages"),
    ({**V2_SPAN, "gen_ai.input.messages": '[{"parts": []}]'},
     PROBLEM_UNEXPECTED_SHAPE, "messages"),
    ({**V2_SPAN, "gen_ai.output.messages": '[{"role": "assistant", "parts": ["text"]}]'},
     PROBLEM_UNEXPECTED_SHAPE, "output"),
    ({**V2_SPAN, "gen_ai.tool.definitions": '{"name": "x"}'}, PROBLEM_UNEXPECTED_SHAPE, "tools"),
    # Content capture off: the operation is known, the messages are not there.
    ({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1"},
     PROBLEM_NOT_CAPTURED, "output"),
    # An SDK attribute limit dropped the oldest attributes: messages 0 and 1 are gone.
    (oi(in2_role="user", in2_content="hi", out0_role="assistant", out0_content="Done."),
     PROBLEM_MISSING_INDEX, "messages"),
    (oi(in0_role="user", in0_content="hi", in2_role="user", out0_role="assistant",
        out0_content="Done."), PROBLEM_MISSING_INDEX, "messages"),
    (oi(in0_content="hi", out0_role="assistant", out0_content="Done."),
     PROBLEM_MISSING_INDEX, "messages"),
    ({**oi(in0_role="user", in0_content="hi", out0_role="assistant"),
      "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "x"},
     PROBLEM_MISSING_INDEX, "output"),
    ({**oi(in0_role="user", in0_content="hi", out0_role="assistant"),
      "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1"},
     PROBLEM_MISSING_INDEX, "output"),
    (oi(in0_role="user", in0_content="hi"), PROBLEM_NOT_CAPTURED, "output"),
    # OPENINFERENCE_HIDE_OUTPUT_TEXT / HIDE_INPUT_TEXT replace the text.
    (oi(in0_role="user", in0_content="hi", out0_role="assistant",
        out0_content="__REDACTED__"), PROBLEM_NOT_CAPTURED, "output"),
    (oi(in0_role="user", in0_content="__REDACTED__", out0_role="assistant",
        out0_content="Done."), PROBLEM_NOT_CAPTURED, "messages"),
    ({**oi(in0_role="user", in0_content="hi", out0_role="assistant", out0_content="Done."),
      "llm.tools.0.tool.json_schema": '{"type": "function", "function": {"name": '},
     PROBLEM_BAD_JSON, "tools"),
    ({**oi(in0_role="user", in0_content="hi", out0_role="assistant", out0_content="Done."),
      "llm.tools.1.tool.json_schema": json.dumps(SEARCH_TOOL)}, PROBLEM_MISSING_INDEX, "tools"),
    ({**oi(out0_role="assistant", out0_content="Done."),
      "llm.input_messages.x.message.role": "user"}, PROBLEM_UNEXPECTED_SHAPE, "messages"),
    ({**oi(out0_role="assistant", out0_content="Done."),
      "llm.input_messages.².message.role": "user"}, PROBLEM_UNEXPECTED_SHAPE, "messages"),
])
def test_what_cannot_be_read_is_named_and_left_unknown(attrs: dict[str, str], problem: str,
                                                      unread: str) -> None:
    exchange = read_exchange(attrs)

    assert exchange is not None
    assert problem in exchange.problems
    assert exchange.problem_details[problem]  # a line for the log: which key, and why
    assert getattr(exchange, unread) is None


def test_a_readable_part_is_kept_when_another_is_not() -> None:
    exchange = read_exchange({**V2_SPAN, "gen_ai.input.messages": "[oops"})
    assert exchange is not None and exchange.messages is None
    assert exchange.output is not None and exchange.output[0]["tool_calls"][0]["function"][
        "name"] == "book_hotel"


def test_the_same_tool_list_is_one_object_across_spans() -> None:
    first, second = read_exchange(UTIL_SPAN), read_exchange(dict(UTIL_SPAN))
    assert first is not None and second is not None
    assert first.tools is second.tools  # parsed once; the detectors' caches key on it


_KEYS = st.sampled_from([
    "openinference.span.kind", "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content", "llm.input_messages.1.message.role",
    "llm.input_messages.0.message.contents.0.message_content.text",
    "llm.output_messages.0.message.role", "llm.output_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.tools.0.tool.json_schema", "llm.tools.3.tool.json_schema",
    "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.system_instructions", "gen_ai.tool.definitions",
])
_VALUES = st.one_of(
    st.sampled_from(["LLM", "chat", "user", "assistant", "[]", "{}", "[{}]", "null", "1",
                     '[{"role": "user", "parts": [{"type": "tool_call"}]}]',
                     '[{"role": "tool", "parts": [{"type": "tool_call_response"}]}]',
                     '[{"role": 3, "parts": {}}]', '[{"content": 5, "type": "text"}]',
                     "__REDACTED__"]),
    st.text(max_size=30))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=8))
def test_reading_never_raises_on_what_attributes_hold(attrs: dict[str, Any]) -> None:
    exchange = read_exchange(attrs)
    assert exchange is None or isinstance(exchange.problems, tuple)
