"""Names of the tools that fired, read from OpenAI and Anthropic responses.

The fabrication guard needs the tools that *actually* fired this turn. A turn of a tool
loop spans several model calls (tool call, tool result, final text), and the final
reply usually has no tool call in it, so pass every response (or the turn's message
list) of the turn, not only the last one.

Accepted shapes, as plain dicts (JSON) or SDK objects (attribute access):

* OpenAI Chat Completions: a completion (``choices[].message.tool_calls[].function.name``
  and the legacy ``function_call.name``), a streamed chunk (``choices[].delta``), one
  choice, or one message.
* OpenAI Responses API: a response or its ``output`` list (``function_call`` and
  ``custom_tool_call`` items by ``name``; built-in ``web_search_call``,
  ``file_search_call``, ``code_interpreter_call``, ``local_shell_call`` ... as the tool
  name without ``_call``; ``mcp_call`` by ``name``).
* Anthropic Messages: a message or its ``content`` list (``tool_use``,
  ``server_tool_use`` and ``mcp_tool_use`` blocks by ``name``).
* Streamed output, collected into a list as it was consumed: OpenAI chat chunks (and the
  ``chunk`` events of ``chat.completions.stream()``), Responses stream events
  (``response.output_item.added`` / ``.done`` items, the response of
  ``response.completed``), Anthropic stream events (``content_block_start`` blocks, the
  message of ``message_start`` and of the helper's ``message_stop``).
* Framework messages: LangChain ``AIMessage`` / ``AIMessageChunk`` (``tool_calls[].name``,
  ``tool_call_chunks[].name``), Pydantic AI ``ModelResponse`` (``parts`` of kind
  ``tool-call`` / ``builtin-tool-call`` by ``tool_name``), LlamaIndex ``ChatMessage`` /
  ``ChatResponse`` (OpenAI-shaped ``additional_kwargs["tool_calls"]``, ``tool_call``
  blocks by ``tool_name``).
* A list or tuple of any of these (a turn's messages): the names of all of them.

A stream itself (an OpenAI or Anthropic ``Stream``, a stream helper or its manager, any
generator or iterator) raises :class:`GuardInputError`: it yields each chunk once, to
whoever reads it first, so reading it here would take the chunks from the agent, and
reading it after the agent finds it empty. The message names the stream and says what
to pass instead (the chunks collected while consuming it, or the final response).

A shape that is recognisably a response or message but holds no tool calls gives ``[]``,
and so does a mapping of any keys (a ``tool`` role message, a ``tool_result`` block:
transcripts are loosely typed JSON). An object with none of the fields any of these
shapes has raises :class:`GuardInputError` naming its type, and so do values that cannot
be a response at all (None, strings, bytes, numbers): they mean the caller passed the
wrong variable, and a silent ``[]`` would read as "no tool fired".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any

from .errors import GuardInputError

__all__ = ["tool_names_from_anthropic", "tool_names_from_openai", "tool_names_fired"]

_ANTHROPIC_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_OPENAI_NAMED_ITEMS = frozenset({"function_call", "custom_tool_call", "mcp_call"})
# Responses API stream events are typed "response.<what>"; the ones naming a tool carry
# an output `item` (output_item.added / .done) or the whole `response` (completed, ...).
_RESPONSES_EVENT_PREFIX = "response."
# The `chat.completions.stream()` helper wraps each raw chunk in an event of this type.
_CHAT_HELPER_CHUNK_EVENT = "chunk"
# What to pass instead of a stream, named in the error.
_INSTEAD_OF_A_STREAM = (
    "Pass the list of chunks/events you collected while consuming it, or the final "
    "response (the SDKs' stream helpers give it: get_final_completion(), "
    "get_final_response(), get_final_message()).")


def _get(obj: Any, key: str) -> Any:
    """``obj[key]`` for mappings, ``obj.key`` for SDK objects, else None."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


_EXPECTED = "expected a model response, message, content/output list or list of them"


def _type_name(obj: Any) -> str:
    """``openai.Stream``, ``anthropic.MessageStream``, ``generator``: the type as its
    user knows it (the package, not the private module it lives in)."""
    kind = type(obj)
    package = kind.__module__.split(".")[0]
    return kind.__qualname__ if package == "builtins" else f"{package}.{kind.__qualname__}"


def _check_type(obj: Any) -> None:
    if obj is None or isinstance(obj, (str, bytes, bytearray, int, float, complex)):
        raise GuardInputError(f"{_EXPECTED}, got {type(obj).__name__}")
    _refuse_stream(obj)


