"""Plan validation and tool suggestions on real function-calling output (BFCL).

``measure(report, bfcl_path, progress)`` is called by ``benchmarks/detection_quality.py``;
it reads ``bfcl.jsonl.gz`` (54,253 outputs of the dev models, third-party data kept in
``shared/realdata``, never in this repository) and adds tables, figures and targets to
the report.

What is measured, exactly
-------------------------

* **Plan.** One BFCL output is one plan: its decoded ``calls`` in order, each passed to
  :func:`~guardtrace.collectors.plans.validation.validate_plan` as a bare call
  ``{"name", "arguments"}`` against the output's ``tools`` (the OpenAI function tools,
  names as that model saw them), with ``emit=False``. Arguments are the decoded ones
  less ``_positional`` (the converter's key for positional arguments, which carry no
  names); ``null`` arguments (undecodable) are passed as none. A call's finding is the
  issue of its step (steps have no ids, so step ``#N`` is call N).
* **Truth.** Each call's ``truth.kind``: ``ok`` (the name is in the list shown),
  ``mangled`` (a shown name apart from case/separators; ``target`` is that name),
  ``sentinel`` (an abstention token used as a name) or ``invented``.
* **False alarms**: outputs whose calls are all ``ok`` and that get any finding (a
  hallucination or an abstention). Target 0.
* **Caught**: ``invented``, ``mangled`` and ``sentinel`` calls whose step gets a
  finding. Target 1.0. **Sentinels as abstention**: ``sentinel`` calls whose finding
  is ``abstention`` (not ``hallucinated_tool``). Target 1.0.
* **The right tool** for a call that is not ``ok`` (none for sentinels):

  * ``mangled``: its ``target``.
  * ``invented``, when the item's possible answer (``truth.intended``) names one
    function: that function ("single intent").
  * ``invented``, when it names several: among them, the functions whose parameter
    schema declares every argument name of the call and whose required parameters the
    call all gives, less those the same output already calls validly with the same
    arguments (an output does not ask the same thing twice); the right tool if exactly
    one remains ("by arguments"), else none ("ambiguous"). This uses the call's
    arguments, as the suggester does, but only to choose among the *intended*
    functions; the suggester ranks every tool shown and does not know the intent.
  * ``invented`` with no intended function (``relevance``: no tool shown fits): none.

* **Top-1**: over calls with a right tool whose name validate_plan does not report as
  a placeholder (placeholders get no suggestion by design: ``func1``, ``tools.call``,
  ``python``), the share whose first suggested tool is the right one. Reported per
  sub-kind and for plans offering 2+ tools (the target, >= 0.85) and 1 tool.
  Placeholders are reported apart (how many, and that none got a suggestion), and a
  top-1 that counts them as misses is shown too.
* **Baseline**: ``difflib.get_close_matches(name, shown_names, n=1)`` (cutoff 0.6) on
  the same calls in the same run; right when its match is the right tool. Target:
  top-1 minus baseline > 0.
* **Relevance**: invented names where no tool fits, reported as the share given a
  suggestion (the shown tool is then the wrong answer; no target).
"""

from __future__ import annotations

import difflib
import gzip
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import Report

from guardtrace.collectors.plans.validation import PlanErrorType, PlanIssue, validate_plan

TARGET_TOP1_MULTI = 0.85
_PROGRESS_EVERY = 10_000
_POSITIONAL = "_positional"  # the BFCL converter's key for positional arguments

__all__ = ["measure", "right_tool"]


@dataclass
class _Tally:
    """Counts for one group of calls."""

    n: int = 0
    ours: int = 0
    baseline: int = 0

    def add(self, ours: bool, baseline: bool) -> None:
        self.n += 1
        self.ours += ours
        self.baseline += baseline

    def rate(self, which: str) -> float:
        return getattr(self, which) / self.n if self.n else float("nan")


@dataclass
class _Results:
    outputs: int = 0
    valid_outputs: int = 0
    false_alarm_outputs: int = 0
    false_alarm_names: Counter[str] = field(default_factory=Counter)
    calls: Counter[str] = field(default_factory=Counter)
    caught: Counter[str] = field(default_factory=Counter)
    as_abstention: Counter[str] = field(default_factory=Counter)
    missed: list[str] = field(default_factory=list)
    top1: dict[tuple[str, str], _Tally] = field(default_factory=dict)
    placeholders: Counter[str] = field(default_factory=Counter)
    placeholders_suggested: int = 0
    placeholders_with_right_tool: Counter[str] = field(default_factory=Counter)
    relevance: _Tally = field(default_factory=_Tally)
    ambiguous: Counter[str] = field(default_factory=Counter)
    abstention_names: Counter[str] = field(default_factory=Counter)
    wrong_top1: list[str] = field(default_factory=list)

    def tally(self, kind: str, size: str) -> _Tally:
        return self.top1.setdefault((kind, size), _Tally())


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def _arguments(arguments: Any) -> Any:
    if not isinstance(arguments, Mapping):
        return None
    return {k: v for k, v in arguments.items() if k != _POSITIONAL}


