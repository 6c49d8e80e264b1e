"""The writer's inserts do not import pandas (about 90 MB of a consumer's RSS), and insert
the same bytes as with pandas imported.

Each check runs in a fresh interpreter: in this one, other tests may have imported pandas.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Serializes rows as clickhouse-connect's HTTP insert does (no server needed): once inside
# pandas_free_insert, then again after importing pandas. In between, ClickHouseWriter and
# the migrations' bookkeeping insert into a client that records what clickhouse-connect's
# options say at insert time.
SCRIPT = r"""
import json, sys
from clickhouse_connect.datatypes.registry import get_from_name
from clickhouse_connect.driver import options
from clickhouse_connect.driver.insert import InsertContext
from clickhouse_connect.driver.transform import NativeTransform
from guardtrace.store.migrate import load_migrations, record_applied
from guardtrace.store.pandas_free_insert import pandas_free_insert
from guardtrace.store.rows import DecodedRows
from guardtrace.store.writer import ClickHouseWriter

ROWS = [[1, "a\n\x00b", ["x", "y"], {"k": "v"}], [2, "", [], {}]]
TYPES = [get_from_name(name) for name in
         ("UInt64", "String", "Array(String)", "Map(LowCardinality(String), String)")]

def native(rows):
    context = InsertContext("db.t", ["n", "s", "a", "m"], TYPES, data=rows)
    return b"".join(NativeTransform.build_insert(context)).hex()

class RecordingClient:
    def __init__(self):
        self.seen = []
    def insert(self, table, data, column_names, settings=None):
        self.seen.append({"table": table, "rows": len(data),
                          "pd": repr(vars(options).get("pd", "unresolved")),
                          "np": repr(vars(options).get("np", "unresolved"))})

with pandas_free_insert():
    inside = native(ROWS)
client = RecordingClient()
written = ClickHouseWriter(client, "db").write(
    DecodedRows(span_events=[["row"]], metric_points=[["a"], ["b"]]))
record_applied(client, "db", load_migrations()[0])
loaded = sorted(m for m in ("pandas", "numpy", "pyarrow") if m in sys.modules)
after = {"pd": "pd" in vars(options), "np": "np" in vars(options)}
import pandas
print(json.dumps({"inside": inside, "loaded": loaded, "seen": client.seen,
                  "written": written, "resolved_after": after,
                  "pd_resolves_to_pandas": options.pd is pandas,
                  "with_pandas": native(ROWS)}))
"""


def _run(code: str) -> dict[str, Any]:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def out() -> dict[str, Any]:
    return _run(SCRIPT)


def test_inserts_import_neither_pandas_nor_numpy_and_write_the_same_bytes(
        out: dict[str, Any]) -> None:
    assert out["loaded"] == []
    assert out["inside"] == out["with_pandas"]
    assert len(out["inside"]) > 100  # rows were serialized, not an empty block


def test_the_writer_and_the_migrations_insert_inside_it(out: dict[str, Any]) -> None:
    assert out["written"] == {"span_events": 1, "metric_points": 2}
    assert [seen["table"] for seen in out["seen"]] == [
        "db.span_events", "db.metric_points", "db.schema_migrations"]
    assert all(seen["pd"] == "None" and seen["np"] == "None" for seen in out["seen"])


def test_pandas_resolves_lazily_again_afterwards(out: dict[str, Any]) -> None:
    assert out["resolved_after"] == {"pd": False, "np": False}
    assert out["pd_resolves_to_pandas"] is True


def test_changes_nothing_once_pandas_is_imported() -> None:
    imported = _run(r"""
import json
import pandas, numpy
from clickhouse_connect.driver import options
from guardtrace.store.pandas_free_insert import pandas_free_insert
with pandas_free_insert():
    inside = (options.pd is pandas, options.np is numpy)
print(json.dumps({"inside": inside}))
""")
    assert imported["inside"] == [True, True]
