"""The OpenAI Responses API as the guards read it: ``responses.create`` / ``parse``.

The guards read conversations in chat shape, so the ``input`` items and the reply's
``output`` items are read into chat messages, in order, by
:func:`~guardtrace.integrations._messages.from_responses_items` (the Agents SDK adapter's
reader too): calls (``function_call``, ``mcp_call``, the hosted tools' ``*_call`` items
by their type) as assistant tool calls, ``*_call_output`` items as their results.
``instructions`` is the system prompt. A conversation continued with
``previous_response_id`` is seen from this request on: its earlier turns live on
OpenAI's side.

A stream's reply is the ``response`` of its ``response.completed`` (or
``response.incomplete``) event. Retry feedback goes first in ``instructions``; the
disclaimer is appended to the last ``output_text`` of the reply.

Forced verification (:mod:`._verification`): the question is the last user message of
``input`` (a string ``input`` is one); the verification call sends
``reason_messages(question)`` as ``input``; the verification goes in as a
``function_call`` item of ``reason`` and its ``function_call_output``, not offered in
``tools`` (see :mod:`._openai_chat`).
"""

from __future__ import annotations

import json
from typing import Any

from openai import AsyncStream, Stream
from openai.types.responses import Response

from ..collectors.questions.reason_tool import REASON_TOOL_NAME, reason_messages
from ._exchange import Exchange
from ._messages import from_responses_items, text_of
from ._sdk import attr, given, listed, plain
from ._verification import Question, Verification, find_question, request_options

__all__ = ["ResponsesAccumulator", "ResponsesDialect", "input_question"]

_LISTED_ARGUMENTS = ("input", "tools")
# Stream events carrying the finished response (a failed one is not checked).
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})
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


def _message_texts(output: Any) -> list[Any]:
    """The text parts of the reply's message items, in order."""
    return [part for item in output or () if attr(item, "type") == "message"
            for part in attr(item, "content") or () if attr(part, "type") in _TEXT_PARTS]


def _user_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if attr(item, "type") not in (None, "message") or attr(item, "role") != "user":
        return ""
    return text_of(attr(item, "content"))


def _calls_reason(item: Any) -> bool:
    return attr(item, "type") == "function_call" and attr(item, "name") == REASON_TOOL_NAME


def _items(sent: Any) -> list[Any] | None:
    """``input`` as a list of items (a string is one user message); None when absent."""
    if isinstance(sent, str):
        return [{"role": "user", "content": sent}]
    return list(sent) if isinstance(sent, (list, tuple)) else None


def input_question(sent: Any) -> Question | None:
    """The latest user question of a Responses ``input`` (also an Agents SDK run's)."""
    items = _items(sent)
    return None if items is None else find_question(items, _user_text, _calls_reason)


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
        sent: Any = kwargs.get("input")
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
            tools=tools,
            conversation=from_responses_items([*([sent] if isinstance(sent, str) else sent),
                                               *(output or ())]),
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

    # -- forced verification ---------------------------------------------------------------
    def question(self, kwargs: dict[str, Any]) -> Question | None:
        return input_question(kwargs.get("input"))

    def reason_request(self, kwargs: dict[str, Any], question: str) -> dict[str, Any]:
        return {"model": kwargs.get("model"), "input": reason_messages(question),
                **request_options(kwargs)}

    def reason_text(self, reply: Any) -> str:
        texts = [attr(part, "text") for part in _message_texts(attr(reply, "output"))]
        return "".join(t for t in texts if isinstance(t, str))

    def with_verification(self, kwargs: dict[str, Any], question: Question,
                          verification: Verification) -> dict[str, Any]:
        call = {"type": "function_call", "call_id": verification.call_id,
                "name": REASON_TOOL_NAME,
                "arguments": json.dumps(verification.arguments, ensure_ascii=False)}
        result = {"type": "function_call_output", "call_id": verification.call_id,
                  "output": verification.result}
        items = _items(kwargs.get("input")) or []
        at = question.index + 1
        return {**kwargs, "input": [*items[:at], call, result, *items[at:]]}
