"""Run ``guardtrace consume`` as its own process, with a short group session timeout.

    python -m tests.support.consumer_process --session-timeout-ms 2000 consume --until-idle 3

Everything after the options is the ``guardtrace`` command line, run by the real
``guardtrace.cli.main`` (store, migrations check, signal handling, JSON summary). The
one change: the consumer's Kafka session timeout, which the CLI leaves at its 6 s
default. A member killed with SIGKILL stays in its group until that timeout expires and
Tansu holds the next join until then, so with the default every restart of a killed
consumer costs about 12 s; with 2 s it costs about 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNNER = [sys.executable, "-m", "tests.support.consumer_process"]
GUARDTRACE = [sys.executable, "-m", "guardtrace.cli"]


def shorten_session_timeout(session_timeout_ms: int) -> None:
    """Make ``ConsumerConfig.resolve`` default to ``session_timeout_ms`` in this process.

    Args:
        session_timeout_ms: The group session timeout; heartbeats go at a third of it.
    """
    from guardtrace.consumers.config import ConsumerConfig

    resolve = ConsumerConfig.resolve.__func__  # type: ignore[attr-defined]

    def resolve_with_short_session(cls: type[ConsumerConfig], **explicit: Any) -> ConsumerConfig:
        explicit.setdefault("session_timeout_ms", session_timeout_ms)
        explicit.setdefault("heartbeat_interval_ms", max(100, session_timeout_ms // 3))
        return resolve(cls, **explicit)

    ConsumerConfig.resolve = classmethod(resolve_with_short_session)  # type: ignore[method-assign]


def store_env(bootstrap: str, store: Path, suffix: str, **extra: str) -> dict[str, str]:
    """Environment of a ``guardtrace`` process with its own store, topics and group.

    Args:
        bootstrap: Kafka bootstrap servers.
        store: The chDB directory (no other process may hold it while this one runs).
        suffix: Makes the topic and group names unique to the test.
        **extra: More ``GUARDTRACE_*`` variables.
    """
    from guardtrace.transport.topics import TopicSet

    env = dict(os.environ)
    env.update({
        "GUARDTRACE_KAFKA_BOOTSTRAP": bootstrap,
        "GUARDTRACE_CLICKHOUSE_URL": f"chdb://{store}",
        **TopicSet.named("", suffix).environment(),
        "GUARDTRACE_CONSUMER_GROUP": f"group-{suffix}",
        "GUARDTRACE_LOG_LEVEL": "INFO",
        **extra,
    })
    return env


def run_guardtrace(args: Sequence[str], env: dict[str, str],
                   timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real ``guardtrace`` command to completion."""
    return subprocess.run([*GUARDTRACE, *args], env=env, cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout_s, check=False)


class ConsumerProcess:
    """One ``guardtrace consume`` process, its output in a log file.

    Args:
        env: Its environment (see :func:`store_env`).
        log_path: Where its stdout and stderr go.
        args: Extra ``consume`` arguments (``--until-idle 3``).
        session_timeout_ms: Its group session timeout.
    """

    def __init__(self, env: dict[str, str], log_path: Path, args: Sequence[str] = (),
                 session_timeout_ms: int = 2000) -> None:
        self.log_path = log_path
        # Open for the process's lifetime (closed by kill/wait), not a with-block.
        self._log = open(log_path, "w")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [*RUNNER, "--session-timeout-ms", str(session_timeout_ms), "consume", *args],
            env=env, cwd=REPO_ROOT, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_assigned(self, timeout_s: float = 90) -> float:
        """Wait until the consumer has joined its group; return seconds since start.

        Raises:
            AssertionError: it exited first, or the timeout passed.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "assigned partitions" in self.output():
                return time.monotonic() - self.started
            if self.process.poll() is not None:
                raise AssertionError(f"consumer {self.pid} exited with "
                                     f"{self.process.returncode}:\n{self.output()[-3000:]}")
            time.sleep(0.05)
        raise AssertionError(f"consumer {self.pid} not assigned partitions in {timeout_s}s:\n"
                             f"{self.output()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: no signal handler, no final flush, no commit, no clean close."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._log.close()

    def wait(self, timeout_s: float) -> dict[str, Any]:
        """Wait for a clean exit; return the JSON summary it printed.

        Raises:
            AssertionError: it failed, or printed no summary.
        """
        try:
            code = self.process.wait(timeout=timeout_s)
        finally:
            if self.process.poll() is None:
                self.kill()
        self._log.close()
        output = self.output()
        assert code == 0, f"consumer {self.pid} exited with {code}:\n{output[-3000:]}"
        summaries = [line for line in output.splitlines() if line.startswith("{")]
        assert summaries, f"consumer {self.pid} printed no summary:\n{output[-3000:]}"
        return json.loads(summaries[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.consumer_process")
    parser.add_argument("--session-timeout-ms", type=int, default=2000)
    options, cli_args = parser.parse_known_args(argv)
    shorten_session_timeout(options.session_timeout_ms)
    from guardtrace.cli import main as guardtrace_main

    return guardtrace_main(cli_args)


if __name__ == "__main__":
    sys.exit(main())
