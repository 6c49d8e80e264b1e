"""Every guard verdict is also a GenAI evaluation result event (``gen_ai.evaluation.result``).

One event per verdict, pass or fail, for each family (plan tools, fabrication,
verification), on the span the guard's own events go on, with the request id first,
the evaluation's name, label, score and explanation (the evidence, redacted and
bounded), ``gen_ai.response.id`` when known and ``found_in=agent``; ``error.type`` when
a check could not decide. Read through the in-memory capture of real SDK objects; the
OpenAI adapter's test drives the real client offline (tests/support/llm_wire.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.trace import TracerProvider

from guardtrace.collectors import FabricationGuard, validate_plan
from guardtrace.collectors.emit import state as _state
from guardtrace.collectors.emit.internal import internal_totals
from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.collectors.emit.telemetry import GuardTelemetry
from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.plans.retry import generate_validated_plan
from guardtrace.collectors.questions.criticality import CriticalityGate
from guardtrace.collectors.questions.verification import VerificationLoop, VerificationOutcome
from guardtrace.collectors.testing import Capture, CapturedEvent, capture
from guardtrace.integrations import openai as gt_openai
from guardtrace.schemas import names
from tests.support.llm_wire import ScriptedAPI, chat_completion

# The two keys the semantic convention defines beyond the evaluation's own.
RESPONSE_ID = "gen_ai.response.id"
ERROR_TYPE = "error.type"

TOOLS = ["get_weather", "get_time"]
OCTOBER = "Which month of the year is spelled with an X?"
CLAIM = "I've deployed the fix to production and restarted the servers."
GROUNDED = "The weather in Paris is sunny, 21 degrees."
OPENAI_KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"


@pytest.fixture
def cap() -> Iterator[Capture]:
    with capture() as captured:
        yield captured


def evaluations(cap: Capture) -> list[CapturedEvent]:
    return cap.events(names.EVENT_EVALUATION_RESULT)


def verdict(event: CapturedEvent) -> tuple[str, str, float]:
    attrs = event.attributes
    return (attrs[names.ATTR_EVALUATION_NAME], attrs[names.ATTR_EVALUATION_SCORE_LABEL],
            attrs[names.ATTR_EVALUATION_SCORE_VALUE])


def assert_shape(event: CapturedEvent, request_id: str, module: str) -> None:
    """What every evaluation result carries, whatever the family."""
    keys = list(event.attributes)
    assert keys[:2] == [names.ATTR_REQUEST_ID, names.ATTR_MODULE]
    assert event.attributes[names.ATTR_REQUEST_ID] == request_id
    assert event.attributes[names.ATTR_MODULE] == module
    assert event.attributes[names.ATTR_FOUND_IN] == names.FOUND_IN_AGENT


# --- plan tools ------------------------------------------------------------------------------

def test_a_plan_that_invents_a_tool_fails_with_the_tool_and_its_suggestion(
        cap: Capture) -> None:
    tracer = cap.tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("agent.plan"):
        validate_plan([{"tool": "get_wether"}, {"tool": "get_wether"}], TOOLS,
                      request_id="plan-1", response_id="chatcmpl-7")
    (event,) = evaluations(cap)
    assert verdict(event) == (names.EVALUATION_PLAN_TOOLS, names.EVALUATION_FAIL, 0.0)
    assert_shape(event, "plan-1", names.MODULE_PLANNING)
    assert event.attributes[names.ATTR_EVALUATION_EXPLANATION] == (
        "'get_wether' is not one of the 2 allowed tools (closest: get_weather)")
    assert event.attributes[RESPONSE_ID] == "chatcmpl-7"
    # On the agent's span, beside the detection it summarises.
    assert [(e.name, e.span_name) for e in cap.events()] == [
        (names.EVENT_HALLUCINATION_DETECTED, "agent.plan"),
        (names.EVENT_EVALUATION_RESULT, "agent.plan")]


def test_a_plan_of_allowed_tools_passes_with_one_event_and_nothing_else(cap: Capture) -> None:
    validate_plan([{"tool": "get_weather"}, {"tool": "get_time"}], TOOLS, request_id="plan-2")
    validate_plan([], TOOLS, request_id="plan-3")  # the zero-step answer
    events = cap.events()
    assert [verdict(e) for e in events] == [
        (names.EVALUATION_PLAN_TOOLS, names.EVALUATION_PASS, 1.0)] * 2
    assert_shape(events[0], "plan-2", names.MODULE_PLANNING)
    assert RESPONSE_ID not in events[0].attributes  # not known: left out, not made up
    assert events[0].attributes[names.ATTR_EVALUATION_EXPLANATION]
    # Without a recording span of the agent's, the verdict gets a span of its own.
    assert events[0].span_name == "guardtrace.hallucination_detection"


def test_an_unreadable_plan_is_an_evaluation_that_could_not_decide(cap: Capture) -> None:
    with pytest.raises(GuardInputError):
        validate_plan([{"depends_on": []}], TOOLS, request_id="plan-4")
    (event,) = cap.events()
    assert event.name == names.EVENT_EVALUATION_RESULT
    assert_shape(event, "plan-4", names.MODULE_PLANNING)
    assert event.attributes[names.ATTR_EVALUATION_NAME] == names.EVALUATION_PLAN_TOOLS
    assert event.attributes[ERROR_TYPE] == "GuardInputError"
    assert names.ATTR_EVALUATION_SCORE_LABEL not in event.attributes
    assert names.ATTR_EVALUATION_SCORE_VALUE not in event.attributes


def test_a_retry_loop_that_recovers_emits_the_verdict_of_each_attempt(cap: Capture) -> None:
    plans = iter([[{"tool": "get_wether"}], [{"tool": "get_weather"}]])
    out = generate_validated_plan("Weather in Oslo?", lambda attempt: next(plans), TOOLS,
                                  request_id="plan-5")
    assert out.retries_used == 1
    assert [verdict(e)[1] for e in evaluations(cap)] == [names.EVALUATION_FAIL,
                                                         names.EVALUATION_PASS]
    assert {e.attributes[names.ATTR_REQUEST_ID] for e in evaluations(cap)} == {"plan-5"}


def test_the_explanation_is_redacted_like_every_event_attribute(cap: Capture) -> None:
    validate_plan([{"tool": "mail ops@example.com"}], TOOLS, request_id="plan-6")
    (event,) = evaluations(cap)
    explanation = event.attributes[names.ATTR_EVALUATION_EXPLANATION]
    assert "ops@example.com" not in explanation and "[REDACTED:email]" in explanation


def test_the_explanation_is_bounded_and_cut_after_redaction(cap: Capture) -> None:
    GuardTelemetry(names.MODULE_REPLIES, "check").evaluation(
        names.EVALUATION_FABRICATION, "r-long", passed=False,
        explanation=f"key {OPENAI_KEY} " + "x" * 100_000)
    (event,) = evaluations(cap)
    explanation = event.attributes[names.ATTR_EVALUATION_EXPLANATION]
    assert explanation.startswith("key [REDACTED:api_key] xxx")
    assert len(explanation) <= 512 and explanation.endswith(names.TRUNCATION_MARKER)


# --- fabrication -----------------------------------------------------------------------------

def test_a_fabricated_action_fails_with_its_tier_and_phrase(cap: Capture) -> None:
    FabricationGuard().check(CLAIM, [], request_id="rep-1", response_id="chatcmpl-9")
    (detected,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    (event,) = evaluations(cap)
    assert verdict(event) == (names.EVALUATION_FABRICATION, names.EVALUATION_FAIL, 0.0)
    assert_shape(event, "rep-1", names.MODULE_REPLIES)
    phrase = detected.attributes[names.ATTR_MATCHED_PHRASE]
    assert event.attributes[names.ATTR_EVALUATION_EXPLANATION] == f'action: "{phrase}"'
    assert event.attributes[RESPONSE_ID] == "chatcmpl-9"
    # Detection and verdict share the span of their own (one trace, not two).
    assert len(cap.spans()) == 1


def test_one_evaluation_per_reply_whatever_the_number_of_tiers(cap: Capture) -> None:
    guard = FabricationGuard()
    guard.check("Let me read the notes. I'm deploying the patch now.", [], request_id="rep-2")
    assert len(cap.events(names.EVENT_FABRICATION_DETECTED)) == 2
    (event,) = evaluations(cap)
    explanation = event.attributes[names.ATTR_EVALUATION_EXPLANATION]
    assert explanation.startswith(f"{names.TIER_ACTION}: ")
    assert f"; {names.TIER_READ}: " in explanation


def test_a_grounded_reply_in_its_conversation_passes(cap: Capture) -> None:
    conversation = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"sky": "sunny", "celsius": 21}'},
        {"role": "assistant", "content": GROUNDED},
    ]
    verdict_ = FabricationGuard().check_conversation(conversation, request_id="rep-3")
    assert not verdict_.flagged
    (event,) = cap.events()
    assert verdict(event) == (names.EVALUATION_FABRICATION, names.EVALUATION_PASS, 1.0)
    assert_shape(event, "rep-3", names.MODULE_REPLIES)


def test_a_conversation_with_no_reply_to_judge_has_no_verdict(cap: Capture) -> None:
    FabricationGuard().check_conversation([{"role": "user", "content": "Hi"}],
                                          request_id="rep-4")
    assert cap.events() == []


# --- verification ----------------------------------------------------------------------------

def test_a_question_the_gate_passes_is_one_pass_at_once(cap: Capture) -> None:
    loop = VerificationLoop("Write a haiku about deployment pipelines.", request_id="ver-1")
    (event,) = cap.events()  # before the loop runs: the verdict is known
    assert verdict(event) == (names.EVALUATION_VERIFICATION, names.EVALUATION_PASS, 1.0)
    assert_shape(event, "ver-1", names.MODULE_VERIFICATION)
    loop.on_model_turn(wants_to_finish=True)
    loop.close()
    assert len(cap.events()) == 1


def test_a_verified_answer_passes_and_names_the_gates_family(cap: Capture) -> None:
    with VerificationLoop(OCTOBER, request_id="ver-2") as loop:
        loop.on_model_turn(wants_to_finish=False)
        loop.on_tool_call("reason")
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
    (event,) = evaluations(cap)
    assert verdict(event) == (names.EVALUATION_VERIFICATION, names.EVALUATION_PASS, 1.0)
    assert event.attributes[names.ATTR_EVALUATION_EXPLANATION].startswith(
        "verified: spelling question")
    (completed,) = cap.events(names.EVENT_VERIFICATION_COMPLETED)
    assert completed.span_name == event.span_name


def test_an_unverified_answer_fails_and_says_why(cap: Capture) -> None:
    loop = VerificationLoop(OCTOBER, request_id="ver-3", max_nudges=None)
    loop.on_model_turn(wants_to_finish=True)  # nudged
    assert loop.close("turn_limit") is VerificationOutcome.BYPASSED
    (event,) = evaluations(cap)
    assert verdict(event) == (names.EVALUATION_VERIFICATION, names.EVALUATION_FAIL, 0.0)
    assert_shape(event, "ver-3", names.MODULE_VERIFICATION)
    explanation = event.attributes[names.ATTR_EVALUATION_EXPLANATION]
    assert explanation.startswith("answered unverified (turn_limit): spelling question")
    assert "0 of 1 required call(s) of reason, 1 nudge(s)" in explanation


class _FailingGate(CriticalityGate):
    def assess(self, question: str):  # type: ignore[no-untyped-def, override]
        raise KeyError("gate exploded")


@pytest.mark.expect_hook_errors
def test_a_gate_that_fails_is_an_evaluation_that_could_not_decide(cap: Capture) -> None:
    VerificationLoop(OCTOBER, request_id="ver-4", gate=_FailingGate())
    VerificationLoop(12345, request_id="ver-5")  # type: ignore[arg-type] - the shipped gate
    assert [(e.attributes[names.ATTR_REQUEST_ID], e.attributes[ERROR_TYPE])
            for e in cap.events()] == [("ver-4", "KeyError"), ("ver-5", "AttributeError")]
    assert all(names.ATTR_EVALUATION_SCORE_LABEL not in e.attributes for e in cap.events())


# --- an adapter: the response's id -----------------------------------------------------------

def test_the_openai_adapter_gives_each_verdict_the_responses_id(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(CLAIM))
    client = gt_openai.instrument(openai.OpenAI(api_key="sk-test", max_retries=0,
                                                http_client=api.http_client()))
    client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Ship the hotfix"}],
        tools=[{"type": "function", "function": {"name": "get_weather"}}])
    events = evaluations(cap)
    assert [verdict(e)[:2] for e in events] == [
        (names.EVALUATION_PLAN_TOOLS, names.EVALUATION_PASS),
        (names.EVALUATION_FABRICATION, names.EVALUATION_FAIL)]
    assert {e.attributes[RESPONSE_ID] for e in events} == {"chatcmpl-BvA1kQz7"}
    assert len({e.attributes[names.ATTR_REQUEST_ID] for e in events}) == 1


# --- telemetry off or broken: nothing emitted, nothing raised --------------------------------

def _every_family() -> list[Any]:
    """One pass and one fail of each family; the decisions, which must not change."""
    guard = FabricationGuard()
    with VerificationLoop(OCTOBER, request_id="v") as loop:
        loop.on_model_turn(wants_to_finish=True)
    return [
        validate_plan([{"tool": "get_weather"}], TOOLS).valid,
        validate_plan([{"tool": "get_wether"}], TOOLS).hallucinated_names,
        guard.check(GROUNDED, ["get_weather"]).flagged,
        guard.check(CLAIM, []).tiers,
        VerificationLoop("Write a haiku.").outcome,
        loop.outcome,
    ]


DECISIONS = [True, ("get_wether",), False, (names.TIER_ACTION,),
             VerificationOutcome.NOT_REQUIRED, VerificationOutcome.BYPASSED]


def test_with_telemetry_off_the_guards_decide_alike_and_emit_nothing(cap: Capture) -> None:
    previous = _state.install(_state.TelemetryState(
        tracer_provider=trace.NoOpTracerProvider(),
        meter_provider=metrics.NoOpMeterProvider()))
    try:
        assert _every_family() == DECISIONS
    finally:
        _state.install(previous)
    assert cap.events() == [] and cap.spans() == []


class _BrokenTracerProvider(TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer provider exploded")


class _BrokenRedactor(Redactor):
    def redact(self, text: str) -> str:
        raise RuntimeError("redactor exploded")


@pytest.mark.expect_hook_errors
@pytest.mark.parametrize("broken", [
    {"tracer_provider": _BrokenTracerProvider()},
    {"redactor": _BrokenRedactor()},
], ids=["tracer", "redactor"])
def test_with_broken_telemetry_the_guards_decide_alike_and_raise_nothing(
        cap: Capture, broken: dict[str, Any]) -> None:
    before = sum(internal_totals(names.METRIC_HOOK_ERRORS).values())
    previous = _state.install(_state.TelemetryState(**broken))
    try:
        assert _every_family() == DECISIONS
    finally:
        _state.install(previous)
    assert cap.events() == []
    assert sum(internal_totals(names.METRIC_HOOK_ERRORS).values()) > before
