"""Zero-code detection on decoded GenAI spans: the rows, their ids and request ids, the
spans left alone, and the verdicts against the hooks' own."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace.collectors.plans.validation import validate_plan
from guardtrace.collectors.replies.fabrication import FabricationGuard
from guardtrace.collectors.replies.fabrication_detector import default_detector
from guardtrace.collectors.testing import capture
from guardtrace.consumers import pipeline_detection
from guardtrace.consumers.decode import PoisonRecord, decode_spans
from guardtrace.consumers.genai_exchange import (
    PROBLEM_BAD_JSON,
    PROBLEM_MISSING_INDEX,
    EnclosingAgent,
    read_enclosing_agent,
)
from guardtrace.consumers.otlp_values import event_id
from guardtrace.consumers.pipeline_detection import (
    COUNT_FINDINGS,
    COUNT_LLM_SPANS,
    COUNT_REPORTED_IN_AGENT,
    PROBLEM_DETECTOR_ERROR,
    PROBLEM_TOOLS_NOT_CAPTURED,
    DetectionCounts,
    PipelineDetection,
    detection_rows,
    judge_reply,
)
from guardtrace.schemas import names
from guardtrace.schemas.request_ids import storable_request_id
from guardtrace.store.tables import Columns
from tests.support.llm_span_attributes import openinference_attributes
from tests.support.realdata import conversations

from .test_genai_exchange import SEARCH_TOOL, UTIL_SPAN, V2_SPAN

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
BOOK_TOOL = {"type": "function", "function": {
    "name": "book_flight", "description": "Book a flight for the user",
    "parameters": {"type": "object", "properties": {"flight": {"type": "string"}}}}}


def call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


ASKED = [{"role": "system", "content": "You are a travel agent."},
         {"role": "user", "content": "Find me a flight to Paris on Friday"},
         {"role": "assistant", "content": "", "tool_calls": [call("call_1", "search_flights",
                                                                  '{"to": "Paris"}')]},
         {"role": "tool", "tool_call_id": "call_1", "content": '[{"flight": "AF123"}]'}]
INVENTED = openinference_attributes(ASKED, {"role": "assistant", "content": "",
                                 "tool_calls": [call("call_2", "search_flight")]},
                         [SEARCH_TOOL, BOOK_TOOL])
CLAIMED = openinference_attributes(ASKED, {"role": "assistant",
                                "content": "I've booked AF123 for you; you're all set."},
                        [SEARCH_TOOL, BOOK_TOOL])
CLEAN = openinference_attributes(ASKED, {"role": "assistant",
                              "content": "I found AF123 on Friday. Shall I book it?"},
                      [SEARCH_TOOL, BOOK_TOOL])


def rows_of(attrs: dict[str, str], counts: DetectionCounts | None = None,
            request_id: str = "req-1") -> list[dict[str, Any]]:
    rows = detection_rows(attrs, trace_id=TRACE, span_id=SPAN, time_ns=1_700_000_000_000,
                          service="travel-agent", resource={"service.name": "travel-agent"},
                          request_id=request_id, counts=counts or DetectionCounts())
    assert all(len(row) == len(Columns.SPAN_EVENTS) for row in rows)
    return [dict(zip(Columns.SPAN_EVENTS, row, strict=True)) for row in rows]


def test_an_invented_tool_is_a_hallucination_event_and_a_failed_evaluation() -> None:
    found = rows_of(INVENTED)

    assert [r["name"] for r in found] == [names.EVENT_HALLUCINATION_DETECTED,
                                          names.EVENT_EVALUATION_RESULT]
    event, evaluation = found
    assert (event["module"], event["agent"], event["tier"]) == (
        names.MODULE_PLANNING, "search_flight", "")
    assert list(event["attributes"])[:2] == [names.ATTR_REQUEST_ID, names.ATTR_MODULE]
    assert event["attributes"][names.ATTR_REQUEST_ID] == event["request_id"] == "req-1"
    assert event["attributes"][names.ATTR_FOUND_IN] == names.FOUND_IN_PIPELINE
    assert event["attributes"][names.ATTR_ERROR_TYPE] == "hallucinated_tool"
    assert event["attributes"][names.ATTR_ALLOWED_AGENT_COUNT] == "2"
    assert json.loads(event["attributes"][names.ATTR_SUGGESTED_TOOLS])[0] == "search_flights"
    assert (event["trace_id"], event["span_id"], event["service"]) == (TRACE, SPAN,
                                                                     "travel-agent")
    attrs = evaluation["attributes"]
    assert attrs[names.ATTR_EVALUATION_NAME] == names.EVALUATION_PLAN_TOOLS
    assert attrs[names.ATTR_EVALUATION_SCORE_LABEL] == names.EVALUATION_FAIL
    assert attrs[names.ATTR_EVALUATION_SCORE_VALUE] == "0.0"
    assert "'search_flight'" in attrs[names.ATTR_EVALUATION_EXPLANATION]
    assert evaluation["agent"] == "travel-agent"  # the service: no gen_ai.agent.name


def test_a_claimed_action_no_tool_ran_is_a_fabrication_event() -> None:
    found = rows_of(CLAIMED)

    assert [(r["name"], r["tier"]) for r in found] == [
        (names.EVENT_FABRICATION_DETECTED, names.TIER_ACTION),
        (names.EVENT_EVALUATION_RESULT, "")]
    event, evaluation = found
    assert (event["module"], event["agent"]) == (names.MODULE_REPLIES, "travel-agent")
    assert "booked" in event["attributes"][names.ATTR_MATCHED_PHRASE]
    assert evaluation["attributes"][names.ATTR_EVALUATION_NAME] == names.EVALUATION_FABRICATION
    assert evaluation["attributes"][names.ATTR_EVALUATION_SCORE_LABEL] == names.EVALUATION_FAIL
    assert evaluation["attributes"][names.ATTR_EVALUATION_EXPLANATION].startswith("action: ")


def test_a_clean_call_gets_two_passing_evaluations_and_nothing_else() -> None:
    both = openinference_attributes(ASKED, {"role": "assistant", "content": "I found AF123 on Friday.",
                                 "tool_calls": [call("call_2", "book_flight")]},
                         [SEARCH_TOOL, BOOK_TOOL])
    found = rows_of(both)

    assert [r["name"] for r in found] == [names.EVENT_EVALUATION_RESULT] * 2
    assert [(r["module"], r["attributes"][names.ATTR_EVALUATION_NAME],
             r["attributes"][names.ATTR_EVALUATION_SCORE_LABEL],
             r["attributes"][names.ATTR_EVALUATION_SCORE_VALUE]) for r in found] == [
        (names.MODULE_PLANNING, names.EVALUATION_PLAN_TOOLS, names.EVALUATION_PASS, "1.0"),
        (names.MODULE_REPLIES, names.EVALUATION_FABRICATION, names.EVALUATION_PASS, "1.0")]


def test_genai_spans_are_judged_with_their_agent_conversation_and_response() -> None:
    found = rows_of({**UTIL_SPAN, "gen_ai.agent.name": "travel-bot",
                     "gen_ai.conversation.id": "conv-7", "gen_ai.response.id": "resp-1"})

    event = next(r for r in found if r["name"] == names.EVENT_FABRICATION_DETECTED)
    assert (event["tier"], event["agent"]) == (names.TIER_ACTION, "travel-bot")
    assert event["attributes"][names.ATTR_CHANNEL] == "conv-7"
    evaluation = next(r for r in found if r["name"] == names.EVENT_EVALUATION_RESULT)
    assert evaluation["attributes"]["gen_ai.response.id"] == "resp-1"


def test_an_explanation_is_cut_as_the_hooks_cut_theirs() -> None:
    calls = [call(f"call_{n}", f"invented_tool_number_{n}_" + "x" * 80) for n in range(20)]
    found = rows_of(openinference_attributes(ASKED, {"role": "assistant", "content": "",
                                          "tool_calls": calls}, [SEARCH_TOOL]))
    explanation = found[-1]["attributes"][names.ATTR_EVALUATION_EXPLANATION]
    assert len(explanation) == 512 and explanation.endswith(names.TRUNCATION_MARKER)
    assert len(found) == 21  # one event per invented name, then the evaluation


def test_the_agent_label_is_capped_as_the_hooks_cap_it() -> None:
    found = rows_of({**UTIL_SPAN, "gen_ai.agent.name": "a" * 500})
    assert {len(r["agent"]) for r in found} == {121}  # 120 characters and an ellipsis


def test_rows_carry_what_the_hooks_events_carry() -> None:
    """The same call judged by the hooks in an agent and by the pipeline: the same
    attributes, as the consumer stores them, but for found_in."""
    messages = [*ASKED, {"role": "assistant", "content": "I've booked AF123 for you.",
                         "tool_calls": [call("call_2", "reserve_seat")]}]
    with capture() as cap:
        validate_plan(messages[-1], [SEARCH_TOOL, BOOK_TOOL], request_id="req-1")
        FabricationGuard().check_conversation(messages, [SEARCH_TOOL, BOOK_TOOL],
                                              request_id="req-1", agent="travel-agent")
        hooks = decode_spans(encode_spans(cap.spans()).SerializeToString()).span_events
    pipeline = rows_of(openinference_attributes(ASKED, messages[-1], [SEARCH_TOOL, BOOK_TOOL]))

    def comparable(row: list[Any] | dict[str, Any]) -> tuple[Any, ...]:
        named = row if isinstance(row, dict) else dict(zip(Columns.SPAN_EVENTS, row,
                                                           strict=True))
        attrs = {k: v for k, v in named["attributes"].items() if k != names.ATTR_FOUND_IN}
        return (named["name"], named["module"], named["agent"], named["tier"],
                named["request_id"], attrs)

    detections = {names.EVENT_HALLUCINATION_DETECTED, names.EVENT_FABRICATION_DETECTED}
    assert sorted(r[2] for r in hooks if r[2] in detections) == sorted(detections)
    assert sorted(map(comparable, (r for r in pipeline if r["name"] in detections)),
                  key=repr) == sorted(map(comparable, (r for r in hooks if r[2] in detections)),
                                      key=repr)


def test_event_ids_are_deterministic_distinct_and_apart_from_the_spans_own() -> None:
    first, again = rows_of(INVENTED), rows_of(dict(INVENTED))
    other_span = detection_rows(INVENTED, trace_id=TRACE, span_id="1" * 16, time_ns=1,
                                service="", resource={}, request_id="req-1")

    ids = [r["event_id"] for r in first]
    assert ids == [r["event_id"] for r in again]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & {row[0] for row in other_span}
    assert all(i.startswith("pipeline-") for i in ids)
    own = {event_id(TRACE, SPAN, index, 1_700_000_000_000, name)
           for index in range(4) for name in (r["name"] for r in first)}
    assert not set(ids) & own


def test_problems_are_counted_per_span_and_logged_once_per_kind(
        caplog: pytest.LogCaptureFixture) -> None:
    counts = DetectionCounts()
    broken = {**V2_SPAN, "gen_ai.input.messages": "[{"}
    with caplog.at_level(logging.WARNING, "guardtrace.consumers.pipeline_detection"):
        for _ in range(3):
            rows_of(broken, counts)
            rows_of(V2_SPAN, counts)  # calls a tool, and records no tool definitions

    assert counts.counts[PROBLEM_BAD_JSON] == 3
    assert counts.counts[PROBLEM_TOOLS_NOT_CAPTURED] == 6
    assert counts.counts[COUNT_LLM_SPANS] == 6
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2
    assert any("bad_json" in line and "gen_ai.input.messages" in line for line in logged)
    assert any("tools_not_captured" in line and "book_hotel" in line for line in logged)


@pytest.fixture
def failing_plan_check(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def explode(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("detector bug")

    monkeypatch.setattr(pipeline_detection, "validate_plan", explode)
    yield


@pytest.mark.usefixtures("failing_plan_check")
def test_a_failing_detector_costs_only_its_own_rows() -> None:
    counts = DetectionCounts()
    found = rows_of(openinference_attributes(ASKED, {"role": "assistant", "content": "I've booked it.",
                                          "tool_calls": [call("c", "reserve_seat")]},
                                  [SEARCH_TOOL]), counts)

    assert counts.counts[PROBLEM_DETECTOR_ERROR] == 1
    assert [r["name"] for r in found] == [names.EVENT_EVALUATION_RESULT,
                                          names.EVENT_FABRICATION_DETECTED,
                                          names.EVENT_EVALUATION_RESULT]
    # The check that could not decide says so, as the hooks do: error.type, no score.
    failed = found[0]["attributes"]
    assert failed[names.ATTR_EVALUATION_NAME] == names.EVALUATION_PLAN_TOOLS
    assert failed["error.type"] == "RuntimeError"
    assert names.ATTR_EVALUATION_SCORE_LABEL not in failed
    assert "detector bug" not in json.dumps(failed)


# --- one OTLP request: request ids, spans left alone, the decoder's own rows ------------

def request_bytes(build: Any) -> bytes:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "travel-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    build(provider)
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def test_request_ids_come_from_the_span_its_ancestors_its_trace_or_the_trace_id() -> None:
    def build(provider: TracerProvider) -> None:
        app = provider.get_tracer("app")
        llm = provider.get_tracer("openinference.instrumentation.openai")
        with app.start_as_current_span("handle", attributes={"request_id": "order-42"}):
            with (app.start_as_current_span("agent step"),
                  llm.start_as_current_span("ChatCompletion", attributes=CLAIMED)):
                pass
            with llm.start_as_current_span("ChatCompletion", attributes={
                    **CLAIMED, "request_id": "own id"}):
                pass
        with llm.start_as_current_span("ChatCompletion", attributes=INVENTED):
            pass  # a trace of its own, with no request id anywhere

    raw = request_bytes(build)
    plain = decode_spans(raw)
    rows = PipelineDetection(decode_spans)(raw)

    by_span = {row[1]: row for row in rows.spans}
    llm_spans = [row for row in plain.spans if row[3] == "ChatCompletion"]
    lone_trace = llm_spans[2][0]
    # A span's own id is kept on its row as it came; the events carry the id as the
    # hooks store it (the readers refuse "own id").
    assert [by_span[row[1]][12] for row in llm_spans] == [
        "order-42", "own id", lone_trace]
    found = {(e[4], e[5]) for e in rows.span_events}
    assert found == {(llm_spans[0][1], "order-42"),
                     (llm_spans[1][1], storable_request_id("own id")),
                     (llm_spans[2][1], lone_trace)}
    # Nothing else of the decoder's rows changed.
    for before, after in zip(plain.spans, rows.spans, strict=True):
        assert before[:12] == after[:12] and before[13:] == after[13:]
    assert rows.span_events[:len(plain.span_events)] == plain.span_events


def test_spans_a_hook_reported_and_guardtraces_own_are_left_alone() -> None:
    def build(provider: TracerProvider) -> None:
        llm = provider.get_tracer("openinference.instrumentation.openai")
        with llm.start_as_current_span("ChatCompletion", attributes=CLAIMED) as span:
            span.add_event(names.EVENT_FABRICATION_DETECTED, {"request_id": "r",
                                                              "tier": "action"})
        with llm.start_as_current_span("ChatCompletion", attributes=CLAIMED) as span:
            span.add_event(names.EVENT_EVALUATION_RESULT, {
                names.ATTR_EVALUATION_NAME: names.EVALUATION_FABRICATION})
        with provider.get_tracer(names.INSTRUMENTATION_NAME).start_as_current_span(
                "guardtrace.fabrication_detection", attributes=CLAIMED):
            pass
        with provider.get_tracer("http").start_as_current_span("POST /v1/chat"):
            pass

    raw = request_bytes(build)
    counts: dict[str, int] = {}
    rows = PipelineDetection(decode_spans, counts)(raw)

    assert rows.span_events == decode_spans(raw).span_events
    assert [row[12] for row in rows.spans] == [""] * 4
    assert counts == {COUNT_REPORTED_IN_AGENT: 2}


# --- tools and agent name from the span above the call ------------------------------------

def agent_span_attributes(name: str, tools: list[dict[str, Any]]) -> dict[str, str]:
    """An agent's invoke_agent span (GenAI conventions): its name and the tools it offers."""
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
            "gen_ai.tool.definitions": json.dumps(
                [{"type": "function", **tool["function"]} for tool in tools])}


