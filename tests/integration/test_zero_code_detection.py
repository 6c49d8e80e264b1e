"""Zero-code detection: GenAI telemetry an agent already emits, found by the pipeline.

An OpenAI client traced by a real instrumentation package (OpenInference's, or
OpenTelemetry's GenAI ``openai-v2``), answered offline with recorded-shape replies,
exports its spans (and the v2 package's log events) with guardtrace's Kafka exporters,
the bytes a Collector's Kafka exporter writes, to the real broker. No guardtrace hook,
adapter or ``configure()`` runs in the "agent". The real consumer then has to find the
reply that calls a tool the request did not offer and the reply that claims an action
no tool call backs, write them as guard events marked ``found_in=pipeline``, and the
CLI and the dashboard's request page have to find them by request id.

The request id gets onto the telemetry the ways a real application puts it there: an
application span above the LLM call (OpenInference case), or the ``request_id``
baggage entry copied onto every span and log record by a processor (GenAI cases). A
scheduled job's call, outside any request, is found under its trace id.

Five agents: OpenInference (content on the span), the same with each span exported on
its own (the request id's span reaches Kafka after the LLM span: the finding is filed
under the trace id and the request's reads join it), openai-v2 with content on the span
only, in the log event only, and in both (judged twice, counted once). openai-v2 records
no tool definitions: on spans, the agent span above the call lends its own. What is known
not to work is marked ``xfail(strict=True)`` with the reason, so the day it works the
marker has to go: a log event has no agent span beside it, so with content in the event
only an invented tool is not told from an offered one. The unit-level tests at the end
put the same telemetry through the consumer's decoding and reader without the broker, so
a failure there points at the reader or the detector. Shapes of each package's
telemetry: :mod:`tests.support.genai_shapes`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry import baggage, context
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span

from guardtrace import cli
from guardtrace.collectors.export.kafka_exporters import KafkaLogExporter, KafkaSpanExporter
from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.collectors.tool_catalog import read_tool_specs
from guardtrace.consumers.config import ConsumerStats
from guardtrace.consumers.decode import decode_logs, decode_spans
from guardtrace.consumers.genai_exchange import (
    CONVENTION_OPENINFERENCE,
    GenAIExchange,
    read_exchange,
)
from guardtrace.consumers.otlp_values import attributes_map
from guardtrace.consumers.pipeline_detection import DetectionCounts, detect_in_spans
from guardtrace.schemas import names
from guardtrace.store import request_queries
from guardtrace.store.tables import Columns
from guardtrace.transport.broker import EmbeddedBroker
from tests.support.genai_shapes import (
    BaggageRequestIdLogProcessor,
    BaggageRequestIdProcessor,
    genai_semconv_openai,
    openinference_openai,
)
from tests.support.llm_wire import ScriptedAPI, chat_completion
from tests.support.services import new_pipeline

from .conftest import Pipeline

SERVICE = "ops-agent"
SEARCH_DOCS = {"type": "function", "function": {
    "name": "search_docs", "description": "Search the runbooks",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"]}}}
TOOLS = [SEARCH_DOCS]
# The same list as the GenAI conventions write it (gen_ai.tool.definitions).
TOOL_DEFINITIONS = json.dumps([{"type": "function", **SEARCH_DOCS["function"]}])
INVENTED_TOOL = "delete_database"
ACTION_CLAIM = "I've deployed the fix to production and restarted the servers."
SYSTEM = "You are the on-call ops agent. Use only the tools you are given."


@dataclass(frozen=True)
class Sent:
    """What one instrumented agent sent, and the pipeline slice it went through."""

    case: str
    pipeline: Pipeline
    store_args: tuple[str, ...]
    invented: str  # request id of the call whose reply calls an unoffered tool
    claimed: str  # request id of the call whose reply claims an unbacked action
    honest: str  # request id of a call whose reply uses the offered tool
    unlabelled: str  # trace id of a claim made outside any request (no request id at all)


def _replies() -> ScriptedAPI:
    return ScriptedAPI(
        chat_completion(calls=[("call_9Xk2", INVENTED_TOOL, {"name": "staging"})]),
        chat_completion(ACTION_CLAIM),
        chat_completion(calls=[("call_4Hq7", "search_docs", {"query": "restart web"})]),
        chat_completion(ACTION_CLAIM))


def _ask(client: openai.OpenAI, question: str) -> None:
    client.chat.completions.create(
        model="gpt-4.1", tools=TOOLS,  # type: ignore[arg-type]
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}])


# The last call is a scheduled job's, outside any request: no request id anywhere.
QUESTIONS = ("Clean up the staging data.", "Fix the outage on web-3.", "How do I restart web?",
             "Nightly: rotate the web certificates.")
# Runs the four calls under these request ids ("" for none); returns the last call's trace id.
Run = Callable[[TracerProvider, LoggerProvider, Sequence[str]], str]


def _trace_id(span: Span) -> str:
    return format(span.get_span_context().trace_id, "032x")


def _run_openinference(tracer_provider: TracerProvider, logger_provider: LoggerProvider,
                       request_ids: Sequence[str]) -> str:
    # The application's own span carries the request id; the LLM span below has none.
    tracer = tracer_provider.get_tracer("ops_agent.http")
    trace_id = ""
    with openinference_openai(_replies(), tracer_provider) as client:
        for request_id, question in zip(request_ids, QUESTIONS, strict=True):
            labels = {names.ATTR_REQUEST_ID: request_id} if request_id else {}
            with tracer.start_as_current_span("POST /incidents" if request_id else "cron",
                                              attributes=labels) as span:
                _ask(client, question)
                trace_id = _trace_id(span)
    return trace_id


def _genai_run(content: str) -> Run:
    def run(tracer_provider: TracerProvider, logger_provider: LoggerProvider,
            request_ids: Sequence[str]) -> str:
        # openai-v2 records no tool definitions: the agent's invoke_agent span (GenAI
        # conventions) says which tools it offers, and the request id comes as baggage.
        tracer = tracer_provider.get_tracer("ops_agent.runtime")
        trace_id = ""
        with genai_semconv_openai(_replies(), tracer_provider, logger_provider,
                                  content=content) as client:
            for request_id, question in zip(request_ids, QUESTIONS, strict=True):
                token = context.attach(baggage.set_baggage(names.ATTR_REQUEST_ID, request_id)
                                       if request_id else context.get_current())
                try:
                    with tracer.start_as_current_span(
                            f"invoke_agent {SERVICE}",
                            attributes={"gen_ai.operation.name": "invoke_agent",
                                        "gen_ai.agent.name": SERVICE,
                                        "gen_ai.tool.definitions": TOOL_DEFINITIONS}) as span:
                        _ask(client, question)
                        trace_id = _trace_id(span)
                finally:
                    context.detach(token)
        return trace_id
    return run


CASES: dict[str, Run] = {
    "openinference": _run_openinference,
    # Content on the span only, and in the log event only: each path on its own.
    "genai-span": _genai_run("span_only"),
    "genai-event": _genai_run("event_only"),
    # Both: the same call judged twice (on the span, with the agent span's tools, and on
    # the log event, without), and counted once.
    "genai-both": _genai_run("span_and_event"),
    # As "openinference", each span exported as soon as it ends (SimpleSpanProcessor, or
    # a batch boundary in a long request): the LLM span reaches Kafka in a message before
    # the one holding the application span and its request id.
    "openinference-split": _run_openinference,
}
SPLIT_CASES = frozenset({"openinference-split"})


def _providers(producer: LazyProducer, pipeline: Pipeline, *, span_by_span: bool = False
               ) -> tuple[TracerProvider, LoggerProvider]:
    resource = Resource.create({"service.name": SERVICE})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BaggageRequestIdProcessor())
    exporter = KafkaSpanExporter(producer, topic=pipeline.topics.spans)
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(exporter) if span_by_span else BatchSpanProcessor(exporter))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BaggageRequestIdLogProcessor())
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(KafkaLogExporter(producer, topic=pipeline.topics.logs)))
    return tracer_provider, logger_provider


@pytest.fixture(scope="module")
def consumed(broker: EmbeddedBroker, ch_client: Any,
             chdb_dir: Path) -> tuple[dict[str, Sent], ConsumerStats]:
    """Each instrumented agent's calls, exported to one pipeline, consumed once; and the
    consumer's stats."""
    pipeline = new_pipeline(broker, ch_client)
    store_args = ("--clickhouse-url", f"chdb://{chdb_dir}", "--database", pipeline.database)
    producer = LazyProducer(pipeline.bootstrap, max_message_bytes=1_000_000)
    delivered: dict[str, Sent] = {}
    try:
        for case, run in CASES.items():
            suffix = uuid.uuid4().hex[:8]
            ids = (f"{case}-invented-{suffix}", f"{case}-claimed-{suffix}",
                   f"{case}-honest-{suffix}")
            tracer_provider, logger_provider = _providers(producer, pipeline,
                                                          span_by_span=case in SPLIT_CASES)
            try:
                unlabelled = run(tracer_provider, logger_provider, (*ids, ""))
                assert tracer_provider.force_flush() and logger_provider.force_flush()
            finally:
                tracer_provider.shutdown()
                logger_provider.shutdown()
            delivered[case] = Sent(case, pipeline, store_args, *ids, unlabelled)
    finally:
        producer.close(5.0)
    # Everything is flushed before the consumer starts: a second with nothing new is idle.
    stats = pipeline.consume_until_idle(idle_s=1.0)
    assert stats.dead_letters == 0, stats.dead_letter_reasons
    return delivered, stats


