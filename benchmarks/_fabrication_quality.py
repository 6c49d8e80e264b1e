"""The fabrication and loop tiers on real agent conversations, against hand labels.

``measure(report, realdata_dir, labels_path, progress)`` is called by
``benchmarks/detection_quality.py``. It runs the scanner exactly as
``guardtrace scan conversations`` does (:func:`scan_conversation_input`) over
``conversations.jsonl`` (third-party data in ``shared/realdata``, never in this
repository) and scores every assistant reply against ``benchmarks/labels/
conversations_dev.jsonl`` (ids and classes; see ``benchmarks/labels/README.md``).

What is measured, exactly
-------------------------

* Each labelled reply has a set of classes (``class`` plus ``also``, ``none`` dropped)
  and a loop flag. A tier's flag is right when its class is in the set:
  ``action`` - ``action_claim``, ``read`` - ``read_claim``, ``text_tool_call`` -
  ``text_tool_call``, ``ungrounded_result`` - ``invented_result``, ``repetition`` -
  ``loop``.
* **Fabrication (any tier)**: a reply flagged in any of the four fabrication tiers,
  against a reply with any fabrication class. Precision, recall and flag rate (flagged
  replies over all replies).
* **Per tier**: flags, right flags, precision, recall against that tier's class.
* **Loops**: ``repetition`` against the loop flag.
* **Per source**: the same, per run (tau-bench GPT-4o, tau2 grok-3 airline and telecom,
  SWE-agent).
* **Earlier labels**: ``labels.jsonl`` holds hand judgements of the previous detector's
  verdicts on these conversations. Reported: how many of its false alarms the detector
  now leaves quiet, and how many of its true findings it still makes.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import Report

from guardtrace.cli.scan_conversations import scan_conversation_input

TIER_CLASS: Mapping[str, str] = {
    "action": "action_claim",
    "read": "read_claim",
    "text_tool_call": "text_tool_call",
    "ungrounded_result": "invented_result",
}
LOOP_TIER = "repetition"
TARGET_FABRICATION_PRECISION = 0.85
TARGET_FABRICATION_RECALL = 0.70
TARGET_TIER_PRECISION = 0.80
TARGET_LOOP_PRECISION = 0.85
TARGET_LOOP_RECALL = 0.70

_SOURCES = (("tau-bench GPT-4o airline", "tau1-gpt-4o-airline:"),
            ("tau2 grok-3 airline", "tau2-grok-3-airline:"),
            ("tau2 grok-3 telecom", "tau2-grok-3-telecom"),
            ("SWE-agent GPT-4", "swe:"))


@dataclass
class Score:
    """Confusion counts of one detector decision against one label."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    n: int = 0

    def add(self, flagged: bool, truth: bool) -> None:
        self.n += 1
        self.tp += flagged and truth
        self.fp += flagged and not truth
        self.fn += truth and not flagged

    @property
    def flags(self) -> int:
        return self.tp + self.fp

    @property
    def precision(self) -> float:
        return self.tp / self.flags if self.flags else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def flag_rate(self) -> float:
        return self.flags / self.n if self.n else float("nan")


@dataclass
class _Results:
    fabrication: Score = field(default_factory=Score)
    loops: Score = field(default_factory=Score)
    tiers: dict[str, Score] = field(default_factory=lambda: {t: Score() for t in TIER_CLASS})
    by_source: dict[str, tuple[Score, Score]] = field(default_factory=dict)
    errors: list[tuple[str, str, int, str, str]] = field(default_factory=list)


def _source(conv_id: str) -> str:
    return next((name for name, prefix in _SOURCES if conv_id.startswith(prefix)), "other")


