"""The GenAI telemetry two real OpenAI instrumentations emit, and clients instrumented by them.

Recorded with ``openai`` 3.57 driven offline by :class:`tests.support.llm_wire.ScriptedAPI`
(recorded-shape Chat Completions), one call whose reply calls a tool the request did not
offer and one whose reply claims an action with no tool call. The request offered one
tool, ``search_docs``. Values below are abridged; keys are exact.

OpenInference (``openinference-instrumentation-openai`` 0.1.66)
-------------------------------------------------------------------
One span per call: name ``ChatCompletion``, kind INTERNAL, scope
``openinference.instrumentation.openai``. Content is captured by default (the
``OPENINFERENCE_HIDE_*`` variables turn parts of it off, replacing values with
``__REDACTED__``). Attributes, all flattened strings or numbers::

    openinference.span.kind = "LLM"
    llm.provider = "openai";  llm.system = "openai"
    llm.model_name = "gpt-4.1-2025-04-14"          # the response's model
    llm.invocation_parameters = '{"model": "gpt-4.1"}'
    llm.tools.0.tool.json_schema = '{"type": "function", "function": {"name": "search_docs",
                                     "description": ..., "parameters": {...}}}'
    llm.input_messages.0.message.role = "system"
    llm.input_messages.0.message.content = "You are an ops agent."
    llm.input_messages.1.message.role = "user"
    llm.input_messages.1.message.content = "Clean up the staging data."
    llm.output_messages.0.message.role = "assistant"
    llm.output_messages.0.message.content = "I've deployed the fix ..."   # absent when null
    llm.output_messages.0.message.tool_calls.0.tool_call.id = "call_1"
    llm.output_messages.0.message.tool_calls.0.tool_call.function.name = "delete_database"
    llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments = '{"name": "prod"}'
    llm.finish_reason = "tool_calls"                # or "stop"
    llm.token_count.prompt / .completion / .total = 85 / 18 / 103
    input.value = <the request body as JSON>;  input.mime_type = "application/json"
    output.value = <the response body as JSON>; output.mime_type = "application/json"

With ``OPENINFERENCE_ENABLE_GENAI_SEMCONV=true`` the same span also carries the GenAI
conventions (so one span holds the same exchange twice; count it once)::

    gen_ai.operation.name = "chat";  gen_ai.provider.name = "openai"
    gen_ai.request.model = "gpt-4.1-2025-04-14"   # the response's model, not the request's
    gen_ai.response.finish_reasons = ("tool_call",)   # singular, unlike OpenAI's "tool_calls"
    gen_ai.tool.definitions = '[{"type": "function", "name": "search_docs",
                                "description": ..., "parameters": {...}}]'
    gen_ai.input.messages = '[{"role": "system", "parts": [{"type": "text",
                              "content": "You are an ops agent."}]}, ...]'
    gen_ai.output.messages = '[{"role": "assistant", "parts": [{"type": "tool_call",
                               "name": "delete_database", "arguments": {"name": "prod"},
                               "id": "call_1"}], "finish_reason": "tool_call"}]'

OpenTelemetry GenAI (``opentelemetry-instrumentation-openai-v2`` 2.4b0)
-----------------------------------------------------------------------
One span per call: name ``chat gpt-4.1`` (operation and request model), kind CLIENT,
scope ``opentelemetry.util.genai.handler``. Always on the latest experimental GenAI
conventions: ``opentelemetry-util-genai``'s ``is_experimental_mode()`` returns True, so
``OTEL_SEMCONV_STABILITY_OPT_IN`` changes nothing and the legacy path is unreachable.
Without content capture a span holds only::

    gen_ai.operation.name = "chat";  gen_ai.provider.name = "openai"
    gen_ai.request.model = "gpt-4.1";  gen_ai.response.model = "gpt-4.1-2025-04-14"
    gen_ai.response.id = "chatcmpl-BvA1kQz7"
    gen_ai.response.finish_reasons = ("tool_calls",)   # or ("stop",)
    gen_ai.usage.input_tokens = 85;  gen_ai.usage.output_tokens = 18
    openai.response.service_tier = "default";  openai.response.system_fingerprint = "fp_..."

``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` takes ``span_only``,
``event_only`` or ``span_and_event`` (case-insensitive). ``true``, the value the
package's own README gives for "the legacy path", is refused with a warning and means
NO content. It is read when the instrumentor starts and again per call.

* ``span_only`` / ``span_and_event`` add two JSON strings to the span (system
  messages stay in ``gen_ai.input.messages``; ``gen_ai.system_instructions`` is not
  set for Chat Completions)::

      gen_ai.input.messages = '[{"role":"system","parts":[{"content":"You are an ops
                               agent.","type":"text"}]},{"role":"user","parts":[...]}]'
      gen_ai.output.messages = '[{"role":"assistant","parts":[{"arguments":{"name":"prod"},
                                "name":"delete_database","id":"call_1","type":"tool_call"}],
                                "finish_reason":"tool_calls"}]'

* ``event_only`` / ``span_and_event`` emit one OTLP log record per call: event name
  ``gen_ai.client.inference.operation.details`` (the LogRecord's ``event_name`` field,
  not an attribute), no body, the call span's trace id and span id, and every span
  attribute above as a log attribute, with ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` as structured values, not JSON text: OTLP ``array_value``
  of ``kvlist_value`` (``role``, ``parts`` -> ``array_value`` of ``kvlist_value``
  with ``type``, ``content`` or ``name``/``id``/``arguments``; ``arguments`` is itself
  a ``kvlist_value``). ``OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT=true|false`` overrides
  whether the event is emitted.

The tools offered in the request are NOT recorded in any mode: 2.4b0 never sets
``gen_ai.tool.definitions`` (the util supports it; the OpenAI wrapper does not fill
it). A span or log event from this package alone cannot tell an invented tool from an
offered one; the allowed tools have to come from elsewhere (an application span, a
catalogue).

Other things found
------------------
* ``opentelemetry-instrumentation-openai-v2`` 2.4b0 imports
  ``opentelemetry.util.genai.instruments``, which ``opentelemetry-util-genai`` 1.2b0
  removed: with util-genai >= 1.2 (1.3b0 is what a fresh install picks) importing
  the instrumentor fails with ``ModuleNotFoundError``. It works with util-genai 1.1b0;
  :func:`check_genai_semconv_installable` says so instead of failing deep in an import.
* Neither package records a request id: GenAI spans carry one only when an
  application span above them does, or when a span processor copies it onto every
  span (:class:`BaggageRequestIdProcessor`) and log record
  (:class:`BaggageRequestIdLogProcessor`).
* Both instrumentors are process-wide singletons (``BaseInstrumentor``): a second
  ``instrument()`` with another provider is ignored with a warning, so each client
  here uninstruments on exit and refuses to start over a live instrumentation.
* Neither needs a newer ``openai``: OpenInference asks for ``openai>=2.8.0``, the v2
  package for ``openai>=1.26.0``; both patch the sync and async clients.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
from opentelemetry import baggage
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from guardtrace.schemas import names
from tests.support.llm_wire import ScriptedAPI

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "CONTENT_MODES",
    "EMIT_EVENT_VARIABLE",
    "INFERENCE_DETAILS_EVENT",
    "OPENINFERENCE_GENAI_SEMCONV_VARIABLE",
    "BaggageRequestIdLogProcessor",
    "BaggageRequestIdProcessor",
    "check_genai_semconv_installable",
    "genai_semconv_openai",
    "openinference_openai",
]

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EMIT_EVENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT"
OPENINFERENCE_GENAI_SEMCONV_VARIABLE = "OPENINFERENCE_ENABLE_GENAI_SEMCONV"
INFERENCE_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
CONTENT_MODES = ("span_only", "event_only", "span_and_event")
_BASE_URL = "https://api.openai.com/v1"


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    # The packages read these both at instrument() and per call, so they stay set for
    # the whole life of the client.
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _client(api: ScriptedAPI) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=_BASE_URL, max_retries=0,
                         http_client=api.http_client())


def _start(instrumentor: Any, **providers: Any) -> None:
    if instrumentor.is_instrumented_by_opentelemetry:
        raise RuntimeError(f"{type(instrumentor).__module__} is already instrumenting "
                           "openai in this process; uninstrument it first")
    instrumentor.instrument(**providers)


@contextmanager
def openinference_openai(api: ScriptedAPI, tracer_provider: TracerProvider, *,
                         genai_semconv: bool = False) -> Iterator[openai.OpenAI]:
    """An ``openai.OpenAI`` client traced by OpenInference's instrumentor, answered by ``api``.

    Args:
        api: Answers the client's requests.
        tracer_provider: Receives the ``ChatCompletion`` spans.
        genai_semconv: Also emit the GenAI conventions on the same span
            (``OPENINFERENCE_ENABLE_GENAI_SEMCONV``).

    Yields:
        The client; the instrumentation is removed on exit.
    """
    from openinference.instrumentation.openai import OpenAIInstrumentor

    flag = {OPENINFERENCE_GENAI_SEMCONV_VARIABLE: "true" if genai_semconv else "false"}
    instrumentor = OpenAIInstrumentor()
    with _environment(flag):
        _start(instrumentor, tracer_provider=tracer_provider)
        try:
            yield _client(api)
        finally:
            instrumentor.uninstrument()


def check_genai_semconv_installable() -> None:
    """Fail with the reason when ``opentelemetry-instrumentation-openai-v2`` cannot import.

    Raises:
        RuntimeError: The installed ``opentelemetry-util-genai`` lacks the module the
            instrumentation imports (removed in util-genai 1.2b0).
    """
    from importlib.metadata import version
    from importlib.util import find_spec

    if find_spec("opentelemetry.util.genai.instruments") is None:
        raise RuntimeError(
            "opentelemetry-instrumentation-openai-v2 "
            f"{version('opentelemetry-instrumentation-openai-v2')} imports "
            "opentelemetry.util.genai.instruments, which opentelemetry-util-genai "
            f"{version('opentelemetry-util-genai')} no longer has: install "
            "opentelemetry-util-genai<1.2")


@contextmanager
def genai_semconv_openai(api: ScriptedAPI, tracer_provider: TracerProvider,
                         logger_provider: LoggerProvider | None = None, *,
                         content: str = "span_and_event") -> Iterator[openai.OpenAI]:
    """An ``openai.OpenAI`` client traced by OpenTelemetry's GenAI instrumentor.

    Args:
        api: Answers the client's requests.
        tracer_provider: Receives the ``chat <model>`` spans.
        logger_provider: Receives the ``gen_ai.client.inference.operation.details``
            log events (content modes ``event_only`` and ``span_and_event``). Required
            for those modes: the package would otherwise write to the global provider.
        content: Where message content goes: ``span_only``, ``event_only`` or
            ``span_and_event``.

    Yields:
        The client; the instrumentation and the variables are removed on exit.

    Raises:
        ValueError: An unknown content mode, or an event mode with no logger provider.
        RuntimeError: The installed packages do not fit together (see
            :func:`check_genai_semconv_installable`).
    """
    if content not in CONTENT_MODES:
        raise ValueError(f"content must be one of {', '.join(CONTENT_MODES)}, not {content!r}")
    if content != "span_only" and logger_provider is None:
        raise ValueError(f"content={content!r} emits log events: pass a logger_provider")
    check_genai_semconv_installable()
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    providers: dict[str, Any] = {"tracer_provider": tracer_provider}
    if logger_provider is not None:
        providers["logger_provider"] = logger_provider
    with _environment({CAPTURE_CONTENT_VARIABLE: content}):
        _start(instrumentor, **providers)
        try:
            yield _client(api)
        finally:
            instrumentor.uninstrument()


def _baggage_request_id(parent_context: Context | None) -> str:
    request_id = baggage.get_baggage(names.ATTR_REQUEST_ID, parent_context)
    return request_id if isinstance(request_id, str) else ""


class BaggageRequestIdProcessor(SpanProcessor):
    """Copies the ``request_id`` baggage entry onto every span started under it.

    The way an application gives instrumentation spans it does not own (such as the
    GenAI spans above) its request id: set the baggage once per request, and every span
    of that request, in any library, carries ``request_id``.
    """

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if request_id := _baggage_request_id(parent_context):
            span.set_attribute(names.ATTR_REQUEST_ID, request_id)

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class BaggageRequestIdLogProcessor(LogRecordProcessor):
    """Copies the ``request_id`` baggage entry onto every log record emitted under it.

    The log side of :class:`BaggageRequestIdProcessor`: GenAI log events (such as
    ``gen_ai.client.inference.operation.details``) carry the request id too. Add it
    before the exporting processor, which sees the record after it.
    """

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        if (request_id := _baggage_request_id(None)) and \
                log_record.log_record.attributes is not None:
            # The SDK hands processors a mutable BoundedAttributes.
            log_record.log_record.attributes[names.ATTR_REQUEST_ID] = request_id  # type: ignore[index]

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