@pytest.fixture(scope="module")
def delivered(consumed: tuple[dict[str, Sent], ConsumerStats]) -> dict[str, Sent]:
    return consumed[0]


@pytest.fixture(params=list(CASES))
def sent(request: pytest.FixtureRequest, delivered: dict[str, Sent]) -> Sent:
    return delivered[request.param]


# A request's events as stored: under its request id, or (pipeline detection's finding on
# an LLM span whose request id reached Kafka in a later message) under a trace id of the
# request, which the request reads join (store/request_queries.py).
_REQUEST_EVENTS = (
    "FROM {db}.span_events FINAL WHERE (request_id = {r:String} OR (request_id = trace_id "
    "AND trace_id IN (SELECT trace_id FROM {db}.spans FINAL WHERE request_id = {r:String})))")


def _guard_events(sent: Sent, request_id: str) -> list[dict[str, Any]]:
    """The request's guard events as stored, one per event id (see genai-both)."""
    rows = sent.pipeline.rows(
        "SELECT name, trace_id, span_id, module, agent, tier, attributes " + _REQUEST_EVENTS
        + " AND name IN {n:Array(String)} ORDER BY timestamp LIMIT 1 BY event_id",
        r=request_id, n=list(names.GUARD_EVENTS))
    keys = ("name", "trace_id", "span_id", "module", "agent", "tier", "attributes")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def _llm_span(sent: Sent, request_id: str) -> tuple[str, str]:
    """The trace id and span id of the request's LLM call span, as stored."""
    rows = sent.pipeline.rows(
        "SELECT s.trace_id, s.span_id FROM {db}.spans AS s FINAL "
        "WHERE s.trace_id IN (SELECT trace_id FROM {db}.spans FINAL "
        "                     WHERE request_id = {r:String}) "
        "AND (s.scope_name LIKE 'openinference.%' OR s.scope_name LIKE 'opentelemetry.%')",
        r=request_id)
    assert len(rows) == 1, rows
    return rows[0]