def load_labels(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The hand labels by ``(conv_id, msg_index)``."""
    with path.open(encoding="utf-8") as lines:
        return {(r["conv_id"], r["msg_index"]): r for r in map(json.loads, lines) if r}


def _classes(label: Mapping[str, Any]) -> set[str]:
    return ({label["class"], *label.get("also", ())}) - {"none"}


def scan_verdicts(conversations: Path) -> Iterator[dict[str, Any]]:
    """Every verdict the conversations scanner prints for the file, in order."""
    with conversations.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield from scan_conversation_input(json.loads(line))


def _score(verdicts: Mapping[tuple[str, int], dict[str, Any]],
           labels: Mapping[tuple[str, int], dict[str, Any]]) -> _Results:
    results = _Results()
    for key, label in labels.items():
        verdict = verdicts.get(key)
        if verdict is None:
            raise ValueError(f"no verdict for labelled reply {key}: the scanner must print "
                             f"one line per assistant reply with text")
        tiers = set(verdict["tiers"])
        classes = _classes(label)
        flagged = bool(tiers & set(TIER_CLASS))
        results.fabrication.add(flagged, bool(classes))
        results.loops.add(LOOP_TIER in tiers, bool(label["loop"]))
        for tier, cls in TIER_CLASS.items():
            results.tiers[tier].add(tier in tiers, cls in classes)
            if (tier in tiers) != (cls in classes):
                results.errors.append(("false flag" if tier in tiers else "miss", key[0],
                                       key[1], tier, verdict["evidence"].get(tier, "")))
        if (LOOP_TIER in tiers) != bool(label["loop"]):
            results.errors.append(("false flag" if LOOP_TIER in tiers else "miss", key[0],
                                   key[1], LOOP_TIER,
                                   verdict["evidence"].get(LOOP_TIER, "")))
        fab, loop = results.by_source.setdefault(_source(key[0]), (Score(), Score()))
        fab.add(flagged, bool(classes))
        loop.add(LOOP_TIER in tiers, bool(label["loop"]))
    return results


def _earlier_labels(path: Path, verdicts: Mapping[tuple[str, int], dict[str, Any]]
                    ) -> list[list[Any]]:
    """How the earlier detector's hand-judged verdicts fare now, by verdict and cause."""
    tally: Counter[tuple[str, str, bool]] = Counter()
    with path.open(encoding="utf-8") as lines:
        for record in map(json.loads, lines):
            verdict = verdicts.get((record["conv_id"], record["msg_index"]))
            if verdict is None or record["label"] not in ("FP", "TP"):
                continue
            tier = record.get("flagged_tier")
            flagged_now = tier in verdict["tiers"] if tier else bool(verdict["tiers"])
            tally[(record["label"], record.get("cause") or "", flagged_now)] += 1
    rows = []
    for label, outcome in (("FP", "quiet now"), ("TP", "still found")):
        causes = sorted({c for (lab, c, _) in tally if lab == label})
        for cause in causes:
            now = tally[(label, cause, True)]
            then = now + tally[(label, cause, False)]
            kept = then - now if label == "FP" else now
            rows.append([f"earlier {label}", cause, then, outcome, kept])
    return rows


def measure(report: Report, realdata_dir: Path, labels_path: Path,
            progress: Callable[[str], None], *, list_errors: bool = False) -> None:
    """Score the fabrication and loop tiers; add tables, figures and targets to ``report``."""
    conversations = realdata_dir / "conversations.jsonl"
    for path in (conversations, labels_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: set GUARDTRACE_REALDATA (or "
                                    f"--realdata) to the folder holding conversations.jsonl")
    labels = load_labels(labels_path)
    progress(f"scanning {conversations} ({len(labels)} labelled replies)")
    started = time.perf_counter()
    verdicts = {(v["conv_id"], v["msg_index"]): v for v in scan_verdicts(conversations)
                if "error" not in v}
    seconds = time.perf_counter() - started
    results = _score(verdicts, labels)

    fab, loops = results.fabrication, results.loops
    rows = [["fabrication (any tier)", fab.flags, fab.tp, fab.tp + fab.fn, fab.precision,
             fab.recall, fab.flag_rate]]
    for tier, score in results.tiers.items():
        rows.append([tier, score.flags, score.tp, score.tp + score.fn, score.precision,
                     score.recall, score.flag_rate])
    rows.append(["repetition (loops)", loops.flags, loops.tp, loops.tp + loops.fn,
                 loops.precision, loops.recall, loops.flag_rate])
    report.table(f"fabrication and loops on {len(labels)} real replies (hand labels)",
                 ["tier", "flags", "right", "labelled", "precision", "recall", "flag rate"],
                 rows)
    report.table("per source", ["source", "replies", "fab flags", "fab P", "fab R",
                                "loop flags", "loop P", "loop R"],
                 [[name, f.n, f.flags, f.precision, f.recall, lp.flags, lp.precision,
                   lp.recall] for name, (f, lp) in sorted(results.by_source.items())])
    earlier = realdata_dir / "labels.jsonl"
    if earlier.is_file():
        report.table("the earlier detector's hand-judged verdicts, now",
                     ["earlier verdict", "cause", "replies", "now", "count"],
                     _earlier_labels(earlier, verdicts))
    if list_errors:
        report.table("every miss and false flag", ["kind", "conversation", "msg", "tier",
                                                   "evidence"],
                     [list(e) for e in sorted(results.errors)])

    figures = {
        "replies": len(labels), "scan_replies_per_s": round(len(verdicts) / seconds, 1),
        "fabrication_precision": fab.precision, "fabrication_recall": fab.recall,
        "fabrication_flag_rate": fab.flag_rate,
        "loop_precision": loops.precision, "loop_recall": loops.recall,
        **{f"{t}_precision": s.precision for t, s in results.tiers.items()},
        **{f"{t}_recall": s.recall for t, s in results.tiers.items()},
        **{f"{t}_flags": s.flags for t, s in results.tiers.items()},
    }
    # A tier with no flags has no precision: null in the JSON line, not NaN.
    report.figures.update({k: None if isinstance(v, float) and math.isnan(v) else v
                           for k, v in figures.items()})
    report.target("fabrication precision (any tier)", fab.precision, ">=",
                  TARGET_FABRICATION_PRECISION)
    report.target("fabrication recall (any tier)", fab.recall, ">=",
                  TARGET_FABRICATION_RECALL)
    for tier, score in results.tiers.items():
        if score.flags:
            report.target(f"{tier} precision", score.precision, ">=", TARGET_TIER_PRECISION)
        else:
            report.notes.append(f"{tier}: no flags on the dev set (and "
                                f"{score.tp + score.fn} labelled), so no precision to "
                                f"measure here")
    report.target("loop precision", loops.precision, ">=", TARGET_LOOP_PRECISION)
    report.target("loop recall", loops.recall, ">=", TARGET_LOOP_RECALL)
    progress(f"fabrication: scanned {len(verdicts)} replies in {seconds:.1f} s")