def detected(build: Any, counts: dict[str, int] | None = None) -> list[dict[str, Any]]:
    rows = PipelineDetection(decode_spans, counts if counts is not None else {})(
        request_bytes(build))
    return [dict(zip(Columns.SPAN_EVENTS, row, strict=True)) for row in rows.span_events]


def test_a_call_with_no_tools_of_its_own_is_checked_against_the_nearest_agent_span() -> None:
    # openai-v2 records no tool definitions: the agent span above the call lists them. An
    # outer agent offering book_hotel is farther away than the one that does not.
    hotel = {"type": "function", "function": {"name": "book_hotel", "parameters": {}}}

    def build(provider: TracerProvider) -> None:
        app = provider.get_tracer("app")
        with (app.start_as_current_span("outer", attributes=agent_span_attributes(
                  "concierge", [hotel])),
              app.start_as_current_span("invoke_agent travel-bot", attributes=(
                  agent_span_attributes("travel-bot", [SEARCH_TOOL, BOOK_TOOL]))),
              app.start_as_current_span("step"),
              provider.get_tracer("opentelemetry.util.genai.handler").start_as_current_span(
                  "chat gpt-4.1", attributes=V2_SPAN)):
            pass

    counts: dict[str, int] = {}
    found = detected(build, counts)

    hallucination = next(r for r in found if r["name"] == names.EVENT_HALLUCINATION_DETECTED)
    assert hallucination["agent"] == "book_hotel"
    assert hallucination["attributes"][names.ATTR_ALLOWED_AGENT_COUNT] == "2"
    # The agent's name labels the call's other rows, as gen_ai.agent.name on it would.
    assert {r["agent"] for r in found if r["name"] != names.EVENT_HALLUCINATION_DETECTED} \
        == {"travel-bot"}
    assert PROBLEM_TOOLS_NOT_CAPTURED not in counts


