"""Replies that report what a run showed ("all tests pass") when nothing ran since the code
changed.

A coding agent's most expensive invented result is a green run it never saw: it edits a
file, then reports "All tests pass" or "the script now runs without errors" with no run
after the edit, or with none at all. The outcome of a run is a result like a price or a
flight number: only a run returns it. So a reply that states a run's outcome in the
present or past is judged against the calls of its turn before it:

* something ran since the last change: a command runner (``bash``, ``python``; whatever
  its command, since ``cat`` and ``pytest`` look alike to a catalog) or a tool named for
  a run (``run_tests``, ``build``, ``lint``);
* a change made after the last run (an editor's edit, ``write_file``) leaves the outcome
  unseen: the run showed the code before it;
* a run since the change whose output ends in a failure ("2 failed", ``FAILED``, a
  traceback), with no later run that passed, contradicts it.

A run in the same message as the report does not count: its result was not back yet.
Plans, purposes and conditions ("to make sure the tests pass", "the tests should pass
now", "let me know if the build succeeds") report nothing, nor do questions or negated
outcomes. A reply without an outcome word costs a few substring tests; the phrases are
matched only where a subject word starts, each in bounded windows, so the time stays
linear in the reply's length.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .claims import mask_quoted
from .conversation import ToolCall
from .tool_kinds import ToolKinds, name_words, ran_a_command
from .verbs import WRITE

__all__ = ["find_run_outcomes", "may_report_run_outcome", "unseen_outcomes"]

# What a run is run on, and what it reports: "all 42 tests pass", "the test suite passed",
# "the build succeeded", "the script ran successfully", "tests are green", "42 passed".
# Matched only where a subject word starts (found with str.find): a scan of the whole
# reply with these alternatives at every character costs a millisecond per 2 KB.
_SUBJECT = (r"(?:tests?|test\s++(?:suite|cases?|run)|specs?|suite|build|compilation|linter|"
            r"lint(?:ing)?|type[\s-]?check(?:s|ing|er)?|(?:ci|lint|type)\s++checks|ci|"
            r"script|program)")
_SUBJECT_WORDS = ("test", "specs", "spec ", "suite", "build", "compilation", "lint", "type",
                  "ci ", "script", "program")
# Every outcome holds one of these (lower-cased): a reply with none is done in a few
# substring tests.
_OUTCOME_STEMS = ("succe", "compil", "green", "fine", "cleanly", "without")
# "pass" as a verb, not the start of every "passenger" of an airline's replies.
_PASS_RE = re.compile(r"pass(?:e[sd]|ing)?\b")
# A name in code marks may follow the subject: "the script `fix.py` ran successfully".
_NAMED = r"(?:\s++`[^`\s]{1,200}`)?"
_OUTCOME = (r"(?:now\s++)?(?:pass(?:es|ed)?|succeed(?:s|ed)?|compiles?|compiled|"
            r"(?:is|are|was|were)\s++(?:now\s++|all\s++)?(?:passing|green|successful)|"
            r"(?:ran|runs|run|completed?|finished|executed|works?|worked|passed|builds?|"
            r"built|compiled)\s++(?:successfully|fine|cleanly|without\s++(?:any\s++)?"
            r"(?:errors?|failures?|issues?|problems?)))")
_OUTCOME_AT_RE = re.compile(
    rf"{_SUBJECT}\b{_NAMED}(?:\s++(?:all|now|still|also|both|again)\b)*+\s++{_OUTCOME}\b",
    re.IGNORECASE)
# "42 passed", "42 tests passed", unless some failed: found from "passed" backwards.
_COUNT_BEFORE_RE = re.compile(r"\b\d++\s++(?:tests?\s++)?$", re.IGNORECASE)
_SOME_FAILED_RE = re.compile(r"\s*+,?\s*+[1-9]\d*+\s++failed", re.IGNORECASE)
# The words that say which tests ("unit tests", "previously failing tests").
_MODIFIERS = ("unit", "integration", "existing", "new", "remaining", "relevant", "failing",
              "previously")
# The words that may lead a subject into its phrase ("all 42 unit tests"), for the
# evidence.
_LEAD_IN_RE = re.compile(r"(?:\ball\s++(?:of\s++)?(?:the\s++)?(?:\d++\s++)?|\b\d++\s++)?"
                         rf"(?:\b(?:{'|'.join(_MODIFIERS[:-1])}|previously\s++failing)\s++)?$",
                         re.IGNORECASE)
# The end of the outcome's sentence: a question there asks, it does not report.
_SENTENCE_END_RE = re.compile(r"[!?\n]|\.(?!\w)")
_MAX_SENTENCE_TAIL_CHARS = 400
# Words before the outcome in its clause that make it a plan, a purpose, a condition,
# a hope or a denial rather than a report.
_NOT_A_REPORT_RE = re.compile(
    r"\b(?:should|would|will|could|might|may|must|to\s+(?:make\s+sure|ensure|verify|"
    r"confirm|check|see|test)|if|whether|once|until|unless|when|after|expect\w*|hope\w*|"
    r"let['’]?s|let\s+me|need\w*|make\s+sure|ensure|verify|confirm|check|not|no|never|"
    r"n['’]t|fail\w*|wait\w*|going\s+to|want|try\w*|so\s+that)\b|['’]ll\b",
    re.IGNORECASE)
# The words after an outcome that keep it from being one ("pass the new value", "the
# script passed to the parser").
_NOT_AN_OUTCOME_AFTER_RE = re.compile(r"\s*(?:to|the|a|an|in|through|as|over|into|on)\b",
                                      re.IGNORECASE)
# Words that may stand right before the subject; any other word names another kind of
# test or script ("speed test", "blood test", "welcome script") than a run of code.
_LAST_WORD_RE = re.compile(r"(\w+)[ \t]*$")
# The words before an outcome that are read, a bounded window: a sentence with many
# outcomes in it costs time linear in its length.
_LOOK_BACK_CHARS = 160
_LEAD_WORDS = frozenset({"the", "all", "my", "our", "your", "its", "these", "those", "this",
                         "that", "both", "every", "each", "and", "so", "now", "which",
                         "then", "great", "good", "done", "yes", "ok", "okay", "also",
                         "of", *_MODIFIERS})
# Tool-name words of a tool that runs something itself (``run_tests``, ``build_project``).
_RUN_TOOL_WORDS = frozenset({"run", "test", "tests", "pytest", "build", "lint", "check",
                             "checks", "exec", "execute", "compile", "ci"})
# What a run's output ends with when it failed, and when it passed: the summary lines of
# pytest, unittest, go, cargo, jest, npm, make and maven, and an uncaught Python error.
_FAILURE_RE = re.compile(
    r"\b[1-9]\d*\s++(?:failed|failures?|errors?)\b|\bFAILED\b|\bFAIL\b|"
    r"Traceback \(most recent call last\)|\bBUILD FAILURE\b|\bBUILD FAILED\b|npm ERR!|"
    r"\bmake: \*\*\*|\bexit (?:code|status) [1-9]")
_SUCCESS_RE = re.compile(r"\b\d+\s++passed\b|^OK\b|\bPASS\b|\bok\s++\S|test result: ok|"
                         r"\bBUILD SUCCESS(?:FUL)?\b|\bAll \d+ tests passed\b", re.MULTILINE)
# A run's summary is at the end of its output: only this much of a result is read.
_MAX_RESULT_TAIL_CHARS = 16 * 1024
_MAX_OUTCOMES = 3
# Candidate phrases judged per reply; a real reply has a handful.
_MAX_CANDIDATES = 32
# An outcome is looked for in this much of a reply: the guards run on the agent's thread.
_MAX_SCAN_CHARS = 64 * 1024


def may_report_run_outcome(reply: str) -> bool:
    """False when ``reply`` holds no outcome word, so `find_run_outcomes` finds nothing
    (a few substring tests: most replies)."""
    lowered = reply[:_MAX_SCAN_CHARS].lower()
    return (any(stem in lowered for stem in _OUTCOME_STEMS)
            or ("pass" in lowered and _PASS_RE.search(lowered) is not None))


def find_run_outcomes(reply: str) -> list[str]:
    """The phrases of ``reply`` that report a run's outcome, in order (at most a few)."""
    if not may_report_run_outcome(reply):
        return []
    text = mask_quoted(reply[:_MAX_SCAN_CHARS])
    lowered = text.lower()
    if len(lowered) != len(text):
        lowered = text  # a character that lower-cases to two: offsets would drift
    found: list[str] = []
    for start in _candidates(lowered)[:_MAX_CANDIDATES]:
        phrase = _outcome_at(text, lowered, start)
        if phrase is not None:
            found.append(phrase)
            if len(found) >= _MAX_OUTCOMES:
                break
    return found


