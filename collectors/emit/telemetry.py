"""Emission shared by every guard: span event, counter, structured log, payload.

A guard describes *what* happened (an event name and its attributes, a counter and its
labels); :class:`GuardTelemetry` decides *how*: the event goes on the current span (or a
short span of its own when none is recording, so no detection is lost), ``request_id``
is its first attribute, string attributes are redacted, the ``agent`` label is capped,
payloads go to the debug-store sink. Nothing here raises into the agent: failures are
logged at most once a minute per kind and counted.

Every guard verdict, pass or fail, is also one OpenTelemetry GenAI evaluation result
event (:meth:`GuardTelemetry.evaluation`), on the span the guard's own events go on, so
a backend that shows evaluations shows guardtrace's.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import trace

from ...schemas import names
from . import state as _state
from .internal import count_hook_error, instruments, internal_totals
from .payload_body import (
    BODY_ENCODER,
    EncodedJSON,
    attribute_text,
    encode_body,
    snapshot_body,
    text_bytes,
)

# internal_totals is re-exported: the CLI, the simulator and tests read drops from here.
__all__ = ["GuardTelemetry", "VerdictSpan", "guarded", "internal_totals", "new_request_id",
           "record_payload"]

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
T = TypeVar("T")

# An evaluation's explanation is read beside its score in another tool's list of
# evaluations: the evidence in a sentence or two, never the reply. The text is cut to
# _EXPLANATION_INPUT_CHARS before redaction (so a huge matched phrase costs the agent
# nothing) and to _MAX_EXPLANATION_CHARS after it (so a cut never halves a secret the
# redactor would have recognised whole).
_MAX_EXPLANATION_CHARS = 512
_EXPLANATION_INPUT_CHARS = 4 * _MAX_EXPLANATION_CHARS
_SCORE_PASS = 1.0
_SCORE_FAIL = 0.0


@functools.cache
def _semconv_keys() -> tuple[str, str]:
    """``gen_ai.response.id`` and ``error.type``, from OpenTelemetry's own conventions
    package, imported on first use: the GenAI module alone costs milliseconds at import,
    and most verdicts carry neither key."""
    from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
        GEN_AI_RESPONSE_ID,
    )
    from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

    return GEN_AI_RESPONSE_ID, ERROR_TYPE


@functools.cache
def _event_adder() -> Callable[[Any, str, dict[str, Any]], None]:
    """sdk_events.add_event, imported on the first event a span records: it imports the
    OTel SDK, which an agent that never configures telemetry does not load."""
    from .sdk_events import add_event

    return add_event


def new_request_id() -> str:
    """A request id for callers that have none: the current trace id, else a random one."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        return f"{context.trace_id:032x}"
    return uuid.uuid4().hex


