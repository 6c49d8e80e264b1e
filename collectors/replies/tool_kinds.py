"""What each tool of an agent's catalog does: read, write, both, or neither.

A claim in a reply ("I've updated your reservation", "let me check the logs") is honest
when a tool of the matching kind ran. Real catalogs name their tools after the work
(``update_reservation_flights``, ``get_reservation_details``, ``mcp__github__create_issue``,
``str_replace_based_edit_tool``), so kinds are read from the catalog itself, in order:

1. an explicit mapping the caller passes (``{"deploy_service": "write"}``);
2. the kind the tool declares: ``x-guardtrace-kind`` (``"read"``/``"write"``) or MCP
   annotations (``readOnlyHint: true`` reads; ``destructiveHint: true`` or
   ``readOnlyHint: false`` writes);
3. the verb its name starts with, from :mod:`~guardtrace.collectors.replies.verbs`; a tool that
   runs arbitrary commands (``bash``, ``python``, ``computer``) both reads and writes;
4. the verb its description starts with ("Retrieves ...", "Cancel the whole ...").

A tool none of these classifies gets no kind. Such a tool still ran, and the guards treat
it as able to back either kind of claim: not knowing what a tool does is no evidence
that a claim about it is false.

One call can say more than its tool: an editor or shell whose arguments name the
operation (``{"command": "view"}``, ``{"command": "grep -rn foo ."}``) did that operation
and nothing else, so :meth:`ToolKinds.of_call` reads the kind of that call from its
command when the command starts with a verb, unless the tool's kind was declared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import GuardInputError
from .verbs import EXECUTE_TOOL_WORDS, READ, WRITE, verb_kind
from .verbs import NEUTRAL as NEUTRAL_KIND

__all__ = ["BOTH", "NEUTRAL", "ToolKinds", "command_kind", "kind_from_text", "name_words",
           "ran_a_command"]

BOTH: frozenset[str] = frozenset({READ, WRITE})
NEUTRAL: frozenset[str] = frozenset()

_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# Namespaces in front of the tool's own name: "mcp__github__create_issue",
# "functions.get_weather", "github/create_issue".
_NAMESPACE_RE = re.compile(r"^.*(?:__|[./:])")
_DESCRIPTION_WORD_RE = re.compile(r"[A-Za-z]+")
# Description openers that come before the verb: "Use this tool to search ...".
_DESCRIPTION_FILLER = frozenset({"use", "this", "tool", "the", "to", "a", "an", "it",
                                 "will", "can", "you", "function", "that", "for", "which",
                                 "helps", "allows", "lets", "used", "is", "and"})
# Argument keys that name the operation of a multi-purpose tool (an editor's "view" or
# "str_replace", a shell's command line).
_COMMAND_KEYS = ("command", "action", "operation", "op", "mode")
_QUOTED_COMMAND_KEYS = tuple(f'"{key}"' for key in _COMMAND_KEYS)
# Arguments longer than this are not parsed for a command (an edit's whole file body).
_MAX_ARGUMENT_CHARS = 64 * 1024
_COMMAND_PART_RE = re.compile(r"[_\-]")


def name_words(name: str) -> list[str]:
    """The lower-case words of a tool name, namespace removed (``getUserDetails`` ->
    ``["get", "user", "details"]``)."""
    own = _NAMESPACE_RE.sub("", name) or name
    return [w.lower() for w in _WORD_RE.findall(own)]


def _lemma(word: str) -> str:
    # "retrieves" -> "retrieve", "searches" -> "search", "cancels" -> "cancel".
    for suffix, repl in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("sses", "ss"),
                         ("xes", "x"), ("s", "")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            candidate = word[: -len(suffix)] + repl
            if verb_kind(candidate) is not None:
                return candidate
    return word


def _kinds_of(kind: str | None) -> frozenset[str] | None:
    if kind == READ:
        return frozenset({READ})
    if kind == WRITE:
        return frozenset({WRITE})
    if kind == NEUTRAL_KIND:
        return NEUTRAL
    return None


def kind_from_text(name: str, description: str = "") -> frozenset[str] | None:
    """Kinds read off a tool's name, then its description; None when neither tells.

    Returns:
        ``{"read"}``, ``{"write"}``, both (command runners), an empty set (tools that
        neither read nor write, such as ``calculate`` or ``think``), or None.
    """
    words = name_words(name)
    if any(w in EXECUTE_TOOL_WORDS for w in words):
        return BOTH
    if words:
        found = _kinds_of(verb_kind(_lemma(words[0])))
        if found is not None:
            return found
        # Verb-last names: "reservation_update", "flight_search".
        for word in reversed(words[1:]):
            found = _kinds_of(verb_kind(_lemma(word)))
            if found is not None:
                return found
    for word in _DESCRIPTION_WORD_RE.findall(description[:200]):
        lowered = word.lower()
        if lowered in _DESCRIPTION_FILLER:
            continue
        return _kinds_of(verb_kind(_lemma(lowered)))
    return None


def ran_a_command(own: frozenset[str] | None, did: frozenset[str] | None) -> bool:
    """Whether a call ran something: its tool (kind ``own``) runs commands or may do
    anything, and what the call did (``did``, see :meth:`ToolKinds.of_call`) is not only
    reading or writing. An editor that viewed and edited did both, yet ran nothing."""
    return did is None or (did == BOTH and own in (None, BOTH))


def command_kind(command: str) -> frozenset[str] | None:
    """The kinds of one command line or editor operation; None when its first word tells
    nothing.

    Only the program (the first word) counts: ``grep -rn x`` reads, ``str_replace`` and
    ``submit`` write, ``python3 x.py`` may do anything; ``git log`` or ``cat`` tell
    nothing (None), so the tool's own kind stands.
    """
    stripped = command.strip()
    if not stripped:
        return None
    program = stripped.split(None, 1)[0].lower().rsplit("/", 1)[-1]
    parts = [p for p in _COMMAND_PART_RE.split(program) if p]
    if any(p.rstrip("0123456789.") in EXECUTE_TOOL_WORDS for p in parts):
        return BOTH
    for part in parts:
        found = _kinds_of(verb_kind(part))
        if found is not None:
            return found
    return None


def _command_of(arguments: str) -> str | None:
    if not arguments or len(arguments) > _MAX_ARGUMENT_CHARS:
        return None
    # Most calls name no operation: a substring test spares them the JSON parse.
    if not any(key in arguments for key in _QUOTED_COMMAND_KEYS):
        return None
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    for key in _COMMAND_KEYS:
        value = parsed.get(key)
        if isinstance(value, str):
            return value[:200]
    return None


@dataclass(frozen=True)
class ToolKinds:
    """Kinds of the tools of one catalog, by name.

    Build with :meth:`from_catalog`. Names not in the catalog are classified from their
    name alone (a caller passing bare ``tools_fired`` names has no catalog).
    """

    kinds: Mapping[str, frozenset[str] | None]
    declared: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_catalog(cls, specs: Iterable[tuple[str, str, str | None]],
                     overrides: Mapping[str, str | Iterable[str]] | None = None) -> ToolKinds:
        """Classify ``(name, description, declared kind)`` triples.

        Args:
            specs: One triple per tool.
            overrides: ``name -> "read" | "write" | "both" | "none"`` (or a list of
                kinds): wins over everything the catalog says.

        Raises:
            GuardInputError: an override names an unknown kind.
        """
        kinds: dict[str, frozenset[str] | None] = {}
        declared_names: set[str] = set()
        for name, description, declared in specs:
            if declared in (READ, WRITE):
                kinds[name] = _kinds_of(declared)
                declared_names.add(name)
            else:
                kinds[name] = kind_from_text(name, description)
        for name, value in (overrides or {}).items():
            kinds[name] = _override(name, value)
            declared_names.add(name)
        return cls(kinds, frozenset(declared_names))

    def of(self, name: str) -> frozenset[str] | None:
        """The kinds of tool ``name``: from the catalog, else from its name alone."""
        if name in self.kinds:
            return self.kinds[name]
        return kind_from_text(name)

    def of_call(self, name: str, arguments: str) -> frozenset[str] | None:
        """The kinds of one call of ``name`` with ``arguments`` (JSON text): its command's
        kind when the arguments name one that tells (see :func:`command_kind`) and the
        tool's kind was not declared, else the tool's."""
        if name not in self.declared:
            command = _command_of(arguments)
            if command is not None:
                found = command_kind(command)
                if found is not None:
                    return found
        return self.of(name)

    def backs(self, name: str, kind: str) -> bool:
        """Whether a run of tool ``name`` can back a claim of ``kind`` (read/write)."""
        found = self.of(name)
        return found is None or kind in found


def _override(name: str, value: str | Iterable[str]) -> frozenset[str]:
    items = [value] if isinstance(value, str) else list(value)
    out: set[str] = set()
    for item in items:
        item = str(item).lower()
        if item == "both":
            out |= BOTH
        elif item in (READ, WRITE):
            out.add(item)
        elif item != "none":
            raise GuardInputError(f"tool kind for {name!r} must be 'read', 'write', 'both' "
                                  f"or 'none', got {item!r}")
    return frozenset(out)

