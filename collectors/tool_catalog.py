"""Read a tool list, in any shape an agent holds one, into :class:`ToolSpec` records.

Every guard that needs "the tools the model was shown" (plan validation, tool kinds
for the reply guards) reads them here, so each real shape is understood in one place:

* OpenAI Chat Completions: ``{"type": "function", "function": {"name", "description",
  "parameters"}}`` and custom tools ``{"type": "custom", "custom": {"name", ...}}``.
* OpenAI Responses API: ``{"type": "function", "name", "parameters", ...}``,
  ``{"type": "custom", "name", ...}``, and the hosted built-ins (``web_search``,
  ``web_search_preview``, ``file_search``, ``code_interpreter``, ``computer_use_preview``,
  ``image_generation``, ``local_shell`` ... any typed entry without a name), named by
  their type; an ``mcp`` server gives one spec per tool of its ``allowed_tools``
  (a list, or ``{"tool_names": [...], "read_only": ...}``), or one spec named by its
  ``server_label`` when it lists none.
* Anthropic: ``{"name", "description", "input_schema"}``, and the provider-defined
  tools with a versioned type (``web_search_20250305``, ``bash_20250124``,
  ``text_editor_20250429`` ...), named by their ``name`` (or their type without the
  date when the name is missing).
* MCP: a ``tools/list`` result ``{"tools": [...], "nextCursor"?}``, the JSON-RPC
  response around it ``{"jsonrpc", "id", "result": {"tools": [...]}}``, and
  ``mcp.types.Tool`` objects (``name``, ``description``, ``inputSchema``,
  ``annotations.readOnlyHint`` / ``destructiveHint``; mcp 2.x's snake_case attributes
  ``input_schema``, ``read_only_hint``, ``destructive_hint`` too), or a
  ``ListToolsResult``.
* Gemini: a tool holding ``function_declarations`` (or ``functionDeclarations``).
* Any other object with a ``name`` and, optionally, a JSON schema under ``parameters``,
  ``input_schema``, ``inputSchema``, ``json_schema`` or ``args_schema`` (a mapping or a
  pydantic model class, as LangChain tools carry).
* Plain names: ``"get_weather"``.

Elements may be dicts (JSON) or SDK / pydantic objects (attribute access); a list may mix
shapes, and a JSON text of any list or envelope is read too. A tool list is read whole
or not at all: input that cannot be a tool list raises :class:`GuardInputError` naming
the position (``tools[3]``) and the problem.

Declared kinds are taken only from what the catalogue itself declares: the
``x-guardtrace-kind`` field (``"read"`` / ``"write"``; the dev data and the guard's own
convention), then MCP annotations (``readOnlyHint`` true means read; ``destructiveHint``
true or ``readOnlyHint`` false means write), and a Responses MCP server whose
``allowed_tools`` filter says ``read_only``. Guessing a kind from a name or a
description is the caller's business, not the reader's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import GuardInputError, is_mapping, loads_json

__all__ = [
    "ToolSpec",
    "looks_like_tool_definition",
    "read_tool_definition",
    "read_tool_specs",
    "tool_list_in",
]

#: The field a catalogue uses to declare a tool's kind (values ``read`` / ``write``).
KIND_FIELD = "x-guardtrace-kind"
_KINDS = frozenset({"read", "write"})

# Typed entries whose definition is not a provider built-in: the name lives elsewhere.
_FUNCTION_TYPES = frozenset({"function", "custom"})
# Keys under which tool objects carry the JSON schema of their input, in order of use.
_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema", "json_schema", "args_schema")

# Keys of a Gemini tool holding function declarations.
_GEMINI_KEYS = ("function_declarations", "functionDeclarations")
# Anthropic's provider-defined tools carry a dated type: "web_search_20250305".
_DATED_TYPE_RE = re.compile(r"^(?P<base>[a-z][a-z0-9_]*?)_(?P<date>\d{8})$")
# A built-in's type is an identifier; anything else cannot name a tool.
_TYPE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool the model was shown.

    Attributes:
        name: The name the model calls it by.
        description: What the catalogue says it does ("" when nothing).
        declared_kind: ``"read"`` or ``"write"`` when the catalogue declares it
            (``x-guardtrace-kind``, MCP annotations), else None.
        builtin: A provider-defined tool (OpenAI Responses hosted tools, Anthropic's
            dated-type tools such as ``web_search_20250305``, tools of a Responses MCP
            server), whose schema the provider holds.
        parameters: The JSON schema of the tool's input when given (as given, not
            copied), else None.
    """

    name: str
    description: str = ""
    declared_kind: str | None = None
    builtin: bool = False
    parameters: Mapping[str, Any] | None = field(default=None, hash=False)