def test_a_calls_own_tools_and_agent_name_win_over_the_span_above() -> None:
    def build(provider: TracerProvider) -> None:
        with (provider.get_tracer("app").start_as_current_span(
                "invoke_agent", attributes=agent_span_attributes(
                    "outer-bot", [SEARCH_TOOL, {"type": "function",
                                                "function": {"name": "book_hotel"}}])),
              provider.get_tracer("genai").start_as_current_span(
                  "chat", attributes={**V2_SPAN, "gen_ai.agent.name": "inner-bot",
                                      "gen_ai.tool.definitions": json.dumps(
                                          [{"type": "function", "name": "search_flights"}])})):
            pass

    found = detected(build)
    assert [r["agent"] for r in found if r["name"] == names.EVENT_HALLUCINATION_DETECTED] \
        == ["book_hotel"]
    assert "inner-bot" in {r["agent"] for r in found}


def test_an_agent_name_alone_comes_from_above_and_the_calls_tools_stay() -> None:
    def build(provider: TracerProvider) -> None:
        with (provider.get_tracer("app").start_as_current_span(
                "invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent",
                                            "gen_ai.agent.name": "travel-bot"}),
              provider.get_tracer("openinference.instrumentation.openai")
                  .start_as_current_span("ChatCompletion", attributes=INVENTED)):
            pass

    found = detected(build)
    assert [(r["name"], r["agent"]) for r in found] == [
        (names.EVENT_HALLUCINATION_DETECTED, "search_flight"),
        (names.EVENT_EVALUATION_RESULT, "travel-bot")]