def test_the_agent_ran_no_guardtrace_code(sent: Sent) -> None:
    scopes = {row[0] for row in sent.pipeline.rows(
        "SELECT DISTINCT scope_name FROM {db}.spans FINAL")}
    assert names.INSTRUMENTATION_NAME not in scopes
    assert scopes & {"openinference.instrumentation.openai", "opentelemetry.util.genai.handler"}


# Each finding: the request it is in, the guard event, and the evaluation that failed.
FINDINGS = {
    "invented": (names.EVENT_HALLUCINATION_DETECTED, names.EVALUATION_PLAN_TOOLS),
    "claimed": (names.EVENT_FABRICATION_DETECTED, names.EVALUATION_FABRICATION),
}
# openai-v2 records no tool definitions on its spans or log events. On the spans topic
# the agent span above the call (gen_ai.tool.definitions) is in the same export request
# and lends its tools; a log event arrives on a topic of its own with nothing above it,
# and the consumer keeps no state to join it with the agent span: with event_only
# capture, whether a call's tool was offered is not known, and is not guessed.
TOOLS_NOT_ON_THE_LOG_EVENT = pytest.mark.xfail(
    strict=True, reason="openai-v2 records no gen_ai.tool.definitions on the log event, "
    "and the invoke_agent span that has them is on the spans topic")


