"""Every span and metric point guardtrace's providers export leaves redacted, whoever
recorded it: another instrumentation's prompt attributes and exception events too.

configure() runs with its exporters swapped for in-memory ones (the SDK's span exporter,
a list-backed metric exporter of ours), so what is checked is what the Kafka exporter
would have been handed.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import Counter
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, StatusCode

from guardtrace import collectors
from guardtrace.collectors import setup
from guardtrace.collectors.emit.export_redaction import (
    RedactingMetricExporter,
    RedactingSpanExporter,
)
from guardtrace.collectors.emit.internal import internal_totals
from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.transport.broker import free_port

FOREIGN_SCOPE = "other.instrumentation"
OPENAI_MARKER = "[REDACTED:api_key]"


def _openai_key(seed: int = 5) -> str:
    rng = random.Random(seed)
    return "sk-proj-" + "".join(rng.choice(string.ascii_letters + string.digits)
                                for _ in range(40))


KEY = _openai_key()


class ListMetricExporter(MetricExporter):
    """Keeps what it is handed, as the Kafka metric exporter would receive it."""

    def __init__(self) -> None:
        super().__init__(preferred_temporality={Counter: AggregationTemporality.DELTA})
        self.exported: list[MetricsData] = []

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        self.exported.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None

    def points(self, metric_name: str) -> list[Any]:
        return [point for data in self.exported for resource in data.resource_metrics
                for scope in resource.scope_metrics for metric in scope.metrics
                if metric.name == metric_name for point in metric.data.data_points]


class InMemoryExports:
    """The exporters configure() builds, replaced by in-memory ones."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = ListMetricExporter()


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryExports]:
    for var in env.ALL:
        monkeypatch.delenv(var.name, raising=False)
    collectors.shutdown(timeout_s=2.0)
    memory = InMemoryExports()
    monkeypatch.setattr(setup, "_exporters",
                        lambda config, producer, resource: (memory.spans, memory.metrics))
    try:
        yield memory
    finally:
        collectors.shutdown(timeout_s=2.0)


def _configure(**settings: Any) -> collectors.Telemetry:
    return collectors.configure(set_global=False, capture_payloads=False,
                                kafka_bootstrap=f"127.0.0.1:{free_port()}", **settings)


def _foreign_span_with_an_exception(telemetry: collectors.Telemetry) -> None:
    """What an LLM client's instrumentation records: the prompt, the messages, and the
    provider's error, which quotes the key, as an exception event and status."""
    tracer = telemetry.tracer_provider.get_tracer(FOREIGN_SCOPE)
    with pytest.raises(PermissionError), tracer.start_as_current_span(
            "chat gpt-4o", links=[Link(_context(tracer), {"note": f"retry of {KEY}"})]
    ) as span:
        span.set_attribute("gen_ai.prompt", f"Use my key {KEY} for the call")
        span.set_attribute("gen_ai.messages", (f"key={KEY}", "hello"))
        span.set_attribute("gen_ai.usage.input_tokens", 12)
        span.set_attribute("gen_ai.request.model", "gpt-4o")
        span.add_event(f"retrying with {KEY}", {"attempt": 2})
        raise PermissionError(f"Incorrect API key provided: {KEY}")


def _context(tracer: Any) -> Any:
    with tracer.start_as_current_span("earlier") as earlier:
        return earlier.get_span_context()


def test_a_foreign_span_leaves_redacted_attributes_events_links_and_status(
        exports: InMemoryExports) -> None:
    telemetry = _configure()
    _foreign_span_with_an_exception(telemetry)
    telemetry.force_flush(timeout_s=5.0)

    (span,) = [s for s in exports.spans.get_finished_spans() if s.name == "chat gpt-4o"]
    assert span.instrumentation_scope.name == FOREIGN_SCOPE
    encoded = encode_spans([span]).SerializeToString()
    assert KEY.encode() not in encoded and KEY not in span.to_json()

    assert span.attributes["gen_ai.prompt"] == f"Use my key {OPENAI_MARKER} for the call"
    assert list(span.attributes["gen_ai.messages"]) == [f"key={OPENAI_MARKER}", "hello"]
    assert span.attributes["gen_ai.usage.input_tokens"] == 12
    assert span.attributes["gen_ai.request.model"] == "gpt-4o"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == f"PermissionError: Incorrect API key provided: {OPENAI_MARKER}"
    retry, exception = span.events
    assert (retry.name, dict(retry.attributes)) == (f"retrying with {OPENAI_MARKER}",
                                                    {"attempt": 2})
    assert exception.name == "exception"
    assert exception.attributes["exception.message"] == (
        f"Incorrect API key provided: {OPENAI_MARKER}")
    assert exception.attributes["exception.stacktrace"].endswith(
        f"PermissionError: Incorrect API key provided: {OPENAI_MARKER}\n")
    assert exception.attributes["exception.type"] == "PermissionError"
    assert dict(span.links[0].attributes) == {"note": f"retry of {OPENAI_MARKER}"}