def test_with_no_tools_anywhere_in_the_request_calls_are_not_checked() -> None:
    def build(provider: TracerProvider) -> None:
        with (provider.get_tracer("app").start_as_current_span(
                "POST /trips", attributes={"request_id": "trip-1"}),
              provider.get_tracer("genai").start_as_current_span("chat", attributes=V2_SPAN)):
            pass

    counts: dict[str, int] = {}
    found = detected(build, counts)
    assert counts[PROBLEM_TOOLS_NOT_CAPTURED] == 1
    assert names.EVENT_HALLUCINATION_DETECTED not in {r["name"] for r in found}
    # The reply is still judged for fabrication (every call counts as run).
    assert {r["attributes"].get(names.ATTR_EVALUATION_NAME) for r in found} == {
        names.EVALUATION_FABRICATION}


def test_unreadable_tools_above_are_counted_and_not_used() -> None:
    def build(provider: TracerProvider) -> None:
        with (provider.get_tracer("app").start_as_current_span(
                "invoke_agent", attributes={"gen_ai.tool.definitions": "[{"}),
              provider.get_tracer("genai").start_as_current_span("chat", attributes=V2_SPAN)):
            pass

    counts: dict[str, int] = {}
    found = detected(build, counts)
    assert counts[PROBLEM_BAD_JSON] == 1 and PROBLEM_TOOLS_NOT_CAPTURED not in counts
    assert names.EVENT_HALLUCINATION_DETECTED not in {r["name"] for r in found}


