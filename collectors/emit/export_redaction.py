"""Redaction of every span, point and log record guardtrace's providers export, whoever made it.

``configure()`` installs guardtrace's providers as the OTel globals, so other
instrumentations (an LLM client's, an HTTP client's, the agent's own) record prompts,
URLs and exception messages on spans that leave through guardtrace's exporters. The
hooks redact what they record themselves; these exporter wrappers redact everything, at
the last point before encoding:

* spans: name, attributes, status description; each event's name and attributes (an
  exception event's ``exception.message`` and ``exception.stacktrace``); each link's
  attributes. The resource (service name, host, SDK version) is the deployment's
  configuration, not user text, and is left as it is, as are the instrumentation scope
  and the ids.
* metric points: attributes, and each exemplar's filtered attributes. Metric names,
  descriptions and units come from instrument definitions in code.
* log records (GenAI log events carry a call's whole prompt and reply): the body, as a
  string or as every string of a map or array body, and the attributes. Event name,
  severity, scope, resource and ids are code's and the deployment's, and are kept.

Why a wrapped exporter and not a span processor: ``SpanProcessor.on_end`` runs on the
thread that ends the span, the agent's, and a ``ReadableSpan`` cannot be changed there,
so a processor would copy and redact every span on the agent's thread (an exception's
stack trace alone is kilobytes of text for the rules). An exporter runs on the batch
span processor's worker (metrics: on the periodic reader's), so the agent pays nothing.
It works on the SDK's objects, not on the encoded protobuf: reading the strings back
out of protobuf messages took about 1.6x reading them from the SDK's spans (measured on
LLM-client spans of eight attributes), and the same wrapper then serves every exporter
(Kafka and OTLP/gRPC). A span or point is copied only where a secret was found; the
rest go to the encoder as they came. benchmarks/hook_overhead.py measures the cost per
span against the unredacted export.

Each value is redacted by :meth:`Redactor.redact_counted`, as payloads are: linear
time, a bounded number of decisions per rule, long values in slices.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Status

from ...schemas import names
from .internal import count_internal, log_rate_limited
from .redaction import Redactor

__all__ = ["RedactingLogExporter", "RedactingMetricExporter", "RedactingSpanExporter",
           "redact_log_record", "redact_metrics", "redact_span", "redacting_exporters",
           "redacting_log_exporter"]


class _RedactedSpan(ReadableSpan):
    """A redacted copy of a span that still reports what the SDK dropped from the
    original (the OTLP encoder exports those counts)."""

    def __init__(self, original: ReadableSpan, name: str, attributes: Any,
                 events: Sequence[Event], links: Sequence[Link], status: Status) -> None:
        super().__init__(
            name=name, context=original.context, parent=original.parent,
            resource=original.resource, attributes=attributes, events=events, links=links,
            kind=original.kind, status=status, start_time=original.start_time,
            end_time=original.end_time,
            instrumentation_scope=original.instrumentation_scope)
        self._dropped = (original.dropped_attributes, original.dropped_events,
                         original.dropped_links)

    @property
    def dropped_attributes(self) -> int:
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        return self._dropped[1]

    @property
    def dropped_links(self) -> int:
        return self._dropped[2]


class _RedactedEvent(Event):
    """A redacted copy of an event, with the original's dropped-attribute count."""

    def __init__(self, original: Event, name: str, attributes: Any) -> None:
        super().__init__(name, attributes, original.timestamp)
        self._dropped = original.dropped_attributes

    @property
    def dropped_attributes(self) -> int:
        return self._dropped


class _RedactedLink(Link):
    """A redacted copy of a link, with the original's dropped-attribute count."""

    def __init__(self, original: Link, attributes: Any) -> None:
        super().__init__(original.context, attributes)
        self._dropped = original.dropped_attributes

    @property
    def dropped_attributes(self) -> int:
        return self._dropped


