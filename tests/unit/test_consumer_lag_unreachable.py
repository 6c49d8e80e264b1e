"""Consumer lag when Kafka cannot be reached: an error the health page can show as is."""

from __future__ import annotations

from guardtrace.transport.broker import free_port
from guardtrace.transport.lag import read_consumer_lag


def test_an_unreachable_broker_is_reported_with_its_error_named_once() -> None:
    # Nothing listens on a free port: kafka-python gives up after the 3 s bootstrap timeout.
    bootstrap = f"127.0.0.1:{free_port()}"
    lag = read_consumer_lag(bootstrap, "guardtrace-consumers", ["otlp_spans"])

    assert lag.error is not None and lag.partitions == [] and lag.total == 0
    assert lag.error.startswith("KafkaTimeoutError")
    assert lag.error.count("KafkaTimeoutError") == 1, lag.error