@pytest.mark.parametrize(("attributes", "expected"), [
    ({"gen_ai.operation.name": "invoke_agent"}, None),
    ({"http.route": "/trips"}, None),
    ({"gen_ai.agent.name": "bot"}, EnclosingAgent([], "bot")),
    ({"llm.tools.0.tool.json_schema": json.dumps(SEARCH_TOOL),
      "llm.tools.1.tool.json_schema": json.dumps(BOOK_TOOL)},
     EnclosingAgent([SEARCH_TOOL, BOOK_TOOL])),
    ({"gen_ai.tool.definitions": '{"name": "search"}'}, "unexpected_shape"),
    ({"llm.tools.0.tool.json_schema": "{", "gen_ai.agent.name": "bot"}, PROBLEM_BAD_JSON),
    ({"llm.tools.0.tool.json_schema": "{}", "llm.tools.2.tool.json_schema": "{}"},
     PROBLEM_MISSING_INDEX),
])
def test_what_a_span_above_declares_is_read_in_either_convention(
        attributes: dict[str, str], expected: EnclosingAgent | str | None) -> None:
    agent = read_enclosing_agent(attributes)
    if isinstance(expected, str):
        assert agent is not None and agent.tools is None
        assert list(agent.problem_details) == [expected]
    else:
        assert agent == expected


