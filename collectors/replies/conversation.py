"""A conversation as the reply guards read it: messages, the calls that ran, and turns.

Agents hold their conversation as a message list in one of two shapes, and the guards
judge each assistant message within it, so both are read into one model here:

* OpenAI Chat Completions: ``{"role": "system"|"developer"|"user"|"assistant"|"tool"|
  "function", "content": str | [parts], "tool_calls": [...], "tool_call_id": ...}``.
  Dicts or SDK objects (attribute access) alike.
* Anthropic Messages: ``{"role": "user"|"assistant", "content": str | [blocks]}`` with
  ``text``, ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` and ``tool_result`` /
  ``*_tool_result`` blocks; the system prompt is passed apart (``system=``).

A **turn** runs from one user message to the next. A user message that only carries tool
results (Anthropic's shape for them) does not start a turn: the user said nothing.
Calls a simulated user made on its own side (tau2's ``"x-requestor": "user"`` results,
``tool_calls`` on a user message) are the user's, never the agent's.

**Only calls that ran count as fired.** A requested call whose name is not in the tool
catalog never ran (the API rejected it or the framework answered "no such tool"), so it
backs no claim.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import GuardInputError, is_mapping

__all__ = [
    "Conversation",
    "Message",
    "ToolCall",
    "read_conversation",
]

_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_ROLES = frozenset({"tool", "function", "ipython"})
_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model requested.

    Attributes:
        name: The tool name as requested.
        arguments: The arguments as text (OpenAI's JSON string, or the JSON of a dict).
        call_id: The id results refer to, when the shape has one.
    """

    name: str
    arguments: str = ""
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation, in a shape-independent form.

    Attributes:
        index: The position in the list the caller passed (``msg_index`` of the scanner).
        role: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.
        text: The message's text (text parts joined by newlines; tool results' text for
            ``tool`` messages and for the tool-result blocks of an Anthropic user message).
        calls: Calls the agent requested in this message (assistant messages only).
        result_ids: Ids of the calls this message answers (tool results).
        is_error: A tool result marked as an error.
        by_user: Calls or results that belong to a simulated user, not the agent.
        starts_turn: A user message with something the user said (text, not only tool
            results).
        canned: Text the framework wrote, not the model (``"x-canned": true``).
    """

    index: int
    role: str
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    result_ids: tuple[str, ...] = ()
    is_error: bool = False
    by_user: bool = False
    starts_turn: bool = False
    canned: bool = False

    @property
    def is_reply(self) -> bool:
        """An assistant message with text of the model's own: what the guards judge."""
        return self.role == "assistant" and not self.canned and bool(self.text.strip())


def _get(obj: Any, key: str) -> Any:
    if is_mapping(obj):
        return obj.get(key)
    return getattr(obj, key, None)


def _getter(obj: Any) -> Callable[[str], Any]:
    """``_get`` bound to ``obj``: a dict's own ``get`` (messages and calls are dicts
    mostly, and are asked for several keys each), else a reader of keys or attributes."""
    if type(obj) is dict:
        return obj.get
    return functools.partial(_get, obj)


def _arguments_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _result_text(content: Any) -> str:
    # Tool-result content: a string, or a list of text (and image, ...) blocks.
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(_result_text(_get(b, "text") if not isinstance(b, str) else b)
                         for b in content)
    return _arguments_text(content)


def _openai_calls(get: Callable[[str], Any], index: int) -> list[ToolCall]:
    # `get` reads a key of the message (see `_getter`).
    calls: list[ToolCall] = []
    listed = get("tool_calls")
    if listed is not None and not isinstance(listed, (list, tuple)):
        raise GuardInputError(f"message {index}: 'tool_calls' must be a list, got "
                              f"{type(listed).__name__}")
    for call in listed or ():
        if call is None or isinstance(call, (str, bytes, int, float, list, tuple)):
            raise GuardInputError(f"message {index}: each tool call must be an object, got "
                                  f"{type(call).__name__}")
        call_get = _getter(call)
        fn = call_get("function") or call_get("custom")
        fn_get = _getter(fn) if fn is not None else None
        name = fn_get("name") if fn_get is not None else call_get("name")
        if isinstance(name, str) and name:
            args = fn_get("arguments") if fn_get is not None else None
            if args is None and fn_get is not None:
                args = fn_get("input")
            calls.append(ToolCall(name, _arguments_text(args), call_get("id")))
    legacy = get("function_call")
    if legacy is not None and isinstance(_get(legacy, "name"), str):
        calls.append(ToolCall(_get(legacy, "name"), _arguments_text(_get(legacy, "arguments"))))
    return calls