def _candidates(lowered: str) -> list[int]:
    """Where an outcome phrase may start: a subject word at a word start, or the count
    before a "passed"."""
    starts: set[int] = set()
    for word in _SUBJECT_WORDS:
        at = lowered.find(word)
        while at >= 0 and len(starts) <= _MAX_CANDIDATES:
            if at == 0 or not lowered[at - 1].isalnum():
                starts.add(at)
            at = lowered.find(word, at + 1)
    at = lowered.find("passed")
    while at >= 0 and len(starts) <= _MAX_CANDIDATES:
        count = _COUNT_BEFORE_RE.search(lowered, max(0, at - 24), at)
        if count is not None:
            starts.add(count.start())
        at = lowered.find("passed", at + 1)
    return sorted(starts)


def _outcome_at(text: str, lowered: str, start: int) -> str | None:
    """The outcome phrase that starts at ``start``, if it reports one."""
    counted = text[start].isdigit()
    if counted:  # "42 passed": `_candidates` found the "passed" after the count
        end = lowered.find("passed", start) + len("passed")
        if _SOME_FAILED_RE.match(text, end):
            return None
    else:
        found = _OUTCOME_AT_RE.match(text, start)
        if found is None:
            return None
        end = found.end()
    before = _clause_before(text, start)
    phrase = text[start:end]
    if _NOT_A_REPORT_RE.search(before) or _NOT_A_REPORT_RE.search(phrase):
        return None
    sentence_end = _SENTENCE_END_RE.search(text, end, end + _MAX_SENTENCE_TAIL_CHARS)
    if sentence_end is not None and sentence_end.group() == "?":
        return None  # "do the tests pass?"
    if counted:
        return " ".join(phrase.split())
    modifier = _LAST_WORD_RE.search(before)
    if modifier is not None and not modifier.group(1).isdigit() and \
            modifier.group(1).lower() not in _LEAD_WORDS:
        return None  # "the speed test passed": not a run of code
    if phrase.lower().endswith(("pass", "passes", "passed")) and \
            _NOT_AN_OUTCOME_AFTER_RE.match(text, end):
        return None  # "the tests pass the value through": a verb, not a verdict
    lead = _LEAD_IN_RE.search(before)
    return " ".join(((before[lead.start():] if lead else "") + phrase).split())


