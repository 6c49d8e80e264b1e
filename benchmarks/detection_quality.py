"""How right the detectors are on real agent data: fabrication, loops, plans, the gate.

    .venv/bin/python benchmarks/detection_quality.py              # everything (~15 s)
    .venv/bin/python benchmarks/detection_quality.py --only fabrication --list-errors
    .venv/bin/python benchmarks/detection_quality.py --realdata /path/to/realdata

The data is third-party and stays outside this repository: ``../shared/realdata`` by
default (``GUARDTRACE_REALDATA`` or ``--realdata`` to point elsewhere). Three parts, each
defining exactly what it counts in its own module:

* fabrication and loops (``_fabrication_quality``): ``guardtrace scan conversations``
  over ``conversations.jsonl`` (tau-bench, tau2-bench, SWE-agent), scored per tier and
  per source against the hand labels in ``benchmarks/labels/conversations_dev.jsonl``;
* plans (``_plan_quality``): ``validate_plan`` and its suggestions on 54,253 BFCL
  function-calling outputs, against the closest-name baseline (difflib) in the same run;
* the criticality gate (``_gate_quality``): how often it fires on the real user messages,
  and whether it catches the character-level question families.

Prints the tables, the targets and, last, one JSON line (see ``_common.Report``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _fabrication_quality
import _gate_quality
import _plan_quality
from _common import REPO, Report, log, realdata_dir

PARTS = ("fabrication", "plans", "gate")
LABELS = REPO / "benchmarks" / "labels" / "conversations_dev.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--realdata", type=Path, default=None,
                        help="folder holding conversations.jsonl, bfcl.jsonl.gz and "
                             "labels.jsonl (default: $GUARDTRACE_REALDATA, else "
                             "../shared/realdata, else /work/shared/realdata)")
    parser.add_argument("--labels", type=Path, default=LABELS,
                        help="hand labels of the conversations (default: %(default)s)")
    parser.add_argument("--only", choices=PARTS, action="append",
                        help="run only this part (repeatable)")
    parser.add_argument("--list-errors", action="store_true",
                        help="also print every fabrication/loop miss and false flag")
    parser.add_argument("--quick", action="store_true",
                        help="accepted for 'make bench BENCH_ARGS=--quick'; the whole run "
                             "already takes seconds, so it measures everything")
    args = parser.parse_args(argv)
    realdata = args.realdata or realdata_dir()
    if not realdata.is_dir():
        parser.error(f"real agent data not found at {realdata}: pass --realdata or set "
                     f"GUARDTRACE_REALDATA to the folder holding conversations.jsonl")
    parts = args.only or list(PARTS)
    report = Report("detection_quality", {"realdata": str(realdata), "parts": parts,
                                          "labels": str(args.labels)})
    try:
        if "fabrication" in parts:
            _fabrication_quality.measure(report, realdata, args.labels, log,
                                         list_errors=args.list_errors)
        if "plans" in parts:
            _plan_quality.measure(report, realdata / "bfcl.jsonl.gz", log)
        if "gate" in parts:
            _gate_quality.measure(report, realdata, log)
    except FileNotFoundError as exc:
        print(f"detection_quality: {exc}", file=sys.stderr)
        return 2
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
