"""Transport security settings: checked at start, passed whole to every client, never printed.

The settings reaching kafka-python and clickhouse-connect are checked here by replacing
their constructors with recorders: the embedded broker cannot complete a SASL login and
there is no ClickHouse server to reach. What the recorders check is our plumbing, not the
libraries; TLS runs for real in tests/integration/test_kafka_security.py and
tests/integration/test_clickhouse_tls.py.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

import kafka
import pytest
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient

from guardtrace.schemas import environment_variables as env
from guardtrace.schemas.environment_variables import ConfigError
from guardtrace.schemas.transport_security import ClickHouseTLS, KafkaSecurity, Secret
from tests.support.tls import Certificates, make_certificates

SASL_PASSWORD = "sasl-pw-91d3"


@pytest.fixture(autouse=True)
def _no_guardtrace_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in env.ALL:
        monkeypatch.delenv(var.name, raising=False)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def sasl_ssl_environment(certificates: Certificates) -> dict[str, str]:
    """Every Kafka security variable set, with values unlike the defaults."""
    return {env.KAFKA_SECURITY_PROTOCOL.name: "sasl_ssl",
            env.KAFKA_SASL_MECHANISM.name: "scram-sha-512",
            env.KAFKA_SASL_USERNAME.name: "guardtrace",
            env.KAFKA_SASL_PASSWORD.name: SASL_PASSWORD,
            env.KAFKA_SSL_CA_FILE.name: str(certificates.ca),
            env.KAFKA_SSL_CERT_FILE.name: str(certificates.client_cert),
            env.KAFKA_SSL_KEY_FILE.name: str(certificates.client_key_encrypted),
            env.KAFKA_SSL_KEY_PASSWORD.name: certificates.key_password,
            env.KAFKA_SSL_CHECK_HOSTNAME.name: "false"}


def expected_kafka_settings(certificates: Certificates) -> dict[str, Any]:
    return {"bootstrap_servers": ["b1:9093", "b2:9093"], "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "guardtrace",
            "sasl_plain_password": SASL_PASSWORD, "ssl_cafile": str(certificates.ca),
            "ssl_certfile": str(certificates.client_cert),
            "ssl_keyfile": str(certificates.client_key_encrypted),
            "ssl_password": certificates.key_password, "ssl_check_hostname": False}


def security_part(settings: dict[str, Any]) -> dict[str, Any]:
    keys = ("bootstrap_servers", "security_protocol") + tuple(
        k for k in settings if k.startswith(("sasl_", "ssl_")))
    return {key: settings[key] for key in keys if key in settings}


# -- checked at start, each error naming its variable -------------------------------------
@pytest.mark.parametrize(("settings", "message"), [
    ({"GUARDTRACE_KAFKA_SECURITY_PROTOCOL": "TLS"},
     r"GUARDTRACE_KAFKA_SECURITY_PROTOCOL must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
     r"SASL_SSL, got 'TLS'"),
    ({"GUARDTRACE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"},
     r"GUARDTRACE_KAFKA_SASL_MECHANISM must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
     r"with GUARDTRACE_KAFKA_SECURITY_PROTOCOL=SASL_SSL, got nothing"),
    ({"GUARDTRACE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
      "GUARDTRACE_KAFKA_SASL_MECHANISM": "GSSAPI"}, r"MECHANISM must be one of .*'GSSAPI'"),
    ({"GUARDTRACE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
      "GUARDTRACE_KAFKA_SASL_MECHANISM": "PLAIN", "GUARDTRACE_KAFKA_SASL_PASSWORD": "pw-x"},
     r"GUARDTRACE_KAFKA_SASL_USERNAME must be set"),
    ({"GUARDTRACE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
      "GUARDTRACE_KAFKA_SASL_MECHANISM": "PLAIN", "GUARDTRACE_KAFKA_SASL_USERNAME": "u"},
     r"GUARDTRACE_KAFKA_SASL_PASSWORD must be set"),
    ({"GUARDTRACE_KAFKA_SASL_PASSWORD": "pw-x"},
     r"GUARDTRACE_KAFKA_SASL_PASSWORD is set, but GUARDTRACE_KAFKA_SECURITY_PROTOCOL is "
     r"PLAINTEXT"),
    ({"GUARDTRACE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "GUARDTRACE_KAFKA_SASL_MECHANISM":
      "PLAIN", "GUARDTRACE_KAFKA_SASL_USERNAME": "u", "GUARDTRACE_KAFKA_SASL_PASSWORD": "pw-x",
      "GUARDTRACE_KAFKA_SSL_CA_FILE": "/etc/hostname"},
     r"GUARDTRACE_KAFKA_SSL_CA_FILE is set, but .* TLS settings apply only with SSL"),
    ({"GUARDTRACE_KAFKA_SECURITY_PROTOCOL": "SSL",
      "GUARDTRACE_KAFKA_SSL_CA_FILE": "/no/such/ca.pem"},
     r"GUARDTRACE_KAFKA_SSL_CA_FILE names /no/such/ca.pem, which is not a file"),
    ({"GUARDTRACE_KAFKA_SSL_CHECK_HOSTNAME": "maybe"},
     r"GUARDTRACE_KAFKA_SSL_CHECK_HOSTNAME must be true or false"),
])
def test_unusable_kafka_settings_stop_the_start_naming_the_variable(
        settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        KafkaSecurity.resolve(settings)
    assert "pw-x" not in str(caught.value)


def test_certificate_files_are_loaded_at_start(certificates: Certificates) -> None:
    ssl_only = {env.KAFKA_SECURITY_PROTOCOL.name: "SSL"}
    with pytest.raises(ConfigError, match=r"GUARDTRACE_KAFKA_SSL_CA_FILE: .* no usable CA"):
        KafkaSecurity.resolve({**ssl_only, env.KAFKA_SSL_CA_FILE.name: str(certificates.server_key)})
    encrypted = {**ssl_only, env.KAFKA_SSL_CERT_FILE.name: str(certificates.client_cert),
                 env.KAFKA_SSL_KEY_FILE.name: str(certificates.client_key_encrypted)}
    # No password for an encrypted key: an error, not a prompt on the terminal.
    with pytest.raises(ConfigError, match=r"needs GUARDTRACE_KAFKA_SSL_KEY_PASSWORD"):
        KafkaSecurity.resolve(encrypted)
    with pytest.raises(ConfigError, match=r"KEY_FILE: the client certificate and key do not load"
                       ) as caught:
        KafkaSecurity.resolve({**encrypted, env.KAFKA_SSL_KEY_PASSWORD.name: "wrong-pw-5"})
    assert "wrong-pw-5" not in str(caught.value)
    with pytest.raises(ConfigError, match=r"KEY_FILE is set, but GUARDTRACE_KAFKA_SSL_CERT_FILE "
                       r"is not"):
        KafkaSecurity.resolve({**ssl_only,
                               env.KAFKA_SSL_KEY_FILE.name: str(certificates.client_key)})
    security = KafkaSecurity.resolve({**encrypted, env.KAFKA_SSL_KEY_PASSWORD.name:
                                      certificates.key_password})
    assert security.uses_tls and not security.uses_sasl


def test_clickhouse_tls_settings_are_checked_at_start(certificates: Certificates) -> None:
    with pytest.raises(ConfigError, match=r"GUARDTRACE_CLICKHOUSE_CA_FILE is set, but "
                       r"GUARDTRACE_CLICKHOUSE_TLS_VERIFY is false"):
        ClickHouseTLS.resolve({env.CLICKHOUSE_TLS_VERIFY.name: "false",
                               env.CLICKHOUSE_CA_FILE.name: str(certificates.ca)})
    with pytest.raises(ConfigError, match=r"GUARDTRACE_CLICKHOUSE_CLIENT_CERT_FILE names /nope"):
        ClickHouseTLS.resolve({env.CLICKHOUSE_CLIENT_CERT_FILE.name: "/nope"})
    # clickhouse-connect takes no key password: an encrypted key is refused, not prompted for.
    with pytest.raises(ConfigError, match=r"the key must not be encrypted"):
        ClickHouseTLS.resolve({
            env.CLICKHOUSE_CLIENT_CERT_FILE.name: str(certificates.client_cert),
            env.CLICKHOUSE_CLIENT_KEY_FILE.name: str(certificates.client_key_encrypted)})
    from guardtrace.store.connection import StoreConfig

    with pytest.raises(ConfigError, match=r"GUARDTRACE_CLICKHOUSE_CA_FILE apply to https:// "
                       r"URLs, but the ClickHouse URL is http://w:\*\*\*@ch:8123") as caught:
        StoreConfig.resolve(url="http://w:pw-2f@ch:8123", environ={
            env.CLICKHOUSE_CA_FILE.name: str(certificates.ca)})
    assert "pw-2f" not in str(caught.value)


# -- never printed ------------------------------------------------------------------------
def test_passwords_print_as_stars_but_work_where_kafka_python_uses_them(
        certificates: Certificates) -> None:
    security = KafkaSecurity.resolve(sasl_ssl_environment(certificates))
    assert isinstance(security.password, Secret)
    logged = logging.makeLogRecord({"msg": "%s %r", "args": (security.password,) * 2})
    shown = [repr(security), str(security), f"{security.password}", logged.getMessage(),
             repr(security.client_settings()), security.describe()]
    for text in shown:
        assert SASL_PASSWORD not in text and certificates.key_password not in text, text
    assert "password='***'" in repr(security)
    # Where kafka-python uses the password, it is the real one.
    settings = security.client_settings()
    plain = SaslMechanismPlain(**{**settings, "sasl_mechanism": "PLAIN"})
    assert plain.auth_bytes() == b"guardtrace\0guardtrace\0" + SASL_PASSWORD.encode()
    scram = ScramClient(settings["sasl_plain_username"], settings["sasl_plain_password"],
                        "SCRAM-SHA-512")
    assert scram.password == SASL_PASSWORD.encode()
    assert pickle.loads(pickle.dumps(security)) == security
    assert str.__str__(pickle.loads(pickle.dumps(security.password))) == SASL_PASSWORD


def test_kafka_pythons_own_configuration_log_shows_no_password(
        certificates: Certificates, caplog: pytest.LogCaptureFixture) -> None:
    # KafkaAdminClient logs its whole configuration at DEBUG before it connects.
    from guardtrace.schemas.transport_security import kafka_connection_settings

    security = KafkaSecurity.resolve({env.KAFKA_SECURITY_PROTOCOL.name: "SASL_PLAINTEXT",
                                      env.KAFKA_SASL_MECHANISM.name: "PLAIN",
                                      env.KAFKA_SASL_USERNAME.name: "guardtrace",
                                      env.KAFKA_SASL_PASSWORD.name: SASL_PASSWORD})
    caplog.set_level(logging.DEBUG, logger="kafka")
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaAdminClient(**kafka_connection_settings("127.0.0.1:1", security),
                               bootstrap_timeout_ms=200)
    assert "sasl_plain_password': '***'" in caplog.text
    assert SASL_PASSWORD not in caplog.text


def test_a_kafka_error_names_the_protocol_and_user_but_not_the_password() -> None:
    from guardtrace.transport.topics import KafkaUnreachable

    security = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                             username="guardtrace", password=SASL_PASSWORD)
    message = str(KafkaUnreachable("k:9093", TimeoutError("no answer"), security))
    assert message == ("cannot reach Kafka at k:9093 over SASL_SSL, SCRAM-SHA-256 as "
                       "'guardtrace': TimeoutError('no answer')")
    assert str(KafkaUnreachable("k:9092", TimeoutError("x"), KafkaSecurity())) == (
        "cannot reach Kafka at k:9092: TimeoutError('x')")


# -- every Kafka client gets the same settings ----------------------------------------------
class Recorder:
    """Stands in for a kafka-python client class: keeps the keyword arguments."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, *topics: str, **settings: Any) -> Recorder.Client:
        self.calls.append(settings)
        return Recorder.Client()

    class Client:
        def subscribe(self, *args: Any, **kwargs: Any) -> None:
            pass

        def list_topics(self) -> list[str]:
            return []

        def create_topics(self, new_topics: Any) -> None:
            pass

        def list_group_offsets(self, group: str) -> dict[str, Any]:
            return {group: {}}

        def partitions_for_topic(self, topic: str) -> None:
            return None

        def close(self, *args: Any, **kwargs: Any) -> None:
            pass


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch, certificates: Certificates
             ) -> dict[str, Recorder]:
    """The environment holds every security variable; every client class is a recorder,
    and so is the TLS handshake check (it would connect: these servers do not exist)."""
    for name, value in sasl_ssl_environment(certificates).items():
        monkeypatch.setenv(name, value)
    recorders = {name: Recorder() for name in
                 ("producer", "consumer", "dlq", "admin", "lag_admin", "lag_consumer",
                  "tls_check")}
    from guardtrace.collectors.export import kafka_producer
    from guardtrace.consumers import consumer
    from guardtrace.transport import lag, topics

    monkeypatch.setattr(kafka_producer, "KafkaProducer", recorders["producer"])
    monkeypatch.setattr(consumer, "KafkaConsumer", recorders["consumer"])
    monkeypatch.setattr(consumer, "KafkaProducer", recorders["dlq"])
    for module in (kafka_producer, topics, lag):
        monkeypatch.setattr(module, "check_tls_handshake", recorders["tls_check"])
    return recorders


