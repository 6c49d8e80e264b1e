"""An LLM exchange as a conversation: who said what, which tools were called with which
arguments, what they returned, and the reply, in order.

Read from what the store holds of one model call:

* an ``llm_exchange`` debug payload as the adapters record it: the request as sent
  (``messages``, or ``input`` and ``instructions``, or ``system`` and ``messages``;
  ``tools``) with the reply under ``response``, in OpenAI Chat Completions, OpenAI
  Responses, Anthropic Messages or LangChain shape (:func:`read_payload_exchange`);
* an agent's own text record of a call, ``PROMPT\\nresponse:\\nREPLY`` (as
  ``guardtrace simulate`` records one): the prompt, then the reply;
* an LLM span's attributes in the OpenInference or OpenTelemetry GenAI conventions, read
  by the consumers' own reader (:func:`read_span_exchange`).

Pure and total: whatever a stored body holds (it is hostile text), reading gives a
:class:`Conversation` or an :class:`Unreadable` that says why, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from guardtrace.schemas.genai_exchange import GenAIExchange, read_exchange

__all__ = [
    "ROLE_ASSISTANT",
    "ROLE_PROMPT",
    "ROLE_SYSTEM",
    "ROLE_TOOL",
    "ROLE_USER",
    "TEXT_RECORD_SEPARATOR",
    "Conversation",
    "Message",
    "ToolCall",
    "Unreadable",
    "argument_text",
    "read_payload_exchange",
    "read_reply",
    "read_span_exchange",
    "tool_names",
]

ROLE_SYSTEM: Final = "system"
ROLE_USER: Final = "user"
ROLE_ASSISTANT: Final = "assistant"
ROLE_TOOL: Final = "tool"
# A prompt recorded as one text, system and user parts together (a text record).
ROLE_PROMPT: Final = "prompt"

# Between the prompt and the reply of an agent's text record of a call.
TEXT_RECORD_SEPARATOR: Final = "\nresponse:\n"

# LangChain's message types, and the roles they are.
_LANGCHAIN_ROLES: Final = {"human": ROLE_USER, "ai": ROLE_ASSISTANT, "system": ROLE_SYSTEM,
                           "tool": ROLE_TOOL, "function": ROLE_TOOL}
_TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
_CALL_PARTS: Final = frozenset({"tool_use", "function_call", "custom_tool_call", "tool_call"})
_RESULT_PARTS: Final = frozenset({"tool_result", "function_call_output",
                                  "custom_tool_call_output"})
# Parts that say nothing a reader of the conversation needs (a model's hidden reasoning).
_SILENT_PARTS: Final = frozenset({"reasoning", "thinking", "redacted_thinking"})


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool by the model.

    Attributes:
        name: The tool called, as the model wrote it.
        arguments: Its arguments as text (JSON indented when they parse as JSON).
        call_id: The id a tool result refers to ("" when none was recorded).
    """

    name: str
    arguments: str = ""
    call_id: str = ""


@dataclass(frozen=True)
class Message:
    """One turn of a conversation.

    Attributes:
        role: :data:`ROLE_SYSTEM`, :data:`ROLE_USER`, :data:`ROLE_ASSISTANT`,
            :data:`ROLE_TOOL`, :data:`ROLE_PROMPT`, or another role as recorded.
        text: What it says ("" when it only calls tools).
        tool_calls: The tools it calls, in order.
        answers: For a tool result, the id of the call it answers ("" when unknown).
        tool: For a tool result, the tool's name, when recorded or known from its call.
    """

    role: str
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    answers: str = ""
    tool: str = ""


@dataclass(frozen=True)
class Conversation:
    """One model call as a conversation.

    Attributes:
        sent: What the model was sent, oldest first (system instructions first).
        reply: What it answered (usually one assistant message; one per choice).
        tools: The names of the tools it was shown; None when the record holds no tool
            list (then no call can be judged against one).
        model: The model, when recorded ("" otherwise).
        notes: What could not be read, in words (the rest is shown).
    """

    sent: tuple[Message, ...]
    reply: tuple[Message, ...]
    tools: tuple[str, ...] | None = None
    model: str = ""
    notes: tuple[str, ...] = ()

    @property
    def reply_text(self) -> str:
        """The reply's text, its messages' texts joined."""
        return "\n".join(m.text for m in self.reply if m.text)

    @property
    def reply_calls(self) -> tuple[ToolCall, ...]:
        """Every tool the reply calls, in order."""
        return tuple(call for m in self.reply for call in m.tool_calls)


