"""Create guardtrace's Kafka topics when they are missing (idempotent)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

__all__ = ["DEFAULT_PARTITIONS", "ensure_topics"]

logger = logging.getLogger("guardtrace.consumers")

# Enough for a few consumers sharing the work; request ids spread by key hash.
DEFAULT_PARTITIONS = 4


def ensure_topics(bootstrap: str, topics: Iterable[str], partitions: int = DEFAULT_PARTITIONS,
                  replication_factor: int = 1) -> list[str]:
    """Create each topic that does not exist yet; return the ones created."""
    admin = KafkaAdminClient(bootstrap_servers=[s.strip() for s in bootstrap.split(",")],
                             client_id="guardtrace-admin", request_timeout_ms=10_000)
    try:
        existing = set(admin.list_topics())
        missing = [t for t in dict.fromkeys(topics) if t not in existing]
        if missing:
            try:
                admin.create_topics([NewTopic(t, partitions, replication_factor)
                                     for t in missing])
            except TopicAlreadyExistsError:
                pass  # another process created it between list and create
            logger.info("created topics: %s", ", ".join(missing))
        return missing
    finally:
        admin.close()
