"""The OpenAI Responses API as the guards read it: ``responses.create`` / ``parse``.

The guards read conversations in chat shape, so the ``input`` items and the reply's
``output`` items are read into chat messages, in order: message items as they are
(their ``input_text`` / ``output_text`` parts are text), ``function_call`` and
``custom_tool_call`` items as an assistant message calling the tool, their
``*_call_output`` items as tool results, ``mcp_call`` as a call and its output, and the
hosted tools' items (``web_search_call`` ...) as a call of the tool by its type.
``instructions`` is the system prompt. Reasoning and other items say nothing the
guards judge. A conversation continued with ``previous_response_id`` is seen from this
request on: its earlier turns live on OpenAI's side.

A stream's reply is the ``response`` of its ``response.completed`` (or
``response.incomplete``) event. Retry feedback goes first in ``instructions``; the
disclaimer is appended to the last ``output_text`` of the reply.
"""

from __future__ import annotations

from typing import Any

from openai import AsyncStream, Stream
from openai.types.responses import Response

from ._exchange import Exchange
from ._sdk import attr, given, listed, plain

__all__ = ["ResponsesAccumulator", "ResponsesDialect", "items_to_messages"]

_LISTED_ARGUMENTS = ("input", "tools")
# Stream events carrying the finished response (a failed one is not checked).
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})
_CALL_SUFFIX = "_call"
_OUTPUT_SUFFIX = "_call_output"
_NAMED_CALLS = frozenset({"function_call", "custom_tool_call", "mcp_call"})
_TEXT_PARTS = frozenset({"output_text", "input_text", "text"})


class ResponsesAccumulator:
    """The final response of a Responses API stream."""

    def __init__(self) -> None:
        self.response: Any = None

    def feed(self, event: Any) -> None:
        if attr(event, "type") in _FINAL_EVENTS:
            self.response = attr(event, "response")

    def result(self) -> Any | None:
        return self.response


def _call(item: Any, name: str) -> dict[str, Any]:
    arguments = attr(item, "arguments")
    if arguments is None:
        arguments = attr(item, "input")  # custom tools take free text
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": attr(item, "call_id") or attr(item, "id"), "type": "function",
        "function": {"name": name, "arguments": arguments or ""}}]}


def _result(call_id: Any, output: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id,
            "content": output if isinstance(output, (str, list)) else plain(output)}


def items_to_messages(items: Any) -> list[dict[str, Any]]:
    """Responses API items (``input``, or a response's ``output``) as chat messages."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    for item in items or ():
        kind, role = attr(item, "type"), attr(item, "role")
        if isinstance(role, str) and kind in (None, "message"):
            messages.append({"role": role, "content": attr(item, "content")})
        elif not isinstance(kind, str):
            continue
        elif kind.endswith(_OUTPUT_SUFFIX):
            messages.append(_result(attr(item, "call_id"), attr(item, "output")))
        elif kind in _NAMED_CALLS:
            messages.append(_call(item, attr(item, "name") or ""))
            if kind == "mcp_call":  # the provider ran it: its output is in the item
                messages.append(_result(attr(item, "id"), attr(item, "output") or
                                        attr(item, "error") or ""))
        elif kind.endswith(_CALL_SUFFIX):
            messages.append(_call(item, kind[: -len(_CALL_SUFFIX)]))
    return messages


def _message_texts(output: Any) -> list[Any]:
    """The text parts of the reply's message items, in order."""
    return [part for item in output or () if attr(item, "type") == "message"
            for part in attr(item, "content") or () if attr(part, "type") in _TEXT_PARTS]


class ResponsesDialect:
    """See the module docstring."""

    api = "responses"

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {key: listed(value) if key in _LISTED_ARGUMENTS else value
                for key, value in kwargs.items()}

    def reply_of(self, result: Any) -> Any | None:
        return result if isinstance(result, Response) else None

    def stream_of(self, result: Any) -> Any | None:
        return result if isinstance(result, (Stream, AsyncStream)) else None

    def accumulator(self) -> ResponsesAccumulator:
        return ResponsesAccumulator()

    def exchange(self, kwargs: dict[str, Any], reply: Any, *, streamed: bool) -> Exchange:
        sent = kwargs.get("input")
        sent = sent if given(sent) else []
        output = attr(reply, "output")
        instructions = kwargs.get("instructions")
        instructions = instructions if given(instructions) else None
        tools = kwargs.get("tools")
        tools = tools if given(tools) else None
        model = kwargs.get("model")
        texts = [attr(part, "text") for part in _message_texts(output)]
        return Exchange(
            api=self.api, model=model if isinstance(model, str) else attr(reply, "model"),
            tools=tools, conversation=[*items_to_messages(sent), *items_to_messages(output)],
            reply=reply, reply_text="".join(t for t in texts if isinstance(t, str)),
            system=instructions,
            request={"model": plain(model), "instructions": plain(instructions),
                     "input": plain(sent), "tools": plain(tools)},
            streamed=streamed)

    def with_feedback(self, kwargs: dict[str, Any], feedback: str) -> dict[str, Any]:
        instructions = kwargs.get("instructions")
        if isinstance(instructions, str) and instructions:
            feedback = f"{feedback}\n\n{instructions}"
        return {**kwargs, "instructions": feedback}

    def with_disclaimer(self, reply: Any, suffix: str) -> Any:
        annotated = reply.model_copy(deep=True)
        parts = _message_texts(annotated.output)
        if parts:
            parts[-1].text = (parts[-1].text or "").rstrip() + suffix
        return annotated