@dataclass(frozen=True)
class Unreadable:
    """A record that is no conversation this page can read; it is shown raw.

    Attributes:
        note: Why, in words.
    """

    note: str


class _Notes:
    """What could not be read, each kind once, in the order met."""

    def __init__(self) -> None:
        self.found: dict[str, None] = {}

    def add(self, note: str) -> None:
        self.found[note] = None

    def all(self) -> tuple[str, ...]:
        return tuple(self.found)


def read_payload_exchange(body: str) -> Conversation | Unreadable:
    """The conversation of an ``llm_exchange`` payload body.

    Args:
        body: The body as stored (JSON, or an agent's text record).

    Returns:
        The conversation, or why the body is not one (never raises).
    """
    stripped = body.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            if TEXT_RECORD_SEPARATOR in body:
                return _text_record(body)
            return Unreadable(f"The body is not valid JSON ({_reason(exc)}); a body cut at "
                              "the collector's payload limit is not.")
        return _json_exchange(data)
    if TEXT_RECORD_SEPARATOR in body:
        return _text_record(body)
    return Unreadable("The body is neither JSON nor a text record with a 'response:' line.")


def read_span_exchange(attributes: Mapping[str, str]) -> Conversation | Unreadable | None:
    """The conversation an LLM span's attributes record, or None for any other span.

    Args:
        attributes: The span's attributes as stored (text values).

    Returns:
        None when the span records no LLM call (an agent's, a tool's or guardtrace's own
        span); otherwise the conversation, or why it cannot be read (content not
        captured, messages dropped by an attribute limit, bad JSON).
    """
    exchange = read_exchange(attributes)
    if exchange is None:
        return None
    return _from_genai(exchange)


def _from_genai(exchange: GenAIExchange) -> Conversation | Unreadable:
    details = tuple(f"{kind}: {detail}" for kind, detail in exchange.problem_details.items())
    if exchange.messages is None and exchange.output is None:
        return Unreadable("The span records no messages that can be read. " + "; ".join(
            details))
    notes = _Notes()
    for detail in details:
        notes.add(detail)
    sent: list[Message] = []
    if exchange.system:
        sent.append(Message(ROLE_SYSTEM, exchange.system))
    sent.extend(_messages(exchange.messages or (), ROLE_USER, notes))
    reply = _messages(exchange.output or (), ROLE_ASSISTANT, notes)
    # No definitions recorded is not "no tools shown": instrumentations often leave them
    # out (openai-v2 records none; OpenInference hides them on request).
    tools = _tool_names(exchange.tools, notes) if exchange.tools else None
    return _linked(Conversation(tuple(sent), tuple(reply), tools, exchange.model,
                                notes.all()))


def _text_record(body: str) -> Conversation:
    prompt, _, reply = body.rpartition(TEXT_RECORD_SEPARATOR)
    reply = reply.rstrip("\n")
    return Conversation((Message(ROLE_PROMPT, prompt),),
                        (Message(ROLE_ASSISTANT, reply),) if reply else ())


def _json_exchange(data: Any) -> Conversation | Unreadable:
    notes = _Notes()
    if isinstance(data, list):  # a conversation recorded as a bare list of messages
        return _linked(Conversation(tuple(_messages(data, ROLE_USER, notes)), (),
                                    notes=notes.all()))
    if not isinstance(data, dict):
        return Unreadable(f"The body is a JSON {type(data).__name__}, not an exchange.")
    sent: list[Message] = []
    for key in ("system", "instructions"):
        system = _content_text(data.get(key), notes)
        if system:
            sent.append(Message(ROLE_SYSTEM, system))
    conversation = data.get("messages", data.get("input"))
    if isinstance(conversation, str):
        sent.append(Message(ROLE_USER, conversation))
    elif isinstance(conversation, list):
        sent.extend(_messages(conversation, ROLE_USER, notes))
    elif conversation is not None:
        notes.add(f"The messages are a JSON {type(conversation).__name__}, not a list.")
    if "response" not in data and conversation is None:
        return Unreadable("The body has no 'messages', 'input' or 'response': it is not an "
                          "exchange in a shape this page reads.")
    reply = _reply(data.get("response"), notes) if "response" in data else []
    tools = _tool_names(data["tools"], notes) if isinstance(data.get("tools"), list) else None
    model = data.get("model")
    return _linked(Conversation(tuple(sent), tuple(reply), tools,
                                model if isinstance(model, str) else "", notes.all()))