def redact_span(span: ReadableSpan, redactor: Redactor) -> ReadableSpan:
    """``span`` as it may leave the process: itself when it holds no secret, else a
    redacted copy."""
    name, found = redactor.redact_counted(span.name)
    attributes = redactor.redact_attributes(span.attributes)
    changed = found > 0 or attributes is not None

    events: list[Event] = []
    for event in span.events:
        event_name, found = redactor.redact_counted(event.name)
        event_attributes = redactor.redact_attributes(event.attributes)
        if found or event_attributes is not None:
            changed = True
            events.append(_RedactedEvent(event, event_name, event_attributes
                                         if event_attributes is not None else event.attributes))
        else:
            events.append(event)

    links: list[Link] = []
    for link in span.links:
        link_attributes = redactor.redact_attributes(link.attributes)
        if link_attributes is None:
            links.append(link)
        else:
            changed = True
            links.append(_RedactedLink(link, link_attributes))

    status = span.status
    if status.description:
        description, found = redactor.redact_counted(status.description)
        if found:
            changed = True
            status = Status(status.status_code, description)

    if not changed:
        return span
    return _RedactedSpan(span, name, span.attributes if attributes is None else attributes,
                         events, links, status)


def redact_metrics(data: MetricsData, redactor: Redactor) -> MetricsData:
    """``data`` as it may leave the process: itself when no point holds a secret, else a
    copy in which only the containers on the way to a redacted point are new."""
    resources = [_replaced(resource, "scope_metrics",
                           [_replaced(scope, "metrics",
                                      [_redact_metric(metric, redactor)
                                       for metric in scope.metrics])
                            for scope in resource.scope_metrics])
                 for resource in data.resource_metrics]
    return _replaced(data, "resource_metrics", resources)


def _redact_metric(metric: Any, redactor: Redactor) -> Any:
    points = getattr(metric.data, "data_points", None)
    if not points:
        return metric
    data = _replaced(metric.data, "data_points",
                     [_redact_point(point, redactor) for point in points])
    return metric if data is metric.data else dataclasses.replace(metric, data=data)


def _redact_point(point: Any, redactor: Redactor) -> Any:
    changes: dict[str, Any] = {}
    attributes = redactor.redact_attributes(point.attributes)
    if attributes is not None:
        changes["attributes"] = attributes
    exemplars = point.exemplars
    if exemplars:
        redacted = [_redact_exemplar(exemplar, redactor) for exemplar in exemplars]
        if any(new is not old for new, old in zip(redacted, exemplars, strict=True)):
            changes["exemplars"] = redacted
    return dataclasses.replace(point, **changes) if changes else point


def _redact_exemplar(exemplar: Any, redactor: Redactor) -> Any:
    attributes = redactor.redact_attributes(exemplar.filtered_attributes)
    return exemplar if attributes is None else dataclasses.replace(
        exemplar, filtered_attributes=attributes)


def _replaced(container: Any, field: str, items: list[Any]) -> Any:
    """``container`` itself when every item of ``field`` is the one it holds, else a copy
    holding ``items``."""
    if all(new is old for new, old in zip(items, getattr(container, field), strict=True)):
        return container
    return dataclasses.replace(container, **{field: items})


class RedactingSpanExporter(SpanExporter):
    """Redacts every span (:func:`redact_span`) on the export thread, then hands the
    batch to ``exporter``.

    A span whose redaction fails is dropped and counted
    (``guardtrace.export_dropped{reason="redaction_failed"}``), never exported as it was.
    """

    def __init__(self, exporter: SpanExporter, redactor: Redactor) -> None:
        self._exporter = exporter
        self._redactor = redactor

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        redacted: list[ReadableSpan] = []
        for span in spans:
            try:
                redacted.append(redact_span(span, self._redactor))
            except Exception as exc:  # noqa: BLE001 - fail closed: the span is not sent
                _redaction_failed("spans", 1, exc)
        result = self._exporter.export(redacted) if redacted else SpanExportResult.SUCCESS
        return result if len(redacted) == len(spans) else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._exporter.shutdown()


