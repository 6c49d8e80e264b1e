"""The CLI as an operator runs it: separate processes, a store of their own.

chDB allows one store directory per process, so these tests drive `guardtrace` in
subprocesses with their own store and read results back through `guardtrace stats`.
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

import pytest
from kafka import KafkaAdminClient

from guardtrace.transport.broker import EmbeddedBroker
from guardtrace.transport.topics import TopicSet, ensure_topics

from .conftest import wait_for

CLI = [sys.executable, "-m", "guardtrace.cli"]


def cli_env(broker: EmbeddedBroker, store: Path, suffix: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "GUARDTRACE_KAFKA_BOOTSTRAP": broker.bootstrap,
        "GUARDTRACE_CLICKHOUSE_URL": f"chdb://{store}",
        **TopicSet.named("cli-", suffix).environment(),
        "GUARDTRACE_CONSUMER_GROUP": f"cli-group-{suffix}",
        "GUARDTRACE_BATCH_MAX_SECONDS": "0.3",
    })
    return env


def run(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def last_json(text: str) -> Any:
    return json.loads(text.strip().splitlines()[-1])


def committed_records(broker: EmbeddedBroker, env: dict[str, str]) -> int:
    """Records the CLI's consumer group has committed on its spans topic."""
    group = env["GUARDTRACE_CONSUMER_GROUP"]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
    finally:
        admin.close()
    return sum(meta.offset for tp, meta in offsets.items()
               if tp.topic == env["GUARDTRACE_SPANS_TOPIC"] and meta.offset > 0)


def test_emit_consume_sigterm_resume_and_store_lock(broker: EmbeddedBroker,
                                                    tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    env = cli_env(broker, tmp_path / "store", suffix)
    ensure_topics(broker.bootstrap, TopicSet.resolve(environ=env), partitions=2)

    migrated = run(["migrate", "--json"], env)
    assert migrated.returncode == 0, migrated.stderr
    assert len(json.loads(migrated.stdout)["applied"]) >= 3
    assert json.loads(run(["migrate", "--json"], env).stdout)["applied"] == []

    emitted = run(["emit-test", "--spans", "2000", "--payloads"], env)
    assert emitted.returncode == 0, emitted.stderr
    summary = last_json(emitted.stdout)
    assert summary["dropped"] == {} and summary["payloads"] == 200

    consumer = subprocess.Popen([*CLI, "consume"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        # Once it holds the store (ClickHouse writes the holder's PID into `status`),
        # a second process is told who holds it.
        status = tmp_path / "store" / "status"
        wait_for(lambda: status.exists() and f"PID: {consumer.pid}" in status.read_text(),
                 timeout_s=60, message="the consumer to open the store")
        refused = run(["stats", "--json"], env)
        assert refused.returncode == 1
        assert "in use by another process" in refused.stderr
        assert f"PID {consumer.pid}" in refused.stderr and "Traceback" not in refused.stderr
        # It has joined the group and written (and committed) a batch: what the SIGTERM
        # summary below must show. Polled, instead of a fixed 4 s sleep.
        wait_for(lambda: committed_records(broker, env) > 0, timeout_s=60, interval_s=0.3,
                 message="the consumer to write and commit a batch")
    finally:
        consumer.send_signal(signal.SIGTERM)
        out, err = consumer.communicate(timeout=60)
    assert consumer.returncode == 0, err
    first = last_json(out)
    assert first["rows_written"].get("span_events", 0) > 0

    # More traffic after the stop; a new run resumes from the committed offsets.
    assert run(["emit-test", "--spans", "500"], env).returncode == 0
    # The 500 spans are on the broker before it starts (emit-test flushes): 1 s of idle
    # after the assignment is enough to have read them, and the counts below are exact.
    resumed = run(["consume", "--until-idle", "1"], env)
    assert resumed.returncode == 0, resumed.stderr

    stats = last_json(run(["stats", "--json"], env).stdout)
    assert stats["events"] == {"guardtrace.emit_test": 2500}
    assert stats["tables"]["spans"] == 2500
    assert stats["tables"]["payloads"] == 200


def test_bad_configuration_is_one_clear_line(tmp_path: Path) -> None:
    env = dict(os.environ, GUARDTRACE_CLICKHOUSE_URL="mysql://nope",
               GUARDTRACE_BATCH_MAX_ROWS="many")
    done = run(["stats"], env)
    assert done.returncode == 1
    assert "GUARDTRACE_CLICKHOUSE_URL must start with chdb://" in done.stderr
    assert "Traceback" not in done.stderr
    env = dict(os.environ, GUARDTRACE_CLICKHOUSE_URL=f"chdb://{tmp_path}/s")
    done = run(["stats"], env)
    assert done.returncode == 1 and "run `guardtrace migrate` first" in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_broker_command_stops_tansu_on_a_signal(signum: int) -> None:
    # SIGHUP: a closed terminal. Tansu runs in its own session, so only the command
    # hears it, and must stop Tansu rather than orphan it on the port.
    import socket

    from guardtrace.transport.broker import free_port

    port = free_port()
    process = subprocess.Popen([*CLI, "broker", "--port", str(port)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert any("listening" in line for line in iter(process.stdout.readline, ""))
    finally:
        process.send_signal(signum)
        assert process.wait(timeout=30) == 0

    def port_free() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) != 0

    # Tansu (a child of the command) is gone too: nothing listens on the port any more.
    assert wait_for(port_free, timeout_s=10, message="the broker port to be released")
