"""What would make a guard hook wait for Kafka on the agent's own thread.

Asking the lazy producer for its client waits for a connection, and a send can block up
to ``max_block_ms``: a hook that does either on the caller's thread stalls the agent when
Kafka is down. Tests watch for those calls instead of bounding wall-clock time, which a
busy machine decides.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kafka import KafkaProducer

from guardtrace.collectors.export.kafka_producer import LazyProducer

__all__ = ["watch_kafka_waits"]


def watch_kafka_waits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that receives the name of each producer lookup or send made on the main
    thread from now until the test ends."""
    waited_on: list[str] = []
    for owner, method in ((LazyProducer, "get"), (KafkaProducer, "send")):
        original = getattr(owner, method)

        def watched(*args: Any, __original: Any = original, __name: str = method,
                    **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                waited_on.append(__name)
            return __original(*args, **kwargs)

        monkeypatch.setattr(owner, method, watched)
    return waited_on
