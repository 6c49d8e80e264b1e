"""The request page's story of a request (dashboard/views/story.py, plan_story.py,
reply_marks.py): plan loops, flagged replies, verifications and verdicts, read from what
the hooks emit.

Payloads and events come from the real hooks and adapters (the plan retry loop, the
fabrication guard, the verification loop, the OpenAI adapter on an offline client),
captured in memory, then stored as the consumers store them: event attributes through
OTLP to text (:func:`guardtrace.consumers.otlp_values.attributes_map`). Findings of the
pipeline are written by hand as its README section says it writes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from guardtrace.collectors import (
    FabricationGuard,
    PlanAttempt,
    PlanRetryConfig,
    VerificationLoop,
    generate_validated_plan,
    record_payload,
)
from guardtrace.collectors.plans.retry import GeneratedPlan
from guardtrace.collectors.testing import Capture, CapturedPayload, capture
from guardtrace.consumers.otlp_values import attributes_map
from guardtrace.dashboard.views.plan_story import OUTCOME_DETECTED, PlanStep, plan_steps
from guardtrace.dashboard.views.reply_marks import Mark, Segment, mark_reply, place
from guardtrace.dashboard.views.story import RequestStory, read_story
from guardtrace.integrations import openai as gt_openai
from guardtrace.schemas import names
from guardtrace.store.queries import (
    Payload,
    PayloadIntegrity,
    RequestSummary,
    Trace,
    TraceEvent,
    TraceSpan,
)
from tests.support.llm_wire import ScriptedAPI, chat_completion

from .test_genai_exchange import UTIL_SPAN

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TRAVEL_TOOLS = [{"type": "function", "function": {"name": name, "description": text}}
                for name, text in (("search_flights", "Search flights between two airports"),
                                   ("book_hotel", "Book a hotel room"),
                                   ("get_weather", "Weather for a city"))]
WEATHER_TOOL = TRAVEL_TOOLS[2]


@pytest.fixture
def cap() -> Iterator[Capture]:
    with capture() as captured:
        yield captured


# -- storing what the hooks emitted, as the consumers store it ------------------------------

def stored_events(cap: Capture) -> list[TraceEvent]:
    """Every span event, its attributes as text (OTLP, then the consumers' conversion)."""
    found = []
    for resource in encode_spans(cap.spans()).resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                for number, event in enumerate(span.events):
                    attrs = attributes_map(event.attributes)
                    found.append(TraceEvent(
                        f"{span.span_id.hex()}-{number}",
                        datetime.fromtimestamp(event.time_unix_nano / 1e9, UTC), event.name,
                        span.trace_id.hex(), span.span_id.hex(),
                        attrs.get(names.ATTR_MODULE, ""), attrs.get(names.ATTR_AGENT, ""),
                        attrs.get(names.ATTR_TIER, ""), "agent", attrs))
    return sorted(found, key=lambda e: e.timestamp)


def stored(captured: CapturedPayload, at: datetime, *, chunks: int = 1) -> Payload:
    return Payload(f"p-{at.timestamp()}", captured.request_id, captured.kind, at, "t", "s",
                   captured.body, len(captured.body), "", False, 0, dict(captured.attributes),
                   chunks, 1, PayloadIntegrity.VERIFIED)


def payload(kind: str, body: str, at: datetime = T0, *, span_id: str = "s") -> Payload:
    return Payload(f"p-{kind}-{at.timestamp()}", "r1", kind, at, "t", span_id, body,
                   len(body), "", False, 0, {}, 1, 1, PayloadIntegrity.VERIFIED)


def trace_of(events: Sequence[TraceEvent], spans: Sequence[TraceSpan] = ()) -> Trace:
    summary = RequestSummary("r1", T0, T0, ("t",), (), (), (), ())
    return Trace(summary, tuple(spans), tuple(events))


def event(name: str, attributes: dict[str, str], *, span_id: str = "llm", at: datetime = T0,
          number: int = 0) -> TraceEvent:
    return TraceEvent(f"e{number}", at, name, "t", span_id, "", attributes.get("agent", ""),
                      attributes.get(names.ATTR_TIER, ""), "svc", attributes)


def llm_span(attributes: dict[str, str], span_id: str = "llm") -> TraceSpan:
    return TraceSpan("t", span_id, "", "chat gpt-4.1", "svc", T0, T0, 1.0, "unset", "",
                     attributes)


def hooks_story(cap: Capture, exchanges_after: Sequence[CapturedPayload] = ()) -> RequestStory:
    """The story of what the hooks emitted: each guard payload at its event's time, the
    agent's own exchange records after them all."""
    events = stored_events(cap)
    last = events[-1].timestamp
    payloads = []
    for captured in cap.payloads:
        if captured.kind == names.PAYLOAD_KIND_LLM_EXCHANGE or captured in exchanges_after:
            continue
        payloads.append(stored(captured, _event_time(captured, events)))
    payloads += [stored(p, last + timedelta(milliseconds=1 + n))
                 for n, p in enumerate(cap.payloads)
                 if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    return read_story(trace_of(events), sorted(payloads, key=lambda p: p.timestamp))


def _event_time(captured: CapturedPayload, events: Sequence[TraceEvent]) -> datetime:
    """A guard payload is recorded right after its detection event."""
    body = json.loads(captured.body)
    for stored_event in events:
        if captured.kind == names.PAYLOAD_KIND_HALLUCINATION and \
                stored_event.name == names.EVENT_HALLUCINATION_DETECTED and \
                stored_event.attributes.get(names.ATTR_HALL_RETRY) == str(body["retry"]):
            return stored_event.timestamp + timedelta(microseconds=1)
    return events[-1].timestamp


# -- plans ------------------------------------------------------------------------------------

def scripted_planner(*plans: list[dict[str, Any]]) -> Any:
    def generate(attempt: PlanAttempt) -> GeneratedPlan:
        return GeneratedPlan(plans[attempt.retry],
                             attempt.compose(f"Plan this: {attempt.request}\nTools: ..."))
    return generate


def test_a_plan_recovered_after_two_retries_tells_each_rejection_the_feedback_and_the_fix(
        cap: Capture) -> None:
    first = [{"id": "s1", "tool": "search_flight", "instruction": "find a flight to Oslo"},
             {"id": "s2", "tool": "book_hotel", "instruction": "book near the airport",
              "depends_on": ["s1"]}]
    second = [{"id": "s1", "tool": "hotel_reserve_pro", "instruction": "reserve"}]
    fixed = [{"id": "s1", "tool": "search_flights", "instruction": "find a flight to Oslo"},
             {"id": "s2", "tool": "book_hotel", "instruction": "book", "depends_on": ["s1"]}]
    generate_validated_plan("Trip to Oslo", scripted_planner(first, second, fixed),
                            TRAVEL_TOOLS, config=PlanRetryConfig(max_retries=2),
                            request_id="r1")
    # The agent records its own exchange after the loop (as the simulator does).
    record_payload("r1", names.PAYLOAD_KIND_LLM_EXCHANGE,
                   f"Plan this: Trip to Oslo\nresponse:\n{json.dumps({'steps': fixed})}\n")

    [plan] = hooks_story(cap).plans
    assert plan.outcome == names.EVENT_HALLUCINATION_RECOVERED and plan.recovered
    assert plan.outcome_detail[names.ATTR_RETRIES_USED] == "2"
    one, two = plan.rejected
    assert (one.retry, one.invented, two.retry, two.invented) == (
        0, ("search_flight",), 1, ("hotel_reserve_pro",))
    assert one.shown == two.shown == ("search_flights", "book_hotel", "get_weather")
    assert one.suggestions == {"search_flight": ("search_flights",)}
    assert one.steps == (PlanStep("s1", "search_flight", "find a flight to Oslo"),
                         PlanStep("s2", "book_hotel", "book near the airport", ("s1",)))
    assert one.feedback == "" and one.found_in == names.FOUND_IN_AGENT
    # What the guard told the model before retry 1 opens retry 1's prompt.
    assert two.feedback.startswith("YOUR PREVIOUS PLAN WAS REJECTED")
    assert "'search_flight'" in two.feedback and "Closest allowed: search_flights" in two.feedback
    assert "Plan this:" not in two.feedback
    assert any("hotel_reserve_pro" in problem for problem in two.problems)
    assert plan.final == (PlanStep("s1", "search_flights", "find a flight to Oslo"),
                          PlanStep("s2", "book_hotel", "book", ("s1",)))


def test_the_openai_adapters_retry_reads_as_rejected_calls_and_the_call_given_back(
        cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(calls=[("call_1", "get_wether_forecast", {"city": "Oslo"})]),
                      chat_completion(calls=[("call_2", "get_weather", {"city": "Oslo"})]))
    client = gt_openai.instrument(openai.OpenAI(api_key="sk-test", max_retries=0,
                                                http_client=api.http_client()), act=True)
    client.chat.completions.create(model="gpt-4.1", tools=[WEATHER_TOOL],
                                   messages=[{"role": "user", "content": "Oslo weather?"}])

    story = hooks_story(cap)
    [plan] = story.plans
    [rejected] = plan.rejected
    assert rejected.steps == (PlanStep("call_1", "get_wether_forecast", '{"city": "Oslo"}'),)
    assert rejected.invented == ("get_wether_forecast",)
    assert rejected.suggestions == {"get_wether_forecast": ("get_weather",)}
    assert rejected.shown == ("get_weather",)
    assert plan.recovered
    assert plan.final == (PlanStep("call_2", "get_weather", '{"city": "Oslo"}'),)
    # The exchange the adapter recorded is the call as sent, with the reply given back.
    [exchange] = story.exchanges
    assert exchange.conversation.reply_calls[0].name == "get_weather"  # type: ignore[union-attr]
    # A reply with no text gets no fabrication verdict.
    assert [(e.name, e.label) for e in story.evaluations] == [
        (names.EVALUATION_PLAN_TOOLS, names.EVALUATION_FAIL),
        (names.EVALUATION_PLAN_TOOLS, names.EVALUATION_PASS)]
    assert story.evaluations[0].response_id == "chatcmpl-BvA1kQz7"


def test_an_unrecoverable_loop_has_no_plan_given_back(cap: Capture) -> None:
    invented = [{"id": "s1", "tool": "teleport"}]
    with pytest.raises(Exception, match="teleport"):
        generate_validated_plan("Trip", scripted_planner(invented, invented), TRAVEL_TOOLS,
                                config=PlanRetryConfig(max_retries=1), request_id="r1")
    [plan] = hooks_story(cap).plans
    assert plan.outcome == names.EVENT_HALLUCINATION_UNRECOVERABLE and not plan.recovered
    assert [r.retry for r in plan.rejected] == [0, 1] and plan.final is None


def test_a_pipeline_finding_takes_its_plan_and_tool_list_from_the_llm_span() -> None:
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Weather in Oslo, then book",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_wether",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{}",
        "llm.tools.0.tool.json_schema": json.dumps(WEATHER_TOOL),
    }
    # As the consumers write it: the hooks' attributes plus found_in = pipeline.
    finding = event(names.EVENT_HALLUCINATION_DETECTED, {
        names.ATTR_HALLUCINATED_AGENT: "get_wether", names.ATTR_AGENT: "get_wether",
        names.ATTR_SUGGESTED_TOOLS: '["get_weather"]',
        names.ATTR_FOUND_IN: names.FOUND_IN_PIPELINE})
    story = read_story(trace_of([finding], [llm_span(attributes)]), [])

    [plan] = story.plans
    [rejected] = plan.rejected
    assert rejected.found_in == names.FOUND_IN_PIPELINE and plan.outcome == OUTCOME_DETECTED
    assert rejected.shown == ("get_weather",)
    assert rejected.steps == (PlanStep("c1", "get_wether", "{}"),)
    assert rejected.suggestions == {"get_wether": ("get_weather",)}
    assert story.pipeline_findings == (finding,)
    [exchange] = story.exchanges
    assert exchange.span is not None and exchange.payload is None


def test_plan_shapes_read_as_steps() -> None:
    assert plan_steps({"steps": [{"step_id": 1, "agent_name": "a", "inputs": {"x": 1},
                                  "depends_on": 0}]}) == (PlanStep("1", "a", '{"x": 1}', ("0",)),)
    assert plan_steps('[{"tool": "t"}]') == (PlanStep("#1", "t"),)
    assert plan_steps({"content": [{"type": "tool_use", "id": "u", "name": "n",
                                    "input": {"q": "é"}}], "role": "assistant"}) == (
        PlanStep("u", "n", '{"q": "é"}'),)
    assert plan_steps({"choices": [{"message": {"role": "assistant", "content": "no"}}]}) == ()
    assert plan_steps("not json") is None and plan_steps({"weird": 1}) is None
    assert plan_steps(42) is None


# -- replies ----------------------------------------------------------------------------------

REPLY = ("The cheapest flight to Oslo departs at 15:40 and costs 4431.63 EUR. I've booked it "
         "for you and emailed the receipt! Anything else?")


def test_a_fabricated_sentence_is_marked_in_the_reply_with_its_tier_and_evidence(
        cap: Capture) -> None:
    verdict = FabricationGuard().check(REPLY, tools_fired=[], request_id="r1")
    assert verdict.flagged

    story = hooks_story(cap)
    [reply] = story.fabrications
    assert reply.reply == REPLY and reply.tools_fired == ()
    [mark] = reply.marks
    assert mark.tier == names.TIER_ACTION and mark.evidence == "I've booked; and emailed"
    assert REPLY[mark.start:mark.end] == "I've booked it for you and emailed the receipt!"
    assert reply.segments() == (
        Segment("The cheapest flight to Oslo departs at 15:40 and costs 4431.63 EUR. "),
        Segment("I've booked it for you and emailed the receipt!", (mark,)),
        Segment(" Anything else?"))
    assert [(e.name, e.label) for e in story.evaluations] == [
        (names.EVALUATION_FABRICATION, names.EVALUATION_FAIL)]


def test_marks_join_where_they_overlap_and_repetition_marks_the_whole_reply() -> None:
    text = "First line\nI'm deploying it now. I've sent the mail. Done."
    deploy = place(text, names.TIER_ACTION, "i'm DEPLOYING")  # case does not matter
    sent = place(text, names.TIER_ACTION, "sent the mail")
    same = place(text, names.TIER_UNGROUNDED_RESULT, "deploying it")
    assert text[deploy.start:deploy.end] == "I'm deploying it now."
    assert mark_reply(text, [sent, deploy, same]) == (
        Segment("First line\n"), Segment("I'm deploying it now.", (deploy, same)),
        Segment(" "), Segment("I've sent the mail.", (sent,)), Segment(" Done."))
    whole = place(text, names.TIER_REPETITION, "First line I'm deploy…")
    assert (whole.start, whole.end) == (0, len(text))
    missing = place(text, names.TIER_READ, "I'm reading")
    assert not missing.placed and mark_reply(text, [missing]) == (Segment(text),)
    assert place("", names.TIER_REPETITION, "x") == Mark(names.TIER_REPETITION, "x")
    # Evidence of two claims: the first phrase found places the mark.
    two = place(text, names.TIER_ACTION, "I've pushed; sent the mail")
    assert text[two.start:two.end] == "I've sent the mail."


def test_invented_values_are_marked_where_the_reply_wrote_them() -> None:
    text = "Upgraded to business class. The total is $809.25. Flight HAT999 leaves at 9."
    # Several values, as the guard joins them; a value with the guard's note; a field
    # stated contrary to a write's result, named as the result names it.
    for evidence, sentence in [
            ("HAT999; $809.25", "Flight HAT999 leaves at 9."),
            ("$809.25 (calculated from a number no source gave)", "The total is $809.25."),
            ("cabin: business (result: economy)", "Upgraded to business class.")]:
        mark = place(text, names.TIER_UNGROUNDED_RESULT, evidence)
        assert text[mark.start:mark.end] == sentence, evidence
    assert not place(text, names.TIER_UNGROUNDED_RESULT, "seat: 12A (result: 14C)").placed


def test_a_pipeline_fabrication_takes_its_reply_from_the_llm_span() -> None:
    finding = event(names.EVENT_FABRICATION_DETECTED, {
        names.ATTR_TIER: names.TIER_ACTION, names.ATTR_MATCHED_PHRASE: "I have booked",
        names.ATTR_TOOLS_FIRED: "[]", names.ATTR_FOUND_IN: names.FOUND_IN_PIPELINE})
    [reply] = read_story(trace_of([finding], [llm_span(UTIL_SPAN)]), []).fabrications
    assert reply.found_in == names.FOUND_IN_PIPELINE and reply.tools_fired == ()
    assert reply.segments() == (Segment("I have booked AF123 for you.", reply.marks),)


def test_a_fabrication_without_its_reply_stored_still_lists_its_findings() -> None:
    finding = event(names.EVENT_FABRICATION_DETECTED, {
        names.ATTR_TIER: names.TIER_READ, names.ATTR_MATCHED_PHRASE: "I'm reading"},
        span_id="agent.reply")
    [reply] = read_story(trace_of([finding]), []).fabrications
    assert reply.reply is None and not reply.marks[0].placed and reply.tools_fired is None


# -- verification, verdicts, unreadable payloads ----------------------------------------------

def test_a_forced_verification_reads_its_question_decision_and_counts(cap: Capture) -> None:
    loop = VerificationLoop("How many r's are in strawberry?", request_id="r1")
    loop.on_model_turn(wants_to_finish=True)
    loop.close("turn_limit")

    [verification] = hooks_story(cap).verifications
    assert verification.question == "How many r's are in strawberry?"
    facts = dict(verification.facts)
    assert verification.outcome == "bypassed" and verification.reason
    assert facts["verifying tool calls"] == "0" and facts["nudges"] == "1"
    assert "depth" in facts and "trigger pattern" in facts


@pytest.mark.parametrize(("kind", "body", "says"), [
    (names.PAYLOAD_KIND_HALLUCINATION, '{"prompt": "x", "response": [' +
     names.TRUNCATION_MARKER, "not valid JSON"),
    (names.PAYLOAD_KIND_HALLUCINATION, '{"prompt": "x"}', "no 'allowed' list"),
    (names.PAYLOAD_KIND_FABRICATION, '["reply"]', "no 'reply' text"),
    (names.PAYLOAD_KIND_FABRICATION, "{" * 50_000, "not valid JSON"),
    (names.PAYLOAD_KIND_VERIFICATION, '{"outcome": "completed"}', "no 'question'"),
    (names.PAYLOAD_KIND_VERIFICATION, "plain text", "not valid JSON"),
])
def test_a_guard_payload_that_cannot_be_read_is_listed_with_why(kind: str, body: str,
                                                                says: str) -> None:
    broken = payload(kind, body)
    story = read_story(trace_of([]), [broken])
    assert story.unreadable == ((broken, story.unreadable[0][1]),)
    assert says in story.unreadable[0][1]
    assert not (story.plans or story.fabrications or story.verifications)


@pytest.mark.parametrize(("kind", "body"), [
    (names.PAYLOAD_KIND_HALLUCINATION, {"allowed": ["a"], "errors": True, "response": 5,
                                        "retry": "1", "prompt": ["x"]}),
    (names.PAYLOAD_KIND_FABRICATION, {"reply": "I sent it.", "matches": True,
                                      "tools_fired": "none"}),
    (names.PAYLOAD_KIND_VERIFICATION, {"question": "Why?", "decision": [1],
                                       "nudges": {"n": 1}}),
])
def test_fields_of_the_wrong_type_are_read_around_not_raised_on(kind: str,
                                                                body: dict[str, Any]) -> None:
    story = read_story(trace_of([]), [payload(kind, json.dumps(body))])
    assert story.unreadable == ()
    assert len(story.plans) + len(story.fabrications) + len(story.verifications) == 1


def test_an_incomplete_payload_is_not_read_as_a_whole_one() -> None:
    partial = Payload("p", "r1", names.PAYLOAD_KIND_FABRICATION, T0, "t", "s",
                      '{"reply": "I sent it", "matches": []}', 90, "", False, 0, {}, 1, 3,
                      PayloadIntegrity.INCOMPLETE)
    exchange = Payload("q", "r1", names.PAYLOAD_KIND_LLM_EXCHANGE, T0, "t", "s", "{", 90, "",
                       False, 0, {}, 2, 3, PayloadIntegrity.INCOMPLETE)
    story = read_story(trace_of([]), [partial, exchange])
    assert [why for _, why in story.unreadable] == ["Incomplete: 1 of 3 chunks have arrived."]
    assert "2 of 3 chunks" in story.exchanges[0].conversation.note  # type: ignore[union-attr]
    assert story.fabrications == ()


PAYLOAD_KINDS = [names.PAYLOAD_KIND_HALLUCINATION, names.PAYLOAD_KIND_FABRICATION,
                 names.PAYLOAD_KIND_VERIFICATION, names.PAYLOAD_KIND_LLM_EXCHANGE]
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=6)
    | st.sampled_from(["action", "read", "repetition", "hallucinated_tool", "s1", "tool"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from([
        "prompt", "response", "allowed", "retry", "errors", "tool", "suggested_tools",
        "error_type", "message", "steps", "id", "depends_on", "reply", "matches", "tier",
        "phrase", "tools_fired", "similarity", "question", "decision", "outcome",
        "hallucinated_agents", "messages", "choices"]), inner, max_size=5),
    max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PAYLOAD_KINDS), VALUES), max_size=4),
       st.lists(st.sampled_from([names.EVENT_HALLUCINATION_DETECTED,
                                 names.EVENT_HALLUCINATION_RECOVERED,
                                 names.EVENT_FABRICATION_DETECTED,
                                 names.EVENT_EVALUATION_RESULT]), max_size=4))
def test_any_stored_payloads_and_events_read_without_an_exception(
        bodies: list[tuple[str, Any]], event_names: list[str]) -> None:
    payloads = [payload(kind, json.dumps(value), T0 + timedelta(seconds=n))
                for n, (kind, value) in enumerate(bodies)]
    events = [event(name, {names.ATTR_HALL_RETRY: "x", names.ATTR_SUGGESTED_TOOLS: "{",
                           names.ATTR_TOOLS_FIRED: "7"}, number=n,
                    at=T0 + timedelta(seconds=n)) for n, name in enumerate(event_names)]
    story = read_story(trace_of(events), payloads)
    assert len(story.exchanges) == sum(k == names.PAYLOAD_KIND_LLM_EXCHANGE for k, _ in bodies)
    for reply in story.fabrications:
        assert "".join(s.text for s in reply.segments()) == (reply.reply or "")