def _schema_accepts(tool: Mapping[str, Any], arguments: Any) -> bool:
    """The tool declares every argument name of the call and gets all it requires."""
    if not isinstance(arguments, Mapping) or not arguments:
        return False
    schema = tool.get("function", tool).get("parameters") or {}
    properties = set(schema.get("properties") or {})
    required = set(schema.get("required") or [])
    return set(arguments) <= properties and required <= set(arguments)


def right_tool(record: Mapping[str, Any], index: int) -> tuple[str | None, str]:
    """The right tool for call ``index`` of a BFCL output, and how it was decided.

    Returns:
        ``(name, how)`` with ``how`` one of ``ok``, ``sentinel``, ``mangled``,
        ``single intent``, ``by arguments``, ``ambiguous``, ``no intent``; ``name`` is
        None for all but ``mangled``, ``single intent`` and ``by arguments``.
    """
    truth = record["truth"]["calls"][index]
    if truth["kind"] in ("ok", "sentinel"):
        return None, truth["kind"]
    if truth["kind"] == "mangled":
        return truth["target"], "mangled"
    intended = list(dict.fromkeys(record["truth"]["intended"]))
    if not intended:
        return None, "no intent"
    if len(intended) == 1:
        return intended[0], "single intent"
    call = record["calls"][index]
    arguments = _arguments(call.get("arguments"))
    tools = {t["function"]["name"]: t for t in record["tools"]}
    asked = {c["name"] for c, t in zip(record["calls"], record["truth"]["calls"], strict=False)
             if t["kind"] == "ok" and _arguments(c.get("arguments")) == arguments}
    fits = [name for name in intended
            if name in tools and name not in asked and _schema_accepts(tools[name], arguments)]
    if len(fits) == 1:
        return fits[0], "by arguments"
    return None, "ambiguous"


def _step_issues(issues: tuple[PlanIssue, ...]) -> dict[str, PlanIssue]:
    """The first tool finding of each step (steps are ``#1``, ``#2`` ...)."""
    out: dict[str, PlanIssue] = {}
    for issue in issues:
        if issue.error_type in (PlanErrorType.HALLUCINATED_TOOL, PlanErrorType.ABSTENTION) \
                and issue.step is not None:
            out.setdefault(issue.step, issue)
    return out


def _score(record: dict[str, Any], results: _Results) -> None:
    truths = record["truth"]["calls"]
    plan = [{"name": c["name"], "arguments": _arguments(c.get("arguments"))}
            for c in record["calls"]]
    result = validate_plan(plan, record["tools"], emit=False)
    found = _step_issues(result.errors)
    shown = [t["function"]["name"] for t in record["tools"]]
    size = "2+ tools" if len(shown) >= 2 else "1 tool"
    results.outputs += 1
    if all(t["kind"] == "ok" for t in truths):
        results.valid_outputs += 1
        results.false_alarm_outputs += bool(result.errors)
    for index, truth in enumerate(truths):
        kind = truth["kind"]
        issue = found.get(f"#{index + 1}")
        results.calls[kind] += 1
        if kind == "ok":
            if issue is not None:
                results.caught[kind] += 1  # a false alarm on a name in the list
                results.false_alarm_names[truth["name"]] += 1
            continue
        if issue is None:
            results.missed.append(f"{record['id']}: {truth['name']} ({kind})")
            continue
        results.caught[kind] += 1
        if issue.is_abstention:
            results.as_abstention[kind] += 1
            results.abstention_names[truth["name"]] += 1
        if kind == "sentinel":
            continue
        right, how = right_tool(record, index)
        ours = issue.suggested_tools[0] if issue.suggested_tools else None
        if issue.placeholder:
            results.placeholders[truth["name"]] += 1
            results.placeholders_suggested += ours is not None
            if right is not None:
                results.placeholders_with_right_tool[size] += 1
            continue
        closest = difflib.get_close_matches(truth["name"], shown, n=1)
        baseline = closest[0] if closest else None
        if how == "no intent":
            results.relevance.add(ours is not None, baseline is not None)
        elif right is None:
            results.ambiguous[size] += 1
        else:
            results.tally(how, size).add(ours == right, baseline == right)
            if ours != right:
                results.wrong_top1.append(
                    f"{record['id']}: {truth['name']} -> {ours} (right: {right}, {how})")


def _combined(results: _Results, size: str) -> _Tally:
    total = _Tally()
    for (_how, group), tally in results.top1.items():
        if group == size:
            total.n += tally.n
            total.ours += tally.ours
            total.baseline += tally.baseline
    return total