def read_reply(response: Any) -> tuple[Message, ...]:
    """The messages of a model's response, in any shape an adapter records one.

    A Chat Completions completion (each choice's message), a Responses response (its
    ``output`` items), an Anthropic or LangChain message, a list of messages or items,
    or text. What is not recognised becomes a message showing it as JSON.
    """
    return tuple(_reply(response, _Notes()))


def _reply(response: Any, notes: _Notes) -> list[Message]:
    if response is None:
        return []
    if isinstance(response, str):
        return [Message(ROLE_ASSISTANT, response)]
    if isinstance(response, list):
        return _messages(response, ROLE_ASSISTANT, notes)
    if not isinstance(response, dict):
        return [Message(ROLE_ASSISTANT, _json_text(response))]
    choices = response.get("choices")
    if isinstance(choices, list):
        found: list[Message] = []
        for choice in choices:
            message = (choice.get("message") or choice.get("delta")) \
                if isinstance(choice, dict) else None
            found.extend(_messages([message], ROLE_ASSISTANT, notes) if message else ())
        return found
    output = response.get("output")
    if isinstance(output, list):
        return _messages(output, ROLE_ASSISTANT, notes)
    return _messages([response], ROLE_ASSISTANT, notes)


def _messages(items: Iterable[Any], role: str, notes: _Notes) -> list[Message]:
    """Messages, in order: one item may be several (a user turn carrying tool results),
    and a call item following an assistant message joins it (Responses output)."""
    out: list[Message] = []
    for item in items:
        for message in _message(item, role, notes):
            previous = out[-1] if out else None
            if (previous is not None and message.role == ROLE_ASSISTANT == previous.role
                    and message.tool_calls and not message.text):
                out[-1] = replace(previous, tool_calls=previous.tool_calls + message.tool_calls)
            else:
                out.append(message)
    return out


def _message(item: Any, role: str, notes: _Notes) -> list[Message]:
    """One stored message or item; ``role`` when it names none."""
    if isinstance(item, str):
        return [Message(role, item)]
    if not isinstance(item, dict):
        notes.add(f"A message that is a JSON {type(item).__name__} is shown as it is.")
        return [Message(role, _json_text(item))]
    kind = _kind(item)
    if kind in _CALL_PARTS:
        return [Message(ROLE_ASSISTANT, tool_calls=(_call(item),))]
    if kind in _RESULT_PARTS:
        return [_result(item, notes)]
    if kind in _SILENT_PARTS:
        return []
    stated = item.get("role")
    if not isinstance(stated, str) or not stated:
        stated = _LANGCHAIN_ROLES.get(kind, "")
    if not stated and "content" not in item and not item.get("tool_calls"):
        if kind:
            # A typed item of the provider's own (a web search it ran): named, not shown.
            return [Message(role, f"[{kind}]")]
        notes.add("A message with no role, content or tool calls is shown as JSON.")
        return [Message(role, _json_text(item))]
    role = stated or role
    if role in (ROLE_TOOL, "function"):
        return [_result(item, notes)]
    results: list[Message] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    content = item.get("content")
    if isinstance(content, list):
        for part in content:
            _part(part, texts, calls, results, notes)
    elif content is not None:
        texts.append(_content_text(content, notes))
    for call in _list(item.get("tool_calls")):
        calls.append(_call(call))
    legacy = item.get("function_call")
    if isinstance(legacy, dict):
        calls.append(_call({"function": legacy}))
    refusal = item.get("refusal")
    if isinstance(refusal, str) and refusal:
        texts.append(refusal)
    # A call both in the content and in tool_calls (LangChain over Anthropic) is one call.
    unique = {call.call_id or f"#{n}": call for n, call in enumerate(calls)}
    message = Message(role, "\n".join(t for t in texts if t), tuple(unique.values()))
    # Tool results a user turn carries (Anthropic) come before what the turn says.
    return results + ([message] if message.text or message.tool_calls or not results else [])


def _part(part: Any, texts: list[str], calls: list[ToolCall], results: list[Message],
          notes: _Notes) -> None:
    """Sort one content part of a message into its texts, calls or tool results."""
    if isinstance(part, str):
        texts.append(part)
        return
    if not isinstance(part, dict):
        notes.add(f"A content part that is a JSON {type(part).__name__} is shown as it is.")
        texts.append(_json_text(part))
        return
    kind = _kind(part)
    if kind in _TEXT_PARTS or (not kind and isinstance(part.get("text"), str)):
        texts.append(_text_value(part.get("text")))
    elif kind in _CALL_PARTS:
        calls.append(_call(part))
    elif kind in _RESULT_PARTS:
        results.append(_result(part, notes))
    elif kind == "refusal":
        texts.append(_text_value(part.get("refusal")))
    elif kind not in _SILENT_PARTS:
        # An image, a file, audio: named where it was, not shown.
        texts.append(f"[{kind or 'part'}]")


