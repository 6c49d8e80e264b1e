"""One LLM call read from the GenAI telemetry an agent already emits: :class:`GenAIExchange`.

The consumers store every span's attributes as text
(:func:`guardtrace.consumers.otlp_values.attributes_map`); :func:`read_exchange` reads
those of one span (or of one GenAI log record, whose attributes carry the same
``gen_ai.*`` keys) into a neutral exchange the detectors take, and the dashboard shows:
the input messages, the output messages and their tool calls, in OpenAI chat shape
(``role``, ``content``, ``tool_calls``, ``tool_call_id``), the tool definitions the
request showed and the system instructions. Two conventions are read:

* OpenInference (``openinference-instrumentation-*``, ``openinference.span.kind`` =
  ``LLM``): flattened keys, one per field, such as
  ``llm.input_messages.N.message.role`` / ``.content`` /
  ``.contents.K.message_content.text`` / ``.tool_calls.M.tool_call.function.name`` /
  ``.tool_call_id``, the same under ``llm.output_messages.N``, and
  ``llm.tools.N.tool.json_schema`` (the definition as a JSON string). A field the
  instrumentation hides (``OPENINFERENCE_HIDE_*``) is absent or ``__REDACTED__``.
* OpenTelemetry GenAI semantic conventions (``opentelemetry-util-genai`` and the
  instrumentations built on it, ``gen_ai.operation.name`` = ``chat``,
  ``text_completion`` or ``generate_content``): ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` (JSON lists of ``{"role", "parts"}`` with ``text``,
  ``tool_call`` and ``tool_call_response`` parts), ``gen_ai.system_instructions`` (a
  JSON list of parts), ``gen_ai.tool.definitions`` (a JSON list), present only when the
  instrumentation captures content
  (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` or
  ``span_and_event``; ``event_only`` puts them on the log event instead).
  ``invoke_agent`` spans are not read: their reply is the last inference span's reply,
  judged there.

Reading never raises on what a span holds: what cannot be read (JSON that does not
parse, message indexes with gaps, where an SDK's attribute limit dropped some, content
that was not captured) is named in :attr:`GenAIExchange.problems`, and the part it
concerns is None, so a detector that needs it does not run on a guess.

It lives here, below both its readers, because the consumers' detectors and the
dashboard's request page read the same spans, and the dashboard may not import the
consumers. Pure: the standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "CONVENTION_GENAI",
    "CONVENTION_OPENINFERENCE",
    "PROBLEM_BAD_JSON",
    "PROBLEM_MISSING_INDEX",
    "PROBLEM_NOT_CAPTURED",
    "PROBLEM_UNEXPECTED_SHAPE",
    "GenAIExchange",
    "read_exchange",
]

CONVENTION_OPENINFERENCE: Final = "openinference"
CONVENTION_GENAI: Final = "gen_ai"

# What could not be read; the consumers count spans by these kinds.
PROBLEM_BAD_JSON: Final = "bad_json"
PROBLEM_MISSING_INDEX: Final = "missing_index"
PROBLEM_NOT_CAPTURED: Final = "content_not_captured"
PROBLEM_UNEXPECTED_SHAPE: Final = "unexpected_shape"

# OpenInference keys (openinference-semantic-conventions).
OI_SPAN_KIND: Final = "openinference.span.kind"
OI_KIND_LLM: Final = "LLM"
OI_INPUT_MESSAGES: Final = "llm.input_messages."
OI_OUTPUT_MESSAGES: Final = "llm.output_messages."
OI_TOOLS: Final = "llm.tools."
OI_TOOL_SCHEMA: Final = "tool.json_schema"
OI_MODEL: Final = "llm.model_name"
OI_REDACTED: Final = "__REDACTED__"
_OI_MESSAGE: Final = "message."
_OI_TOOL_CALL: Final = "tool_call."
_OI_CONTENT: Final = "message_content."

# OpenTelemetry GenAI keys (semantic conventions, gen_ai.*).
GENAI_OPERATION: Final = "gen_ai.operation.name"
GENAI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GENAI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GENAI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GENAI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GENAI_AGENT_NAME: Final = "gen_ai.agent.name"
GENAI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GENAI_RESPONSE_ID: Final = "gen_ai.response.id"
GENAI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GENAI_REQUEST_MODEL: Final = "gen_ai.request.model"
# The operations that are one model call (an LLM span); agents, tools and embeddings are not.
GENAI_INFERENCE_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})

# Tool lists repeat byte for byte on every call of an agent: each distinct one is parsed
# once and the same list object handed out, so the detectors' own per-list caches hit.
_TOOLS_CACHE_ENTRIES = 512
_tools_cache: dict[Any, list[Any]] = {}


@dataclass(frozen=True)
class GenAIExchange:
    """One LLM call as the detectors read it.

    Attributes:
        convention: :data:`CONVENTION_OPENINFERENCE` or :data:`CONVENTION_GENAI`.
        messages: The input messages in OpenAI chat shape, oldest first; None when they
            were not captured or could not be read (see ``problems``).
        output: The output (assistant) messages in OpenAI chat shape, one per choice;
            None when not captured or unreadable.
        tools: The tool definitions the request showed, as recorded (OpenAI chat or
            ``{"type": "function", "name", ...}`` objects); empty when none were
            recorded, None when they could not be read.
        system: System instructions given apart from the messages ("" when none).
        agent_name: ``gen_ai.agent.name`` ("" when absent).
        conversation_id: ``gen_ai.conversation.id`` ("" when absent).
        model: The model that answered, else the one asked for ("" when neither).
        response_id: ``gen_ai.response.id`` ("" when absent).
        problems: What could not be read, as ``PROBLEM_*`` kinds, each at most once.
        problem_details: Each problem kind's first occurrence in words (which key, why),
            for a log line.
    """

    convention: str
    messages: list[dict[str, Any]] | None
    output: list[dict[str, Any]] | None
    tools: list[Any] | None
    system: str = ""
    agent_name: str = ""
    conversation_id: str = ""
    model: str = ""
    response_id: str = ""
    problems: tuple[str, ...] = ()
    problem_details: Mapping[str, str] = field(default_factory=dict)


class _Problems:
    """Problem kinds met while reading one span, each with its first detail."""

    __slots__ = ("kinds",)

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}

    def add(self, kind: str, detail: str) -> None:
        self.kinds.setdefault(kind, detail)


def read_exchange(attributes: Mapping[str, str]) -> GenAIExchange | None:
    """The LLM call recorded in ``attributes``, or None when they record none.

    Args:
        attributes: One span's (or GenAI log record's) attributes, values as text, as
            the consumers store them.

    Returns:
        The exchange, or None for anything but an LLM call in either convention (an
        HTTP span, a tool or agent span, a guardtrace span). Never raises on what the
        attributes hold.
    """
    kind = attributes.get(OI_SPAN_KIND)
    if kind is not None:
        return _openinference(attributes) if kind == OI_KIND_LLM else None
    operation = attributes.get(GENAI_OPERATION)
    if operation is not None:
        return _genai(attributes) if operation in GENAI_INFERENCE_OPERATIONS else None
    if GENAI_OUTPUT_MESSAGES in attributes or GENAI_INPUT_MESSAGES in attributes:
        return _genai(attributes)  # a log record, or an SDK that leaves the operation out
    return None


# --- OpenInference ------------------------------------------------------------------------

def _openinference(attributes: Mapping[str, str]) -> GenAIExchange:
    problems = _Problems()
    # Grouped by the index as written (one split per key: this runs for every attribute
    # of every LLM span); indexes are checked once per message below.
    inputs: dict[str, dict[str, str]] = {}
    outputs: dict[str, dict[str, str]] = {}
    tools: dict[str, str] = {}
    for key, value in attributes.items():
        if key[:4] != "llm.":
            continue
        group, _, rest = key[4:].partition(".")
        if group == "input_messages":
            into = inputs
        elif group == "output_messages":
            into = outputs
        else:
            if group == "tools":
                index, _, tail = rest.partition(".")
                if tail == OI_TOOL_SCHEMA:
                    tools[index] = value
            continue
        index, _, tail = rest.partition(".")
        if not tail.startswith(_OI_MESSAGE):
            problems.add(PROBLEM_UNEXPECTED_SHAPE, f"{key}: not <index>.message.<field>")
            continue
        fields = into.get(index)
        if fields is None:
            fields = into[index] = {}
        fields[tail[len(_OI_MESSAGE):]] = value
    messages = _oi_messages(_numbered(inputs, OI_INPUT_MESSAGES, problems),
                            "llm.input_messages", problems)
    output = _oi_messages(_numbered(outputs, OI_OUTPUT_MESSAGES, problems),
                          "llm.output_messages", problems)
    if output is None and not outputs:
        problems.add(PROBLEM_NOT_CAPTURED, "no llm.output_messages")
    if messages is None and not inputs:
        problems.add(PROBLEM_NOT_CAPTURED, "no llm.input_messages")
    return GenAIExchange(
        CONVENTION_OPENINFERENCE, messages, output,
        _oi_tools(_numbered(tools, OI_TOOLS, problems), problems),
        model=attributes.get(OI_MODEL, ""),
        agent_name=attributes.get(GENAI_AGENT_NAME, ""),
        problems=tuple(problems.kinds), problem_details=problems.kinds)


def _numbered(grouped: dict[str, Any], prefix: str, problems: _Problems) -> dict[int, Any]:
    """``grouped`` keyed by index number; an index that is no number is named and dropped."""
    out = {}
    for index, value in grouped.items():
        number = _index(index)
        if number is None:
            problems.add(PROBLEM_UNEXPECTED_SHAPE, f"{prefix}{index}: not an index")
        else:
            out[number] = value
    return out


def _index(text: str) -> int | None:
    # isdigit() alone takes "²" and other Unicode digits, which int() refuses.
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None


def _flat_field(key: str, start: int, inner: str, value: str,
                into: dict[int, dict[str, str]], problems: _Problems) -> None:
    """Put ``value`` under ``into[N][field]`` for a key ``<prefix>N.<inner><field>``."""
    index, _, rest = key[start:].partition(".")
    number = _index(index)
    if number is None or not rest.startswith(inner):
        problems.add(PROBLEM_UNEXPECTED_SHAPE, f"{key}: not <index>.{inner}<field>")
        return
    fields = into.get(number)
    if fields is None:
        fields = into[number] = {}
    fields[rest[len(inner):]] = value


def _contiguous(indexed: Mapping[int, Any], where: str, problems: _Problems) -> bool:
    """Whether the indexes are exactly 0..n-1 (an SDK's attribute limit drops the oldest)."""
    if len(indexed) and max(indexed) == len(indexed) - 1:
        return True
    problems.add(PROBLEM_MISSING_INDEX,
                 f"{where}: indexes {sorted(indexed)[:8]} are not 0..{len(indexed) - 1}")
    return False


def _oi_messages(indexed: dict[int, dict[str, str]], where: str,
                 problems: _Problems) -> list[dict[str, Any]] | None:
    if not indexed or not _contiguous(indexed, where, problems):
        return None
    messages = []
    for number in range(len(indexed)):
        message = _oi_message(indexed[number], f"{where}.{number}", problems)
        if message is None:
            return None
        messages.append(message)
    return messages


def _oi_message(fields: dict[str, str], where: str,
                problems: _Problems) -> dict[str, Any] | None:
    role = fields.get("role")
    if not role:
        problems.add(PROBLEM_MISSING_INDEX, f"{where}: no message.role")
        return None
    message: dict[str, Any] = {"role": role}
    calls: dict[int, dict[str, str]] = {}
    parts: dict[int, dict[str, str]] = {}
    for name, value in fields.items():
        if name.startswith("tool_calls."):
            _flat_field(name, len("tool_calls."), _OI_TOOL_CALL, value, calls, problems)
        elif name.startswith("contents."):
            _flat_field(name, len("contents."), _OI_CONTENT, value, parts, problems)
        elif name in ("content", "tool_call_id", "name"):
            message[name] = value
    if parts:
        if not _contiguous(parts, f"{where}.message.contents", problems):
            return None
        # Text parts only; an image says nothing the detectors read.
        texts = [parts[k]["text"] for k in range(len(parts))
                 if parts[k].get("type", "text") == "text" and "text" in parts[k]]
        message["content"] = "\n".join(texts) if "content" not in message else \
            "\n".join([message["content"], *texts])
    if OI_REDACTED in (message.get("content"), *(p.get("text") for p in parts.values())):
        problems.add(PROBLEM_NOT_CAPTURED, f"{where}: content hidden ({OI_REDACTED})")
        return None
    if calls:
        if not _contiguous(calls, f"{where}.message.tool_calls", problems):
            return None
        listed = []
        for number in range(len(calls)):
            call = calls[number]
            function = call.get("function.name")
            if not function:
                problems.add(PROBLEM_MISSING_INDEX,
                             f"{where}.message.tool_calls.{number}: no function.name")
                return None
            listed.append({"id": call.get("id") or f"call_{number}", "type": "function",
                           "function": {"name": function,
                                        "arguments": call.get("function.arguments", "")}})
        message["tool_calls"] = listed
    return message


def _oi_tools(indexed: dict[int, str], problems: _Problems) -> list[Any] | None:
    if not indexed:
        return []
    if not _contiguous(indexed, "llm.tools", problems):
        return None
    texts = tuple(indexed[k] for k in range(len(indexed)))
    hit = _tools_cache.get(texts)
    if hit is not None:
        return hit
    tools = []
    for number, text in enumerate(texts):
        try:
            tools.append(json.loads(text))
        except ValueError as exc:
            problems.add(PROBLEM_BAD_JSON, f"llm.tools.{number}.{OI_TOOL_SCHEMA}: {exc}")
            return None
    _remember(texts, tools)
    return tools


def _remember(key: Any, tools: list[Any]) -> None:
    if len(_tools_cache) >= _TOOLS_CACHE_ENTRIES:
        _tools_cache.clear()  # distinct tool lists would otherwise pile up
    _tools_cache[key] = tools


# --- OpenTelemetry GenAI semantic conventions ----------------------------------------------

def _genai(attributes: Mapping[str, str]) -> GenAIExchange:
    problems = _Problems()
    messages = output = None
    raw_in = attributes.get(GENAI_INPUT_MESSAGES)
    raw_out = attributes.get(GENAI_OUTPUT_MESSAGES)
    if raw_in is None or raw_out is None:
        missing = [k for k, v in ((GENAI_INPUT_MESSAGES, raw_in),
                                  (GENAI_OUTPUT_MESSAGES, raw_out)) if v is None]
        problems.add(PROBLEM_NOT_CAPTURED,
                     f"no {' or '.join(missing)} (content capture is off, or on the log "
                     f"event only)")
    if raw_in is not None:
        messages = _genai_messages(raw_in, GENAI_INPUT_MESSAGES, problems)
    if raw_out is not None:
        output = _genai_messages(raw_out, GENAI_OUTPUT_MESSAGES, problems)
    system = _genai_system(attributes.get(GENAI_SYSTEM_INSTRUCTIONS), problems)
    return GenAIExchange(
        CONVENTION_GENAI, messages, output,
        _genai_tools(attributes.get(GENAI_TOOL_DEFINITIONS), problems),
        system=system or "",
        agent_name=attributes.get(GENAI_AGENT_NAME, ""),
        conversation_id=attributes.get(GENAI_CONVERSATION_ID, ""),
        model=attributes.get(GENAI_RESPONSE_MODEL) or attributes.get(GENAI_REQUEST_MODEL, ""),
        response_id=attributes.get(GENAI_RESPONSE_ID, ""),
        problems=tuple(problems.kinds), problem_details=problems.kinds)


def _json(text: str, where: str, problems: _Problems) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        problems.add(PROBLEM_BAD_JSON, f"{where}: {exc}")
        return None


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _genai_messages(text: str, where: str, problems: _Problems) -> list[dict[str, Any]] | None:
    parsed = _json(text, where, problems)
    if parsed is None:
        return None
    if not isinstance(parsed, list):
        problems.add(PROBLEM_UNEXPECTED_SHAPE, f"{where}: a JSON {type(parsed).__name__}, "
                                               f"not a list of messages")
        return None
    messages: list[dict[str, Any]] = []
    for number, raw in enumerate(parsed):
        role = raw.get("role") if isinstance(raw, dict) else None
        parts = raw.get("parts", []) if isinstance(raw, dict) else None
        if not isinstance(role, str) or not role or not isinstance(parts, list):
            problems.add(PROBLEM_UNEXPECTED_SHAPE,
                         f"{where}[{number}]: not a {{'role', 'parts'}} message")
            return None
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for part in parts:
            if not isinstance(part, dict):
                problems.add(PROBLEM_UNEXPECTED_SHAPE, f"{where}[{number}]: a part that is "
                                                       f"not an object")
                return None
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
            elif kind == "tool_call" and isinstance(part.get("name"), str):
                call_id = part.get("id")
                calls.append({"id": call_id if isinstance(call_id, str) and call_id
                              else f"call_{number}_{len(calls)}", "type": "function",
                              "function": {"name": part["name"],
                                           "arguments": _text_of(part.get("arguments", ""))}})
            elif kind == "tool_call_response":
                # A result (role "tool", or "user" as Anthropic sends them) is a tool
                # message of its own, before whatever the message also says.
                call_id = part.get("id")
                result: dict[str, Any] = {"role": "tool",
                                          "content": _text_of(part.get("response", ""))}
                if isinstance(call_id, str):
                    result["tool_call_id"] = call_id
                messages.append(result)
        if role == "tool" and not calls:
            if texts:
                messages.append({"role": "tool", "content": "\n".join(texts)})
            continue
        message: dict[str, Any] = {"role": role, "content": "\n".join(texts)}
        if calls:
            message["tool_calls"] = calls
        if isinstance(raw.get("name"), str):
            message["name"] = raw["name"]
        messages.append(message)
    return messages


def _genai_system(text: str | None, problems: _Problems) -> str | None:
    if text is None:
        return None
    if text.lstrip()[:1] not in ("[", "{"):
        return text  # instructions recorded as plain text
    parsed = _json(text, GENAI_SYSTEM_INSTRUCTIONS, problems)
    parts = parsed if isinstance(parsed, list) else [parsed]
    return "\n".join(part["content"] for part in parts
                     if isinstance(part, dict) and isinstance(part.get("content"), str))


def _genai_tools(text: str | None, problems: _Problems) -> list[Any] | None:
    if text is None:
        return []
    hit = _tools_cache.get(text)
    if hit is not None:
        return hit
    parsed = _json(text, GENAI_TOOL_DEFINITIONS, problems)
    if parsed is None:
        return None
    if not isinstance(parsed, list):
        problems.add(PROBLEM_UNEXPECTED_SHAPE, f"{GENAI_TOOL_DEFINITIONS}: a JSON "
                                               f"{type(parsed).__name__}, not a list")
        return None
    _remember(text, parsed)
    return parsed