def _read_message(raw: Any, index: int) -> Message:
    if raw is None or isinstance(raw, (str, bytes, int, float)):
        raise GuardInputError(f"message {index}: expected an object with a 'role', "
                              f"got {type(raw).__name__}")
    get = _getter(raw)
    role = get("role")
    if not isinstance(role, str):
        raise GuardInputError(f"message {index}: missing 'role'")
    content = get("content")
    texts: list[str] = []
    calls = _openai_calls(get, index)
    result_ids: list[str] = []
    is_error = bool(get("x-error") or get("is_error"))
    said_something = False
    if isinstance(content, str):
        texts.append(content)
        said_something = bool(content.strip())
    elif isinstance(content, (list, tuple)):
        for block in content:
            if isinstance(block, str):
                texts.append(block)
                said_something = said_something or bool(block.strip())
                continue
            kind = _get(block, "type")
            if kind in _TEXT_BLOCKS or (kind is None and isinstance(_get(block, "text"), str)):
                text = _get(block, "text") or ""
                texts.append(text)
                said_something = said_something or bool(text.strip())
            elif kind in _CALL_BLOCKS:
                name = _get(block, "name")
                if isinstance(name, str) and name:
                    calls.append(ToolCall(name, _arguments_text(_get(block, "input")),
                                          _get(block, "id")))
            elif isinstance(kind, str) and kind.endswith("tool_result"):
                texts.append(_result_text(_get(block, "content")))
                if isinstance(_get(block, "tool_use_id"), str):
                    result_ids.append(_get(block, "tool_use_id"))
                is_error = is_error or bool(_get(block, "is_error"))
    elif content is not None and not isinstance(content, (bytes, int, float)):
        texts.append(_arguments_text(content))
    # One text (the usual case) is the text; a join would copy nothing but str subclasses.
    text = (texts[0] if len(texts) == 1 and type(texts[0]) is str
            else "\n".join(t for t in texts if t))
    by_user = get("x-requestor") == "user"

    if role in _SYSTEM_ROLES:
        return Message(index, "system", text)
    if role in _TOOL_ROLES:
        call_id = get("tool_call_id")
        return Message(index, "tool", text, result_ids=(call_id,) if isinstance(call_id, str)
                       else (), is_error=is_error, by_user=by_user)
    if role == "user":
        if result_ids and not said_something:
            # Anthropic sends tool results as a user message: a result, not a new turn.
            return Message(index, "tool", text, result_ids=tuple(result_ids),
                           is_error=is_error)
        # A simulated user's own calls (tau2 telecom) stay the user's.
        return Message(index, "user", text, calls=tuple(calls), by_user=bool(calls),
                       starts_turn=True)
    if role in ("assistant", "model"):
        return Message(index, "assistant", text, calls=tuple(calls),
                       canned=bool(get("x-canned")))
    raise GuardInputError(f"message {index}: unknown role {role!r}")