def test_the_hooks_producer_gets_every_setting_from_the_environment(
        recorded: dict[str, Recorder], certificates: Certificates) -> None:
    from guardtrace.collectors.export.kafka_producer import LazyProducer

    producer = LazyProducer("b1:9093, b2:9093", 1_000_000)
    assert producer.get(wait_s=5) is not None
    assert producer.get(wait_s=5, compressed_values=True) is not None
    producer.close(1)

    # Both of its producers (compressing, and not for compressed values).
    expected = expected_kafka_settings(certificates)
    assert [security_part(call) for call in recorded["producer"].calls] == [expected, expected]


def test_the_consumer_and_its_dead_letter_producer_get_every_setting(
        recorded: dict[str, Recorder], certificates: Certificates) -> None:
    from guardtrace.consumers.config import ConsumerConfig
    from guardtrace.consumers.consumer import TelemetryConsumer

    config = ConsumerConfig.resolve(bootstrap="b1:9093,b2:9093")
    telemetry_consumer = TelemetryConsumer(config, writer=object())  # type: ignore[arg-type]
    telemetry_consumer._write_thread.shutdown(wait=False)

    expected = expected_kafka_settings(certificates)
    assert [security_part(call) for call in recorded["consumer"].calls] == [expected]
    assert [security_part(call) for call in recorded["dlq"].calls] == [expected]
    assert recorded["dlq"].calls[0]["client_id"] == "guardtrace-dlq"


