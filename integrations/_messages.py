"""Framework message lists in the one shape the reply guards read: OpenAI chat.

:meth:`~guardtrace.collectors.replies.fabrication.FabricationGuard.check_conversation`
reads OpenAI chat and Anthropic messages. Frameworks hold their conversation in shapes
of their own, so each adapter converts here, once:

* :func:`from_langchain`: LangChain ``BaseMessage`` objects (``HumanMessage``,
  ``AIMessage`` with ``tool_calls``, ``ToolMessage``, ``SystemMessage``, ``ChatMessage``,
  ``FunctionMessage``; ``RemoveMessage`` markers are skipped).
* :func:`from_responses_items`: OpenAI Responses input items, as the Agents SDK holds
  a run (``message`` items, ``function_call`` / ``function_call_output`` and the other
  ``*_call`` / ``*_call_output`` items; reasoning items are skipped).

Both read by duck typing (``.type``, ``.content`` ...) and import no SDK, so they never
pin an SDK version. What the guards need is kept: who said
what, which tools the model called (with their call ids) and what each call returned.
Anything a converter does not recognise is skipped, never raised on: an adapter must not
break the agent over a message kind a new SDK release adds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._exchange import disclaimer_suffix
from ._sdk import plain

if TYPE_CHECKING:
    from ..collectors.replies.fabrication import FabricationVerdict

__all__ = [
    "DISCLAIMERS_KEY",
    "ChatMessage",
    "from_langchain",
    "from_responses_items",
    "text_of",
    "with_disclaimers",
    "without_disclaimers",
]

ChatMessage = dict[str, Any]
"""One message in OpenAI chat shape."""

#: Where an adapter notes the disclaimers it appended to a reply (LangChain's
#: ``response_metadata``), so the guards read the reply as the model wrote it: disclaimers
#: judged as the model's own words would make flagged replies look alike (a loop).
DISCLAIMERS_KEY = "guardtrace_disclaimers"

# LangChain's message `.type` values and the chat role each is.
_LANGCHAIN_ROLES: Mapping[str, str] = {
    "system": "system",
    "developer": "developer",
    "human": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "HumanMessageChunk": "user",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
    "function": "function",
    "FunctionMessageChunk": "function",
}
# ChatMessage(role=...) carries a free role; these are the ones LangChain's OpenAI
# integration itself maps to chat roles.
_FREE_ROLES: Mapping[str, str] = {
    "user": "user", "human": "user", "assistant": "assistant", "ai": "assistant",
    "system": "system", "developer": "developer", "tool": "tool", "function": "function",
}
# Content blocks whose text is what the model said (not reasoning, not tool calls).
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
_ROLES = frozenset({"system", "developer", "user", "assistant"})


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text blocks of a block list.

    Reasoning, image and tool-call blocks are not text the user reads, so they are left
    out; blocks are joined with newlines.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
                continue
            kind = _get(block, "type")
            text = _get(block, "text")
            if isinstance(text, str) and (kind in _TEXT_BLOCKS or kind is None):
                parts.append(text)
        return "\n".join(part for part in parts if part)
    return str(content)


def _arguments(args: Any) -> str:
    # OpenAI chat carries arguments as JSON text; LangChain parses them into a dict.
    if isinstance(args, str):
        return args
    try:
        return json.dumps(args if args is not None else {}, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(args)


def _function_call(name: Any, arguments: Any, call_id: Any) -> ChatMessage:
    call: ChatMessage = {"type": "function",
                         "function": {"name": name, "arguments": _arguments(arguments)}}
    if isinstance(call_id, str) and call_id:
        call["id"] = call_id
    return call


# --- LangChain --------------------------------------------------------------------------

def _langchain_tool_calls(message: Any) -> list[ChatMessage]:
    # `tool_calls` holds the parsed calls the framework will run; `invalid_tool_calls`
    # (arguments that did not parse) are never run, so they back no claim and are left out.
    calls = []
    for call in _get(message, "tool_calls") or ():
        name = _get(call, "name")
        if isinstance(name, str) and name:
            calls.append(_function_call(name, _get(call, "args"), _get(call, "id")))
    return calls


def _from_langchain_message(message: Any) -> ChatMessage | None:
    if isinstance(message, Mapping) and "role" in message:
        return dict(message)  # already chat-shaped (a dict in a LangGraph state)
    kind = _get(message, "type")
    role = _LANGCHAIN_ROLES.get(kind) if isinstance(kind, str) else None
    if kind == "chat":
        free = _get(message, "role")
        role = _FREE_ROLES.get(free) if isinstance(free, str) else None
    if role is None:
        return None  # RemoveMessage, or a kind this converter does not know
    out: ChatMessage = {"role": role, "content": text_of(_get(message, "content"))}
    if role == "assistant":
        metadata = _get(message, "response_metadata")
        if isinstance(metadata, Mapping) and DISCLAIMERS_KEY in metadata:
            out["content"] = without_disclaimers(out["content"], metadata[DISCLAIMERS_KEY])
        calls = _langchain_tool_calls(message)
        if calls:
            out["tool_calls"] = calls
    elif role == "tool":
        call_id = _get(message, "tool_call_id")
        if isinstance(call_id, str):
            out["tool_call_id"] = call_id
        if _get(message, "status") == "error":
            out["is_error"] = True
    elif role == "function":
        out["name"] = _get(message, "name") or ""
    return out


def from_langchain(messages: Iterable[Any]) -> list[ChatMessage]:
    """LangChain messages (oldest first) as OpenAI chat messages.

    ``AIMessage.tool_calls`` become ``tool_calls`` with JSON arguments and their ids, a
    ``ToolMessage`` becomes a ``tool`` message answering its ``tool_call_id`` (marked
    ``is_error`` when its status is ``error``), and content blocks are reduced to their
    text. Disclaimers an adapter appended to a reply (noted under
    :data:`DISCLAIMERS_KEY`) are taken off again. Messages of unknown kinds are skipped.
    """
    out: list[ChatMessage] = []
    for message in messages:
        converted = _from_langchain_message(message)
        if converted is not None:
            out.append(converted)
    return out


# --- OpenAI Responses items (the Agents SDK) ----------------------------------------------

def _output_text(output: Any) -> str:
    # A call's output: text, or a list of content parts (input_text, images, files).
    if isinstance(output, str):
        return output
    if isinstance(output, (list, tuple)):
        return text_of(list(output))
    return "" if output is None else _arguments(output)


def _call_name(item: Mapping[str, Any], kind: str) -> str:
    name = item.get("name")
    if isinstance(name, str) and name:
        return name
    # Hosted tools carry no name: "web_search_call" is a call of "web_search".
    return kind[: -len("_call")]


def from_responses_items(items: Iterable[Any]) -> list[ChatMessage]:
    """OpenAI Responses input items (oldest first) as OpenAI chat messages.

    Consecutive calls (``function_call``, ``custom_tool_call``, hosted ``*_call`` items)
    join the assistant message just before them, or form one of their own; their
    ``*_call_output`` items become ``tool`` messages answering the ``call_id``. An
    ``mcp_call``, which carries its output inline, becomes both. A bare string is one
    user message.
    """
    out: list[ChatMessage] = []

    def add_call(name: str, arguments: Any, call_id: Any) -> None:
        last = out[-1] if out else None
        if last is None or last["role"] != "assistant":
            last = {"role": "assistant", "content": ""}
            out.append(last)
        last.setdefault("tool_calls", []).append(_function_call(name, arguments, call_id))

    for raw in [items] if isinstance(items, str) else items:
        if isinstance(raw, str):
            out.append({"role": "user", "content": raw})
            continue
        # The SDK mixes TypedDicts and pydantic models in one list: read both as JSON.
        item = plain(raw)
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        role = item.get("role")
        if (kind in (None, "message")) and role in _ROLES:
            out.append({"role": role, "content": text_of(item.get("content"))})
        elif not isinstance(kind, str):
            continue
        elif kind.endswith("_call_output"):
            call_id = item.get("call_id")
            message: ChatMessage = {"role": "tool", "content": _output_text(item.get("output"))}
            if isinstance(call_id, str):
                message["tool_call_id"] = call_id
            out.append(message)
        elif kind == "mcp_call":
            call_id = item.get("id")
            add_call(_call_name(item, kind), item.get("arguments"), call_id)
            result = item.get("output") if item.get("error") is None else item.get("error")
            message = {"role": "tool", "content": _output_text(result)}
            if isinstance(call_id, str):
                message["tool_call_id"] = call_id
            out.append(message)
        elif kind.endswith("_call"):
            arguments = item.get("arguments", item.get("input", item.get("action")))
            add_call(_call_name(item, kind), arguments, item.get("call_id") or item.get("id"))
        # reasoning, compaction and other items say nothing the guards judge
    return out


# --- disclaimers on a framework's message ---------------------------------------------------


def with_disclaimers(content: Any, verdict: FabricationVerdict) -> Any:
    """``content`` with a flagged verdict's disclaimers appended, in the shape it came in.

    Text gets them as the guard's ``verdict.reply`` does (after a blank line); a list of
    content blocks gets one more text block, so tool-call and other blocks stay intact.
    """
    if not verdict.flagged:
        return content
    suffix = disclaimer_suffix(verdict)
    if isinstance(content, (list, tuple)):
        return [*content, {"type": "text", "text": suffix}]
    return text_of(content).rstrip() + suffix


def without_disclaimers(text: str, disclaimers: Any) -> str:
    """``text`` without the disclaimer lines an adapter appended to it."""
    if not isinstance(disclaimers, (list, tuple)) or not disclaimers:
        return text
    lines = "\n".join(str(d) for d in disclaimers)
    stripped = text.rstrip()
    return stripped[: -len(lines)].rstrip() if stripped.endswith(lines) else text