def measure(report: Report, bfcl_path: Path, progress: Callable[[str], None]) -> None:
    """Measure plan validation and suggestions on BFCL; add tables, figures, targets.

    Args:
        report: The benchmark report to add to.
        bfcl_path: ``bfcl.jsonl.gz`` of the dev set.
        progress: Called with a progress message every 10,000 outputs.

    Raises:
        FileNotFoundError: ``bfcl_path`` does not exist.
    """
    if not bfcl_path.is_file():
        raise FileNotFoundError(f"BFCL data not found at {bfcl_path}: set GUARDTRACE_REALDATA "
                                f"to the folder holding bfcl.jsonl.gz")
    results = _Results()
    for count, record in enumerate(_records(bfcl_path), start=1):
        _score(record, results)
        if count % _PROGRESS_EVERY == 0:
            progress(f"plans: {count:,} BFCL outputs validated")
    progress(f"plans: {results.outputs:,} BFCL outputs validated")

    bad_kinds = ("invented", "mangled", "sentinel")
    bad = sum(results.calls[k] for k in bad_kinds)
    caught = sum(results.caught[k] for k in bad_kinds)
    caught_rate = caught / bad if bad else float("nan")
    sentinels = results.calls["sentinel"]
    abstention_rate = results.as_abstention["sentinel"] / sentinels if sentinels else float("nan")
    multi, single = _combined(results, "2+ tools"), _combined(results, "1 tool")
    with_placeholders = multi.n + results.placeholders_with_right_tool["2+ tools"]

    report.table(f"plans on BFCL: names caught (per call; {results.outputs:,} outputs, "
                 f"{results.valid_outputs:,} with every call valid, "
                 f"{results.false_alarm_outputs} of them flagged)",
                 ["truth kind", "calls", "flagged", "reported as abstention"],
                 [[k, results.calls[k], results.caught[k], results.as_abstention[k]]
                  for k in ("ok", *bad_kinds)])
    rows = []
    for (how, size), tally in sorted(results.top1.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append([size, how, tally.n, tally.rate("ours"), tally.rate("baseline")])
    rows.append(["2+ tools", "all with a right tool", multi.n, multi.rate("ours"),
                 multi.rate("baseline")])
    rows.append(["1 tool", "all with a right tool", single.n, single.rate("ours"),
                 single.rate("baseline")])
    report.table("plans on BFCL: top-1 suggestion (guardtrace vs difflib closest name)",
                 ["plan offers", "right tool decided by", "calls", "guardtrace top-1",
                  "difflib top-1"], rows)
    report.table("plans on BFCL: names without a scored suggestion",
                 ["what", "calls", "detail"],
                 [["no right tool decidable (ambiguous)",
                   sum(results.ambiguous.values()),
                   ", ".join(f"{n}: {c}" for n, c in sorted(results.ambiguous.items()))],
                  ["placeholders", sum(results.placeholders.values()),
                   ", ".join(f"{n} x{c}" for n, c in results.placeholders.most_common())],
                  ["placeholders given a suggestion", results.placeholders_suggested, ""],
                  ["abstentions", sum(results.abstention_names.values()),
                   ", ".join(f"{n} x{c}" for n, c in results.abstention_names.most_common())],
                  ["relevance (no tool fits): given a suggestion",
                   f"{results.relevance.ours} of {results.relevance.n}",
                   f"difflib: {results.relevance.baseline} of {results.relevance.n}"]])

    top1_all = multi.ours / with_placeholders if with_placeholders else float("nan")
    report.figures["plans"] = {
        "outputs": results.outputs,
        "valid_outputs": results.valid_outputs,
        "false_alarm_outputs": results.false_alarm_outputs,
        "false_alarm_names": dict(results.false_alarm_names.most_common(20)),
        "calls_by_truth_kind": dict(results.calls),
        "caught_by_truth_kind": dict(results.caught),
        "ok_calls_flagged": results.caught["ok"],
        "caught_rate": round(caught_rate, 4),
        "sentinels_as_abstention": round(abstention_rate, 4),
        "missed": results.missed[:20],
        "top1_2plus_tools": {"calls": multi.n, "guardtrace": round(multi.rate("ours"), 4),
                             "difflib": round(multi.rate("baseline"), 4),
                             "placeholders_counted_as_misses": round(top1_all, 4)},
        "top1_1_tool": {"calls": single.n, "guardtrace": round(single.rate("ours"), 4),
                        "difflib": round(single.rate("baseline"), 4)},
        "top1_by_sub_kind": {f"{size} / {how}": {"calls": t.n,
                                                "guardtrace": round(t.rate("ours"), 4),
                                                "difflib": round(t.rate("baseline"), 4)}
                             for (how, size), t in results.top1.items()},
        "ambiguous": dict(results.ambiguous),
        "placeholders": dict(results.placeholders),
        "placeholders_given_a_suggestion": results.placeholders_suggested,
        "relevance_given_a_suggestion": {"calls": results.relevance.n,
                                         "guardtrace": results.relevance.ours,
                                         "difflib": results.relevance.baseline},
        "wrong_top1": results.wrong_top1[:30],
    }
    report.target("plans: false alarms on valid BFCL plans", results.false_alarm_outputs,
                   "==", 0, "outputs")
    report.target("plans: invented/mangled/sentinel names caught", caught_rate, "==", 1.0)
    report.target("plans: sentinels reported as abstention", abstention_rate, "==", 1.0)
    report.target("plans: top-1 suggestion, plans offering 2+ tools", multi.rate("ours"),
                  ">=", TARGET_TOP1_MULTI)
    report.target("plans: top-1 minus difflib baseline, 2+ tools",
                  multi.rate("ours") - multi.rate("baseline"), ">", 0.0)