def test_the_topic_admin_and_the_lag_reader_get_every_setting(
        recorded: dict[str, Recorder], certificates: Certificates,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from guardtrace.transport.lag import read_consumer_lag
    from guardtrace.transport.topics import ensure_topics

    monkeypatch.setattr(kafka, "KafkaAdminClient", recorded["admin"])
    assert ensure_topics("b1:9093,b2:9093", ["t1"]) == ["t1"]
    monkeypatch.setattr(kafka, "KafkaAdminClient", recorded["lag_admin"])
    monkeypatch.setattr(kafka, "KafkaConsumer", recorded["lag_consumer"])
    lag = read_consumer_lag("b1:9093,b2:9093", "g", ["t1"])
    assert lag.error is None

    expected = expected_kafka_settings(certificates)
    for name in ("admin", "lag_admin", "lag_consumer"):
        assert [security_part(call) for call in recorded[name].calls] == [expected], name


def test_the_tls_handshake_is_checked_with_the_settings_each_client_gets(
        monkeypatch: pytest.MonkeyPatch, certificates: Certificates) -> None:
    for name, value in sasl_ssl_environment(certificates).items():
        monkeypatch.setenv(name, value)
    checked: list[dict[str, Any]] = []
    built: list[dict[str, Any]] = []
    from guardtrace.transport import topics

    monkeypatch.setattr(topics, "check_tls_handshake", lambda settings: checked.append(settings))
    monkeypatch.setattr(kafka, "KafkaAdminClient",
                        lambda **settings: built.append(settings) or Recorder.Client())
    topics.ensure_topics("b1:9093,b2:9093", ["t1"])
    assert checked == built and len(built) == 1


def test_the_dashboard_reads_lag_with_the_security_of_its_environment(
        monkeypatch: pytest.MonkeyPatch, certificates: Certificates) -> None:
    from guardtrace.dashboard import kafka_health
    from guardtrace.transport.lag import ConsumerLag

    for name, value in sasl_ssl_environment(certificates).items():
        monkeypatch.setenv(name, value)
    seen: list[KafkaSecurity | None] = []

    def read(bootstrap: str, group: str, topics: Any,
             security: KafkaSecurity | None = None) -> ConsumerLag:
        seen.append(security)
        return ConsumerLag(bootstrap, group)

    monkeypatch.setattr(kafka_health, "read_consumer_lag", read)
    kafka_health._cached.clear()
    assert kafka_health.consumer_lag().error is None
    assert seen == [KafkaSecurity.resolve(sasl_ssl_environment(certificates))]

    monkeypatch.setenv(env.KAFKA_SECURITY_PROTOCOL.name, "TLS1.3")
    lag = kafka_health.consumer_lag()  # shown on the page, not raised
    assert lag.error is not None and env.KAFKA_SECURITY_PROTOCOL.name in lag.error


# -- ClickHouse ---------------------------------------------------------------------------
def test_clickhouse_tls_settings_reach_clickhouse_connect(
        monkeypatch: pytest.MonkeyPatch, certificates: Certificates,
        caplog: pytest.LogCaptureFixture) -> None:
    import clickhouse_connect

    from guardtrace.store.connection import StoreConfig, open_client

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(clickhouse_connect, "get_client",
                        lambda **kwargs: calls.append(kwargs) or "client")
    tls = {env.CLICKHOUSE_CA_FILE.name: str(certificates.ca),
           env.CLICKHOUSE_CLIENT_CERT_FILE.name: str(certificates.client_cert),
           env.CLICKHOUSE_CLIENT_KEY_FILE.name: str(certificates.client_key)}
    config = StoreConfig.resolve(url="https://writer:pw-7a@ch.example:9443", environ=tls)
    assert open_client(config) == "client"
    assert calls == [{"host": "ch.example", "port": 9443, "username": "writer",
                      "password": "pw-7a", "secure": True, "connect_timeout": 5,
                      "verify": True, "ca_cert": str(certificates.ca),
                      "client_cert": str(certificates.client_cert),
                      "client_cert_key": str(certificates.client_key)}]

    unverified = StoreConfig.resolve(url="https://writer:pw-7a@ch.example",
                                     environ={env.CLICKHOUSE_TLS_VERIFY.name: "false"})
    open_client(unverified)
    assert calls[-1]["verify"] is False and calls[-1]["port"] == 8443
    assert "https://writer:***@ch.example is not verified" in caplog.text
    assert "pw-7a" not in caplog.text

    open_client(StoreConfig.resolve(url="http://writer:pw-7a@ch.example"))
    assert "verify" not in calls[-1] and calls[-1]["secure"] is False


def test_a_failure_to_reach_clickhouse_never_shows_the_password(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import clickhouse_connect

    from guardtrace.store.connection import StoreConfig, StoreError, open_client

    def refuse(**kwargs: Any) -> None:
        # Client libraries quote what they were given: the URL, or the password itself.
        raise RuntimeError(f"auth failed for {kwargs['username']}:{kwargs['password']} "
                           "at http://writer:p%40ss-9@ch:8123/?password=p%40ss-9")

    monkeypatch.setattr(clickhouse_connect, "get_client", refuse)
    with pytest.raises(StoreError) as caught:
        open_client(StoreConfig.resolve(url="http://writer:p%40ss-9@ch:8123"))
    message = str(caught.value)
    assert "p@ss-9" not in message and "p%40ss-9" not in message, message
    assert message.startswith("Cannot reach ClickHouse at http://writer:***@ch:8123: "), message
    assert caught.value.__cause__ is None  # the cause's own text is not chained on


@pytest.mark.parametrize(("url", "shown"), [
    ("http://dash:s3cret@clickhouse:8123", "http://dash:***@clickhouse:8123"),
    ("https://user@host:8443", "https://user@host:8443"),
    ("chdb://.guardtrace/store", "chdb://.guardtrace/store"),
    ("http://ch:8123/?user=w&password=s3cret&x=1", "http://ch:8123/?user=w&password=***&x=1"),
    ("https://ch/?PWD=s3cret;passwd=s3cret", "https://ch/?PWD=***;passwd=***"),
    ("clickhouse://w:s3cret@ch:9000/db?secret=s3cret&access_token=s3cret&api_key=s3cret",
     "clickhouse://w:***@ch:9000/db?secret=***&access_token=***&api_key=***"),
    ("ftp://w:s3cret@ch/x", "ftp://w:***@ch/x"),  # any scheme
    ("w:s3cret@ch:8123", "w:***@ch:8123"),  # no scheme at all
    ("http://w:s3@cret@ch:8123/db", "http://w:***@ch:8123/db"),  # "@" not percent-encoded
    ("http://w:s3/cret@ch:8123", "http://w:***@ch:8123"),  # "/" not percent-encoded
    ("http://w:s3?cret@ch:8123", "http://w:***@ch:8123"),  # "?" not percent-encoded
    ("http://ch:8123/?email=a@b.example", "http://ch:8123/?email=a@b.example"),
    ("http://w:s3cret@ch:8123/?email=a@b.example", "http://w:***@ch:8123/?email=a@b.example"),
])
def test_masked_url_masks_every_form_of_password(url: str, shown: str) -> None:
    from guardtrace.store.connection import masked_url

    assert masked_url(url) == shown


def test_store_url_errors_never_show_the_password() -> None:
    from guardtrace.store.connection import StoreConfig

    with pytest.raises(ConfigError, match=r"got 'ftp://w:\*\*\*@ch/x'") as caught:
        StoreConfig.resolve(url="ftp://w:s3cret@ch/x")
    assert "s3cret" not in str(caught.value)
    with pytest.raises(ConfigError, match=r"got 'mysql://ch/\?password=\*\*\*'"):
        StoreConfig.resolve(url="mysql://ch/?password=s3cret")
    # What does not parse is not shown: in http://w:s3cret, "s3cret" parses as the port.
    with pytest.raises(ConfigError, match="does not parse as a URL") as caught:
        StoreConfig.resolve(url="http://w:s3cret")
    assert "s3cret" not in str(caught.value)


def test_plaintext_is_the_default_and_adds_no_tls_or_sasl_settings() -> None:
    assert KafkaSecurity.resolve({}).client_settings() == {"security_protocol": "PLAINTEXT"}
    assert ClickHouseTLS.resolve({}) == ClickHouseTLS() and not ClickHouseTLS().configured
