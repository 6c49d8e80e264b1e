"""Every environment variable guardtrace reads, defined and documented once.

Each setting resolves in the same order everywhere: an explicit argument, then the
environment variable named here, then the default named here. The README's
configuration table and the deploy-file checks are derived from :data:`ALL`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from . import names


@dataclass(frozen=True)
class EnvVar:
    """One documented environment variable.

    Attributes:
        name: The variable's name.
        default: The default as a string, as it would be written in the environment.
        help: What it controls, one sentence.
        side: Who reads it: ``collector`` (agent process), ``pipeline`` (consumers,
            dashboard, CLI) or ``both``.
    """

    name: str
    default: str
    help: str
    side: str


KAFKA_BOOTSTRAP: Final = EnvVar(
    "GUARDTRACE_KAFKA_BOOTSTRAP", "127.0.0.1:9092",
    "Kafka bootstrap servers, comma separated.", "both")
EXPORTER: Final = EnvVar(
    "GUARDTRACE_EXPORTER", "kafka",
    "Where the collector sends spans, metrics and logs: `kafka`, `otlp` (to an OTel "
    "Collector via opentelemetry-exporter-otlp; OTEL_EXPORTER_OTLP_* apply) or `none`.",
    "collector")
SERVICE_NAME: Final = EnvVar(
    "GUARDTRACE_SERVICE_NAME", "",
    "service.name resource attribute; empty falls back to OTEL_SERVICE_NAME.", "collector")
SPANS_TOPIC: Final = EnvVar("GUARDTRACE_SPANS_TOPIC", names.SPANS_TOPIC,
                            "Topic for OTLP spans.", "both")
METRICS_TOPIC: Final = EnvVar("GUARDTRACE_METRICS_TOPIC", names.METRICS_TOPIC,
                              "Topic for OTLP metrics.", "both")
LOGS_TOPIC: Final = EnvVar(
    "GUARDTRACE_LOGS_TOPIC", names.LOGS_TOPIC,
    "Topic for OTLP logs (GenAI log events such as "
    "`gen_ai.client.inference.operation.details`).", "both")
PAYLOADS_TOPIC: Final = EnvVar("GUARDTRACE_PAYLOADS_TOPIC", names.PAYLOADS_TOPIC,
                               "Topic for debug-store payloads.", "both")
DEAD_LETTER_TOPIC: Final = EnvVar(
    "GUARDTRACE_DEAD_LETTER_TOPIC", names.DEAD_LETTER_TOPIC,
    "Topic that receives records the consumers cannot decode, with the reason in headers.",
    "pipeline")
MAX_MESSAGE_BYTES: Final = EnvVar(
    "GUARDTRACE_MAX_MESSAGE_BYTES", "1000000",
    "Largest Kafka message the collector produces; span batches and payload chunks are "
    "split below it (Kafka's default limit is 1 MB).", "collector")
PAYLOAD_LIMIT_BYTES: Final = EnvVar(
    "GUARDTRACE_PAYLOAD_LIMIT_BYTES", "8388608",
    "Largest debug payload body kept whole (split into chunks across messages); larger "
    "bodies are truncated with a marker, their original size and sha256.", "collector")
CAPTURE_PAYLOADS: Final = EnvVar(
    "GUARDTRACE_CAPTURE_PAYLOADS", "true",
    "Record full prompts and responses to the debug store.", "collector")
REDACT: Final = EnvVar(
    "GUARDTRACE_REDACT", "true",
    "Redact API keys, bearer tokens, URL passwords and e-mail addresses before "
    "anything leaves the agent process.", "collector")
REDACT_BARE_IDS: Final = EnvVar(
    "GUARDTRACE_REDACT_BARE_IDS", "false",
    "Also redact a hex string (32 digits or more) or UUID alone on its line: a secret of "
    "that shape pasted on a line of its own is caught, and a bare SHA, checksum or "
    "request id on a line of its own becomes a marker too.", "collector")
PAYLOAD_QUEUE_BYTES: Final = EnvVar(
    "GUARDTRACE_PAYLOAD_QUEUE_BYTES", "67108864",
    "Memory bound of the payload queue; payloads beyond it are dropped and counted.",
    "collector")
AGENT_LABEL_CAP: Final = EnvVar(
    "GUARDTRACE_AGENT_LABEL_CAP", "1000",
    "Distinct `agent` label values per metric and module; later ones become `__other__`.",
    "collector")
METRIC_EXPORT_INTERVAL_MS: Final = EnvVar(
    "GUARDTRACE_METRIC_EXPORT_INTERVAL_MS", "10000",
    "How often counters are exported.", "collector")
CLICKHOUSE_URL: Final = EnvVar(
    "GUARDTRACE_CLICKHOUSE_URL", "chdb://.guardtrace/store",
    "ClickHouse to write to and read from: `chdb://DIR` for the embedded engine, "
    "`http(s)://user:password@host:8123` for a server.", "pipeline")
CLICKHOUSE_DATABASE: Final = EnvVar("GUARDTRACE_CLICKHOUSE_DATABASE", "guardtrace",
                                    "ClickHouse database name.", "pipeline")
CONSUMER_GROUP: Final = EnvVar("GUARDTRACE_CONSUMER_GROUP", "guardtrace-consumers",
                               "Kafka consumer group of `guardtrace consume`.", "pipeline")
BATCH_MAX_ROWS: Final = EnvVar(
    "GUARDTRACE_BATCH_MAX_ROWS", "20000",
    "Consumer flushes a batch to ClickHouse at this many records...", "pipeline")
BATCH_MAX_BYTES: Final = EnvVar(
    "GUARDTRACE_BATCH_MAX_BYTES", "67108864",
    "...or at this many bytes of record values (bounds consumer memory with large payloads)...",
    "pipeline")
BATCH_MAX_SECONDS: Final = EnvVar(
    "GUARDTRACE_BATCH_MAX_SECONDS", "1.0",
    "...or after this many seconds, whichever comes first.", "pipeline")
TTL_EVENTS_DAYS: Final = EnvVar("GUARDTRACE_TTL_EVENTS_DAYS", "30",
                                "Days spans, events and metric points are kept.", "pipeline")
TTL_PAYLOADS_DAYS: Final = EnvVar("GUARDTRACE_TTL_PAYLOADS_DAYS", "7",
                                  "Days debug payloads are kept.", "pipeline")
DASHBOARD_CLICKHOUSE_URL: Final = EnvVar(
    "GUARDTRACE_DASHBOARD_CLICKHOUSE_URL", "",
    "The dashboard's own ClickHouse URL, with a read-only user on a server; empty: "
    "the dashboard reads `GUARDTRACE_CLICKHOUSE_URL`.", "pipeline")
DASHBOARD_PORT: Final = EnvVar("GUARDTRACE_DASHBOARD_PORT", "8501",
                               "Port the dashboard serves on (`up`, `dashboard`).", "pipeline")
API_PORT: Final = EnvVar(
    "GUARDTRACE_API_PORT", "",
    "Port `guardtrace up` serves the HTTP query API on; empty: one above the dashboard's "
    "port (8502 by default); 0 serves no API.", "pipeline")
DASHBOARD_TOKEN: Final = EnvVar(
    "GUARDTRACE_DASHBOARD_TOKEN", "",
    "Shared sign-in token of the dashboard (16 characters or more); with it, or OIDC "
    "sign-in, the dashboard may serve beyond loopback.", "pipeline")
DASHBOARD_ALLOWED_EMAILS: Final = EnvVar(
    "GUARDTRACE_DASHBOARD_ALLOWED_EMAILS", "",
    "E-mail addresses, comma separated, that may sign in to the dashboard with OIDC "
    "(Streamlit's `[auth]` secrets).", "pipeline")
DASHBOARD_ALLOWED_DOMAINS: Final = EnvVar(
    "GUARDTRACE_DASHBOARD_ALLOWED_DOMAINS", "",
    "E-mail domains, comma separated, whose verified addresses may sign in to the "
    "dashboard with OIDC.", "pipeline")
DASHBOARD_TOP_AGENTS: Final = EnvVar(
    "GUARDTRACE_DASHBOARD_TOP_AGENTS", "10",
    "Agents the overview lists by name; the rest are folded into `__other__`.", "pipeline")
LOG_LEVEL: Final = EnvVar("GUARDTRACE_LOG_LEVEL", "INFO",
                          "Log level of the guardtrace command.", "pipeline")
HEALTH_PORT: Final = EnvVar(
    "GUARDTRACE_HEALTH_PORT", "0",
    "Port on which `guardtrace consume` serves `/healthz` and `/readyz` for probes and "
    "`/metrics` for Prometheus; 0 serves nothing.", "pipeline")
PIPELINE_DETECTION: Final = EnvVar(
    "GUARDTRACE_PIPELINE_DETECTION", "on",
    "Zero-code detection: the consumers run the guards' detectors on the OpenInference and "
    "OpenTelemetry GenAI LLM spans they store and write what they find as guard events "
    "(`on` or `off`).", "pipeline")
ALERT_RULES: Final = EnvVar(
    "GUARDTRACE_ALERT_RULES", "",
    "Alert rules file (TOML) that `guardtrace up` evaluates and the dashboard's Alerts page "
    "shows; empty: no alerts (`guardtrace alerts run` and `alerts test` take the file as an "
    "argument).",
    "pipeline")
ALERT_INTERVAL_SECONDS: Final = EnvVar(
    "GUARDTRACE_ALERT_INTERVAL_SECONDS", "60",
    "How often the alert rules are evaluated (`up`, `alerts run`).", "pipeline")
ALERT_DEAD_LETTER_LOG: Final = EnvVar(
    "GUARDTRACE_ALERT_DEAD_LETTER_LOG", ".guardtrace/alert_dead_letters.jsonl",
    "JSON-lines file to which alert notifications still undelivered after every retry are "
    "appended.", "pipeline")
EMBEDDED_BROKER_MAX_RSS_MB: Final = EnvVar(
    "GUARDTRACE_EMBEDDED_BROKER_MAX_RSS_MB", "256",
    "Resident memory (MB) at which `guardtrace up` replaces its embedded broker, which keeps "
    "every record in memory, with a fresh one once its consumer has drained the old; 0 "
    "never replaces it. Producers of your own that write to the embedded broker must not "
    "be idempotent (guardtrace's are not): a fresh broker refuses an idempotent producer's "
    "id.", "pipeline")

# Transport security: read by schemas/transport_security.py, which every Kafka client and
# every ClickHouse server connection takes its settings from.
KAFKA_SECURITY_PROTOCOL: Final = EnvVar(
    "GUARDTRACE_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT",
    "How Kafka clients connect: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.", "both")
KAFKA_SASL_MECHANISM: Final = EnvVar(
    "GUARDTRACE_KAFKA_SASL_MECHANISM", "",
    "SASL mechanism with a `SASL_*` protocol: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.",
    "both")
KAFKA_SASL_USERNAME: Final = EnvVar(
    "GUARDTRACE_KAFKA_SASL_USERNAME", "", "SASL user name (required with a `SASL_*` protocol).",
    "both")
KAFKA_SASL_PASSWORD: Final = EnvVar(
    "GUARDTRACE_KAFKA_SASL_PASSWORD", "",
    "SASL password (required with a `SASL_*` protocol); never printed.", "both")
KAFKA_SSL_CA_FILE: Final = EnvVar(
    "GUARDTRACE_KAFKA_SSL_CA_FILE", "",
    "PEM file of the CAs that sign the brokers' certificates; empty: the system's CAs.", "both")
KAFKA_SSL_CERT_FILE: Final = EnvVar(
    "GUARDTRACE_KAFKA_SSL_CERT_FILE", "",
    "PEM client certificate, for brokers that require one (mutual TLS).", "both")
KAFKA_SSL_KEY_FILE: Final = EnvVar(
    "GUARDTRACE_KAFKA_SSL_KEY_FILE", "",
    "PEM private key of the client certificate; empty: the key is in the certificate file.",
    "both")
KAFKA_SSL_KEY_PASSWORD: Final = EnvVar(
    "GUARDTRACE_KAFKA_SSL_KEY_PASSWORD", "",
    "Password of an encrypted client key; never printed.", "both")
KAFKA_SSL_CHECK_HOSTNAME: Final = EnvVar(
    "GUARDTRACE_KAFKA_SSL_CHECK_HOSTNAME", "true",
    "Check that a broker's certificate names the host connected to.", "both")
CLICKHOUSE_TLS_VERIFY: Final = EnvVar(
    "GUARDTRACE_CLICKHOUSE_TLS_VERIFY", "true",
    "Verify the certificate of an `https://` ClickHouse server (false: encrypted, but any "
    "server is trusted).", "pipeline")
CLICKHOUSE_CA_FILE: Final = EnvVar(
    "GUARDTRACE_CLICKHOUSE_CA_FILE", "",
    "PEM file of the CAs that sign the ClickHouse server's certificate; empty: the "
    "system's CAs.", "pipeline")
CLICKHOUSE_CLIENT_CERT_FILE: Final = EnvVar(
    "GUARDTRACE_CLICKHOUSE_CLIENT_CERT_FILE", "",
    "PEM client certificate for a ClickHouse server that requires one (mutual TLS).",
    "pipeline")
CLICKHOUSE_CLIENT_KEY_FILE: Final = EnvVar(
    "GUARDTRACE_CLICKHOUSE_CLIENT_KEY_FILE", "",
    "Unencrypted PEM key of the ClickHouse client certificate; empty: the key is in the "
    "certificate file.", "pipeline")

ALL: Final = (
    KAFKA_BOOTSTRAP, EXPORTER, SERVICE_NAME, SPANS_TOPIC, METRICS_TOPIC, LOGS_TOPIC,
    PAYLOADS_TOPIC, DEAD_LETTER_TOPIC, MAX_MESSAGE_BYTES, PAYLOAD_LIMIT_BYTES,
    CAPTURE_PAYLOADS, REDACT, REDACT_BARE_IDS, PAYLOAD_QUEUE_BYTES, AGENT_LABEL_CAP,
    METRIC_EXPORT_INTERVAL_MS,
    CLICKHOUSE_URL,
    CLICKHOUSE_DATABASE, CONSUMER_GROUP, BATCH_MAX_ROWS, BATCH_MAX_BYTES, BATCH_MAX_SECONDS,
    TTL_EVENTS_DAYS, TTL_PAYLOADS_DAYS, DASHBOARD_CLICKHOUSE_URL, DASHBOARD_PORT, API_PORT,
    DASHBOARD_TOP_AGENTS, LOG_LEVEL, HEALTH_PORT, PIPELINE_DETECTION, DASHBOARD_TOKEN,
    DASHBOARD_ALLOWED_EMAILS,
    DASHBOARD_ALLOWED_DOMAINS, KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_MECHANISM,
    KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_SSL_CA_FILE, KAFKA_SSL_CERT_FILE,
    KAFKA_SSL_KEY_FILE, KAFKA_SSL_KEY_PASSWORD, KAFKA_SSL_CHECK_HOSTNAME, CLICKHOUSE_TLS_VERIFY,
    CLICKHOUSE_CA_FILE, CLICKHOUSE_CLIENT_CERT_FILE, CLICKHOUSE_CLIENT_KEY_FILE,
    ALERT_RULES, ALERT_INTERVAL_SECONDS, ALERT_DEAD_LETTER_LOG, EMBEDDED_BROKER_MAX_RSS_MB,
)


class ConfigError(ValueError):
    """A setting has a value guardtrace cannot use; the message names the setting."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(var: EnvVar, explicit: object, environ: Mapping[str, str] | None) -> tuple[object, str]:
    """Return the winning value and where it came from (for error messages)."""
    if explicit is not None:
        return explicit, "argument"
    env = os.environ if environ is None else environ
    value = env.get(var.name)
    if value is not None and value.strip() != "":
        return value.strip(), var.name
    return var.default, f"default of {var.name}"


