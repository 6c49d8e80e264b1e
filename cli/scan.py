"""``guardtrace scan``: run the detectors over a JSONL archive, one verdict per line.

A stable contract (README, "Offline scanner"): one JSON object per input line, in input
order, carrying the input's ``id``. A line that cannot be checked yields
``{"id": <id or null>, "error": "<what is wrong>"}`` and the scan goes on; the exit
status is then 2. Blank lines are skipped. This is how people scan their own archives
and how the detectors are evaluated.

``conversations`` differs in one way: a line holds a whole conversation, and the scan
prints one object per assistant message that has text,
``{"conv_id", "msg_index", "tiers", "evidence"}``; a line that cannot be read yields
``{"conv_id": <id or null>, "error": ...}``.

Output is valid UTF-8 whatever the input held: a lone surrogate (a JSON ``"\\ud800"``
escape in an id) is written as that escape, not as text no UTF-8 stream can carry.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from ..collectors.errors import GuardInputError
from .scan_conversations import scan_conversation_input
from .scan_records import scan_fabrication_input, scan_plan_input, scan_question_input

__all__ = ["SCANNERS", "ScanSummary", "scan_lines"]

# One verdict per input line, or (conversations) one per reply of it.
SCANNERS: Mapping[str, Callable[[Mapping[str, Any]], dict[str, Any] | list[dict[str, Any]]]] = {
    "fabrication": scan_fabrication_input,
    "questions": scan_question_input,
    "plans": scan_plan_input,
    "conversations": scan_conversation_input,
}
# Scanners that print several verdicts per input line, keyed by this id field.
_MULTI = {"conversations": "conv_id"}

# The verdict field each kind counts as a "hit" in the summary.
_HIT = {"fabrication": ("flagged", True), "questions": ("should_reason", True),
        "plans": ("valid", False), "conversations": ("flagged", True)}


# A lone surrogate: from a JSON escape in the input, or a byte that is not UTF-8 (the
# command reads with surrogateescape so that one such line does not end the scan).
_SURROGATE = re.compile("[\ud800-\udfff]")


class ScanSummary(Counter):
    """Counts of lines, hits and errors (printed to stderr with ``--summary``)."""


def scan_lines(kind: str, lines: Iterable[str], out: TextIO, *,
               ascii_only: bool = False) -> ScanSummary:
    """Scan ``lines`` with the ``kind`` scanner, writing one JSON verdict per record.

    Args:
        ascii_only: Escape every non-ASCII character (for an output that is not UTF-8).

    Raises:
        ValueError: ``kind`` is not one of :data:`SCANNERS`.
    """
    if kind not in SCANNERS:
        raise ValueError(f"unknown scan kind {kind!r}; expected one of {', '.join(SCANNERS)}")
    scanner = SCANNERS[kind]
    hit_field, hit_value = _HIT[kind]
    id_field = _MULTI.get(kind, "id")
    summary = ScanSummary()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        summary["lines"] += 1
        record_id = None
        try:
            if undecodable := _SURROGATE.search(line):
                raise GuardInputError(f"line {number}: not UTF-8 text (column "
                                      f"{undecodable.start() + 1})")
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise GuardInputError(f"line {number}: not JSON ({exc.msg} at column "
                                      f"{exc.colno})") from None
            if isinstance(obj, dict):
                record_id = obj.get("id")
            else:
                raise GuardInputError(f"line {number}: expected a JSON object, got "
                                      f"{type(obj).__name__}")
            verdict = scanner(obj)
        except GuardInputError as exc:
            summary["errors"] += 1
            verdict = {id_field: record_id, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - one bad record must not end the scan
            summary["errors"] += 1
            verdict = {id_field: record_id,
                       "error": f"line {number}: could not be checked: {type(exc).__name__}: "
                                f"{exc}"}
        verdicts = verdict if isinstance(verdict, list) else [verdict]
        for item in verdicts:
            if "error" not in item and _is_hit(item, hit_field, hit_value):
                summary[hit_field if hit_value else f"not_{hit_field}"] += 1
            out.write(_json_line(item, ascii_only) + "\n")
        if id_field != "id":
            summary["replies"] += sum(1 for v in verdicts if "error" not in v)
    return summary


def _json_line(verdict: Mapping[str, Any], ascii_only: bool) -> str:
    """One verdict as JSON that any UTF-8 (or, with ``ascii_only``, ASCII) stream carries."""
    text = json.dumps(verdict, ensure_ascii=ascii_only)
    if not ascii_only and _SURROGATE.search(text):
        # Escaped instead: valid UTF-8, and the id still reads back exactly as it came.
        text = json.dumps(verdict)
    return text


def _is_hit(verdict: Mapping[str, Any], hit_field: str, hit_value: Any) -> bool:
    if hit_field == "flagged" and "tiers" in verdict and "flagged" not in verdict:
        return bool(verdict["tiers"]) is hit_value
    return verdict.get(hit_field) == hit_value