def test_a_foreign_metric_point_leaves_redacted(exports: InMemoryExports) -> None:
    telemetry = _configure()
    meter = telemetry.meter_provider.get_meter(FOREIGN_SCOPE)
    meter.create_counter("other.requests").add(1, {"prompt": f"key {KEY}", "model": "gpt-4o"})
    telemetry.force_flush(timeout_s=5.0)

    (point,) = exports.metrics.points("other.requests")
    assert dict(point.attributes) == {"prompt": f"key {OPENAI_MARKER}", "model": "gpt-4o"}


def test_the_payload_redaction_switch_governs_spans_and_points_too(
        exports: InMemoryExports) -> None:
    telemetry = _configure(redact=False)
    _foreign_span_with_an_exception(telemetry)
    telemetry.meter_provider.get_meter(FOREIGN_SCOPE).create_counter("other.requests").add(
        1, {"prompt": f"key {KEY}"})
    telemetry.force_flush(timeout_s=5.0)
    assert KEY in exports.spans.get_finished_spans()[-1].to_json()
    assert exports.metrics.points("other.requests")[0].attributes["prompt"] == f"key {KEY}"

    collectors.shutdown(timeout_s=2.0)  # shuts its exporters down: new ones for the next
    exports.spans, exports.metrics = InMemorySpanExporter(), ListMetricExporter()
    telemetry = _configure()  # the default: on, as payload redaction is
    _foreign_span_with_an_exception(telemetry)
    telemetry.meter_provider.get_meter(FOREIGN_SCOPE).create_counter("other.requests").add(
        1, {"prompt": f"key {KEY}"})
    telemetry.force_flush(timeout_s=5.0)
    assert KEY not in exports.spans.get_finished_spans()[-1].to_json()
    assert exports.metrics.points("other.requests")[0].attributes["prompt"] == (
        f"key {OPENAI_MARKER}")


# -- the exporters on their own ------------------------------------------------------------
def _provider(exporter: Any, limits: SpanLimits | None = None) -> TracerProvider:
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_a_span_without_secrets_goes_to_the_exporter_as_it_came() -> None:
    seen: list[Any] = []

    class Recording(InMemorySpanExporter):
        def export(self, spans: Any) -> Any:
            seen.extend(spans)
            return super().export(spans)

    redacting = RedactingSpanExporter(Recording(), Redactor())
    unwrapped = InMemorySpanExporter()
    provider = _provider(redacting)
    provider.add_span_processor(SimpleSpanProcessor(unwrapped))
    with provider.get_tracer(FOREIGN_SCOPE).start_as_current_span("plain") as span:
        span.set_attribute("http.url", "https://example.com/items?page=2")
    assert seen == list(unwrapped.get_finished_spans())  # the same objects, not copies
    assert seen[0] is unwrapped.get_finished_spans()[0]


def test_a_redacted_copy_keeps_what_the_sdk_dropped() -> None:
    memory = InMemorySpanExporter()
    limits = SpanLimits(max_span_attributes=2, max_events=1, max_links=1,
                        max_event_attributes=1, max_link_attributes=1)
    provider = _provider(RedactingSpanExporter(memory, Redactor()), limits)
    tracer = provider.get_tracer(FOREIGN_SCOPE)
    other = _context(tracer)
    # The SDK keeps the newest of each (so the secrets come last) and counts the rest.
    links = [Link(other, {"c": "y"}), Link(other, {"b": "x", "a": KEY})]
    with tracer.start_as_current_span("span", links=links) as span:
        span.set_attributes({"one": "a", "two": "b", "three": KEY})
        span.add_event("first")
        span.add_event("second", {"other": "x", "third": "y", "secret": KEY})
    (exported,) = [s for s in memory.get_finished_spans() if s.name == "span"]
    proto = encode_spans([exported]).resource_spans[0].scope_spans[0].spans[0]
    assert KEY.encode() not in proto.SerializeToString()
    assert (proto.dropped_attributes_count, proto.dropped_events_count,
            proto.dropped_links_count) == (1, 1, 1)
    assert proto.events[0].dropped_attributes_count == 2
    assert proto.links[0].dropped_attributes_count == 1
    assert exported.attributes["three"] == OPENAI_MARKER  # a copy was made, and redacted
    assert exported.events[0].attributes["secret"] == OPENAI_MARKER
    assert exported.links[0].attributes["a"] == OPENAI_MARKER


