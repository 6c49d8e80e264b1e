"""Tool-name adapters for OpenAI and Anthropic responses, as dicts and as SDK-like objects,
and streams: refused with a message saying what to pass, their collected chunks read."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import anthropic
import openai
import pytest

from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.replies.fabrication import FabricationGuard
from guardtrace.collectors.tool_calls import (
    tool_names_fired,
    tool_names_from_anthropic,
    tool_names_from_openai,
)
from tests.support.llm_wire import (
    ScriptedAPI,
    anthropic_events,
    chat_chunks,
    response_events,
)

NS = SimpleNamespace  # SDK-like objects with attributes


def _ns(value: Any) -> Any:
    """The same data with attribute access, as the vendors' SDK objects offer it."""
    if isinstance(value, dict):
        return NS(**{k: _ns(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_ns(v) for v in value]
    return value


OPENAI_CHAT = {
    "id": "chatcmpl-1", "object": "chat.completion",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "write_file", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
            {"id": "c3", "type": "function",
             "function": {"name": "write_file", "arguments": "{}"}},
        ]}}],
}
OPENAI_LEGACY = {"choices": [{"message": {"role": "assistant", "content": None,
                                          "function_call": {"name": "deploy",
                                                            "arguments": "{}"}}}]}
OPENAI_CUSTOM = {"choices": [{"message": {"tool_calls": [
    {"id": "c", "type": "custom", "custom": {"name": "apply_patch", "input": "..."}}]}}]}
OPENAI_STREAM_CHUNK = {"object": "chat.completion.chunk", "choices": [{"delta": {
    "tool_calls": [{"index": 0, "function": {"name": "shell", "arguments": ""}}]}}]}
OPENAI_RESPONSES = {
    "object": "response",
    "output": [
        {"type": "reasoning", "summary": []},
        {"type": "function_call", "call_id": "f1", "name": "run_command", "arguments": "{}"},
        {"type": "web_search_call", "status": "completed"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "done"}]},
    ],
}
OPENAI_TEXT_ONLY = {"choices": [{"message": {"role": "assistant", "content": "Hello!"}}]}

ANTHROPIC_MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant",
    "content": [
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
        {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "b"}},
    ],
}
ANTHROPIC_TEXT_ONLY = {"type": "message", "role": "assistant",
                       "content": [{"type": "text", "text": "I'm deploying now."}]}


@pytest.mark.parametrize("wrap", [lambda x: x, _ns], ids=["dict", "object"])
@pytest.mark.parametrize(("response", "expected"), [
    (OPENAI_CHAT, ["write_file", "grep"]),
    (OPENAI_LEGACY, ["deploy"]),
    (OPENAI_CUSTOM, ["apply_patch"]),
    (OPENAI_STREAM_CHUNK, ["shell"]),
    (OPENAI_RESPONSES, ["run_command", "web_search"]),
    (OPENAI_RESPONSES["output"], ["run_command", "web_search"]),
    (OPENAI_CHAT["choices"][0], ["write_file", "grep"]),
    (OPENAI_CHAT["choices"][0]["message"], ["write_file", "grep"]),
    (OPENAI_TEXT_ONLY, []),
], ids=["chat", "legacy", "custom", "chunk", "responses", "output-list", "choice", "message",
        "text-only"])
def test_openai_shapes(wrap: Any, response: Any, expected: list[str]) -> None:
    assert tool_names_from_openai(wrap(response)) == expected
    assert tool_names_fired(wrap(response)) == expected


@pytest.mark.parametrize("wrap", [lambda x: x, _ns], ids=["dict", "object"])
@pytest.mark.parametrize(("message", "expected"), [
    (ANTHROPIC_MESSAGE, ["read_file", "web_search"]),
    (ANTHROPIC_MESSAGE["content"], ["read_file", "web_search"]),
    (ANTHROPIC_MESSAGE["content"][1], ["read_file"]),
    (ANTHROPIC_TEXT_ONLY, []),
    ({"role": "assistant", "content": "plain text"}, []),
], ids=["message", "content-list", "block", "text-only", "string-content"])
def test_anthropic_shapes(wrap: Any, message: Any, expected: list[str]) -> None:
    assert tool_names_from_anthropic(wrap(message)) == expected
    assert tool_names_fired(wrap(message)) == expected