@dataclass(frozen=True)
class Conversation:
    """Messages with their turns, and which requested calls ran.

    Build it with :func:`read_conversation`.

    Attributes:
        messages: Every message, in order.
        tool_names: The catalog's tool names; empty when no catalog was given (then
            every requested call counts as run).
    """

    messages: tuple[Message, ...]
    tool_names: frozenset[str] = frozenset()
    _turn_start: tuple[int, ...] = field(default=(), repr=False)
    _turn_end: tuple[int, ...] = field(default=(), repr=False)
    _answers: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False)

    def ran(self, call: ToolCall) -> bool:
        """Whether a requested call ran: its name is in the catalog (or no catalog)."""
        return not self.tool_names or call.name in self.tool_names

    def call_answered(self, position: int) -> ToolCall | None:
        """The call the tool result at ``position`` answers, if it is matched to one."""
        found = self._answers.get(position)
        return None if found is None else self.messages[found[0]].calls[found[1]]

    def turn_bounds(self, position: int) -> tuple[int, int]:
        """``[start, end)`` positions of the turn holding the message at ``position``."""
        return self._turn_start[position], self._turn_end[position]

    def agent_calls(self, start: int, end: int) -> list[tuple[int, ToolCall]]:
        """``(position, call)`` of the agent's calls that ran, in positions ``[start, end)``."""
        return [(p, c) for p in range(max(start, 0), min(end, len(self.messages)))
                for c in self.messages[p].calls
                if self.messages[p].role == "assistant" and self.ran(c)]

    def calls_with_results(self, start: int, end: int) -> list[tuple[ToolCall, str | None]]:
        """The agent's calls that ran in positions ``[start, end)``, in order, each with
        the text of its result when that came back before ``end`` (else None)."""
        results: dict[tuple[int, int], str] = {}
        for p in range(max(start, 0), min(end, len(self.messages))):
            found = self._answers.get(p)
            if found is not None:
                results[found] = self.messages[p].text
        return [(call, results.get((p, i)))
                for p in range(max(start, 0), min(end, len(self.messages)))
                if self.messages[p].role == "assistant"
                for i, call in enumerate(self.messages[p].calls) if self.ran(call)]

    def replies(self) -> list[int]:
        """Positions of the assistant messages to judge (model text, not canned)."""
        return [p for p, m in enumerate(self.messages) if m.is_reply]


def read_conversation(messages: Sequence[Any], tool_names: Sequence[str] | frozenset[str] = (),
                      *, system: Any = None) -> Conversation:
    """Read a message list in OpenAI chat or Anthropic messages shape.

    Args:
        messages: The conversation, oldest first (dicts or SDK objects).
        tool_names: Names of the tools the agent had; calls to other names never ran.
        system: A system prompt given apart from the messages (Anthropic's ``system``:
            a string or a list of text blocks).

    Returns:
        The conversation. ``Message.index`` keeps each message's position in
        ``messages``; a separate ``system`` gets index -1.

    Raises:
        GuardInputError: ``messages`` is not a list, or a message has no role or an
            unknown one.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise GuardInputError(f"messages must be a list of messages, got "
                              f"{type(messages).__name__}")
    read = [_read_message(raw, i) for i, raw in enumerate(messages)]
    if system is not None:
        read.insert(0, Message(-1, "system", _result_text(system)))
    starts: list[int] = []
    start = 0
    for position, message in enumerate(read):
        if message.starts_turn:
            start = position
        starts.append(start)
    ends = [0] * len(read)
    end = len(read)
    for position in range(len(read) - 1, -1, -1):
        ends[position] = end
        if read[position].starts_turn:
            end = position
    return Conversation(tuple(read), frozenset(tool_names), tuple(starts), tuple(ends),
                        _match_results(read))


def _match_results(read: Sequence[Message]) -> dict[int, tuple[int, int]]:
    """Result position -> (position, number) of the call it answers. A result answers the
    call with its id; results without ids answer the calls of the last assistant message
    in order."""
    by_id: dict[str, tuple[int, int]] = {}
    out: dict[int, tuple[int, int]] = {}
    answered: set[tuple[int, int]] = set()
    pending: list[tuple[int, int]] = []
    for position, message in enumerate(read):
        if message.role == "assistant" and message.calls:
            pending = [(position, n) for n in range(len(message.calls))]
            for n, call in enumerate(message.calls):
                if call.call_id:
                    by_id[call.call_id] = (position, n)
        elif message.role == "tool" and not message.by_user:
            matched = [by_id[i] for i in message.result_ids if i in by_id]
            if not matched and pending:
                matched = [pending[0]]
            for key in matched:
                if key not in answered:  # a call's first result answers it
                    answered.add(key)
                    out[position] = key
                if key in pending:
                    pending.remove(key)
    return out