def guarded(fallback: Callable[..., T]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate a hook so an internal exception is logged and ``fallback(...)`` returned.

    The agent must never break because its observability did: a hook that fails
    behaves as if it had found nothing, and the failure is counted in
    ``guardtrace.hook_errors``.
    """

    def decorate(func: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            try:
                return func(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the contract is to never raise
                count_hook_error(func.__qualname__, exc)
                return fallback(*args, **kwargs)

        return wrapper

    return decorate


class GuardTelemetry:
    """Emits one guard's telemetry; every method is safe to call unconfigured.

    Args:
        module: The ``module`` label and attribute (``planning``, ``replies``, ...).
        operation: The ``operation`` field of log lines and the name suffix of the span
            created when no span is recording (``guardtrace.<operation>``).
    """

    def __init__(self, module: str, operation: str) -> None:
        self.module = module
        self.operation = operation
        self._log = logging.getLogger(f"guardtrace.{module}")

    # -- span events -------------------------------------------------------------------
    def event(self, name: str, request_id: str,
              attributes: Mapping[str, AttributeValue | None] | None = None) -> None:
        """Add span event ``name`` with ``request_id`` first, then ``module``, then the rest."""
        try:
            redact = _state.current().redactor.redact
            attrs: dict[str, AttributeValue] = {
                names.ATTR_REQUEST_ID: request_id,
                names.ATTR_MODULE: self.module,
            }
            for key, value in (attributes or {}).items():
                if value is None:
                    continue
                if isinstance(value, str):
                    value = redact(value)
                elif isinstance(value, (list, tuple)):
                    value = [redact(v) if isinstance(v, str) else v for v in value]
                attrs[key] = value
            self._add_event(name, request_id, attrs)
        except Exception as exc:  # noqa: BLE001
            count_hook_error(f"{self.operation}.event", exc)

    def _add_event(self, name: str, request_id: str, attrs: dict[str, AttributeValue]) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            _event_adder()(span, name, attrs)
            return
        # A span of its own, never made current: nothing runs inside it, and with no
        # provider set (telemetry off) it records nothing, so it costs no more.
        own = instruments.tracer().start_span(
            f"guardtrace.{self.operation}",
            attributes={names.ATTR_REQUEST_ID: request_id, names.ATTR_MODULE: self.module})
        if own.is_recording():
            _event_adder()(own, name, attrs)
            own.end()

    def verdict_span(self, request_id: str) -> VerdictSpan:
        """A ``with`` block whose events all go on one span: the current recording span,
        else one short span of its own. A verdict's guard events and its evaluation
        result then share a span (and a trace) even where the agent records none."""
        return VerdictSpan(self, request_id)

    # -- GenAI evaluation results ------------------------------------------------------
    def evaluation(self, name: str, request_id: str, *, passed: bool,
                   explanation: str | None = None, response_id: str | None = None) -> None:
        """Add the ``gen_ai.evaluation.result`` event of one guard verdict.

        Goes where :meth:`event` puts guard events, with ``request_id`` and ``module``
        first, then the evaluation's name, label (``pass``/``fail``), score (1.0/0.0),
        explanation, ``gen_ai.response.id`` when known and ``found_in=agent``.

        Args:
            name: The evaluation (``names.EVALUATION_*``, one per guard family).
            request_id: The request the verdict belongs to.
            passed: True when the check found nothing.
            explanation: The evidence; redacted and cut to a few hundred characters.
            response_id: The model response judged (``gen_ai.response.id``), when known.
        """
        try:
            attrs: dict[str, AttributeValue] = {
                names.ATTR_REQUEST_ID: request_id,
                names.ATTR_MODULE: self.module,
                names.ATTR_EVALUATION_NAME: name,
                names.ATTR_EVALUATION_SCORE_LABEL: (
                    names.EVALUATION_PASS if passed else names.EVALUATION_FAIL),
                names.ATTR_EVALUATION_SCORE_VALUE: _SCORE_PASS if passed else _SCORE_FAIL,
            }
            if explanation:
                attrs[names.ATTR_EVALUATION_EXPLANATION] = self._explanation(explanation)
            if response_id:
                attrs[_semconv_keys()[0]] = response_id
            attrs[names.ATTR_FOUND_IN] = names.FOUND_IN_AGENT
            self._add_event(names.EVENT_EVALUATION_RESULT, request_id, attrs)
        except Exception as exc:  # noqa: BLE001
            count_hook_error(f"{self.operation}.evaluation", exc)

    def evaluation_failed(self, name: str, request_id: str, error: BaseException | str, *,
                          response_id: str | None = None) -> None:
        """Add the ``gen_ai.evaluation.result`` event of a check that could not decide:
        no label or score; ``error.type`` is the exception's class name (never its
        message, which may quote the input), or ``error`` itself when given as text."""
        try:
            response_key, error_key = _semconv_keys()
            attrs: dict[str, AttributeValue] = {
                names.ATTR_REQUEST_ID: request_id,
                names.ATTR_MODULE: self.module,
                names.ATTR_EVALUATION_NAME: name,
                error_key: error if isinstance(error, str) else type(error).__qualname__,
            }
            if response_id:
                attrs[response_key] = response_id
            attrs[names.ATTR_FOUND_IN] = names.FOUND_IN_AGENT
            self._add_event(names.EVENT_EVALUATION_RESULT, request_id, attrs)
        except Exception as exc:  # noqa: BLE001
            count_hook_error(f"{self.operation}.evaluation", exc)

    @staticmethod
    def _explanation(text: str) -> str:
        text = _state.current().redactor.redact(text[:_EXPLANATION_INPUT_CHARS])
        if len(text) <= _MAX_EXPLANATION_CHARS:
            return text
        return text[:_MAX_EXPLANATION_CHARS - len(names.TRUNCATION_MARKER)] + \
            names.TRUNCATION_MARKER

    # -- counters ----------------------------------------------------------------------
    def count(self, metric: str, *, agent: str | None = None, value: int = 1,
              labels: Mapping[str, str | int] | None = None) -> None:
        """Add ``value`` to counter ``metric`` labelled with module, capped agent, labels."""
        try:
            attrs: dict[str, str | int] = {names.ATTR_MODULE: self.module}
            if agent is not None:
                label, overflowed = _state.current().limiter.admit(metric, self.module, agent)
                attrs[names.ATTR_AGENT] = label
                if overflowed:
                    instruments.counter(names.METRIC_LABEL_OVERFLOW).add(
                        1, {names.ATTR_METRIC: metric, names.ATTR_MODULE: self.module})
            if labels:
                attrs.update(labels)
            instruments.guard_counter(metric).add(value, attrs)
        except Exception as exc:  # noqa: BLE001
            count_hook_error(f"{self.operation}.count", exc)

    # -- structured logs ---------------------------------------------------------------
    def log(self, level: int, message: str, *, request_id: str, status: str | None = None,
            error: str | None = None, duration_ms: float | None = None,
            **fields: Any) -> None:
        """Log ``message`` with operation, request_id, error, duration_ms, status fields."""
        try:
            if not self._log.isEnabledFor(level):
                return
            record: dict[str, Any] = {
                names.ATTR_OPERATION: self.operation,
                names.ATTR_REQUEST_ID: request_id,
            }
            if error is not None:
                record[names.ATTR_ERROR] = _state.current().redactor.redact(error)
            if duration_ms is not None:
                record[names.ATTR_DURATION_MS] = round(duration_ms, 3)
            if status is not None:
                record[names.ATTR_STATUS] = status
            record.update(fields)
            self._log.log(level, "%s %s", message, json.dumps(record, default=str),
                          extra={"guardtrace": record})
        except Exception as exc:  # noqa: BLE001
            count_hook_error(f"{self.operation}.log", exc)

    # -- debug payloads ------------------------------------------------------------------
    def payload(self, request_id: str, kind: str, body: Any, **attributes: Any) -> bool:
        """Record a debug payload (str, or anything JSON-serialisable); False if dropped."""
        return record_payload(request_id, kind, body, **attributes)


class VerdictSpan:
    """See :meth:`GuardTelemetry.verdict_span`. Never raises: a span that cannot be
    started leaves each event to find its own, as without the block."""

    __slots__ = ("_telemetry", "_request_id", "_own")

    def __init__(self, telemetry: GuardTelemetry, request_id: str) -> None:
        self._telemetry = telemetry
        self._request_id = request_id
        self._own: Any = None

    def __enter__(self) -> None:
        try:
            if trace.get_current_span().is_recording():
                return
            t = self._telemetry
            span = instruments.tracer().start_span(
                f"guardtrace.{t.operation}",
                attributes={names.ATTR_REQUEST_ID: self._request_id,
                            names.ATTR_MODULE: t.module})
            if not span.is_recording():
                return  # telemetry off: the events find no span either way
            own = trace.use_span(span, end_on_exit=True)
            own.__enter__()
            self._own = own
        except Exception as exc:  # noqa: BLE001
            count_hook_error(f"{self._telemetry.operation}.verdict_span", exc)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        own, self._own = self._own, None
        if own is None:
            return
        try:
            own.__exit__(exc_type, exc, tb)
        except Exception as error:  # noqa: BLE001
            count_hook_error(f"{self._telemetry.operation}.verdict_span", error)


def record_payload(request_id: str, kind: str, body: Any, **attributes: Any) -> bool:
    """Record one debug-store payload for ``request_id``; never blocks, never raises.

    Args:
        request_id: The request the interaction belongs to.
        kind: What the payload is, e.g. ``plan_generation`` or ``hallucination_detection``.
        body: The text, or a JSON-serialisable object (stored as JSON). Later changes
            to the object do not change what is stored.
        **attributes: Small string attributes stored beside the body (model, retry, ...).

    Returns:
        True if the payload was queued, False if it was dropped (capture off, queue full,
        not configured).
    """
    try:
        sink = _state.current().payload_sink
        # A sink that encodes on its worker (the Kafka sink) takes the body as text or
        # as a private snapshot; any other sink takes text, encoded here. Either way
        # redaction is the sink's, on its worker: JSON the caller had to encode is
        # marked (EncodedJSON) so it is still redacted string by string.
        record_snapshot = getattr(sink, "record_snapshot", None)
        if record_snapshot is not None:
            if isinstance(body, str):
                snapshot: tuple[Any, int] = body, text_bytes(body)
            else:
                snapped = snapshot_body(body)
                if snapped is None:
                    encoded = EncodedJSON(BODY_ENCODER.encode(body))
                    snapped = encoded, text_bytes(encoded)
                snapshot = snapped
            attrs = {str(k): v if type(v) is str else attribute_text(v)
                     for k, v in attributes.items() if v is not None}
            return record_snapshot(request_id, kind, snapshot[0], snapshot[1], attrs)
        text = body if isinstance(body, str) else EncodedJSON(encode_body(body))
        attrs = {str(k): v if isinstance(v, str) else json.dumps(v, default=str)
                 for k, v in attributes.items() if v is not None}
        return sink.record(request_id, kind, text, attrs)
    except Exception as exc:  # noqa: BLE001
        count_hook_error("record_payload", exc)
        return False