def _mark_known_gaps(request: pytest.FixtureRequest, sent: Sent, finding: str) -> None:
    if sent.case == "genai-event" and finding == "invented":
        request.applymarker(TOOLS_NOT_ON_THE_LOG_EVENT)


@pytest.fixture(params=list(FINDINGS))
def finding(request: pytest.FixtureRequest, sent: Sent) -> tuple[str, str, str]:
    """(request id, guard event, evaluation name) of one finding the agent's calls hold."""
    _mark_known_gaps(request, sent, request.param)
    return (getattr(sent, request.param), *FINDINGS[request.param])


def test_the_finding_is_a_guard_event_found_in_the_pipeline_on_the_llm_span(
        sent: Sent, finding: tuple[str, str, str]) -> None:
    request_id, expected, _ = finding
    events = _guard_events(sent, request_id)
    assert [event["name"] for event in events] == [expected]
    event = events[0]
    assert event["attributes"][names.ATTR_FOUND_IN] == names.FOUND_IN_PIPELINE
    # With the request id in a later message, the consumer (no state) files the finding
    # under the trace id; the request's reads find it there (the tests below).
    assert event["attributes"][names.ATTR_REQUEST_ID] == (
        event["trace_id"] if sent.case in SPLIT_CASES else request_id)
    assert (event["trace_id"], event["span_id"]) == _llm_span(sent, request_id)
    if expected == names.EVENT_HALLUCINATION_DETECTED:
        assert event["agent"] == INVENTED_TOOL
        assert event["attributes"][names.ATTR_HALLUCINATED_AGENT] == INVENTED_TOOL
    else:
        assert event["tier"] == names.TIER_ACTION


def test_the_finding_is_also_a_failed_genai_evaluation(
        sent: Sent, finding: tuple[str, str, str]) -> None:
    request_id, _, evaluation = finding
    labels = sent.pipeline.rows(
        "SELECT attributes[{e:String}], attributes[{l:String}] " + _REQUEST_EVENTS
        + " AND name = {n:String}",
        e=names.ATTR_EVALUATION_NAME, l=names.ATTR_EVALUATION_SCORE_LABEL, r=request_id,
        n=names.EVENT_EVALUATION_RESULT)
    assert (evaluation, names.EVALUATION_FAIL) in labels
    assert (evaluation, names.EVALUATION_PASS) not in labels


def test_a_call_on_its_span_and_its_log_event_is_one_finding(
        delivered: dict[str, Sent]) -> None:
    sent = delivered["genai-both"]
    stored = sent.pipeline.rows(
        "SELECT event_id, timestamp " + _REQUEST_EVENTS + " AND name = {n:String}",
        r=sent.claimed, n=names.EVENT_FABRICATION_DETECTED)
    # Judged on the span and on the log event: two rows (at the span's end and at the
    # event's time), one event id.
    assert len(stored) == 2 and len({event_id for event_id, _ in stored}) == 1
    client, database = sent.pipeline.client, sent.pipeline.database
    trace = request_queries.request_trace(
        client, database, request_queries.require_request(client, database, sent.claimed))
    assert [e.name for e in trace.events if e.name in names.GUARD_EVENTS] == [
        names.EVENT_FABRICATION_DETECTED]
    # The rollup counts event ids: every finding of every agent here once.
    distinct, rows = sent.pipeline.rows(
        "SELECT uniqExact(event_id), count() FROM {db}.span_events FINAL "
        "WHERE name = {n:String}", n=names.EVENT_FABRICATION_DETECTED)[0]
    rollup = sent.pipeline.scalar(
        "SELECT uniqMerge(events) FROM {db}.event_rollup_1m WHERE name = {n:String}",
        n=names.EVENT_FABRICATION_DETECTED)
    assert rollup == distinct < rows


