"""Query an embedded store from a process of its own, and print the results as JSON.

    python -m tests.support.store_query chdb:///path/to/store DATABASE "SQL" ["SQL" ...]

chDB allows one process per data directory, and a test process that already holds the
session store cannot open a second one; tests read a subprocess's store through this.
``{db}`` in a query stands for DATABASE. Prints one JSON list of result rows per query,
all of them in one JSON array on stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def query_store(url: str, database: str, *queries: str, timeout_s: float = 120) -> list[Any]:
    """Run ``queries`` against the store at ``url`` in a subprocess; one row list each.

    Raises:
        AssertionError: the subprocess failed (its stderr is in the message).
    """
    done = subprocess.run([sys.executable, "-m", "tests.support.store_query", url, database,
                           *queries], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    assert done.returncode == 0, f"store query failed: {done.stderr[-3000:]}"
    return json.loads(done.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    from guardtrace.store.connection import StoreConfig, open_client

    url, database, *queries = argv if argv is not None else sys.argv[1:]
    client = open_client(StoreConfig.resolve(url=url, database=database))
    results = [client.query(sql.replace("{db}", database)).result_rows for sql in queries]
    json.dump(results, sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