def test_vendors_do_not_read_each_other() -> None:
    assert tool_names_from_openai(ANTHROPIC_MESSAGE) == []
    assert tool_names_from_anthropic(OPENAI_CHAT) == []


def test_a_whole_turn_is_read_in_order() -> None:
    # A tool loop: tool call, tool result, final text. The final reply alone has no tool
    # call, which is why the guard wants the whole turn.
    turn = [
        ANTHROPIC_MESSAGE,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "..."}]}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t3",
                                           "name": "write_file", "input": {}}]},
        ANTHROPIC_TEXT_ONLY,
    ]
    assert tool_names_fired(turn) == ["read_file", "web_search", "write_file"]
    openai_turn = [OPENAI_CHAT["choices"][0]["message"],
                   {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                   OPENAI_TEXT_ONLY["choices"][0]["message"]]
    assert tool_names_fired(openai_turn) == ["write_file", "grep"]


def test_malformed_entries_inside_a_known_shape_are_skipped() -> None:
    response = {"choices": [
        {"message": {"tool_calls": [{"function": {"name": None}}, {"function": "oops"},
                                    {"type": "function"}, "garbage",
                                    {"function": {"name": "deploy"}}]}},
        {"no_message": True},
        "not a choice",
    ]}
    assert tool_names_from_openai(response) == ["deploy"]
    blocks = [{"type": "tool_use"}, {"type": "tool_use", "name": 7}, None, "text",
              {"type": "tool_use", "name": "grep"}]
    assert tool_names_from_anthropic(blocks) == ["grep"]


@pytest.mark.parametrize("unknown", [{}, {"foo": 1}, [], ()])
def test_mappings_and_empty_lists_of_any_shape_give_no_names(unknown: Any) -> None:
    assert tool_names_fired(unknown) == []


@pytest.mark.parametrize("unknown", [NS(), object()])
@pytest.mark.parametrize("adapter", [tool_names_fired, tool_names_from_openai,
                                     tool_names_from_anthropic])
def test_objects_with_no_field_of_a_response_are_errors(unknown: Any, adapter: Any) -> None:
    with pytest.raises(GuardInputError, match="which has none of the fields"):
        adapter(unknown)


@pytest.mark.parametrize("wrong", [None, "write_file", b"{}", 3, 2.5, True])
@pytest.mark.parametrize("adapter", [tool_names_fired, tool_names_from_openai,
                                     tool_names_from_anthropic])
def test_values_that_cannot_be_a_response_raise(adapter: Any, wrong: Any) -> None:
    with pytest.raises(GuardInputError, match="expected a model response"):
        adapter(wrong)


def test_adapter_output_feeds_the_guard() -> None:
    guard = FabricationGuard()
    reply = "I'm deploying the patch now."
    assert guard.check(reply, tool_names_fired(_ns(OPENAI_CHAT))).tiers == ()
    assert guard.check(reply, tool_names_fired(ANTHROPIC_MESSAGE)).tiers == ("action",)


# -- streams ------------------------------------------------------------------------------
# The real SDK clients, answered offline by recorded-shape replies (tests/support/llm_wire.py).

WEATHER_CALL = [("call_Wq1", "get_weather", {"city": "Paris"})]
ONE_SHOT = r"a one-shot stream.*cannot be read twice.*list of chunks/events"


def _openai(api: ScriptedAPI, *, asynchronous: bool = False) -> Any:
    if asynchronous:
        return openai.AsyncOpenAI(api_key="sk-test", http_client=api.async_http_client(),
                                  max_retries=0)
    return openai.OpenAI(api_key="sk-test", http_client=api.http_client(), max_retries=0)


def _anthropic(api: ScriptedAPI) -> Any:
    return anthropic.Anthropic(api_key="sk-ant-test", http_client=api.http_client(),
                               max_retries=0)


def _chat_stream(api: ScriptedAPI) -> Any:
    return _openai(api).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Paris?"}], stream=True)


def test_an_openai_stream_is_refused_and_left_unread() -> None:
    stream = _chat_stream(ScriptedAPI(chat_chunks(calls=WEATHER_CALL)))
    with pytest.raises(GuardInputError, match=r"got openai\.Stream, " + ONE_SHOT):
        tool_names_fired(stream)
    with pytest.raises(GuardInputError, match=r"openai\.Stream"):
        tool_names_from_openai([stream])  # inside a list too
    chunks = list(stream)  # the agent still gets every chunk
    assert len(chunks) == 5
    assert tool_names_fired(chunks) == ["get_weather"]
    assert tool_names_from_openai(tuple(chunks)) == ["get_weather"]


def test_an_async_openai_stream_is_refused() -> None:
    async def run() -> list[Any]:
        client = _openai(ScriptedAPI(chat_chunks(calls=WEATHER_CALL)), asynchronous=True)
        stream = await client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "Paris?"}], stream=True)
        with pytest.raises(GuardInputError, match=r"got openai\.AsyncStream, " + ONE_SHOT):
            tool_names_fired(stream)
        return [chunk async for chunk in stream]

    assert tool_names_fired(asyncio.run(run())) == ["get_weather"]