def test_log_events_are_counted_in_the_consumers_stats(
        consumed: tuple[dict[str, Sent], ConsumerStats]) -> None:
    _, stats = consumed
    # Four calls of each agent: five agents' spans, and the log events of the two that
    # send content as events.
    assert stats.pipeline_detection["llm_spans"] == len(CASES) * 4 + 2 * 4


def test_with_detection_off_log_events_are_stored_and_not_judged(
        consumed: tuple[dict[str, Sent], ConsumerStats]) -> None:
    delivered, stats = consumed
    pipeline = delivered["genai-event"].pipeline
    off = pipeline.consume_until_idle(
        idle_s=1.0, group_id=f"{pipeline.consumer_config.group_id}-off",
        pipeline_detection=False)
    assert off.records == stats.records
    assert off.rows_written == {"spans": stats.rows_written["spans"],
                                "log_records": stats.rows_written["log_records"]}
    assert off.pipeline_detection == {}


def test_a_reply_using_an_offered_tool_is_not_flagged(sent: Sent) -> None:
    assert _guard_events(sent, sent.honest) == []


def test_a_claim_outside_any_request_is_found_under_its_trace_id(
        request: pytest.FixtureRequest, sent: Sent, capsys: pytest.CaptureFixture[str]) -> None:
    _mark_known_gaps(request, sent, "unlabelled")
    events = _guard_events(sent, sent.unlabelled)
    assert [event["name"] for event in events] == [names.EVENT_FABRICATION_DETECTED]
    assert events[0]["trace_id"] == sent.unlabelled
    code = cli.main(["trace", sent.unlabelled, "--json", *sent.store_args])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert names.EVENT_FABRICATION_DETECTED in [
        item["name"] for item in json.loads(out)["timeline"] if item["type"] == "event"]


def test_the_cli_finds_the_finding_by_request_id(
        sent: Sent, finding: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    request_id, expected, _ = finding
    code = cli.main(["trace", request_id, "--json", *sent.store_args])
    out, err = capsys.readouterr()
    assert code == 0, err
    timeline = json.loads(out)["timeline"]
    found = [item for item in timeline
             if item["type"] == "event" and item["name"] in names.GUARD_EVENTS]
    assert [item["name"] for item in found] == [expected]
    assert found[0]["attributes"][names.ATTR_FOUND_IN] == names.FOUND_IN_PIPELINE
    # The LLM call's span is on the same timeline as its finding.
    assert found[0]["span_id"] in {item["span_id"] for item in timeline
                                   if item["type"] == "span"}


def test_the_request_page_query_finds_the_finding_by_request_id(
        sent: Sent, finding: tuple[str, str, str]) -> None:
    request_id, expected, _ = finding
    client, database = sent.pipeline.client, sent.pipeline.database
    request = request_queries.require_request(client, database, request_id)
    trace = request_queries.request_trace(client, database, request)
    assert expected in trace.request.event_names
    found = [event for event in trace.events if event.name in names.GUARD_EVENTS]
    assert [event.name for event in found] == [expected]
    assert found[0].attributes[names.ATTR_FOUND_IN] == names.FOUND_IN_PIPELINE
    assert found[0].span_id in {span.span_id for span in trace.spans}


# --- Unit level: what the consumer's reader makes of each package's telemetry ----------------
# The same calls, exported in memory and put through the consumer's own decoding (OTLP
# protobuf, attributes as stored text), then read by the reader pipeline detection uses.
# Each test names the attributes a detector needs; a failure here points at the reader,
# not at the broker or the store.

@dataclass(frozen=True)
class Recorded:
    """Each call's stored attributes: the LLM span's, and its log event's (v2 events)."""

    spans: list[dict[str, str]]
    log_events: list[LogEvent]
    trace_request: bytes  # every span of the calls, agent spans too, as exported
    logs_request: bytes  # the GenAI log events of the calls (b"" when none), as exported


@dataclass(frozen=True)
class LogEvent:
    event_name: str
    trace_id: str
    span_id: str
    attributes: dict[str, str]


def _record(run: Run) -> Recorded:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BaggageRequestIdProcessor())
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BaggageRequestIdLogProcessor())
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    run(tracer_provider, logger_provider, ("unit-invented", "unit-claimed", "unit-honest", ""))
    request = encode_spans(spans.get_finished_spans())
    stored = [attributes_map(span.attributes) for resource in request.resource_spans
              for scope in resource.scope_spans for span in scope.spans
              if not scope.scope.name.startswith("ops_agent.")]
    raw = encode_logs(logs.get_finished_logs()).SerializeToString() \
        if logs.get_finished_logs() else b""
    return Recorded(stored, _log_events(raw), request.SerializeToString(), raw)


