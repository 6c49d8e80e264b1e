"""The Anthropic Messages API as the guards read it: ``messages.create`` / ``parse`` /
``stream``.

The conversation is the ``messages`` sent plus the reply (a message of content blocks,
which the guards read as they are), with ``system`` as the system prompt. A stream's
reply is assembled from its events (text deltas joined, a tool's input from its JSON
deltas); the ``messages.stream()`` helper's ``message_stop`` event carries the whole
message, which is then taken as it is. Retry feedback goes first in ``system``; the
disclaimer is appended to the reply's last text block.

Forced verification (:mod:`._verification`): the question is the last ``user`` message
with text (one holding only ``tool_result`` blocks is not a question); the verification
call sends the prompt of ``reason_messages(question)`` as ``system`` and the task as
``messages``, with the caller's ``max_tokens``; the verification goes in as an assistant
``tool_use`` of ``reason`` and a user ``tool_result``. The API refuses tool blocks in a
request that defines no tools, so a request without tools gets the ``reason`` tool, with
``tool_choice`` ``none`` unless the caller chose: the model then answers in text.
A request with extended thinking is not verified: the API wants a thinking block first
in an assistant turn that calls a tool, and the synthetic call has none.
"""

from __future__ import annotations

import json
from typing import Any

from anthropic import AsyncStream, Stream
from anthropic.types import Message

from ..collectors.questions.reason_tool import (
    REASON_TOOL_NAME,
    reason_messages,
    reason_tool_schema,
)
from ._exchange import Exchange
from ._messages import text_of
from ._sdk import attr, given, listed, plain
from ._verification import Question, Verification, find_question, request_options

__all__ = ["MessageAccumulator", "MessagesDialect"]

_LISTED_ARGUMENTS = ("messages", "tools")
_TEXT = "text"