def _get(obj: Any, key: str) -> Any:
    """``obj[key]`` for mappings, ``obj.key`` for SDK objects, else None."""
    if is_mapping(obj):
        return obj.get(key)
    return getattr(obj, key, None)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _name_of(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _is_object(value: Any) -> bool:
    """An SDK/pydantic/dataclass object rather than a scalar or a container."""
    return not (value is None or isinstance(value, (str, bytes, bytearray, int, float,
                                                    complex, list, tuple, set, frozenset)))


def _schema(obj: Any) -> Mapping[str, Any] | None:
    for key in _SCHEMA_KEYS:
        value = _get(obj, key)
        if value is None:
            continue
        if is_mapping(value):
            return value
        if key != "args_schema":
            continue
        # LangChain's args_schema is a pydantic model class: ask it for its schema.
        # Third-party code: a failure means "no schema", never a broken read.
        to_schema = getattr(value, "model_json_schema", None) or getattr(value, "schema", None)
        if callable(to_schema):
            try:
                schema = to_schema()
            except Exception:  # noqa: BLE001 - a schema we cannot get is no schema
                continue
            if is_mapping(schema):
                return schema
    return None


def _declared_kind(*holders: Any) -> str | None:
    """``x-guardtrace-kind`` of the first holder that declares one, then MCP hints."""
    for holder in holders:
        kind = _get(holder, KIND_FIELD)
        if isinstance(kind, str) and kind.strip().lower() in _KINDS:
            return kind.strip().lower()
    for holder in holders:
        annotations = _get(holder, "annotations")
        if annotations is None:
            continue
        read_only = _hint(annotations, "readOnlyHint", "read_only_hint")
        if read_only is True:
            return "read"
        if read_only is False or _hint(annotations, "destructiveHint",
                                       "destructive_hint") is True:
            return "write"
    return None


def _hint(annotations: Any, wire: str, attribute: str) -> Any:
    """An MCP annotation by its wire name, or by the snake_case attribute newer SDKs use
    (mcp 2.x ``ToolAnnotations.read_only_hint``, aliased ``readOnlyHint``)."""
    value = _get(annotations, wire)
    return _get(annotations, attribute) if value is None else value


def _spec(name: str, holder: Any, *outer: Any, builtin: bool = False) -> ToolSpec:
    return ToolSpec(name=name, description=_text(_get(holder, "description")),
                    declared_kind=_declared_kind(holder, *outer), builtin=builtin,
                    parameters=_schema(holder))


def _mcp_server_specs(item: Any, where: str) -> tuple[ToolSpec, ...]:
    """A Responses ``mcp`` entry: its allowed tools, or the server when none are listed."""
    label = _name_of(_get(item, "server_label"))
    allowed = _get(item, "allowed_tools")
    kind = None
    if allowed is not None and not _is_sequence(allowed):
        # The filter form: {"tool_names": [...], "read_only": true}.
        if _get(allowed, "read_only") is True:
            kind = "read"
        allowed = _get(allowed, "tool_names")
    # The server's words describe its tools too ("deepwiki" for "ask_question").
    described = _text(_get(item, "server_description")) or (
        f"{label} MCP server" if label else "")
    if _is_sequence(allowed) and allowed:
        specs = []
        for index, name in enumerate(allowed):
            tool = _name_of(name)
            if tool is None:
                raise GuardInputError(
                    f"{where}.allowed_tools[{index}]: expected a tool name, got {name!r}")
            specs.append(ToolSpec(tool, described, kind, builtin=True))
        return tuple(specs)
    if label is None:
        raise GuardInputError(f"{where}: an 'mcp' tool needs a 'server_label'")
    return (ToolSpec(label, described, kind, builtin=True),)


def read_tool_definition(item: Any, where: str = "tools[0]") -> tuple[ToolSpec, ...]:
    """Read one element of a tool list.

    One element usually gives one spec; a Gemini tool with several function declarations
    or a Responses MCP server with ``allowed_tools`` gives several.

    Args:
        item: A plain name, or one tool definition in any shape the module docstring
            lists (a dict or an SDK object).
        where: How error messages name the element (``tools[3]``).

    Returns:
        The specs the element defines, in order.

    Raises:
        GuardInputError: The element cannot be a tool; the message says where and why.
    """
    if isinstance(item, str):
        name = _name_of(item)
        if name is None:
            raise GuardInputError(f"{where}: empty tool name")
        return (ToolSpec(name),)
    if not (is_mapping(item) or _is_object(item)):
        raise GuardInputError(
            f"{where}: expected a tool name or a tool definition object, "
            f"got {type(item).__name__}")
    kind = _get(item, "type")
    kind = kind if isinstance(kind, str) else None
    # OpenAI chat: {"type": "function", "function": {...}} / {"type": "custom", "custom": ...}.
    for key in ("function", "custom"):
        inner = _get(item, key)
        # The nested form is a mapping, or an SDK object when the type says so (an
        # object's method that happens to be called `function` is not a definition).
        if inner is not None and (is_mapping(inner) or (kind == key and _is_object(inner))):
            name = _name_of(_get(inner, "name"))
            if name is None:
                raise GuardInputError(f"{where}.{key}: a {key} tool without a 'name'")
            return (_spec(name, inner, item),)
    for key in _GEMINI_KEYS:
        declarations = _get(item, key)
        if _is_sequence(declarations):
            specs: list[ToolSpec] = []
            for index, declaration in enumerate(declarations):
                specs.extend(read_tool_definition(declaration, f"{where}.{key}[{index}]"))
            return tuple(specs)
    if kind == "mcp":
        return _mcp_server_specs(item, where)
    name = _name_of(_get(item, "name"))
    if kind is not None and kind not in _FUNCTION_TYPES:
        dated = _DATED_TYPE_RE.match(kind)
        if name is not None:
            # A provider-defined tool (Anthropic's dated types) or any typed tool that
            # names itself.
            return (_spec(name, item, builtin=dated is not None or _schema(item) is None),)
        if _TYPE_RE.match(kind):
            # A hosted built-in is called by its type ("web_search", "file_search"); a
            # dated type without a name by its base ("bash_20250124" -> "bash").
            return (_spec(dated["base"] if dated else kind, item, builtin=True),)
        raise GuardInputError(f"{where}: tool type {kind!r} is not a tool name and the "
                              f"entry has no 'name'")
    if name is None:
        raise GuardInputError(
            f"{where}: unknown tool form: expected a name, an OpenAI "
            f"{{'type': 'function', 'function': {{'name': ...}}}}, an Anthropic "
            f"{{'name': ..., 'input_schema': ...}}, an MCP {{'name': ..., "
            f"'inputSchema': ...}} or a built-in {{'type': ...}} definition")
    return (_spec(name, item),)


def tool_list_in(obj: Any) -> Any | None:
    """The tool list inside an MCP ``tools/list`` result or its JSON-RPC response.

    Args:
        obj: Any value.

    Returns:
        The ``tools`` list when ``obj`` is ``{"tools": [...], "nextCursor"?, ...}``
        (holding definitions, not bare names), a JSON-RPC response whose ``result`` is
        one, or an object with a ``tools`` list attribute
        (``mcp.types.ListToolsResult``); else None.
    """
    if is_mapping(obj):
        if "jsonrpc" in obj and "result" in obj:
            return tool_list_in(obj["result"])
        tools = obj.get("tools")
        # The result's other fields (nextCursor, _meta, and ttlMs, cacheScope ... in
        # newer protocol versions) are scalars or objects; a second list would make it an
        # agent -> capabilities map that has an agent called "tools".
        if (_is_sequence(tools) and not any(isinstance(t, str) for t in tools)
                and not any(_is_sequence(v) for k, v in obj.items() if k != "tools")):
            return tools
        return None
    if _is_object(obj):
        tools = getattr(obj, "tools", None)
        if _is_sequence(tools):
            return tools
    return None


def looks_like_tool_definition(obj: Any) -> bool:
    """Whether a mapping or object is one tool definition passed without a list."""
    kind = _get(obj, "type")
    if isinstance(kind, str) and kind in _FUNCTION_TYPES and any(
            _get(obj, key) is not None for key in ("function", "custom", "name")):
        return True
    if any(_is_sequence(_get(obj, key)) for key in _GEMINI_KEYS):
        return True
    if not isinstance(_get(obj, "name"), str):
        return False
    return (isinstance(kind, str) or _get(obj, "description") is not None
            or _get(obj, "annotations") is not None
            or any(_get(obj, key) is not None for key in _SCHEMA_KEYS))


def read_tool_specs(tools: Any) -> tuple[ToolSpec, ...]:
    """Read a tool list in any shape into specs, in order, without repeated names.

    Args:
        tools: A list (or tuple) of tool definitions and/or names in any shape the module
            docstring lists; an MCP ``tools/list`` result or JSON-RPC response; a
            ``ListToolsResult``-like object; one definition on its own; or a JSON text
            of any of these.

    Returns:
        One :class:`ToolSpec` per distinct tool name, first definition kept.

    Raises:
        GuardInputError: ``tools`` cannot be a tool list; the message names the position
            and the problem, e.g. ``"tools[2]: expected a tool name or a tool definition
            object, got int"``.
    """
    where = "tools"
    if isinstance(tools, (bytes, bytearray)):
        tools = tools.decode("utf-8", errors="replace")
    if isinstance(tools, str):
        text = tools.strip()
        if text[:1] not in ("[", "{"):
            raise GuardInputError(
                f"{where}: expected a list of tool definitions or names, got text that is "
                f"not JSON")
        tools = loads_json(text, f"{where}: looks like JSON but is not valid JSON")
    inner = tool_list_in(tools)
    if inner is not None:
        where = f"{where}.result.tools" if is_mapping(tools) and "jsonrpc" in tools else f"{where}.tools"
        tools = inner
    elif (is_mapping(tools) or _is_object(tools)) and looks_like_tool_definition(tools):
        tools = (tools,)
    if is_mapping(tools) and "jsonrpc" in tools and "error" in tools:
        raise GuardInputError(f"{where}: a JSON-RPC error response, not a tool list: "
                              f"{_get(tools['error'], 'message')!r}")
    if not _is_sequence(tools):
        raise GuardInputError(
            f"{where}: expected a list of tool definitions or names, an MCP tools/list "
            f"result or one tool definition; got {type(tools).__name__}")
    return _distinct(spec for index, item in enumerate(tools)
                     for spec in read_tool_definition(item, f"{where}[{index}]"))


def _distinct(specs: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    seen: dict[str, ToolSpec] = {}
    for spec in specs:
        seen.setdefault(spec.name, spec)
    return tuple(seen.values())