class RedactingMetricExporter(MetricExporter):
    """Redacts every metric point (:func:`redact_metrics`) on the reader's thread, then
    hands the data to ``exporter``; keeps the temporality and aggregation it prefers.

    If redaction fails, the whole export is dropped and counted, never sent as it was.
    """

    def __init__(self, exporter: MetricExporter, redactor: Redactor) -> None:
        # The reader reads the preferences from the exporter it is given: this one.
        super().__init__(preferred_temporality=exporter._preferred_temporality,  # noqa: SLF001
                         preferred_aggregation=exporter._preferred_aggregation)  # noqa: SLF001
        self._exporter = exporter
        self._redactor = redactor

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        try:
            redacted = redact_metrics(metrics_data, self._redactor)
        except Exception as exc:  # noqa: BLE001 - fail closed: nothing unredacted is sent
            _redaction_failed("metrics", sum(len(scope.metrics)
                                             for resource in metrics_data.resource_metrics
                                             for scope in resource.scope_metrics), exc)
            return MetricExportResult.FAILURE
        return self._exporter.export(redacted, timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._exporter.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._exporter.shutdown(timeout_millis=timeout_millis, **kwargs)


def redact_log_record(record: ReadableLogRecord, redactor: Redactor) -> ReadableLogRecord:
    """``record`` as it may leave the process: itself when it holds no secret, else a
    copy with its body and attributes redacted (and the SDK's dropped-attribute count)."""
    api_record = record.log_record
    body, found = _redact_body(api_record.body, redactor)
    attributes = redactor.redact_attributes(api_record.attributes)
    if not found and attributes is None:
        return record
    redacted = copy.copy(api_record)
    redacted.body = body
    if attributes is not None:
        kept = BoundedAttributes(attributes=attributes)
        kept.dropped = record.dropped_attributes
        redacted.attributes = kept
    return dataclasses.replace(record, log_record=redacted)


def _redact_body(body: Any, redactor: Redactor) -> tuple[Any, int]:
    if isinstance(body, str):
        return redactor.redact_counted(body)
    if isinstance(body, (Mapping, Sequence)) and not isinstance(body, (bytes, bytearray)):
        # The SDK leaves a body as the caller gave it, and the encoder takes any mapping or
        # sequence; the redactor walks dicts, lists and tuples, so others become those.
        new, found = redactor.redact_structure(_plain(body, 0))
        return (new, found) if found else (body, 0)
    return body, 0


def _plain(value: Any, depth: int) -> Any:
    """``value`` with every mapping a dict and every sequence a list or tuple."""
    if isinstance(value, (str, bytes, bytearray)) or depth > 200:
        return value
    if isinstance(value, Mapping):
        return {key: _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, Sequence):
        return [_plain(item, depth + 1) for item in value]
    return value


class RedactingLogExporter(LogRecordExporter):
    """Redacts every log record (:func:`redact_log_record`) on the export thread, then
    hands the batch to ``exporter``.

    A record whose redaction fails is dropped and counted, never exported as it was.
    """

    def __init__(self, exporter: LogRecordExporter, redactor: Redactor) -> None:
        self._exporter = exporter
        self._redactor = redactor

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        redacted: list[ReadableLogRecord] = []
        for record in batch:
            try:
                redacted.append(redact_log_record(record, self._redactor))
            except Exception as exc:  # noqa: BLE001 - fail closed: the record is not sent
                _redaction_failed("logs", 1, exc)
        result = (self._exporter.export(redacted) if redacted
                  else LogRecordExportResult.SUCCESS)
        return result if len(redacted) == len(batch) else LogRecordExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._exporter.shutdown()


def _redaction_failed(signal: str, items: int, exc: BaseException) -> None:
    log_rate_limited(f"redact-{signal}", "guardtrace could not redact %s, dropped them: %r",
                     signal, exc)
    count_internal(names.METRIC_EXPORT_DROPPED, items,
                   {"signal": signal, names.ATTR_REASON: "redaction_failed"})


def redacting_exporters(span_exporter: SpanExporter, metric_exporter: MetricExporter,
                        redactor: Redactor) -> tuple[SpanExporter, MetricExporter]:
    """The exporters wrapped to redact, or as they are when redaction is off
    (``GUARDTRACE_REDACT=false``, which turns payload redaction off too)."""
    if not redactor.enabled:
        return span_exporter, metric_exporter
    # Its own memo: the export thread's values must not evict the hooks' (see there).
    redactor = redactor.with_own_memo()
    return (RedactingSpanExporter(span_exporter, redactor),
            RedactingMetricExporter(metric_exporter, redactor))


def redacting_log_exporter(exporter: LogRecordExporter,
                           redactor: Redactor) -> LogRecordExporter:
    """The log exporter wrapped to redact, or as it is when redaction is off (the same
    switch as spans, points and payloads)."""
    if not redactor.enabled:
        return exporter
    return RedactingLogExporter(exporter, redactor.with_own_memo())
