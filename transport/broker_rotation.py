"""The embedded broker with bounded memory: a proxy on the public port, brokers behind it.

Tansu keeps every record in memory and honours no retention (``retention.ms`` is
ignored, DeleteRecords drops the connection), so a broker left running grows for good.
:class:`RotatingBroker` serves the public port with ``tansu proxy`` in front of a broker
on a private port; when that broker's resident memory passes a limit, a fresh broker
takes its place:

1. a new broker starts on a new private port, with every topic created on it;
2. the proxy is replaced by one (same public port) whose origin is the new broker:
   producers see a dropped connection and send their unacknowledged batches again, to
   the new broker; the old one gets no more writes;
3. the owner's consumer, which reads the old broker directly, commits its log ends;
4. the owner reopens its consumer on the new broker (a new broker has no committed
   offsets: it reads from the earliest);
5. the old broker stops.

A batch the old broker had stored before its connection dropped is sent again to the new
one: a duplicate that the store collapses (rows have deterministic identities). If the
consumer does not drain the old broker in time, it is kept and drained later: nothing
accepted is given up.

Producers must not be idempotent: an idempotent producer's id and sequence numbers live
on the broker that issued them, the new broker refuses them, and Tansu answers the epoch
bump that kafka-python then asks for with an error kafka-python takes as fatal.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..schemas.transport_security import KafkaSecurity
from .broker import (
    BrokerError,
    EmbeddedBroker,
    free_port,
    port_in_use,
    stop_process,
    tansu_binary,
)
from .lag import read_consumer_lag
from .topics import DEFAULT_PARTITIONS, TopicSet, ensure_topics

__all__ = ["BrokerProxy", "RotatingBroker", "Rotation", "parse_vm_rss", "read_rss_bytes",
           "should_rotate"]

logger = logging.getLogger("guardtrace.transport")

_MB = 1024 * 1024
# A port just released by the old proxy is normally free at once (Tansu's listener sets
# SO_REUSEADDR); this bounds the wait when it is not.
_REBIND_TIMEOUT_S = 5.0
_DRAIN_POLL_S = 0.5


def parse_vm_rss(status: str) -> int:
    """Resident memory in bytes from the text of ``/proc/<pid>/status``.

    Raises:
        ValueError: the text has no well-formed ``VmRSS`` line.
    """
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            fields = line.split()
            if len(fields) == 3 and fields[1].isdigit() and fields[2] == "kB":
                return int(fields[1]) * 1024
            raise ValueError(f"unexpected VmRSS line in /proc status: {line!r}")
    raise ValueError("no VmRSS line in /proc status (a kernel thread, or not Linux?)")


def read_rss_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` in bytes; None when it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return parse_vm_rss(status)


def should_rotate(rss_bytes: int | None, limit_bytes: int, draining: bool) -> bool:
    """Whether to replace the broker: over the limit (0: never) and none being drained."""
    return bool(limit_bytes) and not draining and rss_bytes is not None \
        and rss_bytes > limit_bytes


class BrokerProxy:
    """``tansu proxy`` on 127.0.0.1:``port``, forwarding to a broker on ``origin_port``.

    It advertises its own address, so clients that bootstrap to it send everything
    through it.
    """

    def __init__(self, port: int, origin_port: int, log_path: Path | None = None) -> None:
        self.port = port
        self.origin_port = origin_port
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, timeout_s: float = 10.0) -> BrokerProxy:
        """Start the proxy and wait until it accepts connections.

        Raises:
            BrokerError: the port stayed taken, or the proxy exited or did not come up.
        """
        deadline = time.monotonic() + timeout_s
        url = f"tcp://127.0.0.1:{self.port}"
        out = open(self.log_path, "ab") if self.log_path else None
        try:
            while True:
                # The same session rule as the broker's: only the owner stops it.
                self._process = subprocess.Popen(
                    [str(tansu_binary()), "proxy", "--listener-url", url,
                     "--advertised-listener-url", url,
                     "--origin-url", f"tcp://127.0.0.1:{self.origin_port}"],
                    stdout=out if out is not None else subprocess.DEVNULL,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
                while time.monotonic() < deadline and self._process.poll() is None:
                    if port_in_use(self.port):
                        return self
                    time.sleep(0.01)
                if self._process.poll() is None or time.monotonic() >= deadline:
                    break
                # Exited at once: the port is not free yet (the old proxy's socket).
                time.sleep(0.1)
        finally:
            if out is not None:
                out.close()  # the child has its own copy
        self.stop()
        raise BrokerError(f"the embedded broker's proxy did not listen on port {self.port} "
                          f"within {timeout_s:.0f}s"
                          + (f"; see {self.log_path}" if self.log_path else ""))

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the proxy (SIGTERM, then SIGKILL after the timeout)."""
        process, self._process = self._process, None
        stop_process(process, timeout_s)

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None