def read_str(var: EnvVar, explicit: str | None = None,
             environ: Mapping[str, str] | None = None) -> str:
    """Resolve a string setting: argument, then environment, then default."""
    return str(_raw(var, explicit, environ)[0])


def read_int(var: EnvVar, explicit: int | None = None,
             environ: Mapping[str, str] | None = None, *, minimum: int = 0) -> int:
    """Resolve an integer setting; a non-integer or too-small value raises ConfigError."""
    value, source = _raw(var, explicit, environ)
    try:
        if isinstance(value, (float, bool)):
            raise ValueError  # 3.7 is not an integer; do not truncate it silently
        number = value if isinstance(value, int) else int(str(value))
    except (TypeError, ValueError):
        raise ConfigError(f"{var.name} must be an integer, got {value!r} (from {source})") from None
    if number < minimum:
        raise ConfigError(f"{var.name} must be at least {minimum}, got {number} (from {source})")
    return number


def read_float(var: EnvVar, explicit: float | None = None,
               environ: Mapping[str, str] | None = None, *, minimum: float = 0.0) -> float:
    """Resolve a float setting; a non-number or too-small value raises ConfigError."""
    value, source = _raw(var, explicit, environ)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{var.name} must be a number, got {value!r} (from {source})") from None
    if number < minimum:
        raise ConfigError(f"{var.name} must be at least {minimum}, got {number} (from {source})")
    return number


def read_bool(var: EnvVar, explicit: bool | None = None,
              environ: Mapping[str, str] | None = None) -> bool:
    """Resolve a boolean setting from true/false, yes/no, on/off or 1/0."""
    value, source = _raw(var, explicit, environ)
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{var.name} must be true or false, got {value!r} (from {source})")


def read_choice(var: EnvVar, choices: tuple[str, ...], explicit: str | None = None,
                environ: Mapping[str, str] | None = None) -> str:
    """Resolve a setting that must be one of ``choices`` (case-insensitive)."""
    value, source = _raw(var, explicit, environ)
    text = str(value).lower()
    if text not in choices:
        raise ConfigError(
            f"{var.name} must be one of {', '.join(choices)}, got {value!r} (from {source})")
    return text