@pytest.mark.parametrize("attributes, expected", [
    ({"db.password": "hunter2hunter2", "db.user": "app"},
     {"db.password": "[REDACTED:secret_assignment]", "db.user": "app"}),
    ({"gen_ai.messages": ({"role": "user", "content": f"key {KEY}"},)},
     {"gen_ai.messages": [{"role": "user", "content": f"key {OPENAI_MARKER}"}]}),
    ({"tries": (1, 2), "ok": True, "ratio": 0.5, "url": "https://bob:hunter2@db/x"},
     {"tries": (1, 2), "ok": True, "ratio": 0.5,
      "url": "https://bob:[REDACTED:url_password]@db/x"}),
])
def test_span_attribute_values_are_redacted_as_bodies_are(
        attributes: dict[str, Any], expected: dict[str, Any]) -> None:
    memory = InMemorySpanExporter()
    provider = _provider(RedactingSpanExporter(memory, Redactor()))
    for _ in range(2):  # the second time the memo answers: same result
        memory.clear()
        with provider.get_tracer(FOREIGN_SCOPE).start_as_current_span("s") as span:
            span.set_attributes(attributes)
        assert dict(memory.get_finished_spans()[0].attributes) == expected


def test_a_value_remembered_clean_under_one_key_is_still_a_secret_under_another() -> None:
    # Attributes found clean are remembered as (key, value) pairs: the same value under
    # a secret's name is a secret assignment, and a tuple remembered clean does not
    # answer for an equal-looking one holding a secret.
    redactor = Redactor()
    token = "hunter2hunter2"
    for _ in range(3):
        assert redactor.redact_attributes({"note": token, "tools": ("read_file", "x")}) is None
    assert redactor.redact_attributes({"db.password": token}) == {
        "db.password": "[REDACTED:secret_assignment]"}
    assert redactor.redact_attributes({"tools": ("read_file", KEY)}) == {
        "tools": ["read_file", OPENAI_MARKER]}
    # A value equal in Python but of another type is judged on its own.
    assert redactor.redact_attributes({"n": (1, 2)}) is None
    assert redactor.redact_attributes({"n": (True, f"key {KEY}")}) == {
        "n": [True, f"key {OPENAI_MARKER}"]}


def test_remembered_clean_attributes_stay_bounded() -> None:
    redactor = Redactor()
    for n in range(3 * 4096):
        assert redactor.redact_attributes({"request_id": f"req-{n}"}) is None
    remembered = sum(len(values) for values in redactor._clean_attributes.values())
    assert 0 < remembered <= 4096
    long_value = "word " * 200  # longer than a remembered value
    assert redactor.redact_attributes({"text": long_value}) is None
    assert long_value not in redactor._clean_attributes.get("text", ())


def test_a_span_whose_redaction_fails_is_dropped_and_counted() -> None:
    class Broken(Redactor):
        def redact_counted(self, text: str) -> tuple[str, int]:
            raise RuntimeError("rule blew up")

    key = f"{names.METRIC_EXPORT_DROPPED}{{redaction_failed}}"
    before = internal_totals(names.METRIC_EXPORT_DROPPED).get(key, 0)
    memory = InMemorySpanExporter()
    provider = _provider(RedactingSpanExporter(memory, Broken()))
    with provider.get_tracer(FOREIGN_SCOPE).start_as_current_span("s") as span:
        span.set_attribute("prompt", f"key {KEY}")
    assert memory.get_finished_spans() == ()
    assert internal_totals(names.METRIC_EXPORT_DROPPED).get(key, 0) == before + 1


def test_the_metric_wrapper_keeps_the_temporality_its_exporter_prefers() -> None:
    inner = ListMetricExporter()
    wrapper = RedactingMetricExporter(inner, Redactor())
    assert wrapper._preferred_temporality == inner._preferred_temporality


def test_bare_ids_are_redacted_only_when_the_setting_asks(exports: InMemoryExports,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    # A Heroku-style key that is a valid UUID, alone on a line: no shape tells it from a
    # request id, so only GUARDTRACE_REDACT_BARE_IDS redacts it.
    key = "832d2129-a846-4e27-99f4-7004b6ad53ef"
    prompt = f"Here it is:\n{key}\nthanks"
    for setting, kept in (("false", True), ("true", False)):
        monkeypatch.setenv(env.REDACT_BARE_IDS.name, setting)
        exports.spans = InMemorySpanExporter()
        telemetry = _configure()
        with telemetry.tracer_provider.get_tracer(FOREIGN_SCOPE).start_as_current_span(
                "chat") as span:
            span.set_attribute("gen_ai.prompt", prompt)
        telemetry.force_flush(timeout_s=5.0)
        exported = exports.spans.get_finished_spans()[-1].attributes["gen_ai.prompt"]
        assert (key in exported) is kept, (setting, exported)
        collectors.shutdown(timeout_s=2.0)
