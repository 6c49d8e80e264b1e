"""What the benchmark scripts share: percentiles, the human table, the final JSON line,
and the real services (a Tansu broker, chDB stores in a temporary directory).

Every script prints a human table and, as its very last line, one JSON object::

    {"benchmark": ..., "params": {...}, "figures": {...},
     "targets": [{"name", "value", "op", "target", "unit", "met"}], "all_met": bool,
     "machine": {"cpus", "loadavg_start", "loadavg_end", ...}}

Ratios are always taken against a baseline measured in the same run: these machines
are shared and noisy, and absolute figures move with the load (recorded in
``machine``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guardtrace.transport.topics import TopicSet

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent

# The real agent data (third-party, never in the repository); the tests find it through
# this function too (tests/support/realdata.py).
_WORKPLACE_REALDATA = Path("/work/shared/realdata")


def realdata_dir() -> Path:
    """``$GUARDTRACE_REALDATA``, else ``<repo>/../shared/realdata`` if it exists, else
    ``/work/shared/realdata``."""
    if os.environ.get("GUARDTRACE_REALDATA"):
        return Path(os.environ["GUARDTRACE_REALDATA"])
    beside = REPO.parent / "shared" / "realdata"
    return beside if beside.is_dir() or not _WORKPLACE_REALDATA.is_dir() else _WORKPLACE_REALDATA


# Tansu's first join of a new consumer group takes about half the session timeout.
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 1000


# -- statistics --------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; nan when empty."""
    if not values:
        return math.nan
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return float(data[low] + (data[high] - data[low]) * (rank - low))


def summarize_ns(samples_ns: Sequence[int]) -> dict[str, float]:
    """Median, p99 and mean of per-call times given in ns, in microseconds."""
    return {"median_us": round(percentile(samples_ns, 50) / 1000, 3),
            "p99_us": round(percentile(samples_ns, 99) / 1000, 3),
            "mean_us": round(sum(samples_ns) / max(1, len(samples_ns)) / 1000, 3),
            "calls": len(samples_ns)}


# -- reporting ---------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "platform": platform.platform(terse=True)}


@dataclass
class Report:
    """Collects a benchmark's figures and targets; :meth:`finish` prints both forms."""

    benchmark: str
    params: dict[str, Any]
    figures: dict[str, Any] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)
    tables: list[tuple[str, list[str], list[list[Any]]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    machine_start: dict[str, Any] = field(default_factory=machine_info)

    def table(self, title: str, headers: list[str], rows: list[list[Any]]) -> None:
        self.tables.append((title, headers, rows))

    def target(self, name: str, value: float, op: str, limit: float, unit: str = "") -> bool:
        """Record whether ``value op limit`` holds (op one of <=, <, >=, >, ==)."""
        met = {"<=": value <= limit, "<": value < limit, ">=": value >= limit,
               ">": value > limit, "==": value == limit}[op]
        if isinstance(value, float) and math.isnan(value):
            met = False
        self.targets.append({"name": name, "value": _round(value), "op": op,
                             "target": limit, "unit": unit, "met": bool(met)})
        return bool(met)

    def finish(self) -> int:
        """Print the tables, the targets and, last, the JSON line; return the exit status."""
        for title, headers, rows in self.tables:
            print_table(title, headers, rows)
        if self.targets:
            print_table("targets", ["target", "value", "", "limit", "unit", "met"],
                        [[t["name"], t["value"], t["op"], t["target"], t["unit"],
                          "met" if t["met"] else "MISSED"] for t in self.targets])
        for note in self.notes:
            print(f"note: {note}")
        load_end = [round(x, 2) for x in os.getloadavg()]
        print(f"load average at start {self.machine_start['loadavg']}, at end {load_end} "
              f"on {self.machine_start['cpus']} CPUs; wall time "
              f"{time.monotonic() - self.started:.1f} s")
        record = {"benchmark": self.benchmark, "params": self.params,
                  "figures": self.figures, "targets": self.targets,
                  "all_met": all(t["met"] for t in self.targets),
                  "notes": self.notes,
                  "machine": {**self.machine_start, "loadavg_start": self.machine_start["loadavg"],
                              "loadavg_end": load_end,
                              "wall_s": round(time.monotonic() - self.started, 2)}}
        record["machine"].pop("loadavg")
        sys.stdout.flush()
        print(json.dumps(record, sort_keys=False, default=str), flush=True)
        return 0


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) if abs(value) < 100 else round(value, 1)
    return value


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def print_table(title: str, headers: list[str], rows: list[list[Any]]) -> None:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=False))))