@dataclass(frozen=True)
class Rotation:
    """One replaced broker: its port, its successor's, its size, what was drained."""

    old_port: int
    new_port: int
    rss_before_bytes: int | None
    records_drained: int
    seconds: float

    def describe(self) -> str:
        rss = (f"{self.rss_before_bytes / _MB:.0f} MB" if self.rss_before_bytes is not None
               else "unknown")
        return (f"embedded broker rotated: port {self.old_port} -> {self.new_port} (RSS "
                f"{rss} before), {self.records_drained:,} records drained, "
                f"{self.seconds:.1f} s")


class RotatingBroker:
    """The embedded broker of ``guardtrace up``: a proxy on ``port``, brokers behind it.

    Args:
        port: The public port (agents, the simulator and the dashboard bootstrap here).
        topics: The topics every broker gets.
        rss_limit_bytes: Replace the broker when its resident memory passes this; 0 never.
        log_path: Where the brokers' and proxies' output goes (default: discarded).
        partitions: Partitions of each topic.
        security: The admin and lag clients' settings (the embedded broker is plaintext).
    """

    def __init__(self, port: int, topics: TopicSet, rss_limit_bytes: int,
                 log_path: Path | None = None, partitions: int = DEFAULT_PARTITIONS,
                 security: KafkaSecurity | None = None) -> None:
        self.port = port
        self.topics = topics
        self.rss_limit_bytes = rss_limit_bytes
        self.log_path = log_path
        self.partitions = partitions
        self.security = security
        self.current: EmbeddedBroker | None = None
        # The broker that producers left and the consumer has not drained yet.
        self.retiring: EmbeddedBroker | None = None
        self._retiring_rss: int | None = None
        self._retiring_since = 0.0
        self.proxy: BrokerProxy | None = None
        self.rotations: list[Rotation] = []
        # Held by a rotation and by stop(), so a shutdown never meets half a rotation.
        self.lock = threading.RLock()

    @property
    def bootstrap(self) -> str:
        """The public address, through the proxy."""
        return f"127.0.0.1:{self.port}"

    @property
    def internal_bootstrap(self) -> str:
        """The current broker's own address (the owner's consumer reads it directly)."""
        assert self.current is not None, "start() first"
        return self.current.bootstrap

    def _new_broker(self) -> EmbeddedBroker:
        broker = EmbeddedBroker(free_port(), log_path=self.log_path).start()
        try:
            ensure_topics(broker.bootstrap, self.topics, partitions=self.partitions,
                          security=self.security)
        except BaseException:
            broker.stop()
            raise
        return broker

    def start(self) -> RotatingBroker:
        """Start a broker and the proxy in front of it.

        Raises:
            BrokerError: the public port is taken, or a process did not come up.
            KafkaUnreachable: the new broker did not create the topics.
        """
        if port_in_use(self.port):
            raise BrokerError(
                f"port {self.port} on 127.0.0.1 is already in use (another broker?). "
                f"Use that broker via GUARDTRACE_KAFKA_BOOTSTRAP=127.0.0.1:{self.port}, "
                f"stop it, or pick another port with --broker-port.")
        self.current = self._new_broker()
        try:
            self.proxy = BrokerProxy(self.port, self.current.port, self.log_path).start()
        except BaseException:
            self.current.stop()
            raise
        return self

    def broker_rss(self) -> int | None:
        """Resident memory of the current broker in bytes (None: not running)."""
        pid = self.current.pid if self.current is not None else None
        return read_rss_bytes(pid) if pid is not None else None

    def pids(self) -> dict[str, int]:
        """The running processes by role: ``proxy``, ``broker`` and, while one is
        drained, ``retiring``."""
        roles = {"proxy": self.proxy.pid if self.proxy else None,
                 "broker": self.current.pid if self.current else None,
                 "retiring": self.retiring.pid if self.retiring else None}
        return {role: pid for role, pid in roles.items() if pid is not None}

    def due(self) -> bool:
        """Whether a rotation should begin now (memory over the limit, none under way)."""
        return should_rotate(self.broker_rss(), self.rss_limit_bytes,
                             self.retiring is not None)

    def switch(self) -> None:
        """Steps 1 and 2: a new broker behind a new proxy; the old one kept to drain.

        Raises:
            BrokerError, KafkaUnreachable: the new broker did not come up (the old one
                still serves, behind the old proxy).
        """
        with self.lock:
            assert self.current is not None and self.proxy is not None, "start() first"
            if self.retiring is not None:
                raise RuntimeError("a rotation is already under way")
            rss = self.broker_rss()
            fresh = self._new_broker()
            self.proxy.stop()
            try:
                self.proxy = BrokerProxy(self.port, fresh.port, self.log_path).start(
                    _REBIND_TIMEOUT_S)
            except BaseException:
                # Serve the old broker again rather than nothing.
                fresh.stop()
                self.proxy = BrokerProxy(self.port, self.current.port, self.log_path).start(
                    _REBIND_TIMEOUT_S)
                raise
            self.retiring, self.current = self.current, fresh
            self._retiring_rss, self._retiring_since = rss, time.monotonic()

    def drained(self, group: str, topics: Sequence[str]) -> int | None:
        """Step 3's check: the records of the retiring broker, once ``group`` has
        committed all of them; None while it has not (or the broker did not answer)."""
        assert self.retiring is not None, "no rotation under way"
        lag = read_consumer_lag(self.retiring.bootstrap, group, topics, self.security)
        if lag.error is not None or lag.total:
            return None
        return sum(int(row["log end"]) for row in lag.partitions)

    def wait_drained(self, group: str, topics: Sequence[str], timeout_s: float,
                     cancel: threading.Event | None = None) -> int | None:
        """Poll :meth:`drained` until it answers, ``timeout_s`` pass or ``cancel`` is set."""
        deadline = time.monotonic() + timeout_s
        while True:
            records = self.drained(group, topics)
            if records is not None or time.monotonic() >= deadline:
                return records
            if cancel is not None and cancel.wait(_DRAIN_POLL_S):
                return None
            if cancel is None:
                time.sleep(_DRAIN_POLL_S)

    def retire(self, records_drained: int) -> Rotation:
        """Step 5: stop the drained broker; returns the rotation, also logged."""
        with self.lock:
            assert self.retiring is not None and self.current is not None
            old, self.retiring = self.retiring, None
            old.stop()
            rotation = Rotation(old.port, self.current.port, self._retiring_rss,
                                records_drained, time.monotonic() - self._retiring_since)
            self.rotations.append(rotation)
        logger.info("%s", rotation.describe())
        return rotation

    def rotate(self, group: str, topics: Sequence[str], reopen_consumer: Callable[[str], None],
               drain_timeout_s: float = 30.0,
               cancel: threading.Event | None = None) -> Rotation | None:
        """All five steps, or the rest of a rotation whose drain timed out before.

        Args:
            group: The consumer group that must drain the old broker.
            topics: The topics it reads.
            reopen_consumer: Stops the owner's consumer after its batch and starts it
                again on the address it is given (the new broker's own).
            drain_timeout_s: How long to wait for the drain this time.
            cancel: Set by a shutdown: stop waiting.

        Returns:
            The rotation, or None when the old broker is not drained yet (it is kept;
            call again later).
        """
        with self.lock:
            if self.retiring is None:
                self.switch()
            records = self.wait_drained(group, topics, drain_timeout_s, cancel)
            if records is None:
                if cancel is None or not cancel.is_set():
                    logger.warning(
                        "embedded broker rotation: the consumer has not committed everything "
                        "on the old broker (port %d) within %.0f s; it is kept and drained "
                        "later", self.retiring.port if self.retiring else -1, drain_timeout_s)
                return None
            reopen_consumer(self.internal_bootstrap)
            return self.retire(records)

    def alive(self) -> bool:
        """True while the proxy and every broker it needs are running."""
        return (self.proxy is not None and self.proxy.alive()
                and self.current is not None and self.current.alive()
                and (self.retiring is None or self.retiring.alive()))

    def stop(self) -> None:
        """Stop the proxy, then the brokers."""
        with self.lock:
            for part in (self.proxy, self.current, self.retiring):
                if part is not None:
                    part.stop()
