"""Settings: guardtrace/environment_variables.py readers and the three resolved configs.

Order everywhere: explicit argument, then ``GUARDTRACE_*`` variable, then default.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from guardtrace.collectors.config import EXPORTERS, CollectorConfig
from guardtrace.consumers.config import ConsumerConfig
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.schemas.environment_variables import ConfigError
from guardtrace.store.connection import StoreConfig


@pytest.fixture(autouse=True)
def _no_guardtrace_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in env.ALL:
        monkeypatch.delenv(var.name, raising=False)


# -- the registry of variables -----------------------------------------------------------
def test_every_variable_is_named_documented_and_unique() -> None:
    seen: set[str] = set()
    for var in env.ALL:
        assert isinstance(var, env.EnvVar)
        assert re.fullmatch(r"GUARDTRACE_[A-Z0-9_]+", var.name), var.name
        assert var.help.strip(), f"{var.name} has no help text"
        assert var.side in ("collector", "pipeline", "both"), var.name
        assert var.name not in seen, f"{var.name} is listed twice"
        seen.add(var.name)


def test_every_module_level_variable_is_in_all() -> None:
    declared = {value for value in vars(env).values() if isinstance(value, env.EnvVar)}
    assert declared == set(env.ALL)


def test_defaults_resolve_without_any_environment() -> None:
    collector = CollectorConfig.resolve()
    assert collector.kafka_bootstrap == env.KAFKA_BOOTSTRAP.default
    assert collector.exporter == "kafka"
    assert collector.spans_topic == names.SPANS_TOPIC
    assert collector.max_message_bytes == int(env.MAX_MESSAGE_BYTES.default)
    assert collector.capture_payloads is True and collector.redact is True
    assert collector.redact_bare_ids is False
    assert collector.payload_chunk_bytes < collector.max_message_bytes
    store = StoreConfig.resolve()
    assert store.database == env.CLICKHOUSE_DATABASE.default
    assert store.ttl_events_days == int(env.TTL_EVENTS_DAYS.default)
    consumer = ConsumerConfig.resolve()
    assert consumer.batch_max_seconds == float(env.BATCH_MAX_SECONDS.default)
    assert consumer.dead_letter_topic == names.DEAD_LETTER_TOPIC


# -- readers -----------------------------------------------------------------------------
def test_read_str_argument_beats_environment_beats_default() -> None:
    var = env.SPANS_TOPIC
    environ = {var.name: "from-env"}
    assert env.read_str(var, "from-arg", environ) == "from-arg"
    assert env.read_str(var, None, environ) == "from-env"
    assert env.read_str(var, None, {}) == var.default


def test_environment_values_are_stripped_and_blank_means_unset() -> None:
    var = env.SPANS_TOPIC
    assert env.read_str(var, None, {var.name: "  padded  "}) == "padded"
    assert env.read_str(var, None, {var.name: "   "}) == var.default
    assert env.read_str(var, None, {var.name: ""}) == var.default


def test_explicit_empty_string_is_an_explicit_value() -> None:
    assert env.read_str(env.SERVICE_NAME, "", {env.SERVICE_NAME.name: "env-name"}) == ""


def test_readers_use_os_environ_when_no_mapping_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.BATCH_MAX_ROWS.name, "77")
    assert env.read_int(env.BATCH_MAX_ROWS) == 77
    assert env.read_int(env.BATCH_MAX_ROWS, environ={}) == int(env.BATCH_MAX_ROWS.default)


def test_read_int() -> None:
    var = env.BATCH_MAX_ROWS
    assert env.read_int(var, 5, {var.name: "9"}) == 5
    assert env.read_int(var, None, {var.name: " 9 "}) == 9
    assert env.read_int(var, None, {}) == int(var.default)


@pytest.mark.parametrize("bad", ["12x", "1.5", "ten", "0x10"])
def test_read_int_rejects_non_integers_naming_variable_and_value(bad: str) -> None:
    var = env.BATCH_MAX_ROWS
    with pytest.raises(ConfigError) as info:
        env.read_int(var, None, {var.name: bad})
    message = str(info.value)
    assert var.name in message and repr(bad) in message and "integer" in message
    assert f"from {var.name}" in message


def test_read_int_error_says_when_the_value_was_an_argument() -> None:
    with pytest.raises(ConfigError, match=r"GUARDTRACE_BATCH_MAX_ROWS.*'abc'.*from argument"):
        env.read_int(env.BATCH_MAX_ROWS, "abc", {})  # type: ignore[arg-type]


def test_read_int_enforces_minimum() -> None:
    var = env.AGENT_LABEL_CAP
    assert env.read_int(var, None, {var.name: "1"}, minimum=1) == 1
    with pytest.raises(ConfigError) as info:
        env.read_int(var, None, {var.name: "0"}, minimum=1)
    assert var.name in str(info.value) and "at least 1" in str(info.value)
    assert "got 0" in str(info.value)


def test_read_float() -> None:
    var = env.BATCH_MAX_SECONDS
    assert env.read_float(var, 0.25, {var.name: "9"}) == 0.25
    assert env.read_float(var, None, {var.name: "2.5"}) == 2.5
    assert env.read_float(var, None, {}) == float(var.default)
    with pytest.raises(ConfigError) as info:
        env.read_float(var, None, {var.name: "fast"})
    assert var.name in str(info.value) and "'fast'" in str(info.value)
    with pytest.raises(ConfigError, match="at least 0.01"):
        env.read_float(var, None, {var.name: "0.001"}, minimum=0.01)


@pytest.mark.parametrize(("text", "expected"), [
    ("1", True), ("true", True), ("TRUE", True), ("yes", True), ("On", True),
    ("0", False), ("false", False), ("No", False), ("off", False),
])
def test_read_bool_spellings(text: str, expected: bool) -> None:
    var = env.REDACT
    assert env.read_bool(var, None, {var.name: text}) is expected


def test_read_bool_argument_wins_and_bad_value_is_named() -> None:
    var = env.REDACT
    assert env.read_bool(var, False, {var.name: "true"}) is False
    with pytest.raises(ConfigError) as info:
        env.read_bool(var, None, {var.name: "maybe"})
    assert var.name in str(info.value) and "'maybe'" in str(info.value)


def test_read_choice_is_case_insensitive_and_names_the_choices() -> None:
    var = env.EXPORTER
    assert env.read_choice(var, EXPORTERS, None, {var.name: "OTLP"}) == "otlp"
    assert env.read_choice(var, EXPORTERS, "None", {}) == "none"
    with pytest.raises(ConfigError) as info:
        env.read_choice(var, EXPORTERS, None, {var.name: "zipkin"})
    message = str(info.value)
    assert var.name in message and "'zipkin'" in message
    assert all(choice in message for choice in EXPORTERS)


# -- CollectorConfig ---------------------------------------------------------------------
def test_collector_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="kafka_bootstrp"):
        CollectorConfig.resolve(kafka_bootstrp="x:9092")


def test_collector_environment_and_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.KAFKA_BOOTSTRAP.name, "kafka-a:9092,kafka-b:9092")
    monkeypatch.setenv(env.AGENT_LABEL_CAP.name, "25")
    monkeypatch.setenv(env.CAPTURE_PAYLOADS.name, "off")
    config = CollectorConfig.resolve(agent_label_cap=7)
    assert config.kafka_bootstrap == "kafka-a:9092,kafka-b:9092"
    assert config.agent_label_cap == 7
    assert config.capture_payloads is False


def test_collector_none_argument_falls_through_to_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.SERVICE_NAME.name, "travel-agent")
    assert CollectorConfig.resolve(service_name=None).service_name == "travel-agent"


def test_collector_bad_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"GUARDTRACE_EXPORTER.*'jaeger'"):
        CollectorConfig.resolve(exporter="jaeger")
    monkeypatch.setenv(env.EXPORTER.name, "stdout")
    with pytest.raises(ConfigError, match=r"GUARDTRACE_EXPORTER.*'stdout'"):
        CollectorConfig.resolve()


def test_collector_bad_integer_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.MAX_MESSAGE_BYTES.name, "1MB")
    with pytest.raises(ConfigError, match=r"GUARDTRACE_MAX_MESSAGE_BYTES.*'1MB'"):
        CollectorConfig.resolve()


def test_collector_message_size_must_leave_room_for_the_envelope() -> None:
    with pytest.raises(ConfigError, match="GUARDTRACE_MAX_MESSAGE_BYTES must be at least"):
        CollectorConfig.resolve(max_message_bytes=1000)
    config = CollectorConfig.resolve(max_message_bytes=32_768)
    assert 0 < config.payload_chunk_bytes < config.max_message_bytes


def test_collector_kafka_exporter_needs_a_broker() -> None:
    with pytest.raises(ConfigError, match="GUARDTRACE_KAFKA_BOOTSTRAP"):
        CollectorConfig.resolve(kafka_bootstrap="  ", exporter="kafka")
    assert CollectorConfig.resolve(kafka_bootstrap=" ", exporter="none").exporter == "none"


def test_collector_with_changes_copies() -> None:
    config = CollectorConfig.resolve()
    changed = config.with_changes(spans_topic="other")
    assert changed.spans_topic == "other" and config.spans_topic == names.SPANS_TOPIC


# -- StoreConfig -------------------------------------------------------------------------
@pytest.mark.parametrize("url", ["mysql://host/db", "localhost:8123", "chdb-store",
                                 "file:///tmp/x"])
def test_store_bad_scheme(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        StoreConfig.resolve(url=url)
    assert env.CLICKHOUSE_URL.name in str(info.value) and repr(url) in str(info.value)


@pytest.mark.parametrize("database", ["my-db", "1abc", "db;DROP TABLE x", "", "a" * 65,
                                      "spaced name"])
def test_store_bad_database_name(database: str) -> None:
    with pytest.raises(ConfigError) as info:
        StoreConfig.resolve(url="chdb:///tmp/x", database=database)
    assert env.CLICKHOUSE_DATABASE.name in str(info.value)


def test_store_good_names_and_server_urls() -> None:
    config = StoreConfig.resolve(url="https://u:p@ch.example:8443", database="_gt_2")
    assert config.database == "_gt_2"
    assert config.embedded_path is None
    assert StoreConfig.resolve(url="http://localhost:8123").embedded_path is None


def test_store_embedded_relative_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    config = StoreConfig.resolve(url="chdb://data/store")
    assert config.embedded_path == (tmp_path / "data" / "store").resolve()


def test_store_embedded_absolute_path(tmp_path: Path) -> None:
    config = StoreConfig.resolve(url=f"chdb://{tmp_path}/abs/store")
    assert str(tmp_path).startswith("/")  # so the URL above has three slashes
    assert config.embedded_path == (tmp_path / "abs" / "store").resolve()


def test_store_default_is_embedded_under_the_working_directory(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert StoreConfig.resolve().embedded_path == (tmp_path / ".guardtrace" / "store").resolve()


def test_store_environment_and_ttl_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.CLICKHOUSE_DATABASE.name, "from_env")
    monkeypatch.setenv(env.TTL_PAYLOADS_DAYS.name, "3")
    config = StoreConfig.resolve(url="http://h:8123")
    assert (config.database, config.ttl_payloads_days) == ("from_env", 3)
    with pytest.raises(ConfigError, match="GUARDTRACE_TTL_EVENTS_DAYS must be at least 1"):
        StoreConfig.resolve(ttl_events_days=0)


# -- ConsumerConfig ----------------------------------------------------------------------
def test_consumer_argument_environment_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.KAFKA_BOOTSTRAP.name, "env-kafka:9092")
    monkeypatch.setenv(env.CONSUMER_GROUP.name, "env-group")
    monkeypatch.setenv(env.BATCH_MAX_ROWS.name, "500")
    config = ConsumerConfig.resolve(group_id="arg-group", batch_max_seconds=0.5,
                                    session_timeout_ms=9000, heartbeat_interval_ms=None)
    assert config.bootstrap == "env-kafka:9092"
    assert config.group_id == "arg-group"
    assert config.batch_max_rows == 500
    assert config.batch_max_seconds == 0.5
    assert config.session_timeout_ms == 9000
    assert config.heartbeat_interval_ms == ConsumerConfig.__dataclass_fields__[
        "heartbeat_interval_ms"].default
    assert config.topics == (names.SPANS_TOPIC, names.METRICS_TOPIC, names.PAYLOADS_TOPIC,
                             names.LOGS_TOPIC)


def test_consumer_minimums_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="GUARDTRACE_BATCH_MAX_ROWS must be at least 1"):
        ConsumerConfig.resolve(batch_max_rows=0)
    with pytest.raises(ConfigError, match="GUARDTRACE_BATCH_MAX_SECONDS must be at least"):
        ConsumerConfig.resolve(batch_max_seconds=0.0)
    monkeypatch.setenv(env.BATCH_MAX_SECONDS.name, "soon")
    with pytest.raises(ConfigError, match=r"GUARDTRACE_BATCH_MAX_SECONDS.*'soon'"):
        ConsumerConfig.resolve()


def test_consumer_topics_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.PAYLOADS_TOPIC.name, "my_payloads")
    monkeypatch.setenv(env.DEAD_LETTER_TOPIC.name, "my_dlq")
    monkeypatch.setenv(env.LOGS_TOPIC.name, "my_logs")
    config = ConsumerConfig.resolve()
    assert config.topics[2] == "my_payloads"
    assert config.topics[3] == config.logs_topic == "my_logs"
    assert config.dead_letter_topic == "my_dlq"
    assert ConsumerConfig.resolve(logs_topic="arg_logs").topic_set.logs == "arg_logs"
    assert config.topic_set.environment()[env.LOGS_TOPIC.name] == "my_logs"


def test_store_urls_print_with_the_password_masked() -> None:
    from guardtrace.store.connection import StoreConfig, masked_url

    assert masked_url("http://dash:s3cret@clickhouse:8123") == "http://dash:***@clickhouse:8123"
    assert masked_url("https://user@host:8443") == "https://user@host:8443"
    assert masked_url("chdb://.guardtrace/store") == "chdb://.guardtrace/store"
    config = StoreConfig.resolve(url="http://w:p%40ss@ch:8123", database="g")
    assert "p%40ss" not in config.display_url and config.url.endswith("@ch:8123")
