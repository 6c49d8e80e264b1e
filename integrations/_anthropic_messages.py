"""The Anthropic Messages API as the guards read it: ``messages.create`` / ``parse`` /
``stream``.

The conversation is the ``messages`` sent plus the reply (a message of content blocks,
which the guards read as they are), with ``system`` as the system prompt. A stream's
reply is assembled from its events (text deltas joined, a tool's input from its JSON
deltas); the ``messages.stream()`` helper's ``message_stop`` event carries the whole
message, which is then taken as it is. Retry feedback goes first in ``system``; the
disclaimer is appended to the reply's last text block.
"""

from __future__ import annotations

import json
from typing import Any

from anthropic import AsyncStream, Stream
from anthropic.types import Message

from ._exchange import Exchange
from ._sdk import attr, given, listed, plain

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
