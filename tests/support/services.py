"""Real services for tests: a Tansu broker and the embedded ClickHouse engine.

Both start once per session (Tansu in ~0.1 s, chDB in-process). If either cannot start,
the session errors: tests that use them never skip for a missing dependency. Isolation
is by name, as in clickhouse-connect's and kafka-python's own suites: every test gets
its own database, topics and consumer group.

This is a plain module, not a conftest: each suite's ``conftest.py`` imports the
fixtures it wants (``from tests.support.services import broker, pipeline, ...``).
pytest then registers one fixture definition per importing conftest, so two suites in
one run would each start their own "session" broker and chDB client. chDB allows one
data directory per process, so a second client would fail: the session resources are
therefore process-wide singletons here, shared by every conftest that imports the
fixtures and released when the last of them is torn down.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from guardtrace.consumers.config import ConsumerConfig
from guardtrace.consumers.consumer import TelemetryConsumer
from guardtrace.consumers.pipeline import OpenPipeline, PipelineConfig, open_pipeline
from guardtrace.store.connection import StoreConfig, open_client
from guardtrace.transport.broker import EmbeddedBroker, free_port
from guardtrace.transport.topics import TopicSet

__all__ = ["Pipeline", "broker", "ch_client", "chdb_dir", "collectors_reset", "pipeline",
           "wait_for"]

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.1,
             message: str = "condition") -> T:
    """Poll ``check`` until it returns a truthy value; fail with ``message`` on timeout."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {message}; last={last!r}")


# -- process-wide session resources ------------------------------------------------------
_shared: dict[str, Any] = {}
_users: dict[str, int] = {}


@contextmanager
def _shared_resource(key: str, create: Callable[[], T],
                     release: Callable[[T], None] | None = None) -> Iterator[T]:
    """Yield the one process-wide instance of ``key``, creating it on first use.

    Args:
        key: Name of the resource.
        create: Builds the resource when no fixture holds it yet.
        release: Called with the resource when the last holder is torn down.
    """
    if key not in _shared:
        _shared[key] = create()
        _users[key] = 0
    _users[key] += 1
    try:
        yield _shared[key]
    finally:
        _users[key] -= 1
        if _users[key] == 0:
            resource = _shared.pop(key)
            if release is not None:
                release(resource)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    def start() -> EmbeddedBroker:
        log = tmp_path_factory.mktemp("broker") / "tansu.log"
        return EmbeddedBroker(free_port(), log_path=log).start()

    with _shared_resource("broker", start, EmbeddedBroker.stop) as instance:
        yield instance


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with _shared_resource("chdb_dir", lambda: tmp_path_factory.mktemp("chdb") / "store") as path:
        yield path


@pytest.fixture(scope="session")
def ch_client(chdb_dir: Path) -> Iterator[Any]:
    # One chDB directory per process is all the engine allows; tests share it and
    # isolate themselves by database.
    def open_session_client() -> Any:
        return open_client(StoreConfig.resolve(url=f"chdb://{chdb_dir}", database="gt_session"))

    with _shared_resource("ch_client", open_session_client) as client:
        yield client


@dataclass
class Pipeline:
    """One test's slice of the real pipeline: its topics, database and group, opened by
    :func:`guardtrace.consumers.pipeline.open_pipeline` as ``consume`` and ``up`` open theirs."""

    opened: OpenPipeline

    @property
    def bootstrap(self) -> str:
        return self.opened.config.bootstrap

    @property
    def client(self) -> Any:
        return self.opened.client

    @property
    def store(self) -> StoreConfig:
        return self.opened.config.store

    @property
    def consumer_config(self) -> ConsumerConfig:
        return self.opened.config.consumer

    @property
    def topics(self) -> TopicSet:
        return self.opened.config.topics

    @property
    def database(self) -> str:
        return self.store.database

    def collector_settings(self) -> dict[str, Any]:
        """Keyword arguments for guardtrace.collectors.configure()."""
        return {"kafka_bootstrap": self.bootstrap, "exporter": "kafka",
                "spans_topic": self.topics.spans, "metrics_topic": self.topics.metrics,
                "payloads_topic": self.topics.payloads, "logs_topic": self.topics.logs,
                "metric_export_interval_ms": 60_000}

    def consumer(self, writer: Any | None = None, **overrides: Any) -> TelemetryConsumer:
        return self.opened.consumer(writer, **overrides)

    def consume_until_idle(self, idle_s: float = 1.0, **overrides: Any) -> Any:
        """Consume what the test sent, until ``idle_s`` pass without a new record.

        The tests send (and flush) before they consume, so everything is already on the
        broker when this starts; the idle clock runs from the group assignment and from
        each poll that brought records, so 1 s only has to cover the first fetch.
        """
        return self.consumer(**overrides).run(until_idle_s=idle_s)

    def scalar(self, sql: str, **params: Any) -> Any:
        return self.client.query(sql.replace("{db}", self.database), parameters=params).result_rows[0][0]

    def rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        return self.client.query(sql.replace("{db}", self.database), parameters=params).result_rows


@pytest.fixture
def pipeline(broker: EmbeddedBroker, ch_client: Any) -> Pipeline:
    return new_pipeline(broker, ch_client)


def new_pipeline(broker: EmbeddedBroker, ch_client: Any) -> Pipeline:
    """A fresh slice of the real pipeline (for fixtures of a wider scope than a test)."""
    suffix = uuid.uuid4().hex[:10]
    topics = TopicSet.named("", suffix)
    config = PipelineConfig.resolve(
        clickhouse_url="chdb://unused", database=f"gt_{suffix}",
        bootstrap=broker.bootstrap, group_id=f"group-{suffix}",
        spans_topic=topics.spans, metrics_topic=topics.metrics,
        payloads_topic=topics.payloads, logs_topic=topics.logs,
        dead_letter_topic=topics.dead_letters,
        batch_max_rows=500, batch_max_seconds=0.5,
        session_timeout_ms=3000, heartbeat_interval_ms=1000)
    # The session's one chDB client: chDB allows one store directory per process.
    return Pipeline(open_pipeline(config, client=ch_client, partitions=2))


@pytest.fixture
def collectors_reset() -> Iterator[None]:
    """Make sure every test leaves guardtrace.collectors unconfigured."""
    from guardtrace import collectors

    collectors.shutdown()
    yield
    collectors.shutdown()