def test_generators_and_iterators_of_chunks_are_refused() -> None:
    chunks = list(_chat_stream(ScriptedAPI(chat_chunks(calls=WEATHER_CALL))))

    async def agen() -> Any:
        for chunk in chunks:
            yield chunk

    for one_shot, name in [((c for c in chunks), "generator"), (iter(chunks), "list_iterator"),
                           (agen(), "async_generator")]:
        with pytest.raises(GuardInputError, match=rf"got {name}, " + ONE_SHOT):
            tool_names_fired(one_shot)


def test_the_chat_stream_helper_its_manager_and_its_events() -> None:
    client = _openai(ScriptedAPI(chat_chunks(calls=WEATHER_CALL)))
    manager = client.chat.completions.stream(
        model="gpt-4.1", messages=[{"role": "user", "content": "Paris?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {}}}])
    with pytest.raises(GuardInputError, match=r"ChatCompletionStreamManager.*enter it"):
        tool_names_fired(manager)
    with manager as stream:
        with pytest.raises(GuardInputError, match=r"ChatCompletionStream, " + ONE_SHOT):
            tool_names_fired(stream)
        events = list(stream)
    # The helper's events: each raw chunk comes wrapped in a "chunk" event.
    assert {event.type for event in events} >= {"chunk", "tool_calls.function.arguments.done"}
    assert tool_names_fired(events) == ["get_weather"]


def test_responses_stream_events_are_read() -> None:
    stream = _openai(ScriptedAPI(response_events("Checking.", WEATHER_CALL))).responses.create(
        model="gpt-4.1", input="Paris?", stream=True)
    with pytest.raises(GuardInputError, match=ONE_SHOT):
        tool_names_fired(stream)
    events = list(stream)
    assert tool_names_from_openai(events) == ["get_weather"]
    # The item of output_item.added alone names the call, before its arguments arrive.
    added = [e for e in events if e.type == "response.output_item.added"
             and e.item.type == "function_call"]
    assert tool_names_fired(added) == ["get_weather"]
    completed = [e for e in events if e.type == "response.completed"]
    assert tool_names_fired(completed) == ["get_weather"]
    assert tool_names_fired([e for e in events if "text" in e.type]) == []


def test_anthropic_stream_events_are_read() -> None:
    calls = [("toolu_01A", "get_weather", {"city": "Paris"})]
    client = _anthropic(ScriptedAPI(anthropic_events("Let me look.", calls),
                                    anthropic_events("Let me look.", calls)))
    request = {"model": "claude-sonnet-4-6", "max_tokens": 256,
               "messages": [{"role": "user", "content": "Paris?"}]}
    stream = client.messages.create(**request, stream=True)
    with pytest.raises(GuardInputError, match=r"got anthropic\.Stream, " + ONE_SHOT):
        tool_names_fired(stream)
    events = list(stream)
    assert tool_names_from_anthropic(events) == ["get_weather"]
    assert tool_names_fired(events) == ["get_weather"]
    assert tool_names_from_openai(events) == []  # the vendors still do not mix
    starts = [e for e in events if e.type == "content_block_start"]
    assert tool_names_fired(starts) == ["get_weather"]
    # The helper: its message_stop event carries the whole message.
    with client.messages.stream(**request) as helper:
        with pytest.raises(GuardInputError, match=r"anthropic\.MessageStream, " + ONE_SHOT):
            tool_names_fired(helper)
        helper_events = list(helper)
    stops = [e for e in helper_events if e.type == "message_stop"]
    assert tool_names_fired(stops) == ["get_weather"]


# --- framework messages: never a silent [] ------------------------------------------------
def test_langchain_messages_are_read() -> None:
    from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage

    called = AIMessage(content="", tool_calls=[
        {"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1"}])
    assert tool_names_fired(called) == ["get_weather"]
    turn = [HumanMessage("Oslo?"), called, ToolMessage("sunny", tool_call_id="c1"),
            AIMessage("It is sunny in Oslo.")]
    assert tool_names_fired(turn) == ["get_weather"]
    # A streamed chunk names the tool in its first tool-call chunk.
    chunk = AIMessageChunk(content="", tool_call_chunks=[
        {"name": "search_flights", "args": '{"to": "OSL"', "id": "c2", "index": 0}])
    assert tool_names_fired(chunk) == ["search_flights"]
    assert tool_names_fired(AIMessage("No tool needed.")) == []


def test_pydantic_ai_messages_are_read() -> None:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    response = ModelResponse(parts=[TextPart("Checking."),
                                    ToolCallPart(tool_name="get_weather", args={"city": "Oslo"})])
    assert tool_names_fired(response) == ["get_weather"]
    # A tool's return names the tool too, but it is not a call.
    answered = ModelRequest(parts=[UserPromptPart("Oslo?"),
                                   ToolReturnPart(tool_name="book_flight", content="ok")])
    assert tool_names_fired([answered, response]) == ["get_weather"]
    assert tool_names_fired(answered) == []


def test_llama_index_messages_are_read() -> None:
    # llama-index-core (numpy, nltk, sqlalchemy ...) is not installed for one shape: these
    # mirror its ChatMessage / ChatResponse / ToolCallBlock fields (llama_index.core.base.
    # llms.types, 0.14): blocks with block_type "tool_call" and tool_name, and the
    # OpenAI integration's calls in additional_kwargs["tool_calls"].
    block = SimpleNamespace(block_type="tool_call", tool_name="get_weather", tool_kwargs={})
    text = SimpleNamespace(block_type="text", text="Checking.")
    message = SimpleNamespace(role="assistant", blocks=[text, block], additional_kwargs={})
    assert tool_names_fired(message) == ["get_weather"]
    openai_call = {"id": "c1", "type": "function",
                   "function": {"name": "book_flight", "arguments": "{}"}}
    legacy = SimpleNamespace(role="assistant", blocks=[text],
                             additional_kwargs={"tool_calls": [openai_call]})
    response = SimpleNamespace(message=legacy, raw=None, delta=None, additional_kwargs={})
    assert tool_names_fired(response) == ["book_flight"]


def test_an_object_that_is_no_response_is_an_error_not_an_empty_list() -> None:
    class Reply:
        text = "I booked it."

    with pytest.raises(GuardInputError, match=r"got .*Reply, which has none of the fields"):
        tool_names_fired(Reply())
    with pytest.raises(GuardInputError, match=r"Reply, which has none of the fields"):
        tool_names_fired([{"role": "user", "content": "hi"}, Reply()])
    # Loosely typed JSON stays readable: a mapping of any keys holds no calls.
    assert tool_names_fired({"role": "tool", "content": "sunny"}) == []