def _clause_before(text: str, start: int) -> str:
    """The words of the sentence before ``start``, at most `_LOOK_BACK_CHARS`."""
    window = text[max(0, start - _LOOK_BACK_CHARS):start]
    cut = max(window.rfind(". "), window.rfind("! "), window.rfind("? "),
              window.rfind("\n"), window.rfind(".\t"))
    return window[cut + 1:] if cut >= 0 else window


def unseen_outcomes(outcomes: Sequence[str], steps: Sequence[tuple[ToolCall, str | None]],
                    kinds: ToolKinds) -> list[str]:
    """The ``outcomes`` (phrases of `find_run_outcomes`) no run backs.

    Args:
        outcomes: The run outcomes the reply reports.
        steps: The calls of the turn before the reply, in order, each with its result's
            text (None when none came back).
        kinds: What the catalog's tools do.

    Returns:
        All of ``outcomes`` when nothing ran since the last change, or when the latest
        run since then that shows a summary shows a failure ("2 failed", a traceback);
        else none.
    """
    if not outcomes:
        return []
    ran = False
    failed = False  # what the latest run since the change with a summary showed
    for call, result in steps:
        did = kinds.of_call(call.name, call.arguments)
        if ran_a_command(kinds.of(call.name), did) or (
                _RUN_TOOL_WORDS & set(name_words(call.name))):
            # A command runner or a tool that may do anything, or a tool named for a run.
            ran = True
            tail = (result or "")[-_MAX_RESULT_TAIL_CHARS:]
            if _FAILURE_RE.search(tail):
                failed = True
            elif _SUCCESS_RE.search(tail):
                failed = False
        elif did == frozenset({WRITE}):
            ran = failed = False  # an edit: what ran before it saw other code
    return list(outcomes) if not ran or failed else []
