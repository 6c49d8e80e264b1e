"""Memory of ``guardtrace up --demo`` over a long run at 10x the demo rate: flat, or not.

    .venv/bin/python benchmarks/soak.py              # 30 minutes
    .venv/bin/python benchmarks/soak.py --quick      # 4 minutes (smoke)

Runs ``guardtrace up --demo --demo-rate <10 x DEMO_RATE>`` as a user would (a process of
its own, free ports, a temporary directory for its store and logs, so the user's store is
not touched) and samples every 10 s, from /proc, the resident memory of:

- the proxy on the public broker port (``tansu proxy``),
- the brokers behind it (``tansu broker``: the current one, plus the old one while it is
  drained during a rotation), followed across rotations,
- the up process itself (consumer, dashboard, API, the embedded store).

The embedded broker keeps every record in memory; up replaces it by a fresh one past
``GUARDTRACE_EMBEDDED_BROKER_MAX_RSS_MB``. The soak sets that limit (``--limit-mb``,
default 48 MB) so that rotations come every minute or two at this rate, five or more in
each quarter of the run: measured before choosing it, a broker grows by about 20 MB a
minute at 40 requests/s, from about 17 MB when it starts.

Flatness, the targets: the broker's memory is a sawtooth (it grows, then a fresh broker
replaces it), so neither the last half's max/min nor its mean against its first sample
says whether it is bounded. The figure used for the brokers and for up alike: the mean
of the last quarter of the samples over the mean of the third quarter (the two halves of
the run's last half); flat means at most 1.10. The brokers' peak over the last half is
also held against the limit (a rotation takes a few seconds to drain, so some overshoot
is expected), and the requests stored per second in the last quarter against the first
quarter show that traffic kept flowing through the rotations.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

from _common import Report, log

from guardtrace.cli.up import DEMO_RATE
from guardtrace.schemas import environment_variables as env
from guardtrace.transport.broker import free_port
from guardtrace.transport.broker_rotation import read_rss_bytes

MB = 1024 * 1024
TARGET_FLAT_RATIO = 1.10
TARGET_PEAK_OVER_LIMIT = 1.5
TARGET_TRAFFIC_RATIO = 0.9
ROTATED = "embedded broker rotated"


@dataclass
class Sample:
    """Resident memory (MB) of each role at one instant, ``t_s`` into the run."""

    t_s: float
    proxy: float
    brokers: float
    broker_count: int
    up: float
    simulator: float
    rotations: int


@dataclass
class Processes:
    """The up process and, found anew at each sample, its children by role."""

    up: subprocess.Popen[bytes]
    roles: dict[str, list[int]] = field(default_factory=dict)

    def children(self) -> dict[str, list[int]]:
        roles: dict[str, list[int]] = {"proxy": [], "broker": [], "simulator": []}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue  # exited meanwhile
            # The parent's pid follows the command name, which may contain spaces.
            if int(stat.rsplit(")", 1)[1].split()[1]) != self.up.pid:
                continue
            words = [part.decode(errors="replace") for part in command]
            if any(w.endswith("tansu") for w in words) and "proxy" in words:
                roles["proxy"].append(int(entry.name))
            elif any(w.endswith("tansu") for w in words) and "broker" in words:
                roles["broker"].append(int(entry.name))
            elif "simulate" in words:
                roles["simulator"].append(int(entry.name))
        return roles


def _rss_mb(pids: list[int]) -> float:
    return sum((read_rss_bytes(pid) or 0) for pid in pids) / MB


def _quarter_ratio(values: list[float]) -> float:
    """Mean of the last quarter over the mean of the third quarter."""
    n = len(values)
    third, last = values[n // 2: 3 * n // 4], values[3 * n // 4:]
    if not third or not last or not mean(third):
        return float("nan")
    return mean(last) / mean(third)


def _wait_until_up(log_path: Path, up: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if "Ctrl-C stops everything" in log_path.read_text(errors="replace"):
            return
        if up.poll() is not None:
            break
        time.sleep(0.5)
    raise SystemExit(f"guardtrace up did not come up; see {log_path}:\n"
                     + log_path.read_text(errors="replace")[-3000:])


def _stored_rates(store: Path, started: float, ended: float) -> tuple[float, float]:
    """Requests stored per second in the first and in the last quarter of the run."""
    from guardtrace.store.connection import StoreConfig, open_client

    config = StoreConfig.resolve(url=f"chdb://{store}")
    client = open_client(config)
    quarter = (ended - started) / 4

    def rate(since: float, until: float) -> float:
        rows = client.query(
            f"SELECT uniqExact(request_id) FROM {config.database}.spans WHERE request_id != '' "
            "AND start_time >= fromUnixTimestamp64Milli({since:Int64}) "
            "AND start_time < fromUnixTimestamp64Milli({until:Int64})",
            parameters={"since": int(since * 1000), "until": int(until * 1000)}).result_rows
        return float(rows[0][0]) / quarter

    return rate(started, started + quarter), rate(ended - quarter, ended)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="run time (default 30)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 minutes")
    parser.add_argument("--rate", type=float, default=10 * DEMO_RATE,
                        help=f"demo requests/s (default {10 * DEMO_RATE:g}, 10x the demo's)")
    parser.add_argument("--limit-mb", type=int, default=48,
                        help=f"{env.EMBEDDED_BROKER_MAX_RSS_MB.name} for the run (default 48)")
    parser.add_argument("--every", type=float, default=10.0, help="sampling period, s")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.quick:
        args.minutes = min(args.minutes, 4.0)
    report = Report("soak", {"minutes": args.minutes, "rate": args.rate,
                             "limit_mb": args.limit_mb, "every_s": args.every})

    tmp = Path(tempfile.mkdtemp(prefix="guardtrace-soak-"))
    up_log = tmp / "up.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GUARDTRACE_")}
    environ[env.CLICKHOUSE_URL.name] = f"chdb://{tmp / 'store'}"
    environ[env.EMBEDDED_BROKER_MAX_RSS_MB.name] = str(args.limit_mb)
    ports = [str(free_port()) for _ in range(3)]
    with open(up_log, "wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "guardtrace.cli", "up", "--demo", "--demo-rate",
             f"{args.rate:g}", "--port", ports[0], "--api-port", ports[1], "--broker-port",
             ports[2]], cwd=tmp, env=environ, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    processes = Processes(up)
    samples: list[Sample] = []
    try:
        _wait_until_up(up_log, up, 180)
        started = time.time()
        log(f"up is serving (log: {up_log}); sampling every {args.every:g} s for "
            f"{args.minutes:g} min")
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline:
            if up.poll() is not None:
                raise SystemExit(f"guardtrace up exited with {up.returncode}; see {up_log}")
            roles = processes.children()
            text = up_log.read_text(errors="replace")
            sample = Sample(round(time.time() - started, 1), _rss_mb(roles["proxy"]),
                            _rss_mb(roles["broker"]), len(roles["broker"]),
                            _rss_mb([up.pid]), _rss_mb(roles["simulator"]),
                            text.count(ROTATED))
            samples.append(sample)
            log(f"t={sample.t_s:6.0f}s broker {sample.brokers:6.1f} MB ({sample.broker_count}) "
                f"proxy {sample.proxy:5.1f} MB up {sample.up:6.1f} MB "
                f"rotations {sample.rotations}")
            time.sleep(max(0.0, args.every - (time.time() - started - sample.t_s)))
        ended = time.time()
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(120)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
    log(f"up stopped with status {up.returncode}")
    first_rate, last_rate = _stored_rates(tmp / "store", started, ended)

    brokers = [s.brokers for s in samples]
    ups = [s.up for s in samples]
    last_half = samples[len(samples) // 2:]
    rotations = samples[-1].rotations if samples else 0
    report.table("resident memory over time (MB), one row a minute",
                 ["t (min)", "proxy", "brokers", "#", "up", "simulator", "rotations"],
                 [[round(s.t_s / 60, 1), s.proxy, s.brokers, s.broker_count, s.up,
                   s.simulator, s.rotations]
                  for i, s in enumerate(samples) if i % max(1, round(60 / args.every)) == 0
                  or i == len(samples) - 1])
    broker_ratio = _quarter_ratio(brokers)
    up_ratio = _quarter_ratio(ups)
    broker_peak = max(s.brokers for s in last_half)
    report.figures.update({
        "rotations": rotations,
        "broker_mb": {"first": brokers[0], "peak": max(brokers),
                      "last_half_peak": broker_peak,
                      "last_half_mean": mean(s.brokers for s in last_half),
                      "last_quarter_over_third": broker_ratio},
        "up_mb": {"first": ups[0], "peak": max(ups),
                  "last_half_min": min(s.up for s in last_half),
                  "last_half_max": max(s.up for s in last_half),
                  "last_half_mean": mean(s.up for s in last_half),
                  "last_quarter_over_third": up_ratio},
        "proxy_mb": {"first": samples[0].proxy, "last": samples[-1].proxy},
        "stored_requests_per_s": {"first_quarter": first_rate, "last_quarter": last_rate},
        "samples": [[s.t_s, round(s.brokers, 1), round(s.up, 1), round(s.proxy, 1),
                     s.rotations] for s in samples],
    })
    report.target("broker RSS, last quarter mean / third quarter mean", broker_ratio, "<=",
                  TARGET_FLAT_RATIO)
    report.target("up (consumer) RSS, last quarter mean / third quarter mean", up_ratio, "<=",
                  TARGET_FLAT_RATIO)
    report.target("broker RSS peak over the last half / rotation limit",
                  broker_peak / args.limit_mb, "<=", TARGET_PEAK_OVER_LIMIT)
    report.target("rotations during the run", rotations, ">=", 1)
    report.target("requests stored per s, last quarter / first quarter",
                  last_rate / first_rate if first_rate else float("nan"), ">=",
                  TARGET_TRAFFIC_RATIO)
    report.notes.append(f"up's log: {up_log}" if args.keep else "temporary directory removed")
    if not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
