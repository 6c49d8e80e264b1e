"""Kafka over TLS for real, and clear, prompt failures where the broker cannot follow.

What the embedded broker (Tansu 0.6.0) supports decides how each case is tested:

* TLS: Tansu cannot serve it (its ``--cert`` and ``--key`` options exclude each other),
  so these tests put a TLS-terminating proxy in front of it (``tests/support/tls.py``)
  and have the broker advertise the proxy: the hooks' producer, the consumer, its
  dead-letter producer, the topic admin and the lag reader all connect through
  kafka-python's real TLS stack, with a client certificate the proxy requires.
* SASL: Tansu answers every SASL handshake with UnsupportedSaslMechanism unless started
  with ``--authentication``, and then its ``user`` command cannot create a user (it does
  not authenticate itself) while storage is in memory. No SASL login succeeds here; the
  settings reaching kafka-python are checked in tests/unit/test_transport_security.py,
  and here that a SASL client fails promptly and says how it tried.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from guardtrace import collectors
from guardtrace.collectors.emit.telemetry import GuardTelemetry
from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.consumers.pipeline import PipelineConfig, open_pipeline
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.schemas.transport_security import KafkaSecurity, kafka_connection_settings
from guardtrace.transport.broker import EmbeddedBroker, free_port
from guardtrace.transport.lag import read_consumer_lag
from guardtrace.transport.topics import KafkaUnreachable, TopicSet, ensure_topics
from tests.support.tls import CLIENT_NAME, Certificates, TLSProxy, make_certificates
from tests.support.topic_reader import read_records

from .conftest import wait_for


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_kafka(certificates: Certificates,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSProxy]:
    """Tansu behind a TLS proxy that requires a client certificate; the broker advertises
    the proxy, so no client ever reaches it in plaintext. Listens on every loopback
    address (the hostname test connects as 127.0.0.2)."""
    proxy = TLSProxy(free_port(), free_port(), certificates, host="").start()
    log = tmp_path_factory.mktemp("tls-broker") / "tansu.log"
    broker = EmbeddedBroker(proxy.target_port, log_path=log, advertised_port=proxy.port).start()
    try:
        yield proxy
    finally:
        broker.stop()
        proxy.stop()


def mutual_tls(certificates: Certificates) -> dict[str, str]:
    """The variables of a client with a CA, a certificate and an encrypted key."""
    return {env.KAFKA_SECURITY_PROTOCOL.name: "SSL",
            env.KAFKA_SSL_CA_FILE.name: str(certificates.ca),
            env.KAFKA_SSL_CERT_FILE.name: str(certificates.client_cert),
            env.KAFKA_SSL_KEY_FILE.name: str(certificates.client_key_encrypted),
            env.KAFKA_SSL_KEY_PASSWORD.name: certificates.key_password}


@pytest.mark.usefixtures("collectors_reset")
def test_hooks_and_pipeline_configured_by_environment_run_over_mutual_tls(
        tls_kafka: TLSProxy, certificates: Certificates, ch_client: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in mutual_tls(certificates).items():
        monkeypatch.setenv(name, value)
    suffix = uuid.uuid4().hex[:10]
    topics = TopicSet.named("tls-", suffix)
    config = PipelineConfig.resolve(
        clickhouse_url="chdb://unused", database=f"gt_{suffix}", bootstrap=tls_kafka.bootstrap,
        group_id=f"group-{suffix}", spans_topic=topics.spans, metrics_topic=topics.metrics,
        payloads_topic=topics.payloads, logs_topic=topics.logs,
        dead_letter_topic=topics.dead_letters, batch_max_seconds=0.5, session_timeout_ms=3000,
        heartbeat_interval_ms=1000)
    assert config.consumer.security.protocol == "SSL"  # read from the environment
    opened = open_pipeline(config, client=ch_client, partitions=1)  # the admin, over TLS
    assert sorted(opened.topics_created) == sorted(topics.all())

    # The agent side, configured by the same variables: spans and a payload over TLS.
    telemetry = collectors.configure(
        set_global=False, kafka_bootstrap=tls_kafka.bootstrap, spans_topic=topics.spans,
        metrics_topic=topics.metrics, payloads_topic=topics.payloads, logs_topic=topics.logs)
    guard = GuardTelemetry(names.MODULE_PLANNING, "hallucination_detection")
    tracer = telemetry.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("plan", attributes={names.ATTR_REQUEST_ID: "tls-1"}):
        guard.event(names.EVENT_HALLUCINATION_DETECTED, "tls-1", {names.ATTR_AGENT: "a"})
        guard.payload("tls-1", names.PAYLOAD_KIND_HALLUCINATION, {"prompt": "p", "response": "r"})
    assert telemetry.force_flush(30)
    # And one record the consumer cannot decode: its dead letter goes out over TLS too.
    settings = kafka_connection_settings(tls_kafka.bootstrap)
    poison = KafkaProducer(**settings)
    poison.send(topics.spans, key=b"tls-poison", value=b"not an OTLP message").get(20)
    poison.close()

    stats = opened.consumer().run(until_idle_s=1.0)  # all of it was sent and acknowledged

    assert stats.dead_letters == 1
    db = config.store.database
    assert ch_client.query(f"SELECT count() FROM {db}.spans WHERE request_id = 'tls-1'"
                           ).result_rows[0][0] == 1
    assert ch_client.query(f"SELECT count() FROM {db}.payloads WHERE request_id = 'tls-1'"
                           ).result_rows[0][0] >= 1
    # Read over TLS too; one dead letter, and no second one within the quiet window.
    letters = read_records(topics.dead_letters, 1, **settings)
    assert [record.key for record in letters] == [b"tls-poison"]
    lag = read_consumer_lag(tls_kafka.bootstrap, config.consumer.group_id, topics.consumed)
    assert lag.error is None
    # Spans and payloads were read and committed (a metric export may come in later).
    lag_of = {row["topic"]: row["lag"] for row in lag.partitions}
    assert lag_of[topics.spans] == 0 and lag_of[topics.payloads] == 0, lag.partitions
    assert CLIENT_NAME in tls_kafka.client_names  # the proxy saw the client certificate


def test_a_broker_certificate_from_another_ca_is_refused_and_named(
        tls_kafka: TLSProxy, certificates: Certificates) -> None:
    security = KafkaSecurity.resolve({**mutual_tls(certificates),
                                      env.KAFKA_SSL_CA_FILE.name: str(certificates.other_ca)})
    started = time.monotonic()
    with pytest.raises(KafkaUnreachable) as caught:
        ensure_topics(tls_kafka.bootstrap, ["never-created"], security=security)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "over SSL" in message and "certificate is not accepted" in message, message


def test_the_hostname_check_refuses_an_address_the_certificate_does_not_name(
        tls_kafka: TLSProxy, certificates: Certificates) -> None:
    # The certificate names 127.0.0.1 and localhost, not 127.0.0.2 (the same proxy).
    other_address = f"127.0.0.2:{tls_kafka.port}"
    checked = KafkaSecurity.resolve(mutual_tls(certificates))
    with pytest.raises(KafkaUnreachable, match="IP address mismatch"):
        ensure_topics(other_address, ["never-created"], security=checked)

    unchecked = KafkaSecurity.resolve({**mutual_tls(certificates),
                                       env.KAFKA_SSL_CHECK_HOSTNAME.name: "false"})
    topic = f"unchecked-{uuid.uuid4().hex[:8]}"
    assert ensure_topics(other_address, [topic], partitions=1, security=unchecked) == [topic]


def test_a_client_without_the_required_certificate_gets_an_error(
        tls_kafka: TLSProxy, certificates: Certificates) -> None:
    without = KafkaSecurity.resolve({env.KAFKA_SECURITY_PROTOCOL.name: "SSL",
                                     env.KAFKA_SSL_CA_FILE.name: str(certificates.ca)})
    lag = read_consumer_lag(tls_kafka.bootstrap, "any-group", ["otlp_spans"], without)
    assert lag.error is not None and "connecting over SSL" in lag.error


def test_ssl_against_the_plaintext_embedded_broker_fails_instead_of_hanging(
        broker: EmbeddedBroker, certificates: Certificates,
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # The connect failure is logged once a minute: an earlier test's must not hide it.
    monkeypatch.setattr("guardtrace.collectors.emit.internal._last_error_log", {})
    # Tansu reads the ClientHello as the start of a Kafka frame and waits for the rest;
    # kafka-python 3.0.12 alone would wait with it forever (schemas/kafka_tls_check.py).
    security = KafkaSecurity(protocol="SSL", ca_file=str(certificates.ca))
    started = time.monotonic()
    with pytest.raises(KafkaUnreachable) as caught:
        ensure_topics(broker.bootstrap, ["never-created"], security=security)
    assert time.monotonic() - started < 15
    assert "is it a TLS listener?" in str(caught.value) and "over SSL" in str(caught.value)

    started = time.monotonic()
    lag = read_consumer_lag(broker.bootstrap, "any-group", ["otlp_spans"], security)
    assert time.monotonic() - started < 8  # the reader's 3 s bootstrap timeout bounds it
    assert lag.error is not None and "is it a TLS listener?" in lag.error

    # The hooks' producer: the connect attempt ends (and is logged); nothing waits on it.
    producer = LazyProducer(broker.bootstrap, 1_000_000, security=security)
    assert producer.get(wait_s=0.1) is None
    wait_for(lambda: not any(t.name == "guardtrace-kafka-connect" and t.is_alive()
                             for t in threading.enumerate()),
             timeout_s=10, message="the producer's connect attempt to end")
    assert "is it a TLS listener?" in caplog.text
    producer.close(1)


def test_sasl_against_the_embedded_broker_fails_promptly_without_the_password(
        broker: EmbeddedBroker) -> None:
    password = "sasl-pw-7c2b"
    security = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             username="guardtrace", password=password)
    started = time.monotonic()
    lag = read_consumer_lag(broker.bootstrap, "any-group", ["otlp_spans"], security)
    assert time.monotonic() - started < 10
    assert lag.error is not None
    assert "connecting over SASL_PLAINTEXT, PLAIN as 'guardtrace'" in lag.error, lag.error
    assert password not in lag.error


def test_the_certificates_here_are_what_the_tests_claim(certificates: Certificates) -> None:
    # The refusals above must come from the setting under test, not from broken files.
    for path in (certificates.ca, certificates.client_cert, certificates.client_key_encrypted,
                 certificates.other_ca):
        assert Path(path).stat().st_size > 0
    assert b"ENCRYPTED" in certificates.client_key_encrypted.read_bytes()
