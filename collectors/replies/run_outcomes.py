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
outcomes. Each pattern runs once over the reply, in time linear in its length.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .claims import mask_quoted, sentences
from .conversation import ToolCall
from .tool_kinds import BOTH, ToolKinds, name_words
from .verbs import WRITE

__all__ = ["find_run_outcomes", "unseen_outcomes"]

# What a run is run on, and what it reports: "all 42 tests pass", "the test suite passed",
# "the build succeeded", "the script ran successfully", "tests are green", "42 passed".
_SUBJECT = (r"(?:all\s++(?:of\s++)?(?:the\s++)?(?:\d+\s++)?)?"
            r"(?:(?:unit|integration|existing|new|remaining|relevant|failing|previously\s++"
            r"failing)\s++)?"
            r"(?:tests?|test\s++(?:suite|cases?|run)|specs?|suite|build|compilation|linter|"
            r"lint(?:ing)?|type[\s-]?check(?:s|ing|er)?|(?:ci|lint|type)\s++checks|ci|"
            r"script|program)")
# A name in code marks may follow the subject: "the script `fix.py` ran successfully".
_NAMED = r"(?:\s++`[^`\s]{1,200}`)?"
_OUTCOME = (r"(?:now\s++)?(?:pass(?:es|ed)?|succeed(?:s|ed)?|compiles?|compiled|"
            r"(?:is|are|was|were)\s++(?:now\s++|all\s++)?(?:passing|green|successful)|"
            r"(?:ran|runs|run|completed?|finished|executed|works?|worked|passed|builds?|"
            r"built|compiled)\s++(?:successfully|fine|cleanly|without\s++(?:any\s++)?"
            r"(?:errors?|failures?|issues?|problems?)))")
_OUTCOME_RE = re.compile(
    rf"\b{_SUBJECT}\b{_NAMED}(?:\s++(?:all|now|still|also|both|again))*\s++{_OUTCOME}\b"
    r"|\b\d+\s++(?:tests?\s++)?passed\b(?!\s*+,?\s*+[1-9]\d*\s++failed)",
    re.IGNORECASE)
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
                         "then", "great", "good", "done", "yes", "ok", "okay", "also"})
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


def find_run_outcomes(reply: str) -> list[str]:
    """The phrases of ``reply`` that report a run's outcome, in order (at most a few)."""
    text = mask_quoted(reply[:_MAX_SCAN_CHARS])
    if not _OUTCOME_RE.search(text):
        return []  # most replies: one scan, no sentence split
    found: list[str] = []
    tried = 0
    for _, sentence in sentences(text):
        if sentence.rstrip().endswith("?"):
            continue
        for match in _OUTCOME_RE.finditer(sentence):
            tried += 1
            if tried > _MAX_CANDIDATES:
                return found  # hostile text: the cost stays bounded
            before = sentence[max(0, match.start() - _LOOK_BACK_CHARS):match.start()]
            if _NOT_A_REPORT_RE.search(before) or _NOT_A_REPORT_RE.search(match.group()):
                continue
            modifier = None if match.group()[0].isdigit() else _LAST_WORD_RE.search(before)
            if modifier is not None and modifier.group(1).lower() not in _LEAD_WORDS:
                continue  # "the speed test passed", "your promo script": not a code run
            if _NOT_AN_OUTCOME_AFTER_RE.match(sentence, match.end()) and re.search(
                    r"pass(?:es|ed)?$", match.group(), re.IGNORECASE):
                continue  # "the tests pass the value through": a verb, not a verdict
            found.append(" ".join(match.group().split()))
            if len(found) >= _MAX_OUTCOMES:
                return found
    return found


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
        own = kinds.of(call.name)
        did = kinds.of_call(call.name, call.arguments)
        if ((did is None or did == BOTH) and own in (None, BOTH)) or (
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
