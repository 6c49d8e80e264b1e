"""`guardtrace consume --health-port`: the probes Kubernetes and compose use, end to end.

A real consumer process (own chDB store, the session's Tansu broker) serves the health
endpoints; the test reads them over HTTP as kubelet would, then stops it with SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from guardtrace.transport.broker import EmbeddedBroker, free_port
from guardtrace.transport.topics import TopicSet
from tests.support.health_http import get_json

from .conftest import wait_for


def probe(port: int, path: str) -> tuple[int, dict[str, Any]] | None:
    """(status, JSON body), or None while nothing listens yet."""
    try:
        return get_json(port, path, timeout_s=2)
    except OSError:
        return None


def test_consume_serves_healthz_and_readyz_until_sigterm(broker: EmbeddedBroker,
                                                         tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    port = free_port()
    env = dict(os.environ)
    env.update({
        "GUARDTRACE_KAFKA_BOOTSTRAP": broker.bootstrap,
        "GUARDTRACE_CLICKHOUSE_URL": f"chdb://{tmp_path / 'store'}",
        **TopicSet.named("health-", suffix).environment(),
        "GUARDTRACE_CONSUMER_GROUP": f"health-group-{suffix}",
        # The variable, as the deploy files set it; the flag is covered by --help.
        "GUARDTRACE_HEALTH_PORT": str(port),
    })
    consumer = subprocess.Popen([sys.executable, "-m", "guardtrace.cli", "consume", "--migrate"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    try:
        ready = wait_for(lambda: (probe(port, "/readyz") or (0, {}))[0] == 200
                         or consumer.poll() is not None,
                         timeout_s=90, message="/readyz to answer 200")
        assert ready and consumer.poll() is None, consumer.communicate(timeout=10)
        code, body = probe(port, "/healthz")  # type: ignore[misc]
        assert code == 200
        assert body["status"] == "ok"
        assert body["seconds_since_poll"] < 30
        assert body["stats"]["records"] == 0
        assert probe(port, "/nope")[0] == 404  # type: ignore[index]
    finally:
        if consumer.poll() is None:
            consumer.send_signal(signal.SIGTERM)
        out, err = consumer.communicate(timeout=60)
    assert consumer.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["records"] == 0
    assert probe(port, "/healthz") is None  # the port is released on exit


def test_consume_help_names_the_flag_and_the_variable() -> None:
    result = subprocess.run([sys.executable, "-m", "guardtrace.cli", "consume", "--help"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert "--health-port PORT" in result.stdout
    assert "GUARDTRACE_HEALTH_PORT" in result.stdout