def _log_events(raw: bytes) -> list[LogEvent]:
    """The GenAI log events of one OTLP logs message, attributes as the consumer stores them."""
    request = ExportLogsServiceRequest.FromString(raw)
    return [LogEvent(record.event_name, record.trace_id.hex(), record.span_id.hex(),
                     attributes_map(record.attributes))
            for resource in request.resource_logs for scope in resource.scope_logs
            for record in scope.log_records
            if record.event_name == names.EVENT_GENAI_OPERATION_DETAILS]


@pytest.fixture(scope="module")
def recorded() -> dict[str, Recorded]:
    return {case: _record(run) for case, run in CASES.items()}


def _offered(exchange: GenAIExchange) -> list[str]:
    return [spec.name for spec in read_tool_specs(exchange.tools or [])]


def _calls(exchange: GenAIExchange) -> list[str]:
    return [call["function"]["name"] for message in exchange.output or []
            for call in message.get("tool_calls", [])]


def test_reader_openinference_gives_the_offered_tools_and_the_call(
        recorded: dict[str, Recorded]) -> None:
    invented, claimed, honest, _ = (read_exchange(a) for a in recorded["openinference"].spans)
    assert invented is not None and claimed is not None and honest is not None
    assert invented.problems == claimed.problems == ()
    assert _offered(invented) == ["search_docs"]
    assert _calls(invented) == [INVENTED_TOOL] and _calls(honest) == ["search_docs"]
    assert claimed.output is not None and claimed.output[0]["content"] == ACTION_CLAIM
    assert _calls(claimed) == []
    assert [m["role"] for m in claimed.messages or []] == ["system", "user"]


def test_reader_openinference_with_genai_conventions_too_reads_one_exchange() -> None:
    # OPENINFERENCE_ENABLE_GENAI_SEMCONV: one span holds the exchange in both conventions.
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    with openinference_openai(ScriptedAPI(chat_completion(ACTION_CLAIM)), tracer_provider,
                              genai_semconv=True) as client:
        _ask(client, QUESTIONS[1])
    [span] = encode_spans(spans.get_finished_spans()).resource_spans[0].scope_spans[0].spans
    attributes = attributes_map(span.attributes)
    assert "gen_ai.output.messages" in attributes and "llm.output_messages.0.message.content" \
        in attributes
    exchange = read_exchange(attributes)
    assert exchange is not None and exchange.convention == CONVENTION_OPENINFERENCE
    assert exchange.output == [{"role": "assistant", "content": ACTION_CLAIM}]


