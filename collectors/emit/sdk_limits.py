"""Where guardtrace meets two silent limits of the OpenTelemetry SDK, and makes them loud.

* Cardinality: the SDK keeps at most 2000 label sets per metric and folds the rest into
  one ``otel.metric.overflow`` series that loses *every* label, ``module`` included.
  guardtrace caps ``agent`` per metric and module itself (cardinality.py), so the SDK's
  limit must sit above what that cap allows, or it would undo it.
* Span and log queues: ``BatchSpanProcessor`` and ``BatchLogRecordProcessor`` drop what
  arrives when their queue is full and only log it. guardtrace counts every drop in
  ``guardtrace.export_dropped`` like its own.
"""

from __future__ import annotations

from opentelemetry.sdk._logs import ReadWriteLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics.view import View
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ...schemas import names
from .internal import count_internal, log_rate_limited

__all__ = ["CountingBatchLogRecordProcessor", "CountingBatchSpanProcessor",
           "cardinality_views", "sdk_cardinality_limit"]

# Label combinations besides agent and module a guard counter carries (tier: 3 values;
# retries_used: a few) and modules an application is expected to use. A bound, not a
# target: the SDK allocates series only for label sets that occur.
_OTHER_LABEL_COMBINATIONS = 4
_MODULES_EXPECTED = 16
_SDK_DEFAULT_LIMIT = 2000


def sdk_cardinality_limit(agent_label_cap: int) -> int:
    """Series per metric the SDK must keep so guardtrace's own agent cap is what binds."""
    return max(_SDK_DEFAULT_LIMIT,
               (agent_label_cap + 1) * _OTHER_LABEL_COMBINATIONS * _MODULES_EXPECTED)


def cardinality_views(agent_label_cap: int) -> list[View]:
    """A view raising the SDK's per-metric series limit for guardtrace's own meter."""
    return [View(instrument_name="*", meter_name=names.INSTRUMENTATION_NAME,
                 aggregation_cardinality_limit=sdk_cardinality_limit(agent_label_cap))]


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """``BatchSpanProcessor`` that counts the spans it drops because its queue is full.

    The count is exact while the export thread is not popping a batch at the same
    moment; a pop between this check and the SDK's append can make one full-queue span
    count as dropped when it was kept (the SDK's own drop warning has the same race).
    Taking the SDK's export lock would close it, at the price of blocking the agent's
    thread for a whole export, which a hook must never do.
    """

    def on_end(self, span: ReadableSpan) -> None:
        batch = self._batch_processor
        # The SDK checks the same condition right after and drops the span (it never
        # blocks the caller, by design); this only makes the drop visible.
        if len(batch._queue) >= batch._max_queue_size:  # noqa: SLF001
            count_internal(names.METRIC_EXPORT_DROPPED, 1,
                           {"signal": "spans", names.ATTR_REASON: "queue_full"})
        super().on_end(span)


class CountingBatchLogRecordProcessor(BatchLogRecordProcessor):
    """``BatchLogRecordProcessor`` that counts the records it drops because its queue is
    full, and never raises into the code that emitted the record.

    ``on_emit`` runs on the thread of whoever logs (an LLM client's instrumentation, the
    agent), and the SDK passes on whatever a processor raises: a failure here is logged
    and counted as a dropped record instead. The count has the same race as
    :class:`CountingBatchSpanProcessor`'s.
    """

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        try:
            batch = self._batch_processor
            if len(batch._queue) >= batch._max_queue_size:  # noqa: SLF001
                count_internal(names.METRIC_EXPORT_DROPPED, 1,
                               {"signal": "logs", names.ATTR_REASON: "queue_full"})
            super().on_emit(log_record)
        except Exception as exc:  # noqa: BLE001 - telemetry must not break the host's call
            log_rate_limited("emit-logs", "guardtrace dropped a log record: %r", exc)
            count_internal(names.METRIC_EXPORT_DROPPED, 1,
                           {"signal": "logs", names.ATTR_REASON: "emit_failed"})