def _refuse_stream(obj: Any) -> None:
    # SDK streams and stream helpers are iterators (sync or async), and so is any
    # generator; a list or tuple is not (it is read as what it holds).
    if isinstance(obj, (Iterator, AsyncIterator)):
        raise GuardInputError(
            f"{_EXPECTED}, got {_type_name(obj)}, a one-shot stream: it yields each "
            f"chunk once, to whoever reads it first, so reading it here would take the "
            f"chunks from your code, and it cannot be read twice. {_INSTEAD_OF_A_STREAM}")
    if type(obj).__name__.endswith("StreamManager"):
        raise GuardInputError(
            f"{_EXPECTED}, got {_type_name(obj)}, the manager of a stream that has not "
            f"started (enter it: `with ... as stream`). {_INSTEAD_OF_A_STREAM}")


def _is_sequence(obj: Any) -> bool:
    return isinstance(obj, (list, tuple))


def _name(obj: Any) -> str | None:
    name = _get(obj, "name")
    return name if isinstance(name, str) and name else None


def _openai_message(message: Any, out: list[str]) -> None:
    tool_calls = _get(message, "tool_calls")
    if _is_sequence(tool_calls):
        for call in tool_calls:
            # {"type": "function", "function": {"name": ...}} or, for custom tools,
            # {"type": "custom", "custom": {"name": ...}}.
            name = _name(_get(call, "function")) or _name(_get(call, "custom"))
            if name:
                out.append(name)
    legacy = _get(message, "function_call")
    if legacy is not None:
        name = _name(legacy)
        if name:
            out.append(name)


def _openai_output_item(item: Any, out: list[str]) -> None:
    kind = _get(item, "type")
    if not isinstance(kind, str):
        return
    if kind in _OPENAI_NAMED_ITEMS:
        name = _name(item)
        if name:
            out.append(name)
    elif kind.endswith("_call"):
        # Built-in tools carry no name: "web_search_call" -> "web_search".
        out.append(kind[: -len("_call")])


def _openai_event(obj: Any, kind: Any, out: list[str]) -> bool:
    """Read a stream event (Responses API, or the chat helper's ``chunk`` event); False
    when ``obj`` is not one."""
    if not isinstance(kind, str):
        return False
    if kind == _CHAT_HELPER_CHUNK_EVENT:
        chunk = _get(obj, "chunk")
        if chunk is not None:
            _openai(chunk, out)
        return True
    if kind.startswith(_RESPONSES_EVENT_PREFIX):
        item = _get(obj, "item")
        if item is not None:
            _openai_output_item(item, out)
        response = _get(obj, "response")
        if response is not None:
            _openai(response, out)
        return True
    return False


def _openai(obj: Any, out: list[str]) -> None:
    choices = _get(obj, "choices")
    if _is_sequence(choices):
        for choice in choices:
            # `delta` for streamed chunks: the name arrives once, in the first delta.
            message = _get(choice, "message") or _get(choice, "delta")
            if message is not None:
                _openai_message(message, out)
        return
    output = _get(obj, "output")
    if _is_sequence(output):
        for item in output:
            _openai_output_item(item, out)
        return
    kind = _get(obj, "type")
    if _openai_event(obj, kind, out):
        return
    message = _get(obj, "message")  # a single choice
    if message is not None and not isinstance(message, str):
        _openai_message(message, out)
        return
    if kind is not None:
        _openai_output_item(obj, out)  # one Responses-API output item
    _openai_message(obj, out)


def _anthropic_block(block: Any, out: list[str]) -> None:
    if _get(block, "type") in _ANTHROPIC_TOOL_BLOCKS:
        name = _name(block)
        if name:
            out.append(name)


def _anthropic(obj: Any, out: list[str]) -> None:
    content = _get(obj, "content")
    if _is_sequence(content):
        for block in content:
            _anthropic_block(block, out)
        return
    # Stream events: content_block_start (and the helper's content_block_stop) carry the
    # block, message_start (and the helper's message_stop) the message.
    block = _get(obj, "content_block")
    if block is not None:
        _anthropic_block(block, out)
        return
    message = _get(obj, "message")
    if message is not None and not isinstance(message, str):
        _anthropic(message, out)
        return
    _anthropic_block(obj, out)  # a single content block


# Pydantic AI's ModelResponse parts that call a tool, by `part_kind`.
_PYDANTIC_AI_CALL_PARTS = frozenset({"tool-call", "builtin-tool-call"})
# LlamaIndex content blocks that call a tool, by `block_type`.
_LLAMA_INDEX_CALL_BLOCKS = frozenset({"tool_call"})
# Fields one of which every shape read here has: an object with none of them is not a
# model response, message or event, whatever it is.
_KNOWN_FIELDS = ("choices", "output", "type", "message", "content", "tool_calls",
                 "function_call", "delta", "chunk", "item", "response", "content_block",
                 "role", "parts", "blocks", "additional_kwargs", "tool_call_chunks")


