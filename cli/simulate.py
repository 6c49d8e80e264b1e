"""``guardtrace simulate``: the traffic generator on the command line.

Registered by :mod:`guardtrace.cli` through :func:`register`. The command configures the
collectors (Kafka by default, ``GUARDTRACE_*`` variables apply), runs
:func:`~guardtrace.simulator.runner.run_simulation` until its limits or SIGINT/SIGTERM,
shuts telemetry down (which flushes it), and prints one JSON summary line on stdout.
Exit status: 0, or 1 when telemetry was dropped or could not be flushed (the summary is
printed first), or 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from typing import Any

from ..schemas import environment_variables as env
from ..simulator.defaults import (
    DEFAULT_AGENTS,
    DEFAULT_MODULES,
    DEFAULT_RATE,
    DEFAULT_REQUESTS,
    DEFAULT_SEED,
)
from .support import (
    CommandError,
    add_kafka_args,
    int_at_least,
    positive_float,
    positive_int,
    progress,
)

__all__ = ["register"]

_SERVICE_NAME = "guardtrace-simulator"
_FLUSH_TIMEOUT_S = 30.0
_SHUTDOWN_TIMEOUT_S = 10.0
_UNLIMITED = ("unlimited", "max")


_DESCRIPTION = """\
A TRAFFIC GENERATOR for demos and tests; the guard hooks never use it.

A simulated fleet of agents runs the real guard hooks and emits through the configured
pipeline (Kafka by default; GUARDTRACE_* variables apply): plans that invent tools (a
long tail of names, so the agent label cap shows __other__) and recover or fail, replies
that fabricate actions or loop, hallucination-prone questions through forced
verification, and 1-200 KB debug payloads, some with fake secrets to redact. The same
seed gives the same traffic; request ids are new on every run.

Prints one JSON summary line on stdout (requests, span events per event name, payloads,
outcomes, drops) and a progress bar on stderr when it is a terminal. SIGINT/SIGTERM stop
cleanly (flush, summary, exit 0). Exits 1 if telemetry was dropped or could not be
flushed (is Kafka reachable?)."""


# argparse type of ``--requests``: a whole number, 0 meaning no limit.
requests_count = int_at_least(0, "no limit")


def rate(text: str) -> float | None:
    """argparse type of ``--rate``: requests per second, or ``unlimited`` (None)."""
    if text.strip().lower() in _UNLIMITED:
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected requests per second or 'unlimited', got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(
            f"expected a positive number of requests per second or 'unlimited', got {text}")
    return value


def register(subparsers: Any) -> None:
    """Add the ``simulate`` parser to ``guardtrace``'s subcommands."""
    p = subparsers.add_parser(
        "simulate", help="traffic generator: a simulated agent fleet (demos and tests)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_DESCRIPTION,
        epilog="examples:\n"
               "  guardtrace simulate --requests 200 --rate unlimited\n"
               "  guardtrace simulate --requests 0 --rate 5          # until Ctrl-C\n"
               "  GUARDTRACE_AGENT_LABEL_CAP=100 guardtrace simulate --requests 3000")
    add_kafka_args(p)
    p.add_argument("--requests", type=requests_count, default=DEFAULT_REQUESTS, metavar="N",
                   help=f"requests to simulate; 0 = no limit (default {DEFAULT_REQUESTS})")
    p.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                   help="stop after SECONDS (with --requests, whichever comes first)")
    p.add_argument("--rate", type=rate, default=DEFAULT_RATE, metavar="R",
                   help=f"requests per second, or 'unlimited' (default {DEFAULT_RATE:g})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"traffic seed: same seed, same traffic (default {DEFAULT_SEED})")
    p.add_argument("--agents", type=positive_int, default=DEFAULT_AGENTS,
                   help=f"agents in the fleet (default {DEFAULT_AGENTS})")
    p.add_argument("--modules", type=positive_int, default=DEFAULT_MODULES,
                   help=f"modules the agents are spread over, the `module` label "
                        f"(default {DEFAULT_MODULES})")
    p.set_defaults(func=cmd_simulate)


def _service_name() -> str:
    from opentelemetry.sdk.environment_variables import OTEL_SERVICE_NAME

    return env.read_str(env.SERVICE_NAME) or os.environ.get(OTEL_SERVICE_NAME) or _SERVICE_NAME


class _Progress:
    """The progress bar: requests done of N, or seconds of the duration."""

    def __init__(self, duration_s: float | None) -> None:
        self._duration = duration_s
        self._started = time.monotonic()
        self._open = False

    def __call__(self, done: int, total: int | None) -> None:
        if total is None and self._duration is not None:
            done = min(int(time.monotonic() - self._started), int(self._duration))
            total = int(self._duration)
        if total:
            progress(done, total)
            self._open = done < total

    def close(self) -> None:
        # A run stopped early leaves the bar's line open; end it before the summary.
        if self._open and sys.stderr.isatty():
            sys.stderr.write("\n")


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run the simulation, print the summary; 1 if telemetry was lost, 2 on bad args."""
    from .. import collectors
    from ..simulator.catalog import module_names
    from ..simulator.observe import drop_totals
    from ..simulator.runner import SimulationConfig, run_simulation

    if args.modules > args.agents:
        print(f"guardtrace simulate: error: argument --modules: at most --agents "
              f"({args.agents}), got {args.modules}", file=sys.stderr)
        return 2
    if not args.verbose:
        # The simulated agents' own log lines (a WARNING per detection) would bury the
        # generator's output; -v shows them.
        for module in module_names(args.modules):
            logging.getLogger(f"guardtrace.{module}").setLevel(logging.CRITICAL)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    # Installed first: a supervisor (`guardtrace up --demo`) may SIGTERM at any moment,
    # and the run must still end with a flush and a summary.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        drops_before = drop_totals()
        telemetry = collectors.configure(kafka_bootstrap=args.bootstrap,
                                         service_name=_service_name())
        if telemetry.tracer_provider is None:
            collectors.shutdown(_SHUTDOWN_TIMEOUT_S)
            raise CommandError(f"simulate needs spans to go somewhere: set "
                               f"{env.EXPORTER.name} to kafka or otlp, not "
                               f"{telemetry.config.exporter!r}")
        config = SimulationConfig(
            requests=args.requests, duration_s=args.duration, rate=args.rate, seed=args.seed,
            agents=args.agents, modules=args.modules,
            flush_queue_bytes=max(1, telemetry.config.payload_queue_bytes // 4))
        bar = _Progress(args.duration)
        try:
            summary = run_simulation(config, stop, bar,
                                     flush=lambda: telemetry.force_flush(_FLUSH_TIMEOUT_S))
        finally:
            bar.close()
            collectors.shutdown(_SHUTDOWN_TIMEOUT_S)
        # Drops found by the shutdown's own flush count too.
        dropped = {k: v - drops_before.get(k, 0) for k, v in drop_totals().items()
                   if v - drops_before.get(k, 0)}
        summary = replace(summary, dropped=dropped)
        print(json.dumps(summary.to_dict()), flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not summary.ok:
        problem = summary.dropped or "flush timed out"
        raise CommandError(f"telemetry was dropped or not flushed ({problem}); is Kafka "
                           f"reachable at {telemetry.config.kafka_bootstrap}?")
    return 0
