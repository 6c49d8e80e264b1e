"""Validate an LLM-generated plan against the exact tool list the planner was shown.

Family 1 of the guards (seeds 002 and 003). A plan step that names a tool, agent or
capability the planner was not given is a hallucination; dependency mistakes (missing,
forward, self, cycles) make a plan unexecutable too. Validation is deterministic code,
not an LLM judgement, so a prompt cannot talk its way past it.

Accepted plan forms (or a JSON string of either)::

    [{"id": "step_1", "tool": "organize_files", "inputs": {...}, "depends_on": []}]
    {"plan_id": "p1", "steps": [{"step_id": "step_1", "agent_name": "weather-tool-v2",
      "instruction": "...", "depends_on": [],
      "metadata": {"capability": "get_current_weather", "parameters": {...}}}]}

Accepted ``allowed`` forms (or a JSON string of the list/mapping forms):

* tool names: ``["search_documents", "organize_files"]``; an ``"agent/capability"``
  entry (the tiered selector's output) allows that agent with that capability;
* agent -> capabilities: ``{"weather-tool-v2": ["get_current_weather"]}`` (a mapping of
  capability -> description, a list of ``{"name": ...}`` objects, ``None`` for "unknown"
  or a description string work as values too);
* OpenAI tool definitions ``{"type": "function", "function": {"name": ...}}``;
* Anthropic tool definitions ``{"name": ..., "description": ..., "input_schema": ...}``
  (any object with a ``"name"``, optionally ``"capabilities"``);
* the capability text planners are shown: ``Agent: weather-tool-v2 (ID: weather-tool-v2)``
  lines followed by ``  - Capability: get_current_weather`` and ``Description:`` lines;
* an :class:`AllowedTools` parsed earlier (skips re-parsing in loops).

Capabilities are checked only where ``allowed`` lists them: a step that names an allowed
agent with a capability the agent does not list is ``hallucinated_capability``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from enum import StrEnum
from functools import lru_cache
from typing import Any

from guardtrace.collectors.errors import GuardInputError

__all__ = [
    "AllowedTools",
    "PlanErrorType",
    "PlanIssue",
    "PlanStep",
    "PlanValidationResult",
    "scan_plan_input",
    "suggest_tools",
    "validate_plan",
]

MAX_SUGGESTIONS = 3
# A candidate is suggested only if it scores at least this (1.0 = same name once case,
# separators, camelCase, plurals and version suffixes are normalised away) ...
_MIN_SCORE = 0.45
# ... and at least this fraction of the best candidate's score, so one near-exact match
# is not padded with weak ones.
_RELATIVE_CUT = 0.7
# Words that say what kind of thing a name is, not what it does: "weather-tool" and
# "time-tool" share "tool" without being alike. Structural vocabulary of tool naming,
# not a domain map.
_STRUCTURAL_WORDS = frozenset({
    "tool", "agent", "service", "svc", "api", "server", "function", "fn", "plugin", "mcp",
})
# Glue words that carry no meaning when matching a name against descriptions.
_STOPWORDS = frozenset({
    "a", "an", "the", "of", "to", "for", "in", "on", "at", "by", "and", "or", "with",
    "from", "into", "is", "are", "be", "it", "its", "this", "that", "as", "if", "not",
    "do", "doe", "does", "can", "will", "all", "any", "you", "your", "use", "used",
})
# The last content word of a name is usually its head ("list_files" is about files,
# "calculation-agent" about calculation), so sharing it counts for more than sharing a
# verb or a qualifier: "list_files" is closer to "organize_files" than "create_folder"
# is to "create_keynote".
_HEAD_WEIGHT = 2.0
# Descriptions are looser evidence than names, so their matches rank below name matches.
_DESCRIPTION_FACTOR = 0.9
_TYPO_RATIO = 0.8

_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+")
_VERSION_RE = re.compile(r"^v?\d+$")
_AGENT_LINE_RE = re.compile(
    r"^\s*Agent:\s*(?P<name>.+?)\s*(?:\(\s*ID:\s*(?P<id>[^)]+?)\s*\))?\s*$")
_CAPABILITY_LINE_RE = re.compile(r"^\s*-\s*Capability:\s*(?P<cap>\S+)")
_DESCRIPTION_LINE_RE = re.compile(r"^\s*Description:\s*(?P<desc>.*)$")


class PlanErrorType(StrEnum):
    """What is wrong with a plan step (``error_type`` of a :class:`PlanIssue`).

    Values are plain strings on the wire (span attribute ``error_type``, scanner JSON).
    ``DUPLICATE_STEP_ID`` is ours (the seeds have no name for it): two steps share an
    id, so dependencies on that id are ambiguous.
    """

    HALLUCINATED_TOOL = "hallucinated_tool"
    HALLUCINATED_CAPABILITY = "hallucinated_capability"
    MISSING_DEPENDENCY = "missing_dependency"
    FORWARD_DEPENDENCY = "forward_dependency"
    SELF_DEPENDENCY = "self_dependency"
    DEPENDENCY_CYCLE = "dependency_cycle"
    DUPLICATE_STEP_ID = "duplicate_step_id"


_HALLUCINATION_TYPES = frozenset({PlanErrorType.HALLUCINATED_TOOL,
                                  PlanErrorType.HALLUCINATED_CAPABILITY})


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan, normalised from either plan form.

    Attributes:
        position: 1-based position in the plan (what error messages call "step N").
        step_id: The declared ``id``/``step_id`` as a string, or ``"#N"`` when the step
            declares none (such a step cannot be depended on).
        tool: The ``tool`` or ``agent_name``.
        capability: ``metadata.capability`` (or a top-level ``capability``), if any.
        instruction: The step's ``instruction``, if any.
        depends_on: Step ids this step depends on, in declared order, without repeats.
    """

    position: int
    step_id: str
    tool: str
    capability: str | None = None
    instruction: str | None = None
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanIssue:
    """One validation finding.

    Attributes:
        error_type: What kind of problem (see :class:`PlanErrorType`).
        step: Id of the step it concerns (the first step of the path for cycles).
        tool: That step's tool or agent name.
        message: A sentence a person or the planner LLM can act on.
        suggested_tools: For hallucinated names, the closest allowed names, best first
            (capabilities of the agent for ``hallucinated_capability``); may be empty.
        capability: The capability the step asked for, when the issue concerns it.
        cycle: For ``dependency_cycle``, the path following ``depends_on`` edges and
            ending where it started, e.g. ``("step_1", "step_2", "step_3", "step_1")``.
    """

    error_type: PlanErrorType
    step: str | None
    tool: str | None
    message: str
    suggested_tools: tuple[str, ...] = ()
    capability: str | None = None
    cycle: tuple[str, ...] = ()

    @property
    def is_hallucination(self) -> bool:
        """True for an invented tool, agent or capability."""
        return self.error_type in _HALLUCINATION_TYPES

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the five scanner keys, plus capability and cycle if set."""
        out: dict[str, Any] = {
            "error_type": str(self.error_type),
            "step": self.step,
            "tool": self.tool,
            "suggested_tools": list(self.suggested_tools),
            "message": self.message,
        }
        if self.capability is not None:
            out["capability"] = self.capability
        if self.cycle:
            out["cycle"] = list(self.cycle)
        return out


@dataclass(frozen=True)
class PlanValidationResult:
    """The outcome of :func:`validate_plan`.

    Attributes:
        errors: Every finding, in plan order (cycles last). Empty means valid.
        steps: The parsed steps (empty for the sanctioned zero-step plan).
        allowed: The parsed allowed list the plan was checked against.
    """

    errors: tuple[PlanIssue, ...]
    steps: tuple[PlanStep, ...]
    allowed: AllowedTools = field(repr=False, compare=False)

    @property
    def valid(self) -> bool:
        """True when the plan has no errors at all."""
        return not self.errors

    @property
    def hallucinations(self) -> tuple[PlanIssue, ...]:
        """The ``hallucinated_tool`` and ``hallucinated_capability`` findings."""
        return tuple(e for e in self.errors if e.is_hallucination)

    @property
    def hallucinated_names(self) -> tuple[str, ...]:
        """Distinct invented tool/agent names (the agent for capability findings)."""
        return tuple(dict.fromkeys(e.tool for e in self.hallucinations if e.tool))

    def to_dict(self) -> dict[str, Any]:
        """``{"valid": bool, "errors": [...]}`` ready for JSON."""
        return {"valid": self.valid, "errors": [e.to_dict() for e in self.errors]}


# --- the allowed list --------------------------------------------------------------------

@dataclass
class _Entry:
    """One allowed tool or agent. ``capabilities`` None means "not listed, not checked"."""

    name: str
    capabilities: list[str] | None = None
    texts: list[str] = field(default_factory=list)

    def add_capability(self, capability: str, text: str = "") -> None:
        if self.capabilities is None:
            self.capabilities = []
        if capability not in self.capabilities:
            self.capabilities.append(capability)
        if text:
            self.texts.append(text)


class AllowedTools:
    """The exact tool/agent list a planner was shown, parsed from any accepted form.

    Parse once with :meth:`parse` and pass the object to :func:`validate_plan` to skip
    re-parsing. Normalised names for suggestions are computed lazily, on the first
    hallucinated name, since most plans are valid.
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
        self._features: _Features | None = None
        self._cap_features: dict[str, _Features] = {}

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
                try:
                    allowed = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise GuardInputError(
                        f"{where}: looks like JSON but is not valid JSON "
                        f"(line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
            else:
                builder.add_capability_text(text)
                return builder.build()
        if isinstance(allowed, Mapping):
            if _looks_like_tool_definition(allowed):
                builder.add_item(allowed, where)
            else:
                builder.add_agent_map(allowed)
        elif isinstance(allowed, (list, tuple, set, frozenset)):
            for index, item in enumerate(allowed):
                builder.add_item(item, f"{where}[{index}]")
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

    def suggest(self, name: str, limit: int = MAX_SUGGESTIONS) -> tuple[str, ...]:
        """The allowed names closest to ``name``, best first (see :func:`suggest_tools`)."""
        return self._name_features().rank(name, limit) if self._entries else ()

    # -- resolution used by validate_plan -----------------------------------------------
    def _resolve(self, tool: str) -> tuple[_Entry | None, str | None]:
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
    def _name_features(self) -> _Features:
        if self._features is None:
            self._features = _Features(
                (e.name, e.name, " ".join([*(e.capabilities or ()), *e.texts]))
                for e in self._entries.values())
        return self._features

    def _capability_features(self, entry: _Entry) -> _Features:
        features = self._cap_features.get(entry.name)
        if features is None:
            features = _Features((c, c, "") for c in entry.capabilities or ())
            self._cap_features[entry.name] = features
        return features


def _is_mapping(obj: Any) -> bool:
    # Most inputs are plain dicts; the ABC check is several times slower.
    return type(obj) is dict or isinstance(obj, Mapping)


def _looks_like_tool_definition(obj: Mapping[str, Any]) -> bool:
    """A single OpenAI/Anthropic definition passed without a surrounding list."""
    if obj.get("type") == "function" and isinstance(obj.get("function"), Mapping):
        return True
    return isinstance(obj.get("name"), str) and any(
        key in obj for key in ("input_schema", "parameters", "description", "capabilities"))


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
        if not _is_mapping(item):
            raise GuardInputError(
                f"{where}: expected a tool name or a tool definition object, "
                f"got {type(item).__name__}")
        function = item.get("function")
        if _is_mapping(function):  # OpenAI Chat Completions form
            item = function
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise GuardInputError(
                f"{where}: unknown tool form: expected a name, an OpenAI "
                f"{{'type': 'function', 'function': {{'name': ...}}}} or an Anthropic "
                f"{{'name': ..., 'input_schema': ...}} definition")
        name = name.strip()
        entry = self.entry(name)
        description = item.get("description")
        if isinstance(description, str) and description:
            entry.texts.append(description)
        if "capabilities" in item:
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


# --- name normalisation and similarity -------------------------------------------------

def _stem(token: str) -> str:
    """Crude English stemming so "files"/"file", "creating"/"create" compare equal."""
    if len(token) > 5 and token.endswith("ing"):
        token = token[:-3]
    elif len(token) > 4 and token.endswith("ed"):
        token = token[:-2]
    if len(token) > 4 and token.endswith("ies"):
        token = token[:-3] + "y"
    elif len(token) > 4 and token.endswith(("sses", "xes", "ches", "shes")):
        token = token[:-2]
    elif len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    if len(token) > 4 and token.endswith("e"):
        token = token[:-1]
    return token


def _words(text: str) -> list[str]:
    """Split on separators and camelCase ("getHTTPStatus" -> get, http, status)."""
    out: list[str] = []
    for chunk in _SPLIT_RE.split(text):
        out.extend(w.lower() for w in _CAMEL_RE.findall(chunk))
    return out


@lru_cache(maxsize=4096)  # planners see the same tool names request after request
def _name_tokens(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(all stems without versions, content stems without structural and glue words)."""
    words = _words(name)
    # "v2" splits into "v", "2": versions say which release, not which tool.
    kept = [w for i, w in enumerate(words)
            if not (w.isdigit() or _VERSION_RE.match(w)
                    or (w == "v" and i + 1 < len(words) and words[i + 1].isdigit()))]
    stems = tuple(_stem(w) for w in kept)
    content = tuple(t for t in stems if t not in _STRUCTURAL_WORDS and t not in _STOPWORDS)
    return stems, content or stems


def _weights(tokens: Sequence[str], idf: Mapping[str, float], unseen: float) -> dict[str, float]:
    weights: dict[str, float] = {}
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        w = idf.get(token, unseen) * (_HEAD_WEIGHT if i == last else 1.0)
        weights[token] = max(weights.get(token, 0.0), w)
    return weights


@lru_cache(maxsize=65536)  # vocabularies are small and repeat across candidates
def _similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def _token_match(token: str, others: Iterable[str]) -> tuple[float, str | None]:
    """(1.0, token) for an equal stem, (ratio, other) for a likely typo ("wether"),
    else (0.0, None)."""
    best, partner = 0.0, None
    for other in others:
        if token == other:
            return 1.0, other
        # ratio <= 2*min/(len sum): skip pairs whose lengths alone rule a typo out.
        if (len(token) >= 4 and len(other) >= 4
                and 2 * min(len(token), len(other)) >= _TYPO_RATIO * (len(token) + len(other))):
            ratio = _similarity(token, other)
            if ratio >= _TYPO_RATIO and ratio > best:
                best, partner = ratio, other
    return best, partner


@lru_cache(maxsize=4096)
def _text_tokens(text: str) -> frozenset[str]:
    return frozenset(t for t in (_stem(w) for w in _words(text)) if t not in _STOPWORDS)


class _Candidate:
    __slots__ = ("label", "canonical", "content", "joined", "bag")

    def __init__(self, label: str, name: str, text: str) -> None:
        self.label = label
        stems, self.content = _name_tokens(name)
        self.canonical = "_".join(stems)
        self.joined = "".join(self.content)
        self.bag = frozenset(self.content) | _text_tokens(text)


class _Features:
    """Normalised candidates plus token rarity (IDF), built once per allowed list."""

    def __init__(self, items: Iterable[tuple[str, str, str]]) -> None:
        self.candidates = [_Candidate(*item) for item in items]
        n = len(self.candidates)
        df: dict[str, int] = {}
        for cand in self.candidates:
            for token in cand.bag:
                df[token] = df.get(token, 0) + 1
        # Tokens shared by many allowed names ("get", "create") say little about which
        # one was meant; rare ones ("files") say a lot.
        self.idf = {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}
        self.unseen = math.log(n + 1) + 1.0

    def rank(self, name: str, limit: int) -> tuple[str, ...]:
        stems, content = _name_tokens(name)
        canonical = "_".join(stems)
        joined = "".join(content)
        h_weights = _weights(content, self.idf, self.unseen)
        h_total = sum(h_weights.values()) or 1.0
        scored: list[tuple[float, int, str]] = []
        for order, cand in enumerate(self.candidates):
            score = self._score(canonical, content, joined, h_weights, h_total, cand)
            if score >= _MIN_SCORE:
                scored.append((score, order, cand.label))
        if not scored:
            return ()
        scored.sort(key=lambda s: (-s[0], s[1]))
        best = scored[0][0]
        return tuple(label for score, _, label in scored[:limit]
                     if score >= best * _RELATIVE_CUT)

    def _score(self, canonical: str, content: tuple[str, ...], joined: str,
               h_weights: Mapping[str, float], h_total: float, cand: _Candidate) -> float:
        if canonical == cand.canonical:
            return 1.0
        if set(content) == set(cand.content):
            return 0.95  # differ only in structural words: "weather-agent"/"weather-tool"
        score = 0.0
        # Whole-name typo or missing separator: "getweather" vs "get_weather".
        if joined and cand.joined and 2 * min(len(joined), len(cand.joined)) >= 0.85 * (
                len(joined) + len(cand.joined)):
            ratio = SequenceMatcher(None, joined, cand.joined).ratio()
            if ratio >= 0.85:
                score = 0.95 * ratio
        # Weighted Dice over name tokens, rare tokens and the head word counting more.
        c_weights = _weights(cand.content, self.idf, self.unseen)
        shared = 0.0
        for token, weight in h_weights.items():
            match, partner = _token_match(token, c_weights)
            if partner is not None:
                shared += (weight + c_weights[partner]) * match
        dice = shared / (h_total + sum(c_weights.values()))
        score = max(score, dice)
        # How much of the invented name the candidate's description/capabilities cover:
        # how "create_folder" finds organize_files ("... creates the folder ...").
        if len(cand.bag) > len(cand.content):
            covered = sum(w * _token_match(t, cand.bag)[0] for t, w in h_weights.items())
            score = max(score, _DESCRIPTION_FACTOR * covered / h_total)
        return min(score, 0.99)


def suggest_tools(name: str, allowed: Any, *, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """The allowed names closest to ``name``, best first; only plausibly close ones.

    Domain-agnostic: names are normalised (case, separators, camelCase, plurals,
    version suffixes such as ``-v1``), then compared by rarity-weighted token overlap,
    typo similarity, and overlap with tool descriptions and capabilities when given.

    Args:
        name: The invented tool or agent name.
        allowed: The allowed list in any accepted form (or :class:`AllowedTools`).
        limit: At most this many suggestions.

    Returns:
        Up to ``limit`` allowed names; empty when nothing is plausibly close.
    """
    return list(AllowedTools.parse(allowed).suggest(name, limit))


# --- the plan ----------------------------------------------------------------------------

def _parse_plan(plan: Any) -> list[PlanStep]:
    if isinstance(plan, (bytes, bytearray)):
        plan = plan.decode("utf-8", errors="replace")
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except json.JSONDecodeError as exc:
            raise GuardInputError(
                f"plan: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg})") from None
    if _is_mapping(plan):
        if "steps" not in plan:
            raise GuardInputError("plan: object has no 'steps' list")
        steps = plan["steps"]
        if not isinstance(steps, (list, tuple)):
            raise GuardInputError(
                f"plan: 'steps' must be a list, got {type(steps).__name__}")
    elif isinstance(plan, (list, tuple)):
        steps = plan
    else:
        raise GuardInputError(
            f"plan: expected a list of steps or an object with 'steps', "
            f"got {type(plan).__name__}")
    return [_parse_step(raw, position) for position, raw in enumerate(steps, start=1)]


def _step_ref(value: Any, where: str, what: str) -> str:
    # LLMs write ids as 1 as often as "step_1"; bools are ints in Python but never ids.
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise GuardInputError(f"{where}: {what} must be a string or an integer, got {value!r}")


def _parse_step(raw: Any, position: int) -> PlanStep:
    where = f"plan step {position}"
    if not _is_mapping(raw):
        raise GuardInputError(f"{where}: expected an object, got {type(raw).__name__}")
    tool = raw.get("tool")
    key = "tool"
    if tool is None:
        tool, key = raw.get("agent_name"), "agent_name"
    if tool is None:
        raise GuardInputError(f"{where}: missing 'tool' (or 'agent_name')")
    if not isinstance(tool, str) or not tool.strip():
        raise GuardInputError(f"{where}: '{key}' must be a non-empty string, got {tool!r}")
    raw_id = raw.get("id", raw.get("step_id"))
    step_id = f"#{position}" if raw_id is None else _step_ref(raw_id, where, "'id'")
    deps_raw = raw.get("depends_on")
    if deps_raw is None:
        deps: tuple[str, ...] = ()
    elif isinstance(deps_raw, (str, int)) and not isinstance(deps_raw, bool):
        deps = (_step_ref(deps_raw, where, "'depends_on'"),)
    elif isinstance(deps_raw, (list, tuple)):
        deps = tuple(dict.fromkeys(
            _step_ref(d, where, f"'depends_on' item {i + 1}") for i, d in enumerate(deps_raw)))
    else:
        raise GuardInputError(
            f"{where}: 'depends_on' must be a list of step ids, got {type(deps_raw).__name__}")
    metadata = raw.get("metadata")
    capability = metadata.get("capability") if _is_mapping(metadata) else None
    if capability is None:
        capability = raw.get("capability")
    if capability is not None and not isinstance(capability, str):
        raise GuardInputError(f"{where}: 'capability' must be a string, got {capability!r}")
    instruction = raw.get("instruction")
    return PlanStep(
        position=position,
        step_id=step_id,
        tool=tool.strip(),
        capability=capability.strip() or None if capability else None,
        instruction=instruction if isinstance(instruction, str) and instruction else None,
        depends_on=deps,
    )


def _find_cycles(order: Sequence[str],
                 edges: Mapping[str, Sequence[str]]) -> list[tuple[str, ...]]:
    """Cycles among ``depends_on`` edges, one per DFS back edge, each starting at the
    step that appears first in the plan and ending where it started."""
    rank = {node: i for i, node in enumerate(order)}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles: list[tuple[str, ...]] = []
    seen: set[tuple[str, ...]] = set()
    for root in order:
        if root in state:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        state[root] = 1
        while stack:  # iterative: a 1000-step chain must not hit the recursion limit
            node, i = stack[-1]
            targets = edges.get(node, ())
            if i < len(targets):
                stack[-1] = (node, i + 1)
                target = targets[i]
                mark = state.get(target)
                if mark is None:
                    state[target] = 1
                    stack.append((target, 0))
                    path.append(target)
                elif mark == 1:
                    loop = path[path.index(target):]
                    start = min(range(len(loop)), key=lambda k: rank[loop[k]])
                    loop = loop[start:] + loop[:start]
                    key = tuple(loop)
                    if key not in seen:
                        seen.add(key)
                        cycles.append((*loop, loop[0]))
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return cycles


def _listing(items: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(items[:limit])
    return f"{shown}, … ({len(items) - limit} more)" if len(items) > limit else shown


def validate_plan(plan: Any, allowed: Any) -> PlanValidationResult:
    """Check every step of ``plan`` against ``allowed`` and its dependency structure.

    A zero-step plan is valid: it is the sanctioned answer when no allowed tool fits.

    Args:
        plan: A list of steps, an orchestrator plan object, or a JSON string of either.
        allowed: The exact tools/agents the planner was shown, in any accepted form
            (see the module docstring), or an :class:`AllowedTools`.

    Returns:
        The result; ``result.valid`` is False when there is any finding.

    Raises:
        GuardInputError: ``plan`` or ``allowed`` cannot be interpreted; the message says
            what and where, e.g. ``"plan step 2: missing 'tool' (or 'agent_name')"``.
    """
    catalog = AllowedTools.parse(allowed)
    steps = _parse_plan(plan)
    if not steps:
        return PlanValidationResult((), (), catalog)

    first: dict[str, PlanStep] = {}
    for step in steps:
        first.setdefault(step.step_id, step)
    edges: dict[str, list[str]] = {}
    for step in steps:
        targets = edges.setdefault(step.step_id, [])
        targets.extend(d for d in step.depends_on
                       if d != step.step_id and d in first and d not in targets)
    cycles = _find_cycles(list(first), edges)
    # A cycle always contains an edge to a later step; the cycle finding already says
    # the plan cannot run, so its edges are not reported again as forward dependencies.
    cycle_edges = {(c[i], c[i + 1]) for c in cycles for i in range(len(c) - 1)}

    errors: list[PlanIssue] = []
    for step in steps:
        sid, tool = step.step_id, step.tool
        owner = first[sid]
        if owner is not step:
            errors.append(PlanIssue(
                PlanErrorType.DUPLICATE_STEP_ID, sid, tool,
                f"Step id '{sid}' is used by steps {owner.position} and {step.position}; "
                f"step ids must be unique."))
        entry, implied = catalog._resolve(tool)
        if entry is None:
            suggestions = catalog.suggest(tool)
            message = (f"Step '{sid}' uses '{tool}', which is not in the allowed list "
                       f"({catalog.agent_count} allowed: {_listing(catalog.names)}).")
            if suggestions:
                message += f" Closest allowed: {', '.join(suggestions)}."
            errors.append(PlanIssue(PlanErrorType.HALLUCINATED_TOOL, sid, tool, message,
                                    suggestions, capability=step.capability))
        else:
            capability = step.capability or implied
            if (capability and entry.capabilities is not None
                    and capability not in entry.capabilities):
                suggestions = catalog._capability_features(entry).rank(
                    capability, MAX_SUGGESTIONS)
                offers = _listing(entry.capabilities) or "no capabilities"
                message = (f"Step '{sid}' asks '{entry.name}' for capability "
                           f"'{capability}', which it does not offer (it offers: {offers}).")
                if suggestions:
                    message += f" Closest: {', '.join(suggestions)}."
                errors.append(PlanIssue(PlanErrorType.HALLUCINATED_CAPABILITY, sid,
                                        entry.name, message, suggestions,
                                        capability=capability))
        for dep in step.depends_on:
            if dep == sid:
                errors.append(PlanIssue(PlanErrorType.SELF_DEPENDENCY, sid, tool,
                                        f"Step '{sid}' depends on itself."))
            elif dep not in first:
                errors.append(PlanIssue(
                    PlanErrorType.MISSING_DEPENDENCY, sid, tool,
                    f"Step '{sid}' depends on '{dep}', which is not a step of this plan."))
            elif first[dep].position > step.position and (sid, dep) not in cycle_edges:
                errors.append(PlanIssue(
                    PlanErrorType.FORWARD_DEPENDENCY, sid, tool,
                    f"Step '{sid}' depends on '{dep}', which comes later in the plan; a "
                    f"step may depend only on earlier steps."))
    for cycle in cycles:
        errors.append(PlanIssue(
            PlanErrorType.DEPENDENCY_CYCLE, cycle[0], first[cycle[0]].tool,
            f"Dependency cycle: {' -> '.join(cycle)}; no step of it can run first.",
            cycle=cycle))
    return PlanValidationResult(tuple(errors), tuple(steps), catalog)


# --- offline scanner ---------------------------------------------------------------------

_SCAN_KEYS = ("id", "allowed_tools", "plan")
_SCAN_ERROR_KEYS = ("error_type", "step", "tool", "suggested_tools", "message")


def scan_plan_input(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Validate one scanner record ``{"id", "allowed_tools", "plan"}``.

    Args:
        obj: ``allowed_tools`` in any accepted allowed form, ``plan`` in either plan form.

    Returns:
        ``{"id", "valid", "errors": [{"error_type", "step", "tool", "suggested_tools",
        "message"}]}``, JSON-ready.

    Raises:
        GuardInputError: The record is malformed; the message names the record and what
            is wrong with it.
    """
    if not isinstance(obj, Mapping):
        raise GuardInputError(
            f"scan record: expected an object with 'id', 'allowed_tools' and 'plan', "
            f"got {type(obj).__name__}")
    record_id = obj.get("id")
    label = f"scan record {record_id!r}" if "id" in obj else "scan record"
    missing = [key for key in _SCAN_KEYS if key not in obj]
    if missing:
        raise GuardInputError(
            f"{label}: missing {', '.join(repr(k) for k in missing)}")
    if isinstance(record_id, bool) or not isinstance(record_id, (str, int)):
        raise GuardInputError(f"{label}: 'id' must be a string or an integer")
    if obj["allowed_tools"] is None:
        raise GuardInputError(f"{label}: 'allowed_tools' is null")
    try:
        catalog = AllowedTools.parse(obj["allowed_tools"], where="allowed_tools")
        result = validate_plan(obj["plan"], catalog)
    except GuardInputError as exc:
        raise GuardInputError(f"{label}: {exc}") from exc
    return {
        "id": record_id,
        "valid": result.valid,
        "errors": [{key: found[key] for key in _SCAN_ERROR_KEYS}
                   for found in (issue.to_dict() for issue in result.errors)],
    }