def log(message: str) -> None:
    """Progress to stderr, so stdout stays the table and the JSON line."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- services ----------------------------------------------------------------------------
@contextmanager
def services(partitions: int = 4, keep: bool = False) -> Iterator[tuple[Any, TopicSet, Path]]:
    """A Tansu broker on a free port with fresh topics, and a temporary directory.

    Yields ``(broker, topics, tmpdir)``; everything is stopped and removed afterwards.
    """
    from guardtrace.transport.broker import EmbeddedBroker, free_port
    from guardtrace.transport.topics import TopicSet, ensure_topics

    if threading.current_thread() is threading.main_thread():
        # Tansu is a child process: a plain SIGTERM death would orphan it.
        signal.signal(signal.SIGTERM, _raise_interrupt)
    tmp = Path(tempfile.mkdtemp(prefix="guardtrace-bench-"))
    broker = EmbeddedBroker(free_port(), log_path=tmp / "tansu.log").start()
    try:
        topics = TopicSet.named("bench-", uuid.uuid4().hex[:8])
        ensure_topics(broker.bootstrap, topics, partitions=partitions)
        yield broker, topics, tmp
    finally:
        broker.stop()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def collector_settings(bootstrap: str, topics: TopicSet, **extra: Any) -> dict[str, Any]:
    """Keyword arguments for ``guardtrace.collectors.configure`` on the benchmark topics."""
    return {"kafka_bootstrap": bootstrap, "exporter": "kafka",
            "service_name": "guardtrace-bench", "spans_topic": topics.spans,
            "metrics_topic": topics.metrics, "payloads_topic": topics.payloads,
            "logs_topic": topics.logs, "metric_export_interval_ms": 60_000, **extra}


class SdkDropCounter(logging.Handler):
    """Counts the OTel SDK's "Queue full, dropping" warnings (its span queue is bounded)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "dropping" in record.getMessage().lower():
            self.dropped += 1

    @contextmanager
    def installed(self) -> Iterator[SdkDropCounter]:
        target = logging.getLogger("opentelemetry")
        target.addHandler(self)
        try:
            yield self
        finally:
            target.removeHandler(self)


# -- the consumer in its own process -----------------------------------------------------
class RssSampler:
    """Samples a process's resident set size from /proc every ``interval_s``."""

    def __init__(self, pid: int, interval_s: float = 0.05) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.peak_rss_kb = 0
        self.peak_hwm_kb = 0
        self.peak_anon_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        path = Path(f"/proc/{self.pid}/status")
        while not self._stop.is_set():
            try:
                text = path.read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    self.peak_rss_kb = max(self.peak_rss_kb, int(line.split()[1]))
                elif line.startswith("VmHWM:"):
                    self.peak_hwm_kb = max(self.peak_hwm_kb, int(line.split()[1]))
                elif line.startswith("RssAnon:"):
                    self.peak_anon_kb = max(self.peak_anon_kb, int(line.split()[1]))
            self._stop.wait(self.interval_s)


