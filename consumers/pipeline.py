"""One pipeline: its settings resolved once, and the one function that opens it.

A pipeline is a store (ClickHouse URL, database, retention, TLS), a Kafka bootstrap and
its transport security, the topic set and a consumer group. :class:`PipelineConfig`
resolves all of them once, from arguments, then ``GUARDTRACE_*`` variables, then
defaults, and is passed on explicitly from there (to child processes as
:meth:`PipelineConfig.environment`; passwords and certificate paths stay out of it: a
child inherits them with the environment they were read from).

:func:`open_pipeline` is what ``guardtrace consume``, ``guardtrace up``, the tests and
the benchmarks run before consuming: open the store, migrate it (or check that it is
migrated), make sure every topic exists; :meth:`OpenPipeline.consumer` then builds the
consumer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..schemas import environment_variables as env
from ..store.access import require_schema
from ..store.connection import StoreConfig, open_client
from ..store.migrate import Migration, migrate
from ..store.writer import BatchWriter, ClickHouseWriter
from ..transport.topics import DEFAULT_PARTITIONS, TopicSet, ensure_topics
from .config import ConsumerConfig
from .consumer import TelemetryConsumer

__all__ = ["OpenPipeline", "PipelineConfig", "open_pipeline"]


@dataclass(frozen=True)
class PipelineConfig:
    """Where telemetry comes from (Kafka, the topic set, the group) and goes (the store)."""

    store: StoreConfig
    consumer: ConsumerConfig

    @classmethod
    def resolve(cls, *, clickhouse_url: str | None = None, database: str | None = None,
                environ: Mapping[str, str] | None = None,
                **consumer_settings: Any) -> PipelineConfig:
        """Resolve every setting once: arguments, then variables, then defaults.

        Args:
            clickhouse_url: The store's URL (``chdb://DIR`` or ``http(s)://...``).
            database: The store's database.
            environ: Where variables are read (default: this process's environment).
            **consumer_settings: Fields of :class:`ConsumerConfig` (``bootstrap``,
                ``group_id``, ``spans_topic``, ...); None means "not given".

        Raises:
            ConfigError: a setting has an unusable value (the message names it).
            TypeError: an unknown consumer setting.
        """
        return cls(StoreConfig.resolve(url=clickhouse_url, database=database, environ=environ),
                   ConsumerConfig.resolve(environ=environ, **consumer_settings))

    @property
    def bootstrap(self) -> str:
        return self.consumer.bootstrap

    @property
    def topics(self) -> TopicSet:
        return self.consumer.topic_set

    def with_bootstrap(self, bootstrap: str) -> PipelineConfig:
        """The same pipeline on another broker (``up``'s embedded one, once it listens)."""
        return dataclasses.replace(self, consumer=dataclasses.replace(self.consumer,
                                                                      bootstrap=bootstrap))

    def environment(self) -> dict[str, str]:
        """The ``GUARDTRACE_*`` variables that give another process this same pipeline."""
        return {env.KAFKA_BOOTSTRAP.name: self.bootstrap,
                env.CONSUMER_GROUP.name: self.consumer.group_id,
                env.CLICKHOUSE_URL.name: self.store.url,
                env.CLICKHOUSE_DATABASE.name: self.store.database,
                **self.topics.environment()}


@dataclass
class OpenPipeline:
    """A pipeline whose store is open and migrated and whose topics exist."""

    config: PipelineConfig
    client: Any
    applied: list[Migration] = field(default_factory=list)  # migrations applied on opening
    topics_created: list[str] = field(default_factory=list)

    @property
    def database(self) -> str:
        return self.config.store.database

    def writer(self) -> ClickHouseWriter:
        return ClickHouseWriter(self.client, self.database)

    def consumer(self, writer: BatchWriter | None = None,
                 **overrides: Any) -> TelemetryConsumer:
        """A consumer of this pipeline (``overrides``: fields of :class:`ConsumerConfig`)."""
        config = dataclasses.replace(self.config.consumer, **overrides)
        return TelemetryConsumer(config, writer or self.writer())


def open_pipeline(config: PipelineConfig, *, client: Any = None, migrate_store: bool = True,
                  partitions: int = DEFAULT_PARTITIONS) -> OpenPipeline:
    """Open the store, migrate it (or check it), and create the topics that are missing.

    Args:
        config: The pipeline.
        client: An already open client on ``config.store`` (default: open one).
        migrate_store: Apply missing migrations; if False, only check there are none.
        partitions: Partitions of each topic created.

    Raises:
        StoreError: the store cannot be opened, or (``migrate_store`` False) is not
            migrated (:class:`~guardtrace.store.access.SchemaNotMigrated`).
        KafkaUnreachable: the topics could not be listed or created.
    """
    client = open_client(config.store) if client is None else client
    applied = migrate(client, config.store) if migrate_store else []
    require_schema(client, config.store.database)
    created = ensure_topics(config.bootstrap, config.topics, partitions=partitions,
                            security=config.consumer.security)
    return OpenPipeline(config, client, applied, created)