def _framework(obj: Any, out: list[str]) -> None:
    """LangChain, Pydantic AI and LlamaIndex messages (see the module docstring)."""
    if not isinstance(obj, Mapping):
        # LangChain: AIMessage.tool_calls holds {"name", "args", "id"} dicts (an
        # AIMessageChunk also has tool_call_chunks, the name in the first chunk).
        for field in ("tool_calls", "tool_call_chunks"):
            calls = getattr(obj, field, None)
            if isinstance(calls, (list, tuple)):
                out.extend(name for call in calls if (name := _name(call)))
    parts = _get(obj, "parts")
    if _is_sequence(parts):
        out.extend(name for part in parts
                   if _get(part, "part_kind") in _PYDANTIC_AI_CALL_PARTS
                   and isinstance(name := _get(part, "tool_name"), str) and name)
    message = _get(obj, "message")  # a LlamaIndex ChatResponse
    for holder in (obj, message) if message is not None else (obj,):
        extra = _get(holder, "additional_kwargs")
        if isinstance(extra, Mapping):
            _openai_message(extra, out)
        blocks = _get(holder, "blocks")
        if _is_sequence(blocks):
            out.extend(name for block in blocks
                       if _get(block, "block_type") in _LLAMA_INDEX_CALL_BLOCKS
                       and isinstance(name := _get(block, "tool_name"), str) and name)


def _check_known(obj: Any) -> None:
    if isinstance(obj, Mapping) or _is_sequence(obj):
        return
    if not any(getattr(obj, field, None) is not None for field in _KNOWN_FIELDS):
        raise GuardInputError(f"{_EXPECTED}, got {_type_name(obj)}, which has none of the "
                              f"fields of one ({', '.join(_KNOWN_FIELDS[:6])}, ...)")


def _collect(obj: Any, reader: Any) -> list[str]:
    _check_type(obj)
    out: list[str] = []
    items: Iterable[Any] = obj if _is_sequence(obj) else (obj,)
    for item in items:
        # Elements of a turn's list may be None or text in loosely typed transcripts;
        # they hold no tool calls.
        if item is None or isinstance(item, (str, bytes)):
            continue
        _refuse_stream(item)  # a list of streams is as unreadable as one
        _check_known(item)
        reader(item, out)
    return list(dict.fromkeys(out))


def tool_names_from_openai(response: Any) -> list[str]:
    """Tool names called in OpenAI Chat Completions or Responses API output.

    Args:
        response: A completion, choice, message, Responses-API response, output list or
            output item (dicts or SDK objects), or a list of any of these.

    Returns:
        Distinct tool names in the order they were first called; ``[]`` when none.

    Raises:
        GuardInputError: ``response`` is None, a string, bytes or a number, or a stream
            (see the module docstring).
    """
    return _collect(response, _openai)


def tool_names_from_anthropic(message: Any) -> list[str]:
    """Tool names used in Anthropic Messages API output.

    Args:
        message: A message, its ``content`` block list, one block (dicts or SDK
            objects), or a list of messages.

    Returns:
        Distinct tool names in the order they were first used; ``[]`` when none.

    Raises:
        GuardInputError: ``message`` is None, a string, bytes or a number, or a stream
            (see the module docstring).
    """
    # A list may hold messages or content blocks: `_anthropic` reads a message's blocks
    # and treats anything without a content list as a block.
    return _collect(message, _anthropic)


def tool_names_fired(response: Any) -> list[str]:
    """Tool names from an OpenAI, Anthropic, LangChain, Pydantic AI or LlamaIndex
    response or message, whichever it is.

    Every reader runs and their names are merged: the shapes do not overlap (OpenAI has
    ``choices``/``output``/``tool_calls`` of functions, Anthropic has ``tool_use``
    blocks, the frameworks have their own fields), so a mixed transcript is read
    correctly too.

    Args:
        response: Anything :func:`tool_names_from_openai` or
            :func:`tool_names_from_anthropic` accepts, or a framework message (see the
            module docstring), or a list of them.

    Returns:
        Distinct tool names in order of first appearance; ``[]`` when none.

    Raises:
        GuardInputError: ``response`` is None, a string, bytes or a number, an object
            with none of the fields of a response, or a stream: the message names it
            and what to pass instead.
    """
    return list(dict.fromkeys(tool_names_from_openai(response)
                              + tool_names_from_anthropic(response)
                              + _collect(response, _framework)))