class ConsumerProcess:
    """``benchmarks/_consume.py`` in its own process, its RSS sampled from /proc.

    The peak reported is the larger of the kernel's high-water mark (VmHWM) sampled from
    /proc and the child's own ``ru_maxrss``; the anonymous (private) part is sampled too,
    since an embedded ClickHouse maps some 200 MB of engine code into every process.
    """

    def __init__(self, args: list[str]) -> None:
        command = [sys.executable, str(BENCH_DIR / "_consume.py"), *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=REPO)
        self.sampler = RssSampler(self.process.pid).__enter__()
        self.assigned = threading.Event()
        self.stderr_lines: list[str] = []
        self._stdout: list[str] = []
        # Each pipe has one reader: communicate() beside the stderr thread would read
        # stderr from two threads at once (lines lost or run together, a closed file).
        self._readers = [threading.Thread(target=self._read_stderr, daemon=True),
                         threading.Thread(target=self._read_stdout, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        self._stdout.extend(self.process.stdout)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if line.strip() == "assigned":
                self.assigned.set()
            elif line.strip() != "ready":
                self.stderr_lines.append(line)
                sys.stderr.write(line)

    def wait_assigned(self, timeout_s: float = 60.0) -> None:
        if not self.assigned.wait(timeout_s):
            raise RuntimeError("the consumer got no partitions within "
                               f"{timeout_s:.0f} s:\n{''.join(self.stderr_lines[-20:])}")

    def finish(self, timeout_s: float) -> tuple[dict[str, Any], float, float]:
        """Wait for the result: ``(result, peak RSS MB, peak anonymous RSS MB)``."""
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"consumer process timed out after {timeout_s:.0f} s") from None
        finally:
            self.sampler.__exit__()
            for reader in self._readers:
                reader.join(5)
        if self.process.returncode != 0:
            raise RuntimeError(f"consumer process failed with status {self.process.returncode}:"
                               f"\n{''.join(self.stderr_lines[-20:])}")
        lines = [line for line in self._stdout if line.strip()]
        result = json.loads(lines[-1])
        peak_kb = max(self.sampler.peak_hwm_kb, self.sampler.peak_rss_kb,
                      int(result.get("ru_maxrss_kb", 0)))
        return result, peak_kb / 1024, self.sampler.peak_anon_kb / 1024


def add_profile_argument(parser: argparse.ArgumentParser) -> None:
    """``--profile FILE``: a pyinstrument profile of the consumer process."""
    parser.add_argument("--profile", default=None, metavar="FILE",
                        help="write a pyinstrument profile of the consumer to FILE "
                             "(needs the bench extra: pip install -e '.[bench]')")


def check_profile_argument(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``--profile`` before any work when pyinstrument is missing.

    Without this the consumer process would fail only after the emit phase, minutes in.
    """
    if args.profile and importlib.util.find_spec("pyinstrument") is None:
        parser.error("--profile needs pyinstrument, which is not installed: "
                     "pip install -e '.[bench]'")


def check_module(parser: argparse.ArgumentParser, module: str, needed_for: str,
                 instead: str = "") -> None:
    """Refuse to start when ``module`` (a package of the bench extra) is missing, before
    any work: a missing import found minutes into a run wastes the run."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a package above it is missing too
        found = False
    if not found:
        parser.error(f"{needed_for} needs {module}, which is not installed: "
                     f"pip install -e '.[bench]' (make bench does){instead}")


def run_consumer_process(args: list[str], timeout_s: float) -> tuple[dict[str, Any], float, float]:
    """Run the consumer process to completion: ``(result, peak RSS MB, peak anon MB)``."""
    return ConsumerProcess(args).finish(timeout_s)


def consumer_args(mode: str, store: Path | str, bootstrap: str, topics: TopicSet, *,
                  batch_rows: int, batch_seconds: float = 1.0, idle_s: float = 3.0,
                  extra: Sequence[str] = ()) -> list[str]:
    """``_consume.py``'s arguments; ``store`` is an embedded store's directory or a
    server's ``http://`` URL."""
    where = (["--clickhouse-url", store] if isinstance(store, str) and "://" in store
             else ["--store", str(store)])
    return ["--mode", mode, *where, "--bootstrap", bootstrap,
            "--group", f"bench-{mode}-{uuid.uuid4().hex[:8]}",
            "--spans-topic", topics.spans, "--metrics-topic", topics.metrics,
            "--payloads-topic", topics.payloads, "--logs-topic", topics.logs,
            "--dead-letter-topic", topics.dead_letters,
            "--batch-rows", str(batch_rows), "--batch-seconds", str(batch_seconds),
            "--idle-s", str(idle_s), *extra]