def _list(value: Any) -> list[Any]:
    """``value`` when it is a list, else empty (a stored field may hold anything)."""
    return value if isinstance(value, list) else []


def _kind(item: dict[str, Any]) -> str:
    """An item's ``type`` when it is text ("" otherwise: a list there is no type)."""
    kind = item.get("type")
    return kind if isinstance(kind, str) else ""


def _call(item: Any) -> ToolCall:
    """A tool call in any recorded shape: Chat Completions (``function``), custom tools,
    Responses and Anthropic items, LangChain's ``{"name", "args", "id"}``."""
    if not isinstance(item, dict):
        return ToolCall(_json_text(item))
    inner = item.get("function") or item.get("custom")
    source = inner if isinstance(inner, dict) else item
    name = source.get("name")
    arguments = next((source[key] for key in ("arguments", "input", "args")
                      if source.get(key) is not None), "")
    call_id = item.get("call_id") or item.get("id") or ""
    return ToolCall(name if isinstance(name, str) else _json_text(name),
                    argument_text(arguments), call_id if isinstance(call_id, str) else "")


def _result(item: dict[str, Any], notes: _Notes) -> Message:
    """A tool's result: a ``tool`` message, a Responses output item, an Anthropic block."""
    answers = next((item[key] for key in ("tool_call_id", "tool_use_id", "call_id")
                    if isinstance(item.get(key), str)), "")
    content = item.get("content", item.get("output"))
    name = item.get("name")
    return Message(ROLE_TOOL, _content_text(content, notes), answers=answers,
                   tool=name if isinstance(name, str) else "")


def _content_text(content: Any, notes: _Notes) -> str:
    """Text of a content value: a string, a list of parts (their texts), else JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        for part in content:
            _part(part, texts, calls, results, notes)
        texts.extend(f"[calls {c.name}]" for c in calls)
        texts.extend(r.text for r in results)
        return "\n".join(t for t in texts if t)
    return _json_text(content)


def tool_names(tools: Iterable[Any]) -> tuple[str, ...]:
    """The names of tools as a request lists them: Chat Completions ``{"type":
    "function", "function": {"name"}}``, Responses and Anthropic ``{"name"}``, custom
    tools, or bare names; a definition without a name is left out."""
    return _tool_names(tools, _Notes())


def _tool_names(tools: Iterable[Any], notes: _Notes) -> tuple[str, ...]:
    names: list[str] = []
    for tool in tools:
        if isinstance(tool, str):
            names.append(tool)
            continue
        if isinstance(tool, dict):
            inner = tool.get("function") or tool.get("custom")
            name = (inner if isinstance(inner, dict) else tool).get("name")
            if isinstance(name, str) and name:
                names.append(name)
                continue
        notes.add("A tool definition without a name is left out of the tool list.")
    return tuple(dict.fromkeys(names))


def _linked(conversation: Conversation) -> Conversation:
    """Tool results named after the call they answer, where the result names none."""
    called = {call.call_id: call.name for m in conversation.sent + conversation.reply
              for call in m.tool_calls if call.call_id}
    if not called:
        return conversation

    def named(messages: tuple[Message, ...]) -> tuple[Message, ...]:
        return tuple(replace(m, tool=called.get(m.answers, "")) if m.role == ROLE_TOOL
                     and not m.tool and m.answers else m for m in messages)

    return replace(conversation, sent=named(conversation.sent), reply=named(conversation.reply))


def argument_text(arguments: Any) -> str:
    """Arguments as text: JSON indented when they are (or parse as) an object or list."""
    if isinstance(arguments, str):
        if arguments.lstrip()[:1] not in ("{", "["):
            return arguments
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments  # free text, or JSON cut short: shown as written
    if arguments is None or arguments == "":
        return ""
    return _json_text(arguments, indent=2)


def _json_text(value: Any, indent: int | None = None) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _text_value(value: Any) -> str:
    return value if isinstance(value, str) else _json_text(value)


def _reason(exc: BaseException) -> str:
    return "nested too deep" if isinstance(exc, RecursionError) else str(exc)
