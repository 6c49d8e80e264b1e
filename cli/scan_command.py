"""``guardtrace scan KIND PATH``: the command over :mod:`guardtrace.cli.scan`'s scanners.

Needs only the hooks (no server-side package): it is how people check their own archives.
"""

from __future__ import annotations

import argparse
import codecs
import io
import json
import sys
from typing import Any

from .support import CommandError

__all__ = ["register"]


def cmd_scan(args: argparse.Namespace) -> int:
    from .scan import scan_lines  # the detectors: imported only when scanning

    ascii_only = not _writes_utf8(sys.stdout)
    if args.path == "-":
        # JSONL is UTF-8 whatever the locale; a line that is not becomes that line's
        # error (surrogateescape), and the scan goes on.
        if isinstance(sys.stdin, io.TextIOWrapper):
            sys.stdin.reconfigure(encoding="utf-8", errors="surrogateescape")
        summary = scan_lines(args.kind, sys.stdin, sys.stdout, ascii_only=ascii_only)
    else:
        try:
            handle = open(args.path, encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            raise CommandError(f"cannot read {args.path}: {exc.strerror}") from None
        with handle:
            summary = scan_lines(args.kind, handle, sys.stdout, ascii_only=ascii_only)
    sys.stdout.flush()
    if args.summary:
        print(json.dumps({"kind": args.kind, **dict(sorted(summary.items()))}), file=sys.stderr)
    return 2 if summary["errors"] else 0


def _writes_utf8(stream: Any) -> bool:
    """Whether ``stream`` encodes as UTF-8 (a terminal in another locale may not)."""
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "utf-8").name == "utf-8"
    except LookupError:
        return False


def register(sub: Any) -> None:
    """Add the scan subcommand."""
    p = sub.add_parser("scan", help="run a detector over a JSONL archive",
                       description="Check each line of a JSONL file with one guard's "
                       "detector and print one JSON verdict per line, in order, with the "
                       "input's id. Inputs: fabrication {id, reply, tools_fired, history, "
                       "channel?}; questions {id, question}; plans {id, allowed_tools, plan}; "
                       "conversations {id, tools, messages} (OpenAI chat or Anthropic "
                       "messages with tool results), which prints one {conv_id, msg_index, "
                       "tiers, evidence} per assistant message with text. A malformed line "
                       "yields {id, error} ({conv_id, error} for conversations) and the scan "
                       "goes on; the exit status is then 2.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n"
                              "  guardtrace scan fabrication replies.jsonl\n"
                              "  guardtrace scan conversations traces.jsonl --summary\n"
                              "  cat plans.jsonl | guardtrace scan plans - --summary")
    p.add_argument("kind", choices=("fabrication", "questions", "plans", "conversations"),
                   help="which detector to run")
    p.add_argument("path", help="JSONL file, or - for standard input")
    p.add_argument("--summary", action="store_true",
                   help="print counts (lines, hits, errors) as JSON to stderr")
    p.set_defaults(func=cmd_scan)
