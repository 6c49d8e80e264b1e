"""The OpenAI and Anthropic APIs on the wire, for driving the real SDK clients offline.

The adapters' tests run the SDKs' own clients (request building, response parsing,
SSE decoding, stream helpers) against an ``httpx2.MockTransport`` (the SDKs' HTTP
client; Anthropic's refuses a legacy ``httpx`` client) that answers with bodies in the
shapes the APIs return: JSON for a complete reply, server-sent events for a stream.
:class:`ScriptedAPI` answers each request with the next scripted reply and keeps the
requests it saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import httpx2

__all__ = [
    "ScriptedAPI",
    "anthropic_events",
    "anthropic_message",
    "chat_chunks",
    "chat_completion",
    "response_events",
    "response_object",
]

MODEL_OPENAI = "gpt-4.1-2025-04-14"
MODEL_ANTHROPIC = "claude-sonnet-4-6"
SSE = "text/event-stream"


class ScriptedAPI:
    """An HTTP transport answering each request with the next scripted reply.

    A reply is a dict (sent as JSON) or ``("sse", text)`` (sent as an event stream).
    ``requests`` holds each request's JSON body, in order.
    """

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        if not self.replies:
            return httpx2.Response(500, json={"error": {"message": "no reply scripted"}})
        reply = self.replies.pop(0)
        if isinstance(reply, tuple):
            return httpx2.Response(200, headers={"content-type": SSE},
                                   content=reply[1].encode())
        if isinstance(reply, int):
            return httpx2.Response(reply, json={"error": {"type": "server_error",
                                                          "message": "scripted failure"}})
        return httpx2.Response(200, json=reply)

    def http_client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handle))

    def async_http_client(self) -> httpx2.AsyncClient:
        async def handle(request: httpx2.Request) -> httpx2.Response:
            return self.handle(request)
        return httpx2.AsyncClient(transport=httpx2.MockTransport(handle))


def _sse(events: Iterable[dict[str, Any]], *, named: bool, done: bool = False) -> tuple[str, str]:
    lines = []
    for event in events:
        name = f"event: {event['type']}\n" if named else ""
        lines.append(f"{name}data: {json.dumps(event)}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    return ("sse", "".join(lines))


# -- OpenAI Chat Completions --------------------------------------------------------------

def _calls(calls: Iterable[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"id": call_id, "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}
            for call_id, name, arguments in calls]


def chat_completion(content: str | None = None,
                    calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> dict[str, Any]:
    """A ``chat.completion`` object, as ``POST /chat/completions`` returns it."""
    tool_calls = _calls(calls)
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None,
                               "annotations": []}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-BvA1kQz7", "object": "chat.completion", "created": 1753000000,
        "model": MODEL_OPENAI, "system_fingerprint": "fp_b3f1157249", "service_tier": "default",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 85, "completion_tokens": 18, "total_tokens": 103},
    }


def chat_chunks(content: str | None = None,
                calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> tuple[str, str]:
    """The same reply streamed: ``chat.completion.chunk`` events, content in pieces, each
    call's id and name in its first delta and its arguments in two, then ``[DONE]``."""
    calls = list(calls)
    base = {"id": "chatcmpl-BvA1kQz7", "object": "chat.completion.chunk",
            "created": 1753000000, "model": MODEL_OPENAI, "system_fingerprint": "fp_b3f1157249"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": "" if content else None,
                     "refusal": None})]
    if content:
        middle = len(content) // 2
        chunks += [chunk({"content": content[:middle]}), chunk({"content": content[middle:]})]
    for index, (call_id, name, arguments) in enumerate(calls):
        text = json.dumps(arguments)
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        for piece in (text[: len(text) // 2], text[len(text) // 2:]):
            chunks.append(chunk({"tool_calls": [{"index": index,
                                                 "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    return _sse(chunks, named=False, done=True)


# -- OpenAI Responses ---------------------------------------------------------------------

def _output(content: str | None,
            calls: Iterable[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if content is not None:
        output.append({"id": "msg_68a1", "type": "message", "status": "completed",
                       "role": "assistant", "content": [
                           {"type": "output_text", "text": content, "annotations": [],
                            "logprobs": []}]})
    for call_id, name, arguments in calls:
        output.append({"id": f"fc_{call_id}", "type": "function_call", "status": "completed",
                       "call_id": call_id, "name": name, "arguments": json.dumps(arguments)})
    return output


def response_object(content: str | None = None,
                    calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> dict[str, Any]:
    """A ``response`` object, as ``POST /responses`` returns it."""
    return {
        "id": "resp_68a1c0ffee", "object": "response", "created_at": 1753000000,
        "status": "completed", "background": False, "error": None, "incomplete_details": None,
        "instructions": None, "max_output_tokens": None, "model": MODEL_OPENAI,
        "output": _output(content, list(calls)), "parallel_tool_calls": True,
        "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
        "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}},
        "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
        "usage": {"input_tokens": 70, "output_tokens": 20, "total_tokens": 90,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
        "metadata": {},
    }


def response_events(content: str | None = None,
                    calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> tuple[str, str]:
    """The same reply streamed: ``response.*`` events from ``created`` to ``completed``."""
    calls = list(calls)
    final = response_object(content, calls)
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": created},
                                    {"type": "response.in_progress", "response": created}]
    for index, item in enumerate(final["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append({"type": "response.output_item.added", "output_index": index,
                           "item": {**item, "status": "in_progress", "content": []}})
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append({"type": "response.content_part.added", "item_id": item["id"],
                           "output_index": index, "content_index": 0, "part": part})
            for piece in (text[: len(text) // 2], text[len(text) // 2:]):
                events.append({"type": "response.output_text.delta", "item_id": item["id"],
                               "output_index": index, "content_index": 0, "delta": piece,
                               "logprobs": []})
            events.append({"type": "response.output_text.done", "item_id": item["id"],
                           "output_index": index, "content_index": 0, "text": text,
                           "logprobs": []})
            events.append({"type": "response.content_part.done", "item_id": item["id"],
                           "output_index": index, "content_index": 0,
                           "part": {**part, "text": text}})
        else:
            events.append({"type": "response.output_item.added", "output_index": index,
                           "item": {**item, "status": "in_progress", "arguments": ""}})
            events.append({"type": "response.function_call_arguments.delta",
                           "item_id": item["id"], "output_index": index,
                           "delta": item["arguments"]})
            events.append({"type": "response.function_call_arguments.done",
                           "item_id": item["id"], "output_index": index,
                           "arguments": item["arguments"]})
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
    events.append({"type": "response.completed", "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return _sse(events, named=True)


# -- Anthropic Messages -------------------------------------------------------------------

def anthropic_message(text: str | None = None,
                      calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> dict[str, Any]:
    """A ``message`` object, as ``POST /v1/messages`` returns it."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for call_id, name, arguments in calls:
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": MODEL_ANTHROPIC, "content": content,
        "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content)
        else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 412, "output_tokens": 57, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "service_tier": "standard"},
    }


def anthropic_events(text: str | None = None,
                     calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> tuple[str, str]:
    """The same reply streamed: ``message_start`` to ``message_stop``, with a ``ping``."""
    final = anthropic_message(text, list(calls))
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**final, "content": [], "stop_reason": None,
                                              "usage": {**final["usage"], "output_tokens": 1}}},
        {"type": "ping"}]
    for index, block in enumerate(final["content"]):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            piece = len(block["text"]) // 2
            for part in (block["text"][:piece], block["text"][piece:]):
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "text_delta", "text": part}})
        else:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {**block, "input": {}}})
            text_input = json.dumps(block["input"])
            for part in (text_input[: len(text_input) // 2], text_input[len(text_input) // 2:]):
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": part}})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta",
                   "delta": {"stop_reason": final["stop_reason"], "stop_sequence": None},
                   "usage": {"output_tokens": final["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    return _sse(events, named=True)
