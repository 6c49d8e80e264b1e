"""The consume phase against each kind of store, in the same run over the same topics.

* ``embedded``: the consumer process opens a fresh chDB store itself (``chdb://DIR``), so
  its RSS includes the ClickHouse engine.
* ``server``: the consumer process talks HTTP to a ClickHouse server, as it does in a
  deployment. No server binary is to be had here, so the server is the HTTP stand-in
  (``tests/support/clickhouse_http_standin.py``): ClickHouse's HTTP interface in a
  process of its own, backed by chDB. The consumer then holds only clickhouse-connect's
  HTTP client; the stand-in's RSS is sampled too and reported apart.

Each consumer (guardtrace's, then the bare loop's) gets a fresh store, its own consumer
group, and so all the records.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import REPO, RssSampler, consumer_args, log, run_consumer_process

EMBEDDED = "embedded"
SERVER = "server"
STORES = (EMBEDDED, SERVER)
# --store's choices: one kind, or both in the same run.
STORE_CHOICES = (*STORES, "both")
STORE_LABELS = {EMBEDDED: "embedded ClickHouse (chDB in the consumer's process)",
                SERVER: "ClickHouse over HTTP (stand-in server, its own process)"}


def stores_of(choice: str) -> tuple[str, ...]:
    """The stores a ``--store`` choice runs, embedded first."""
    return STORES if choice == "both" else (choice,)


@dataclass(frozen=True)
class ConsumerRun:
    """One consumer process: its JSON result and its peak RSS (whole and anonymous)."""

    result: dict[str, Any]
    peak_rss_mb: float
    peak_anon_mb: float
    server_peak_rss_mb: float | None = None  # the stand-in's, for the server store


def consume(store: str, mode: str, tmp: Path, bootstrap: str, topics: Any, *,
            batch_rows: int, timeout_s: float, extra: Sequence[str] = ()) -> ConsumerRun:
    """Run ``_consume.py --mode MODE`` to completion into a fresh store of kind ``store``."""
    directory = tmp / f"store-{store}-{mode}"
    if store == EMBEDDED:
        result, rss, anon = run_consumer_process(consumer_args(
            mode, directory, bootstrap, topics, batch_rows=batch_rows, extra=extra), timeout_s)
        return ConsumerRun(result, rss, anon)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests.support, where the stand-in lives
    from tests.support.clickhouse_http_standin import running_standin

    with running_standin(directory, log_path=tmp / f"standin-{mode}.log") as server, \
            RssSampler(server.process.pid) as server_rss:
        log(f"{mode} consumer -> the HTTP stand-in at {server.url}")
        result, rss, anon = run_consumer_process(consumer_args(
            mode, server.url, bootstrap, topics, batch_rows=batch_rows, extra=extra),
            timeout_s)
    return ConsumerRun(result, rss, anon, max(server_rss.peak_hwm_kb,
                                              server_rss.peak_rss_kb) / 1024)