class MessageAccumulator:
    """A message (as a dict) from the events of a Messages stream."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_pieces: dict[int, list[str]] = {}
        self.snapshot: Any = None

    def feed(self, event: Any) -> None:
        kind = attr(event, "type")
        index = attr(event, "index")
        if kind == "message_start":
            started = attr(event, "message")
            self.message = {"id": attr(started, "id"), "type": "message", "role": "assistant",
                            "model": attr(started, "model"), "stop_reason": None}
        elif kind == "content_block_start":
            self.blocks[index] = plain(attr(event, "content_block"))
        elif kind == "content_block_delta":
            self._delta(index, attr(event, "delta"))
        elif kind == "content_block_stop" and index in self.json_pieces:
            try:
                self.blocks[index]["input"] = json.loads("".join(self.json_pieces.pop(index)))
            except ValueError:
                pass  # a tool input cut short: its name is what the guards read
        elif kind == "message_delta" and self.message is not None:
            self.message["stop_reason"] = attr(attr(event, "delta"), "stop_reason")
        elif kind == "message_stop" and attr(event, "message") is not None:
            self.snapshot = attr(event, "message")  # the stream helper's whole message

    def _delta(self, index: Any, delta: Any) -> None:
        block = self.blocks.get(index)
        if block is None:
            return
        kind = attr(delta, "type")
        if kind == "text_delta":
            block[_TEXT] = (block.get(_TEXT) or "") + (attr(delta, _TEXT) or "")
        elif kind == "input_json_delta":
            self.json_pieces.setdefault(index, []).append(attr(delta, "partial_json") or "")

    def result(self) -> Any | None:
        if self.snapshot is not None:
            return self.snapshot
        if self.message is None:
            return None
        return {**self.message, "content": [self.blocks[i] for i in sorted(self.blocks)]}


def _texts(reply: Any) -> list[Any]:
    return [block for block in attr(reply, "content") or () if attr(block, "type") == _TEXT]


def _user_text(message: Any) -> str:
    return text_of(attr(message, "content")) if attr(message, "role") == "user" else ""


def _calls_reason(message: Any) -> bool:
    content = attr(message, "content")
    return isinstance(content, (list, tuple)) and any(
        attr(block, "type") == "tool_use" and attr(block, "name") == REASON_TOOL_NAME
        for block in content)


def _thinking(kwargs: dict[str, Any]) -> bool:
    thinking = kwargs.get("thinking")
    return given(thinking) and attr(thinking, "type") != "disabled"


class MessagesDialect:
    """See the module docstring."""

    api = "messages"

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {key: listed(value) if key in _LISTED_ARGUMENTS else value
                for key, value in kwargs.items()}

    def reply_of(self, result: Any) -> Any | None:
        return result if isinstance(result, Message) else None

    def stream_of(self, result: Any) -> Any | None:
        return result if isinstance(result, (Stream, AsyncStream)) else None

    def accumulator(self) -> MessageAccumulator:
        return MessageAccumulator()

    def exchange(self, kwargs: dict[str, Any], reply: Any, *, streamed: bool) -> Exchange:
        sent: Any = kwargs.get("messages")
        messages = list(sent) if given(sent) else []
        system: Any = kwargs.get("system")
        system = system if given(system) else None
        tools: Any = kwargs.get("tools")
        tools = tools if given(tools) else None
        model = kwargs.get("model")
        texts = [attr(block, _TEXT) for block in _texts(reply)]
        return Exchange(
            api=self.api, model=model if isinstance(model, str) else attr(reply, "model"),
            tools=tools, conversation=[*messages, reply], reply=reply,
            reply_text="\n".join(t for t in texts if isinstance(t, str)), system=system,
            request={"model": plain(model), "system": plain(system),
                     "messages": plain(messages), "tools": plain(tools)},
            streamed=streamed)

    def with_feedback(self, kwargs: dict[str, Any], feedback: str) -> dict[str, Any]:
        system: Any = kwargs.get("system")
        if isinstance(system, str) and system:
            system = f"{feedback}\n\n{system}"
        elif given(system) and isinstance(system, (list, tuple)):
            system = [{"type": "text", "text": feedback}, *system]
        else:
            system = feedback
        return {**kwargs, "system": system}

    def with_disclaimer(self, reply: Any, suffix: str) -> Any:
        annotated = reply.model_copy(deep=True)
        texts = _texts(annotated)
        if texts:
            texts[-1].text = (texts[-1].text or "").rstrip() + suffix
        return annotated

    # -- forced verification ---------------------------------------------------------------
    def question(self, kwargs: dict[str, Any]) -> Question | None:
        messages: Any = kwargs.get("messages")
        if not isinstance(messages, (list, tuple)) or _thinking(kwargs):
            return None
        return find_question(messages, _user_text, _calls_reason)

    def reason_request(self, kwargs: dict[str, Any], question: str) -> dict[str, Any]:
        system, task = reason_messages(question)
        return {"model": kwargs.get("model"), "max_tokens": kwargs.get("max_tokens"),
                "system": system["content"], "messages": [task], **request_options(kwargs)}

    def reason_text(self, reply: Any) -> str:
        texts = [attr(block, _TEXT) for block in _texts(reply)]
        return "\n".join(t for t in texts if isinstance(t, str))

    def with_verification(self, kwargs: dict[str, Any], question: Question,
                          verification: Verification) -> dict[str, Any]:
        call = {"role": "assistant", "content": [{
            "type": "tool_use", "id": verification.call_id, "name": REASON_TOOL_NAME,
            "input": verification.arguments}]}
        result = {"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": verification.call_id,
            "content": verification.result}]}
        messages = list(kwargs["messages"])
        at = question.index + 1
        verified = {**kwargs, "messages": [*messages[:at], call, result, *messages[at:]]}
        if not given(kwargs.get("tools")) or not kwargs["tools"]:
            verified["tools"] = [reason_tool_schema("anthropic")]
            if not given(kwargs.get("tool_choice")):
                verified["tool_choice"] = {"type": "none"}
        return verified
