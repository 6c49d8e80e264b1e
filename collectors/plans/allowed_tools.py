"""Parse the exact tool/agent list a planner was shown into :class:`AllowedTools`.

:func:`~guardtrace.collectors.plans.validation.validate_plan` checks a plan against this
list, so every form a planner's tool list comes in is accepted and parsed once into the
same shape: names, the capabilities each agent lists (when it lists any), and the
descriptions that feed name suggestions (:mod:`guardtrace.collectors.plans.suggestions`).

Accepted ``allowed`` forms (or a JSON string of the list/mapping forms):

* tool names: ``["search_documents", "organize_files"]``; an ``"agent/capability"``
  entry (the tiered selector's output) allows that agent with that capability;
* agent -> capabilities: ``{"weather-tool-v2": ["get_current_weather"]}`` (a mapping of
  capability -> description, a list of ``{"name": ...}`` objects, ``None`` for "unknown"
  or a description string work as values too);
* tool definitions in every shape :mod:`guardtrace.collectors.tool_catalog` reads
  (OpenAI chat and Responses tools including built-ins, Anthropic tools including
  server tools, MCP ``tools/list`` results and ``mcp.types.Tool`` objects, any object
  with a name and a JSON schema), one at a time or in a list, dicts or SDK objects;
  our agent objects ``{"name": ..., "capabilities": [...]}`` add capabilities;
* the capability text planners are shown: ``Agent: weather-tool-v2 (ID: weather-tool-v2)``
  lines followed by ``  - Capability: get_current_weather`` and ``Description:`` lines;
* an :class:`AllowedTools` parsed earlier (skips re-parsing in loops).

Tool definitions are read by :func:`~guardtrace.collectors.tool_catalog.read_tool_definition`
only: one parser for every guard. The specs are kept (:meth:`AllowedTools.spec`), and
their parameter schemas let suggestions weigh a step's arguments.

Capabilities are checked only where ``allowed`` lists them: a step that names an allowed
agent with a capability the agent does not list is ``hallucinated_capability``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import GuardInputError, is_mapping, loads_json
from ..tool_catalog import (
    ToolSpec,
    looks_like_tool_definition,
    read_tool_definition,
    tool_list_in,
)
from .suggestions import (
    MAX_SUGGESTIONS,
    ParameterNames,
    SuggestionIndex,
)

__all__ = [
    "AllowedTools",
    "suggest_tools",
]

# No tool-calling API allows parameter names near this long.
_MAX_PARAMETER_CHARS = 256
_AGENT_LINE_RE = re.compile(
    r"^\s*Agent:\s*(?P<name>.+?)\s*(?:\(\s*ID:\s*(?P<id>[^)]+?)\s*\))?\s*$")
_CAPABILITY_LINE_RE = re.compile(r"^\s*-\s*Capability:\s*(?P<cap>\S+)")
_DESCRIPTION_LINE_RE = re.compile(r"^\s*Description:\s*(?P<desc>.*)$")


@dataclass
class _Entry:
    """One allowed tool or agent. ``capabilities`` None means "not listed, not checked"."""

    name: str
    capabilities: list[str] | None = None
    texts: list[str] = field(default_factory=list)
    spec: ToolSpec | None = None

    def add_capability(self, capability: str, text: str = "") -> None:
        if self.capabilities is None:
            self.capabilities = []
        if capability not in self.capabilities:
            self.capabilities.append(capability)
        if text:
            self.texts.append(text)


class AllowedTools:
    """The exact tool/agent list a planner was shown, parsed from any accepted form.

    Parse once with :meth:`parse` and pass the object to
    :func:`~guardtrace.collectors.plans.validation.validate_plan` to skip re-parsing.
    Normalised names for suggestions are computed lazily, on the first hallucinated
    name, since most plans are valid.
    """

    __slots__ = ("_entries", "_lookup", "_implied", "_features", "_cap_features")

    def __init__(self, entries: Iterable[_Entry], aliases: Mapping[str, str] | None = None,
                 implied: Mapping[str, str] | None = None) -> None:
        self._entries: dict[str, _Entry] = {}
        for entry in entries:
            self._entries.setdefault(entry.name, entry)
        self._lookup: dict[str, _Entry] = dict(self._entries)
        for alias, target in (aliases or {}).items():
            self._lookup.setdefault(alias, self._entries[target])
        # "agent/capability" strings that are themselves allowed names.
        self._implied: dict[str, str] = dict(implied or {})
        self._features: SuggestionIndex | None = None
        self._cap_features: dict[str, SuggestionIndex] = {}

    @classmethod
    def parse(cls, allowed: Any, *, where: str = "allowed") -> AllowedTools:
        """Parse ``allowed`` in any accepted form.

        Args:
            allowed: See the module docstring for the forms.
            where: How error messages name the input (``allowed_tools`` in the scanner).

        Raises:
            GuardInputError: The form is not recognised; the message says where.
        """
        if isinstance(allowed, AllowedTools):
            return allowed
        builder = _Builder(where)
        if isinstance(allowed, (bytes, bytearray)):
            allowed = allowed.decode("utf-8", errors="replace")
        if isinstance(allowed, str):
            text = allowed.strip()
            if text[:1] in ("[", "{"):
                allowed = loads_json(text, f"{where}: looks like JSON but is not valid JSON")
            else:
                builder.add_capability_text(text)
                return builder.build()
        tools = tool_list_in(allowed)
        if tools is not None:  # an MCP tools/list result, its JSON-RPC response
            envelope = "result.tools" if is_mapping(allowed) and "jsonrpc" in allowed \
                else "tools"
            for index, item in enumerate(tools):
                builder.add_item(item, f"{where}.{envelope}[{index}]")
        elif isinstance(allowed, (list, tuple, set, frozenset)):
            for index, item in enumerate(allowed):
                builder.add_item(item, f"{where}[{index}]")
        elif _is_single_definition(allowed):
            builder.add_item(allowed, where)
        elif isinstance(allowed, Mapping):
            builder.add_agent_map(allowed)
        else:
            raise GuardInputError(
                f"{where}: expected a list of tool names or definitions, an agent -> "
                f"capabilities mapping, or capability text; got {type(allowed).__name__}")
        return builder.build()

    @property
    def names(self) -> tuple[str, ...]:
        """Allowed tool/agent names, in the order given (aliases not repeated)."""
        return tuple(self._entries)

    @property
    def agent_count(self) -> int:
        """How many distinct tools/agents were allowed."""
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._lookup

    def __len__(self) -> int:
        return len(self._entries)

    def spec(self, name: str) -> ToolSpec | None:
        """The tool definition ``name`` was read from, or None (a bare name, an agent)."""
        entry = self._lookup.get(name)
        return entry.spec if entry is not None else None

    def capabilities(self, name: str) -> tuple[str, ...] | None:
        """The capabilities listed for ``name``, or None if none were listed."""
        entry = self._lookup.get(name)
        if entry is None or entry.capabilities is None:
            return None
        return tuple(entry.capabilities)

    def describe(self) -> list[str]:
        """One line per tool, with its capabilities when known (for retry feedback)."""
        lines = []
        for entry in self._entries.values():
            if entry.capabilities:
                lines.append(f"{entry.name} (capabilities: {', '.join(entry.capabilities)})")
            else:
                lines.append(entry.name)
        return lines

    def suggest(self, name: str, limit: int = MAX_SUGGESTIONS,
                arguments: Any = None) -> tuple[str, ...]:
        """The allowed names closest to ``name``, best first (see :func:`suggest_tools`).

        Args:
            name: The invented name.
            limit: At most this many names.
            arguments: The step's arguments, matched against the tools' parameters.
        """
        if not self._entries:
            return ()
        return self._name_features().rank(name, limit, arguments)

    # -- resolution used by validate_plan -----------------------------------------------
    def resolve(self, tool: str) -> tuple[_Entry | None, str | None]:
        """The entry a step's tool refers to, and a capability implied by ``a/b`` names."""
        entry = self._lookup.get(tool)
        if entry is not None:
            return entry, self._implied.get(tool)
        if "/" in tool:
            agent, _, capability = tool.partition("/")
            entry = self._lookup.get(agent)
            if entry is not None:
                return entry, capability or None
        return None, None

    # -- suggestions --------------------------------------------------------------------
    def _name_features(self) -> SuggestionIndex:
        if self._features is None:
            self._features = SuggestionIndex(
                (e.name, e.name, [*(e.capabilities or ()), *e.texts,
                                  " ".join(_parameter_names(e.spec))],
                 ParameterNames.from_schema(e.spec.parameters) if e.spec else None)
                for e in self._entries.values())
        return self._features

    def capability_index(self, entry: _Entry) -> SuggestionIndex:
        """The suggestion index over one agent's capabilities (built once per agent)."""
        features = self._cap_features.get(entry.name)
        if features is None:
            features = SuggestionIndex((c, c, "") for c in entry.capabilities or ())
            self._cap_features[entry.name] = features
        return features