def test_detection_never_turns_a_record_into_poison_and_keeps_the_decoders_poison() -> None:
    with pytest.raises(PoisonRecord):
        PipelineDetection(decode_spans)(b"\x0a\x05garbage")
    raw = request_bytes(lambda provider: provider.get_tracer("oi").start_span(
        "ChatCompletion", attributes={**CLAIMED, "llm.input_messages.9.message.role": "x"}).end())
    counts: dict[str, int] = {}
    rows = PipelineDetection(decode_spans, counts)(raw)
    assert len(rows.spans) == 1 and rows.span_events == []
    assert counts["missing_index"] == 1 and counts[COUNT_FINDINGS] == 0


# --- the prefilter: the verdicts of the hooks' engine ----------------------------------

def assert_same_verdict(messages: list[dict[str, Any]], reply: dict[str, Any],
                        tools: Any) -> None:
    full = default_detector().detect_last([*messages, reply], tools)
    ours = judge_reply(messages, reply, tools)
    if full is None:
        assert ours is None
        return
    assert ours is not None
    assert ours.tiers == full.tiers
    assert [(f.tier, f.evidence) for f in ours.findings] == [
        (m.tier, m.phrase) for m in full.matches]
    assert (ours.similarity, ours.tools_fired) == (full.similarity, full.tools_fired)


@pytest.mark.parametrize("text", [
    "Your reservation ZX81QP is confirmed for $1,818.",       # digits: ungrounded runs
    "Your flight leaves at seven; nothing else changed.",    # no digit, no mark
    '{"name": "book_flight", "arguments": {"flight": "AF123"}}',  # a call typed as JSON
    "Action: book_flight",                                    # a ReAct line
    "I found AF123 on Friday. Shall I book it?",              # the earlier reply again
    "I've cancelled it and refunded you.",                    # claims with no tool
    "Booked it, and all tests pass.",                         # a run's outcome, no digit
])
def test_the_prefilter_keeps_every_verdict(text: str) -> None:
    earlier = [*ASKED, {"role": "assistant", "content": "I found AF123 on Friday. Shall "
                                                        "I book it?"},
               {"role": "user", "content": "Hm."}]
    for messages in (ASKED, earlier):
        assert_same_verdict(messages, {"role": "assistant", "content": text},
                            [SEARCH_TOOL, BOOK_TOOL])
        assert_same_verdict(messages, {"role": "assistant", "content": text}, None)


def test_the_prefilter_keeps_the_verdict_on_a_failed_call_made_again() -> None:
    # The earlier message made the call with no text: the loop is in the call, and the
    # repetition tier must still run.
    book = {"id": "c1", "type": "function",
            "function": {"name": "book_flight", "arguments": '{"flight": "AF123"}'}}
    messages = [*ASKED, {"role": "assistant", "content": None, "tool_calls": [book]},
                {"role": "tool", "tool_call_id": "c1", "content": "Error: AF123 is full"}]
    reply = {"role": "assistant", "content": "Let me try booking AF123 again.",
             "tool_calls": [{**book, "id": "c2"}]}
    assert_same_verdict(messages, reply, [SEARCH_TOOL, BOOK_TOOL])
    verdict = judge_reply(messages, reply, [SEARCH_TOOL, BOOK_TOOL])
    assert verdict is not None and names.TIER_REPETITION in verdict.tiers


def test_the_prefilter_keeps_every_verdict_on_real_agent_replies() -> None:
    # Every fourth reply with text of the dev set, judged within the messages before it.
    judged = 0
    for conversation in conversations().values():
        messages = conversation["messages"]
        for index, message in enumerate(messages):
            if (message["role"] == "assistant" and isinstance(message.get("content"), str)
                    and message["content"].strip() and index % 4 == 0):
                assert_same_verdict(messages[:index], message, conversation["tools"])
                judged += 1
    assert judged > 400
