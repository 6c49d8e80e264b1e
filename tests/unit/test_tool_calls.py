"""Tool-name adapters for OpenAI and Anthropic responses, as dicts and as SDK-like objects."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.replies.fabrication import FabricationGuard
from guardtrace.collectors.tool_calls import (
    tool_names_fired,
    tool_names_from_anthropic,
    tool_names_from_openai,
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


@pytest.mark.parametrize("unknown", [{}, {"foo": 1}, NS(), object(), [], ()])
def test_unknown_shapes_give_no_names(unknown: Any) -> None:
    assert tool_names_fired(unknown) == []


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