def _parameter_names(spec: ToolSpec | None) -> list[str]:
    """A tool's parameter names, as words describing it: a "movie_details.extra_info"
    call is after the tool that takes ``extra_info``."""
    properties = spec.parameters.get("properties") if spec and spec.parameters else None
    if properties is None or not is_mapping(properties):
        return []
    # Parameter names are words, not text: a pathological one is left out.
    return [k for k in properties if isinstance(k, str) and len(k) <= _MAX_PARAMETER_CHARS]


def _is_single_definition(obj: Any) -> bool:
    """One tool definition (or agent object) passed without a surrounding list.

    A mapping that is none is an agent -> capabilities map.
    """
    if not isinstance(obj, Mapping):
        return looks_like_tool_definition(obj)  # an SDK object such as mcp.types.Tool
    if looks_like_tool_definition(obj):
        return True
    return isinstance(obj.get("name"), str) and "capabilities" in obj


class _Builder:
    """Accumulates entries while parsing one ``allowed`` value."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.entries: dict[str, _Entry] = {}
        self.aliases: dict[str, str] = {}
        self.implied: dict[str, str] = {}
        # Agents seen as a plain name: their capabilities are unknown even if an
        # "agent/capability" entry also names them.
        self.open_agents: set[str] = set()

    def build(self) -> AllowedTools:
        for name in self.open_agents:
            self.entries[name].capabilities = None
        return AllowedTools(self.entries.values(), self.aliases, self.implied)

    def entry(self, name: str) -> _Entry:
        target = self.aliases.get(name, name)
        entry = self.entries.get(target)
        if entry is None:
            entry = self.entries[target] = _Entry(target)
        return entry

    def add_name(self, name: str, where: str) -> None:
        name = name.strip()
        if not name:
            raise GuardInputError(f"{where}: empty tool name")
        agent, slash, capability = name.partition("/")
        if slash and agent and capability:
            self.entry(agent).add_capability(capability)
            self.implied[name] = capability
            self.aliases.setdefault(name, agent)
        else:
            self.entry(name)
            self.open_agents.add(self.aliases.get(name, name))

    def add_item(self, item: Any, where: str) -> None:
        if isinstance(item, str):
            self.add_name(item, where)
            return
        specs = read_tool_definition(item, where)
        entry = None
        for spec in specs:
            entry = self.entry(spec.name)
            if entry.spec is None:
                entry.spec = spec
                if spec.description:
                    entry.texts.append(spec.description)
        # Our agent objects list capabilities: {"name": ..., "capabilities": [...]}.
        if entry is not None and is_mapping(item) and "capabilities" in item:
            self.add_capabilities(entry, item["capabilities"], f"{where}.capabilities")

    def add_agent_map(self, mapping: Mapping[Any, Any]) -> None:
        for agent, capabilities in mapping.items():
            where = f"{self.where}[{agent!r}]"
            if not isinstance(agent, str) or not agent.strip():
                raise GuardInputError(f"{where}: agent names must be non-empty strings")
            entry = self.entry(agent.strip())
            if isinstance(capabilities, str):
                # {"tool": "what it does"}: a name -> description list.
                entry.texts.append(capabilities)
            elif capabilities is not None:
                self.add_capabilities(entry, capabilities, where)

    def add_capabilities(self, entry: _Entry, capabilities: Any, where: str) -> None:
        if isinstance(capabilities, Mapping):
            for cap, text in capabilities.items():
                entry.add_capability(str(cap), text if isinstance(text, str) else "")
            return
        if not isinstance(capabilities, (list, tuple, set, frozenset)):
            raise GuardInputError(
                f"{where}: capabilities must be a list of names, got "
                f"{type(capabilities).__name__}")
        if not capabilities:
            entry.capabilities = entry.capabilities or []
        for index, cap in enumerate(capabilities):
            if isinstance(cap, str) and cap.strip():
                entry.add_capability(cap.strip())
            elif isinstance(cap, Mapping) and isinstance(cap.get("name"), str):
                text = cap.get("description")
                entry.add_capability(cap["name"], text if isinstance(text, str) else "")
            else:
                raise GuardInputError(
                    f"{where}[{index}]: a capability must be a name or an object with "
                    f"'name', got {type(cap).__name__}")

    def add_capability_text(self, text: str) -> None:
        current: _Entry | None = None
        seen_agent = False
        for line in text.splitlines():
            match = _AGENT_LINE_RE.match(line)
            if match:
                seen_agent = True
                name = match["name"]
                agent_id = (match["id"] or "").strip()
                # Planners are told "Agent: <name> (ID: <id>)" and may answer with
                # either, so both are accepted for the same agent.
                current = self.entry(agent_id or name)
                if agent_id and name != agent_id:
                    self.aliases.setdefault(name, current.name)
                # Listed as text, an agent's capabilities are known: none yet.
                if current.capabilities is None:
                    current.capabilities = []
                continue
            match = _CAPABILITY_LINE_RE.match(line)
            if match and current is not None:
                current.add_capability(match["cap"])
                continue
            match = _DESCRIPTION_LINE_RE.match(line)
            if match and current is not None:
                current.texts.append(match["desc"])
        if text and not seen_agent:
            raise GuardInputError(
                f"{self.where}: text has no 'Agent: <name> (ID: <id>)' lines; pass a list "
                f"of tool names or definitions instead")


def suggest_tools(name: str, allowed: Any, *, limit: int = MAX_SUGGESTIONS,
                  arguments: Any = None) -> list[str]:
    """The allowed names closest to ``name``, best first; only plausibly close ones.

    Domain-agnostic: names are normalised (case, separators, camelCase, plurals,
    version suffixes such as ``-v1``), then compared by rarity-weighted token overlap,
    typo similarity, and overlap with tool descriptions, capabilities and parameter
    names when given; the call's argument names, when given, are matched against each
    tool's parameters (the ranking is described in
    :mod:`guardtrace.collectors.plans.suggestions`). Abstentions (``no_function``) and
    placeholders (``func1``, ``tools.call``) get no suggestion.

    Args:
        name: The invented tool or agent name.
        allowed: The allowed list in any accepted form (see the module docstring), or an
            :class:`AllowedTools`.
        limit: At most this many suggestions.
        arguments: The arguments the invented call passed (a mapping), or None.

    Returns:
        Up to ``limit`` allowed names; empty when nothing is plausibly close.

    Raises:
        GuardInputError: ``allowed`` is not in an accepted form.
    """
    return list(AllowedTools.parse(allowed).suggest(name, limit, arguments))