def test_reader_genai_span_gives_the_call_but_no_offered_tools(
        recorded: dict[str, Recorded]) -> None:
    invented, claimed, honest, _ = (read_exchange(a) for a in recorded["genai-span"].spans)
    assert invented is not None and claimed is not None and honest is not None
    assert _calls(invented) == [INVENTED_TOOL] and _calls(honest) == ["search_docs"]
    assert claimed.output is not None and claimed.output[0]["content"] == ACTION_CLAIM
    # openai-v2 never records the request's tools: "none recorded" reads the same as
    # "none offered", so the offered list has to come from the agent span above.
    assert invented.tools == [] and "gen_ai.tool.definitions" not in \
        recorded["genai-span"].spans[0]


def test_reader_genai_event_gives_the_exchange_from_the_log_event(
        recorded: dict[str, Recorded]) -> None:
    record = recorded["genai-event"]
    assert all("gen_ai.output.messages" not in a for a in record.spans)
    assert [e.attributes.get(names.ATTR_REQUEST_ID) for e in record.log_events] == [
        "unit-invented", "unit-claimed", "unit-honest", None]
    invented, claimed, _, _ = (read_exchange(e.attributes) for e in record.log_events)
    assert invented is not None and claimed is not None
    assert _calls(invented) == [INVENTED_TOOL]
    assert claimed.output is not None and claimed.output[0]["content"] == ACTION_CLAIM
    # The event names its call span, so a finding can point at it.
    assert all(e.trace_id and e.span_id for e in record.log_events)


def _detected(record: Recorded) -> dict[str, list[str]]:
    """Guard events pipeline detection adds to the decoded spans, by request id."""
    rows = detect_in_spans(decode_spans(record.trace_request), DetectionCounts())
    found: dict[str, list[str]] = {}
    for row in rows.span_events:
        event = dict(zip(Columns.SPAN_EVENTS, row, strict=True))
        if event["name"] in names.GUARD_EVENTS:
            found.setdefault(event["request_id"], []).append(event["name"])
    return found


def test_detection_on_openinference_spans_finds_both_under_the_app_spans_request_id(
        recorded: dict[str, Recorded]) -> None:
    found = _detected(recorded["openinference"])
    assert found.pop("unit-invented") == [names.EVENT_HALLUCINATION_DETECTED]
    assert found.pop("unit-claimed") == [names.EVENT_FABRICATION_DETECTED]
    # The scheduled job's claim, under its trace id: 32 hex digits, nothing else.
    [(trace_id, events)] = found.items()
    assert len(trace_id) == 32 and int(trace_id, 16) and events == [
        names.EVENT_FABRICATION_DETECTED]


def test_detection_on_genai_spans_finds_the_claim(recorded: dict[str, Recorded]) -> None:
    assert _detected(recorded["genai-span"]).get("unit-claimed") == [
        names.EVENT_FABRICATION_DETECTED]


def test_detection_on_genai_spans_finds_the_invented_tool(
        recorded: dict[str, Recorded]) -> None:
    # The offered tools are on the invoke_agent span, the call on its child chat span.
    agent_span = next(a for a in _all_span_attributes(recorded["genai-span"])
                      if a.get("gen_ai.operation.name") == "invoke_agent")
    assert json.loads(agent_span["gen_ai.tool.definitions"])[0]["name"] == "search_docs"
    assert _detected(recorded["genai-span"]).get("unit-invented") == [
        names.EVENT_HALLUCINATION_DETECTED]


def _all_span_attributes(record: Recorded) -> list[dict[str, str]]:
    request = ExportTraceServiceRequest.FromString(record.trace_request)
    return [attributes_map(span.attributes) for resource in request.resource_spans
            for scope in resource.scope_spans for span in scope.spans]


def test_detection_on_genai_log_events_finds_the_claim(recorded: dict[str, Recorded]) -> None:
    rows = decode_logs(recorded["genai-event"].logs_request)
    found = [dict(zip(Columns.SPAN_EVENTS, row, strict=True)) for row in rows.span_events]
    assert [(e["request_id"], e["name"]) for e in found if e["name"] in names.GUARD_EVENTS
            and e["request_id"] == "unit-claimed"] == [
        ("unit-claimed", names.EVENT_FABRICATION_DETECTED)]
