"""OpenAI Chat Completions as the guards read it: ``chat.completions.create`` / ``parse``.

The conversation is the ``messages`` sent plus the reply's first choice (``n`` > 1 asks
for alternatives; the first is the one agents use). The tools are ``tools`` and the
legacy ``functions``. A stream's chunks are assembled into a completion of the same
shape (content joined, tool calls gathered by their index). Retry feedback goes first,
as a system message; the disclaimer is appended to the reply's content.

Forced verification (:mod:`._verification`): the question is the last ``user`` message
with text; the verification call sends ``reason_messages(question)`` as ``messages``; the
verification goes in as an assistant message calling ``reason`` and its ``tool``
message. The ``reason`` tool is not added to ``tools``: the API takes calls of tools the
request does not offer, and offered, the model could call it again, a call the caller
cannot run.
"""

from __future__ import annotations

import json
from typing import Any

from openai import AsyncStream, Stream
from openai.types.chat import ChatCompletion

from ..collectors.questions.reason_tool import REASON_TOOL_NAME, reason_messages
from ._exchange import Exchange
from ._messages import text_of
from ._sdk import attr, given, listed, plain
from ._verification import Question, Verification, find_question, request_options

__all__ = ["ChatAccumulator", "ChatDialect"]

# Arguments that may be one-shot iterables the guard reads as well as the SDK.
_LISTED_ARGUMENTS = ("messages", "tools", "functions")


class ChatAccumulator:
    """A chat completion (as a dict) from its streamed chunks, first choice only."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.seen = False

    def feed(self, chunk: Any) -> None:
        self.seen = True
        self.id = self.id or attr(chunk, "id")
        self.model = self.model or attr(chunk, "model")
        for choice in attr(chunk, "choices") or ():
            if attr(choice, "index") not in (0, None):
                continue
            delta = attr(choice, "delta")
            text = attr(delta, "content")
            if isinstance(text, str):
                self.content.append(text)
            for call in attr(delta, "tool_calls") or ():
                self._call_delta(call)
            self.finish_reason = attr(choice, "finish_reason") or self.finish_reason

    def _call_delta(self, call: Any) -> None:
        # The id and name come in a call's first delta, its arguments in pieces after.
        index = attr(call, "index")
        slot = self.calls.setdefault(index if isinstance(index, int) else len(self.calls), {
            "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        slot["id"] = attr(call, "id") or slot["id"]
        function = attr(call, "function")
        for key in ("name", "arguments"):
            piece = attr(function, key)
            if isinstance(piece, str):
                slot["function"][key] += piece

    def result(self) -> dict[str, Any] | None:
        if not self.seen:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[index] for index in sorted(self.calls)]
        return {"id": self.id, "object": "chat.completion", "model": self.model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": self.finish_reason}]}


def _first_message(reply: Any) -> Any | None:
    choices = attr(reply, "choices")
    if not choices:
        return None
    return attr(choices[0], "message")


def _tools(kwargs: dict[str, Any]) -> Any:
    tools: Any = kwargs.get("tools")
    functions: Any = kwargs.get("functions")  # the legacy form: bare function definitions
    if given(functions):
        return [*(tools if given(tools) else ()), *functions]
    return tools if given(tools) else None


def _user_text(message: Any) -> str:
    return text_of(attr(message, "content")) if attr(message, "role") == "user" else ""


def _calls_reason(message: Any) -> bool:
    calls = [attr(call, "function") for call in attr(message, "tool_calls") or ()]
    legacy = attr(message, "function_call")  # the deprecated single-function form
    return any(attr(function, "name") == REASON_TOOL_NAME for function in [*calls, legacy])


class ChatDialect:
    """See the module docstring."""

    api = "chat.completions"

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {key: listed(value) if key in _LISTED_ARGUMENTS else value
                for key, value in kwargs.items()}

    def reply_of(self, result: Any) -> Any | None:
        return result if isinstance(result, ChatCompletion) else None

    def stream_of(self, result: Any) -> Any | None:
        return result if isinstance(result, (Stream, AsyncStream)) else None

    def accumulator(self) -> ChatAccumulator:
        return ChatAccumulator()

    def exchange(self, kwargs: dict[str, Any], reply: Any, *, streamed: bool) -> Exchange:
        sent: Any = kwargs.get("messages")
        messages = list(sent) if given(sent) else []
        message = _first_message(reply)
        content = attr(message, "content")
        tools = _tools(kwargs)
        model = kwargs.get("model")
        return Exchange(
            api=self.api, model=model if isinstance(model, str) else attr(reply, "model"),
            tools=tools, conversation=[*messages, message] if message is not None else messages,
            reply=reply, reply_text=content if isinstance(content, str) else "",
            request={"model": plain(model), "messages": plain(messages), "tools": plain(tools)},
            streamed=streamed)

    def with_feedback(self, kwargs: dict[str, Any], feedback: str) -> dict[str, Any]:
        messages: Any = kwargs.get("messages")
        return {**kwargs, "messages": [{"role": "system", "content": feedback},
                                       *(messages if given(messages) else ())]}

    def with_disclaimer(self, reply: Any, suffix: str) -> Any:
        annotated = reply.model_copy(deep=True)
        message = annotated.choices[0].message
        message.content = (message.content or "").rstrip() + suffix
        return annotated

    # -- forced verification ---------------------------------------------------------------
    def question(self, kwargs: dict[str, Any]) -> Question | None:
        messages: Any = kwargs.get("messages")
        if not isinstance(messages, (list, tuple)):
            return None
        return find_question(messages, _user_text, _calls_reason)

    def reason_request(self, kwargs: dict[str, Any], question: str) -> dict[str, Any]:
        return {"model": kwargs.get("model"), "messages": reason_messages(question),
                **request_options(kwargs)}

    def reason_text(self, reply: Any) -> str:
        content = attr(_first_message(reply), "content")
        return content if isinstance(content, str) else ""

    def with_verification(self, kwargs: dict[str, Any], question: Question,
                          verification: Verification) -> dict[str, Any]:
        call = {"role": "assistant", "content": None, "tool_calls": [{
            "id": verification.call_id, "type": "function",
            "function": {"name": REASON_TOOL_NAME,
                         "arguments": json.dumps(verification.arguments, ensure_ascii=False)}}]}
        result = {"role": "tool", "tool_call_id": verification.call_id,
                  "content": verification.result}
        messages = list(kwargs["messages"])
        at = question.index + 1
        return {**kwargs, "messages": [*messages[:at], call, result, *messages[at:]]}
