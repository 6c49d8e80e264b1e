"""Redaction of secrets before anything leaves the agent process.

On by default: prompts, replies and tool results routinely hold API keys pasted by users,
bearer tokens from tool outputs and credentials in URLs. The rules (secret_rules.py) are
credential families and shapes: vendor prefixes, private keys, JWTs, URL passwords and
``user:password`` pairs that start a token, Authorization and Cookie headers and session
cookies (``JSESSIONID=``), ``NAME = VALUE`` where the name is a secret's name (with any
prefix: ``FOO_API_KEY=``, ``client_secret:``), random-looking tokens (hex in random mixed
case among them), and e-mail addresses. Hex strings and UUIDs with no name next to them
are left alone: they cannot be told from SHAs and request ids (``Redactor(bare_ids=True)``,
the ``GUARDTRACE_REDACT_BARE_IDS`` setting, redacts them too).

Time is linear in the text for every default rule, and bounded per call:

* a rule takes at most ``max(2048, len/256)`` decisions per text; past that the text is
  hostile or degenerate, and its rest becomes one ``[REDACTED:overflow]`` marker (fail
  closed, bounded time);
* a text longer than ``SLICE_CHARS`` is redacted in line-aligned slices (after the
  rules whose matches span lines ran over it whole), so no single regex call holds the
  GIL for long, whatever thread redacts: the agent's threads get it back within a slice.

Structured bodies (dicts and lists) are redacted string by string before they are
encoded (:meth:`Redactor.redact_structure`): a secret alone on a line of a reply is then
at the start of its string, not behind the ``n`` of a JSON ``\\n``.

User rules (``rules``/``extra_rules`` given as regular expressions) replace the whole
match, or only the groups named ``secret...``. Their time is the user's: the engine
cannot make a backtracking pattern linear, but the slices bound how much text one
pattern sees at a time, so a pattern that is quadratic in its input is quadratic in one
slice at most, and linear in the text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...schemas.names import REDACTION_MARKER_FORMAT
from .attribute_items import attribute_items

if TYPE_CHECKING:
    from .secret_rules import DEFAULT_RULES, SecretRule

__all__ = ["DEFAULT_RULES", "SLICE_CHARS", "Redactor", "SecretRule"]

# Python-level decisions per rule and text: at least this many, or one per 256 chars.
DECISION_CAP = 2048
# Texts longer than this are redacted in slices of about this size (cut at a line break,
# a JSON \n escape or a space). 16 K characters is about 2 ms of the slowest stdlib scan.
SLICE_CHARS = 16_384
_OVERFLOW = "overflow"

# Short texts (attribute values: module, tier, agent, matched phrase, tool names) repeat
# from call to call, so their result is remembered. Bounded: cleared when full; long
# texts (payload bodies) are never remembered.
_MEMO_MAX_CHARS = 256
_MEMO_ENTRIES = 4096
# Attributes found clean are remembered as (key, value) pairs, so an attribute seen
# before costs one lookup: the value alone is not enough, a value under a secret's key
# is redacted whole. Sequences of at most this many short strings are remembered too.
_MEMO_MAX_ITEMS = 16


def __getattr__(name: str) -> Any:
    # The rule set compiles some thirty patterns (about 20 ms): it loads on first use, so
    # importing the hooks does not pay for it. These names are handed on from there.
    if name in ("DEFAULT_RULES", "SecretRule"):
        from . import secret_rules

        return getattr(secret_rules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _user_rule(kind: str, pattern: str) -> SecretRule:
    from .secret_rules import SecretRule

    """A rule given as a regular expression: the whole match, or its ``secret*`` groups."""
    compiled = re.compile(pattern)
    groups = tuple(g for g in compiled.groupindex if g.startswith("secret"))

    def decide(m: Any, text: str) -> tuple[int, int, str] | None:
        if not groups:
            return (m.start(), m.end(), kind) if m.end() > m.start() else None
        for g in groups:
            if m.group(g) is not None:
                a, b = m.span(g)
                return (a, b, kind) if b > a else None
        return None

    return SecretRule(compiled, decide)


@functools.cache
def _secret_shapes() -> Any:
    """secret_shapes, imported on first use (as the rules are), then at the cost of a call:
    an import statement in :func:`_keyed_secret` cost a microsecond per attribute."""
    from . import secret_shapes

    return secret_shapes


def _keyed_secret(key: str, value: str) -> bool:
    """``{key: value}`` is a secret's name and a secret: one token (no whitespace), not a
    placeholder, not code, not a bare identifier (``{"key": "user_name"}``)."""
    shapes = _secret_shapes()
    # The key first: it is remembered (names repeat), and most keys name no secret, so
    # a long value is not stripped and measured for nothing.
    if not shapes.name_is_secret(key):
        return False
    value = value.strip()
    if not value or len(value) > 4096 or value.startswith("[REDACTED"):
        return False
    return value.split(maxsplit=1)[0] == value and shapes.value_is_secret(value, " = ")


def _rememberable(kind: type, value: Any) -> bool:
    """A clean attribute value small enough to remember: a short string, or a short
    tuple of short strings (and other scalars: only strings are redacted)."""
    if kind is str:
        return len(value) <= _MEMO_MAX_CHARS
    if kind is not tuple or len(value) > _MEMO_MAX_ITEMS:
        return False
    try:
        hash(value)
    except TypeError:
        return False
    return all(type(item) is not str or len(item) <= _MEMO_MAX_CHARS for item in value)


def _lower(text: str) -> str:
    """A lower-cased copy with the same length (positions hold in both)."""
    low = text.lower()
    if len(low) != len(text):  # U+0130 and a few others lower to two characters
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return low


def _cut(text: str, start: int) -> int:
    """Where the slice that begins at ``start`` ends: the last line break (or JSON ``\\n``
    escape, or space) in its second half, else ``SLICE_CHARS`` on."""
    limit = start + SLICE_CHARS
    if limit >= len(text):
        return len(text)
    half = start + SLICE_CHARS // 2
    at = text.rfind("\n", half, limit)
    if at != -1:
        return at + 1
    at = text.rfind("\\n", half, limit)
    if at != -1:
        return at  # the next slice starts with the escape, as a token after it expects
    for sep in (" ", "\t", ",", '"'):
        at = text.rfind(sep, half, limit)
        if at != -1:
            return at + 1
    return limit


@dataclass(frozen=True)
class Redactor:
    """Replaces secrets in text with ``[REDACTED:<kind>]`` markers.

    Args:
        rules: Rule name -> rule; None (the default) is :data:`DEFAULT_RULES`, compiled
            on the first text redacted, not when the hooks are imported. A rule is a
            :class:`SecretRule` or a regular expression (replacing the whole match, or
            only its groups named ``secret...``; the marker kind is the rule's name).
        extra_rules: Rules added to ``rules`` (how a deployment extends redaction). They
            run first, so where one of them and a default rule both match, the
            deployment's kind is the marker.
        enabled: With False, :meth:`redact` returns text unchanged.
        bare_ids: With True and the default rules, a hex string of 32 digits or more
            or a UUID alone on its line is redacted too (a secret of that shape pasted on
            a line of its own is caught; so is a bare SHA or request id on its own line).
    """

    rules: Mapping[str, SecretRule | str] | None = None
    extra_rules: Mapping[str, SecretRule | str] = field(default_factory=dict)
    enabled: bool = True
    bare_ids: bool = False
    # Set once by __post_init__ (the dataclass is frozen).
    _compiled: tuple[tuple[str, SecretRule], ...] | None = field(
        default=None, init=False, repr=False, compare=False)
    _memo: dict[str, tuple[str, int]] = field(init=False, repr=False, compare=False)
    # key -> values found clean under it (nested, so a lookup allocates no tuple)
    _clean_attributes: dict[Any, set[Any]] = field(init=False, repr=False, compare=False)
    _clean_count: list[int] = field(init=False, repr=False, compare=False)
    _marks: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_memo", {})
        object.__setattr__(self, "_clean_attributes", {})
        object.__setattr__(self, "_clean_count", [0])
        object.__setattr__(self, "_marks", {})
        if self.rules is not None or self.extra_rules:
            self._rule_set()  # a deployment's own rules: a bad one fails here, not in a hook

    def _rule_set(self) -> tuple[tuple[str, SecretRule], ...]:
        """The rules in the order they run, compiled on first use (idempotent: two threads
        that race here compile the same tuple)."""
        compiled = self._compiled
        if compiled is None:
            from .secret_rules import DEFAULT_RULES, SecretRule, bare_id_rules

            rules = (self.rules if self.rules is not None
                     else bare_id_rules() if self.bare_ids else DEFAULT_RULES)
            compiled = tuple(
                (name, rule if isinstance(rule, SecretRule) else _user_rule(name, rule))
                for name, rule in {**self.extra_rules, **rules}.items())
            object.__setattr__(self, "_compiled", compiled)
        return compiled

    # -- text ------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """Return ``text`` with every secret replaced by its marker."""
        hit = self._memo.get(text)
        return hit[0] if hit is not None else self.redact_counted(text)[0]

    def redact_counted(self, text: str) -> tuple[str, int]:
        """Return the redacted text and how many secrets were replaced."""
        if not self.enabled or not text:
            return text, 0
        short = len(text) <= _MEMO_MAX_CHARS
        if short:
            hit = self._memo.get(text)
            if hit is not None:
                return hit
        result = (self._run(text, self._rule_set()) if len(text) <= SLICE_CHARS
                  else self._sliced(text))
        if short:
            memo = self._memo
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            memo[text] = result
        return result

    def _sliced(self, text: str) -> tuple[str, int]:
        whole = tuple(r for r in self._rule_set() if r[1].multiline)
        local = tuple(r for r in self._rule_set() if not r[1].multiline)
        text, total = self._run(text, whole)
        pieces: list[str] = []
        start = 0
        while start < len(text):
            end = _cut(text, start)
            piece, count = self._run(text[start:end], local)
            pieces.append(piece)
            total += count
            start = end
        return "".join(pieces), total

    def _run(self, text: str, rules: tuple[tuple[str, SecretRule], ...]) -> tuple[str, int]:
        total = 0
        low: str | None = None
        for _name, rule in rules:
            if rule.lowered:
                if low is None:
                    low = _lower(text)
                if rule.gate and not any(g in low for g in rule.gate):
                    continue
                text, n = self._apply(text, rule, low)
                if n:
                    low = None
            else:
                if rule.gate and not any(g in text for g in rule.gate):
                    continue
                text, n = self._apply(text, rule, text)
            total += n
        return text, total

    def _marker(self, kind: str) -> str:
        marker = self._marks.get(kind)
        if marker is None:
            marker = self._marks[kind] = REDACTION_MARKER_FORMAT.format(kind=kind)
        return marker

    def _apply(self, text: str, rule: SecretRule, source: str) -> tuple[str, int]:
        """Run ``rule.pattern`` over ``source`` (the text or its lower-cased copy) and
        replace, in ``text``, each span its decision returns."""
        pieces: list[str] = []
        done = count = decided = 0
        cap = max(DECISION_CAP, len(text) // 256)
        for m in rule.pattern.finditer(source):
            decided += 1
            if decided > cap:  # hostile or degenerate: fail closed, bounded time
                pieces.append(text[done:max(m.start(), done)])
                pieces.append(self._marker(_OVERFLOW))
                return "".join(pieces), count + 1
            got = rule.decide(m, text)
            if got is None:
                continue
            a, b, kind = got
            if a < done:
                continue
            pieces.append(text[done:a])
            pieces.append(self._marker(kind))
            done = b
            count += 1
        if not count:
            return text, 0
        pieces.append(text[done:])
        return "".join(pieces), count

    # -- structures ------------------------------------------------------------------------
    def redact_structure(self, body: Any) -> tuple[Any, int]:
        """Redact every string of a JSON-like body (dicts, lists, tuples) before encoding.

        Keys are redacted too: a dict keyed by e-mail address or by token is real (a
        cache, a per-user map). Two keys that redact to the same marker keep both
        values (the later key gets ``#2``, ``#3``, ...). A string value under a key that
        names a secret (``{"api_key": "..."}``) is redacted whole when it looks like a
        value, since the assignment rule cannot see key and value side by side once
        they are separate strings. Other values (numbers, booleans, None) are kept.

        Returns:
            The redacted copy (containers are new; the body is not changed) and how
            many secrets were replaced.
        """
        if not self.enabled:
            return body, 0
        counter = [0]
        return self._walk(body, counter, 0), counter[0]

    def redact_attributes(self, attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Telemetry attributes (of a span, event, link or metric point) as exported.

        Every string value is redacted, and a value under a secret's key whole, as in
        a structured body (:meth:`redact_structure`); sequences and nested mappings are
        redacted as bodies are. Top-level keys are kept: they are attribute names from
        instrumentation code, and renaming one would break what reads it.

        Returns:
            The redacted copy, or None when no secret was found: the caller keeps the
            original, and with it what the SDK counts on it (dropped attributes).
        """
        if not self.enabled or not attributes:
            return None
        out: dict[str, Any] | None = None
        clean = self._clean_attributes
        for key, value in attribute_items(attributes):
            kind = type(value)
            if kind is str or kind is tuple:
                # Equal tuples hold equal strings where they hold strings, and only the
                # strings are redacted, so a pair equal to a clean one is clean.
                values = clean.get(key)
                try:
                    if values is not None and value in values:
                        continue
                except TypeError:  # a tuple holding a dict: not hashable, not remembered
                    pass
            if isinstance(value, str):
                new, found = self.redact_counted(value)
                if not found and _keyed_secret(key, value):
                    new, found = self._marker("secret_assignment"), 1
            elif isinstance(value, (list, tuple, dict)):
                new, found = self.redact_structure(value)
            else:
                continue
            if found:
                if out is None:
                    out = dict(attributes)
                out[key] = new
            elif _rememberable(kind, value):
                self._remember_clean(key, value)
        return out

    def _remember_clean(self, key: Any, value: Any) -> None:
        count = self._clean_count
        if count[0] >= _MEMO_ENTRIES:
            self._clean_attributes.clear()
            count[0] = 0
        self._clean_attributes.setdefault(key, set()).add(value)
        count[0] += 1

    def with_own_memo(self) -> Redactor:
        """The same rules and switch, with a memo of short texts of its own.

        For another thread with values of its own (the export thread sees every
        instrumentation's URLs and ids): in one shared memo they would evict the hooks'
        repeated attribute values, and the hooks would pay for the rules again.
        """
        twin = Redactor(rules=self.rules, extra_rules=self.extra_rules, enabled=self.enabled,
                        bare_ids=self.bare_ids)
        if self._compiled is not None:
            object.__setattr__(twin, "_compiled", self._compiled)
        return twin

    def _walk(self, value: Any, counter: list[int], depth: int) -> Any:
        if isinstance(value, str):
            text, n = self.redact_counted(value)
            counter[0] += n
            return text
        if depth > 200:  # deeper than JSON encoders go: keep it for the encoder to refuse
            return value
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                new_key = key
                if isinstance(key, str):
                    new_key = self._walk(key, counter, depth + 1)
                    if new_key != key and new_key in out:
                        suffix = 2
                        while f"{new_key}#{suffix}" in out:
                            suffix += 1
                        new_key = f"{new_key}#{suffix}"
                before = counter[0]
                new_item = self._walk(item, counter, depth + 1)
                # Unchanged means no secret replaced, not ``new_item is item``: a short
                # text comes back from the memo as the first equal string redacted, a
                # different object, and the check would skip the same value next time.
                if (counter[0] == before and isinstance(key, str) and isinstance(item, str)
                        and _keyed_secret(key, item)):
                    new_item = self._marker("secret_assignment")
                    counter[0] += 1
                out[new_key] = new_item
            return out
        if isinstance(value, (list, tuple)):
            return [self._walk(item, counter, depth + 1) for item in value]
        return value
