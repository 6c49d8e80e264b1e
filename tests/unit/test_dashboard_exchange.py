"""The request page's reading of an LLM call as a conversation (dashboard/views/exchange.py).

The ``llm_exchange`` payloads are the adapters' own: real OpenAI and Anthropic clients,
answered offline (tests/support/llm_wire.py), instrumented by guardtrace, their payloads
captured in memory as the Kafka sink would ship them; the LangChain body is the adapter's
request (its own converter) over real LangChain messages; the text record is the
simulator's. Span attributes are the shapes pinned in test_genai_exchange.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from guardtrace.collectors.testing import Capture, capture
from guardtrace.dashboard.views.exchange import (
    ROLE_ASSISTANT,
    ROLE_PROMPT,
    ROLE_SYSTEM,
    ROLE_TOOL,
    ROLE_USER,
    Conversation,
    Message,
    ToolCall,
    Unreadable,
    read_payload_exchange,
    read_reply,
    read_span_exchange,
    tool_names,
)
from guardtrace.integrations import anthropic as gt_anthropic
from guardtrace.integrations import openai as gt_openai
from guardtrace.integrations._messages import from_langchain
from guardtrace.integrations._sdk import plain
from guardtrace.schemas import names
from guardtrace.simulator.fleet import Fleet
from tests.support.llm_wire import (
    ScriptedAPI,
    anthropic_message,
    chat_completion,
    response_object,
)

from .test_genai_exchange import UTIL_SPAN, V2_SPAN

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
HISTORY = [
    {"role": "system", "content": "You are a weather assistant."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 12}'},
]
PARIS = '{\n  "city": "Paris"\n}'


@pytest.fixture
def cap() -> Iterator[Capture]:
    with capture() as captured:
        yield captured


def exchanges(cap: Capture) -> list[str]:
    """The llm_exchange bodies the adapters recorded, one per call, in call order."""
    return [p.body for p in cap.payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]


def openai_client(api: ScriptedAPI) -> Any:
    return gt_openai.instrument(openai.OpenAI(api_key="sk-test", max_retries=0,
                                              http_client=api.http_client()))


def conversation_of(body: str) -> Conversation:
    conversation = read_payload_exchange(body)
    assert isinstance(conversation, Conversation), conversation
    return conversation


def test_a_chat_completions_exchange_reads_in_order_with_calls_and_results(
        cap: Capture) -> None:
    api = ScriptedAPI(chat_completion("It is 12 degrees in Paris.",
                                      [("call_2", "get_wether_forecast", {"city": "Paris"})]))
    openai_client(api).chat.completions.create(model="gpt-4.1", messages=HISTORY,
                                               tools=[WEATHER_TOOL])
    [body] = exchanges(cap)
    conversation = conversation_of(body)

    assert conversation.sent == (
        Message(ROLE_SYSTEM, "You are a weather assistant."),
        Message(ROLE_USER, "Weather in Paris?"),
        Message(ROLE_ASSISTANT, tool_calls=(ToolCall("get_weather", PARIS, "call_1"),)),
        # A result is named after the call it answers.
        Message(ROLE_TOOL, '{"temp_c": 12}', answers="call_1", tool="get_weather"),
    )
    assert conversation.reply == (Message(ROLE_ASSISTANT, "It is 12 degrees in Paris.", (
        ToolCall("get_wether_forecast", PARIS, "call_2"),)),)
    assert conversation.tools == ("get_weather",)
    assert conversation.model == "gpt-4.1" and conversation.notes == ()
    assert conversation.reply_text == "It is 12 degrees in Paris."
    assert [c.name for c in conversation.reply_calls] == ["get_wether_forecast"]


def test_a_responses_exchange_joins_calls_to_the_reply_and_reads_instructions(
        cap: Capture) -> None:
    api = ScriptedAPI(response_object("Checking Rome.", [("c9", "get_weather", {"city": "Rome"})]))
    openai_client(api).responses.create(
        model="gpt-4.1", instructions="Be brief.",
        input=[{"role": "user", "content": "Rome?"},
               {"type": "function_call", "call_id": "c0", "name": "get_weather",
                "arguments": '{"city": "Milan"}'},
               {"type": "function_call_output", "call_id": "c0", "output": "sunny"}],
        tools=[{"type": "function", "name": "get_weather", "parameters": {}}])
    [body] = exchanges(cap)
    conversation = conversation_of(body)

    assert conversation.sent == (
        Message(ROLE_SYSTEM, "Be brief."), Message(ROLE_USER, "Rome?"),
        Message(ROLE_ASSISTANT, tool_calls=(
            ToolCall("get_weather", '{\n  "city": "Milan"\n}', "c0"),)),
        Message(ROLE_TOOL, "sunny", answers="c0", tool="get_weather"))
    # The output's message and its function call are one assistant turn.
    assert conversation.reply == (Message(ROLE_ASSISTANT, "Checking Rome.", (
        ToolCall("get_weather", '{\n  "city": "Rome"\n}', "c9"),)),)
    assert conversation.tools == ("get_weather",)


def test_an_anthropic_exchange_splits_tool_results_out_of_the_user_turn(
        cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message("Sent.", [("tu_1", "send_mail", {"to": "ops"})]))
    client = gt_anthropic.instrument(anthropic.Anthropic(
        api_key="sk-test", max_retries=0, http_client=api.http_client()))
    client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100,
        system=[{"type": "text", "text": "You are ops."}],
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, {
                "type": "tool_use", "id": "t0", "name": "get_weather", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0",
                                          "content": [{"type": "text", "text": "sunny"}]},
                                         {"type": "text", "text": "Mail it to ops."}]}],
        tools=[{"name": "get_weather", "description": "w", "input_schema": {"type": "object"}}])
    [body] = exchanges(cap)
    conversation = conversation_of(body)

    assert conversation.sent == (
        Message(ROLE_SYSTEM, "You are ops."), Message(ROLE_USER, "Weather?"),
        Message(ROLE_ASSISTANT, "Let me look.", (ToolCall("get_weather", "{}", "t0"),)),
        Message(ROLE_TOOL, "sunny", answers="t0", tool="get_weather"),
        Message(ROLE_USER, "Mail it to ops."))
    assert conversation.reply == (Message(ROLE_ASSISTANT, "Sent.", (
        ToolCall("send_mail", '{\n  "to": "ops"\n}', "tu_1"),)),)
    assert conversation.tools == ("get_weather",)


def test_a_langchain_exchange_reads_its_ai_message_reply() -> None:
    # The LangChain adapter's body: the conversation its converter makes, the tools' names,
    # and the reply as LangChain dumps it (a call both in the content and in tool_calls).
    reply = AIMessage(content=[{"type": "text", "text": "Checking."},
                               {"type": "tool_use", "id": "c2", "name": "get_weather",
                                "input": {"city": "Oslo"}}],
                      tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "c2"}])
    history = from_langchain([SystemMessage("Be kind."), HumanMessage("Oslo?"),
                              AIMessage("", tool_calls=[{"name": "get_weather",
                                                         "args": {"city": "Bergen"},
                                                         "id": "c1"}]),
                              ToolMessage("rain", tool_call_id="c1")])
    body = json.dumps({"messages": history, "tools": ["get_weather"], "response": plain(reply)})
    conversation = conversation_of(body)

    assert [m.role for m in conversation.sent] == [ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT,
                                                   ROLE_TOOL]
    assert conversation.sent[3] == Message(ROLE_TOOL, "rain", answers="c1", tool="get_weather")
    assert conversation.reply == (Message(ROLE_ASSISTANT, "Checking.", (
        ToolCall("get_weather", '{\n  "city": "Oslo"\n}', "c2"),)),)
    assert conversation.tools == ("get_weather",)


def test_the_simulators_text_record_reads_as_prompt_then_reply() -> None:
    script = Fleet(7).next_request()
    conversation = conversation_of(script.exchange())

    assert conversation.sent == (Message(ROLE_PROMPT, script.prompt),)
    assert conversation.reply == (Message(ROLE_ASSISTANT, script.response),)
    assert conversation.tools is None  # a text record lists no tools


def test_an_llm_span_reads_with_the_consumers_reader() -> None:
    conversation = read_span_exchange(UTIL_SPAN)
    assert isinstance(conversation, Conversation)
    assert conversation.sent[0] == Message(ROLE_SYSTEM, "You are a travel agent.")
    assert conversation.sent[2].tool_calls == (
        ToolCall("search_flights", '{\n  "to": "Paris"\n}', "call_1"),)
    assert conversation.sent[3] == Message(ROLE_TOOL, '[{"flight": "AF123"}]',
                                           answers="call_1", tool="search_flights")
    assert conversation.reply_text == "I have booked AF123 for you."
    assert conversation.tools == ("search_flights",)

    v2 = read_span_exchange(V2_SPAN)
    assert isinstance(v2, Conversation)
    assert v2.reply_calls == (ToolCall("book_hotel", '{\n  "city": "Paris"\n}', "call_9"),)
    # openai-v2 records no tool definitions: the list shown is unknown, not empty.
    assert v2.tools is None and v2.model == "gpt-4.1-2025-04-14"


def test_openinference_flattened_keys_read_as_a_conversation() -> None:
    attributes = {
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Book it",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c7",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "book_hotel",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{}",
        "llm.tools.0.tool.json_schema": json.dumps(WEATHER_TOOL),
    }
    conversation = read_span_exchange(attributes)
    assert isinstance(conversation, Conversation)
    assert conversation.sent == (Message(ROLE_USER, "Book it"),)
    assert conversation.reply_calls == (ToolCall("book_hotel", "{}", "c7"),)
    assert conversation.tools == ("get_weather",)


def test_spans_that_record_no_llm_call_are_none_and_uncaptured_content_is_named() -> None:
    assert read_span_exchange({"http.request.method": "POST"}) is None
    assert read_span_exchange({"openinference.span.kind": "TOOL"}) is None
    hidden = read_span_exchange({"gen_ai.operation.name": "chat",
                                 "gen_ai.request.model": "gpt-4.1"})
    assert isinstance(hidden, Unreadable)
    assert "content_not_captured" in hidden.note and "gen_ai.output.messages" in hidden.note


@pytest.mark.parametrize(("body", "says"), [
    ('{"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}' +
     names.TRUNCATION_MARKER, "not valid JSON"),
    ("[" * 100_000, "nested too deep"),
    ('"just a string"', "neither JSON nor"),
    ("42", "neither JSON nor"),
    ("null", "neither JSON nor"),
    ('{"prompt": "plan the trip"}', "no 'messages', 'input' or 'response'"),
    ("plain words, no record", "neither JSON nor a text record"),
    ("", "neither JSON nor a text record"),
], ids=["truncated", "deep", "json-string", "json-number", "json-null", "other-object",
        "text", "empty"])
def test_a_body_that_is_no_exchange_is_unreadable_with_a_reason(body: str, says: str) -> None:
    read = read_payload_exchange(body)
    assert isinstance(read, Unreadable), read
    assert says in read.note


def test_odd_parts_are_shown_not_dropped_and_named_in_notes() -> None:
    body = json.dumps({"messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}},
                                     {"type": "text", "text": "what is this?"}, 7]},
        "a bare string turn", 3.5, {"something": "else"}],
        "tools": [{"type": "function"}, "lookup"],
        "response": {"choices": [{"message": {"role": "assistant", "refusal": "I can't."}}]}})
    conversation = conversation_of(body)

    assert conversation.sent[0] == Message(ROLE_USER, '[image_url]\nwhat is this?\n7')
    assert conversation.sent[1] == Message(ROLE_USER, "a bare string turn")
    assert conversation.sent[2].text == "3.5"
    assert conversation.sent[3].text == '{"something": "else"}'
    assert conversation.reply == (Message(ROLE_ASSISTANT, "I can't."),)
    assert conversation.tools == ("lookup",)
    assert any("without a name" in note for note in conversation.notes)
    assert any("no role, content or tool calls" in note for note in conversation.notes)


def test_replies_in_every_recorded_shape() -> None:
    assert read_reply("plain text") == (Message(ROLE_ASSISTANT, "plain text"),)
    assert read_reply(None) == ()
    assert read_reply([{"type": "reasoning", "summary": []},
                       {"type": "function_call", "name": "f", "arguments": "{}",
                        "call_id": "c"}]) == (
        Message(ROLE_ASSISTANT, tool_calls=(ToolCall("f", "{}", "c"),)),)
    legacy = {"choices": [{"message": {"role": "assistant", "content": None,
                                       "function_call": {"name": "f", "arguments": "x"}}}]}
    assert read_reply(legacy) == (Message(ROLE_ASSISTANT, tool_calls=(ToolCall("f", "x"),)),)
    assert tool_names([{"type": "custom", "custom": {"name": "grep"}}, "a", "a"]) == ("grep", "a")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["role", "user", "tool", "content", "tool_calls", "function", "type",
                       "text", "tool_use", "tool_result", "function_call", "output", "choices"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["role", "content", "tool_calls", "function", "name", "arguments",
                         "type", "text", "input", "args", "id", "call_id", "tool_call_id",
                         "tool_use_id", "output", "choices", "message", "messages", "input",
                         "instructions", "system", "tools", "response", "custom", "refusal"]),
        inner, max_size=5),
    max_leaves=25)


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_any_json_body_reads_without_an_exception(value: Any) -> None:
    read = read_payload_exchange(json.dumps(value))
    assert isinstance(read, (Conversation, Unreadable))
    if isinstance(read, Conversation):
        for message in (*read.sent, *read.reply):
            assert isinstance(message.text, str) and isinstance(message.role, str)
            assert all(isinstance(c.name, str) and isinstance(c.arguments, str)
                       for c in message.tool_calls)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from([
    "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.tool.definitions", "gen_ai.system_instructions", "openinference.span.kind",
    "llm.input_messages.0.message.role", "llm.output_messages.0.message.content",
    "llm.output_messages.0.message.role", "llm.tools.0.tool.json_schema"]),
    st.sampled_from(["chat", "LLM", "user", "assistant", "[]", "{}", '[{"role": "user"}]',
                     '[{"role": "assistant", "parts": [{"type": "tool_call"}]}]', "not json"]),
    max_size=6))
def test_any_span_attributes_read_without_an_exception(attributes: dict[str, str]) -> None:
    assert read_span_exchange(attributes) is None or isinstance(
        read_span_exchange(attributes), (Conversation, Unreadable))
