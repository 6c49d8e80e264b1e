"""The bounded plan retry loop: seed 003 scenarios, prompts, outcomes and telemetry,
asserted through real OTel SDK objects (``capture()``).

Long because each seed scenario runs the whole loop with its own scripted planner.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.plans.retry import (
    GeneratedPlan,
    PlanAttempt,
    PlanDependencyError,
    PlanGenerationError,
    PlanHallucinationError,
    PlanRegenerationError,
    PlanRetryConfig,
    generate_validated_plan,
)
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names
from tests.support.telemetry import ExplodingTelemetry

REQUEST = "What is 100 times the current tesla stock price, multiplied by the temperature?"
ALLOWED = ["stock-service", "weather-service"]
WITH_MATH = ["stock-service", "weather-service", "research-agent-telemetry"]
PLANNER_PROMPT = "Available Agents:\n{tools}\n\nUser Request: {request}"

CALCULATION_PLAN = {"plan_id": "p1", "steps": [{
    "step_id": "step_1", "agent_name": "calculation-agent",
    "instruction": "Calculate 100 times the Tesla stock price multiplied by the temperature",
    "metadata": {"capability": "calculate", "parameters": {}}, "depends_on": []}]}
MATH_PLAN = {"plan_id": "p2", "steps": [
    {"step_id": "step_1", "agent_name": "stock-service", "depends_on": []},
    {"step_id": "step_2", "agent_name": "research-agent-telemetry",
     "metadata": {"capability": "math_analysis"}, "depends_on": ["step_1"]}]}
STOCK_WEATHER_PLAN = {"plan_id": "p3", "steps": [
    {"step_id": "step_1", "agent_name": "stock-service"},
    {"step_id": "step_2", "agent_name": "weather-service"}]}
ZERO_STEPS = {"plan_id": "no-matching-tool", "steps": []}

WEATHER_ONLY_TEXT = ("Agent: weather-tool-v2 (ID: weather-tool-v2)\n"
                     "  - Capability: get_current_weather\n"
                     "    Description: Gets current weather conditions for a location\n")
TIME_TOOL_PLAN = {"plan_id": "p", "steps": [{
    "step_id": "step_1", "agent_name": "time-tool-v1", "instruction": "Get the time in CST",
    "metadata": {"capability": "get_current_time", "parameters": {"timezone": "CST"}}}]}


class ScriptedPlanner:
    """A planner that answers from a script and records what it was asked.

    A script item that is an exception is raised instead of returned.
    """

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.attempts: list[PlanAttempt] = []
        self.prompts: list[str] = []

    def __call__(self, attempt: PlanAttempt) -> Any:
        self.attempts.append(attempt)
        prompt = PLANNER_PROMPT.format(tools="\n".join(attempt.allowed_names),
                                       request=attempt.request)
        self.prompts.append(attempt.compose(prompt))
        response = self.responses.pop(0)
        if isinstance(response, BaseException):
            raise response
        return response


class Reselector:
    def __init__(self, result: Any) -> None:
        self.result = result
        self.requests: list[str] = []

    def __call__(self, enhanced_request: str) -> Any:
        self.requests.append(enhanced_request)
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def guard_logs(caplog):
    return [r for r in caplog.records if r.name == "guardtrace.planning"]


@pytest.fixture(autouse=True)
def _planning_logs(caplog):
    caplog.set_level(logging.DEBUG, logger="guardtrace.planning")


# --- outcomes ----------------------------------------------------------------------------

def test_valid_first_plan_needs_no_retry_and_emits_no_hallucination_telemetry():
    planner = ScriptedPlanner(STOCK_WEATHER_PLAN)
    with capture() as cap:
        out = generate_validated_plan(REQUEST, planner, ALLOWED, request_id="r0")
    assert out.retries_used == 0 and out.plan is STOCK_WEATHER_PLAN
    assert [s.tool for s in out.steps] == ALLOWED
    (attempt,) = planner.attempts
    assert attempt.retry == 0 and attempt.temperature is None and attempt.feedback == ""
    assert attempt.prompt_prefix == "" and attempt.request == REQUEST
    # No hallucination telemetry; the one verdict is a pass evaluation.
    (evaluation,) = cap.events()
    assert evaluation.name == names.EVENT_EVALUATION_RESULT
    assert evaluation.attributes[names.ATTR_EVALUATION_SCORE_LABEL] == names.EVALUATION_PASS
    assert cap.payloads == []


def test_seed_calculation_agent_recovered_via_reselect_that_adds_a_math_tool():
    planner = ScriptedPlanner(CALCULATION_PLAN, MATH_PLAN)
    reselect = Reselector(WITH_MATH)
    out = generate_validated_plan(REQUEST, planner, ALLOWED, reselect=reselect,
                                  request_id="orch-1")
    assert out.retries_used == 1
    assert out.plan is MATH_PLAN
    # The new plan passed against the NEW list, which is what the executor must use.
    assert out.allowed == WITH_MATH
    # The capability hint is generic: the failed step's own words, no domain map.
    (enhanced,) = reselect.requests
    assert enhanced.startswith(REQUEST)
    assert "[CAPABILITY_HINT:" in enhanced
    assert "perform: Calculate 100 times the Tesla stock price" in enhanced
    assert "agent type: calculation-agent" in enhanced and "capability: calculate" in enhanced
    retry = planner.attempts[1]
    assert retry.request == enhanced and retry.original_request == REQUEST
    assert retry.allowed == WITH_MATH
    assert retry.previous_plan is CALCULATION_PLAN
    assert retry.previous_result.hallucinated_names == ("calculation-agent",)


def test_retry_plan_is_validated_against_the_new_list_not_the_old_one():
    # The reselection dropped weather-service; a retry that still uses it is rejected.
    planner = ScriptedPlanner(CALCULATION_PLAN, STOCK_WEATHER_PLAN)
    with pytest.raises(PlanHallucinationError) as info:
        generate_validated_plan(REQUEST, planner, ALLOWED,
                                reselect=Reselector(["stock-service", "math_analysis"]))
    assert info.value.result.hallucinated_names == ("weather-service",)


def test_retry_prompt_has_feedback_first_and_a_lower_temperature():
    planner = ScriptedPlanner(CALCULATION_PLAN, STOCK_WEATHER_PLAN)
    generate_validated_plan(REQUEST, planner, ALLOWED)
    retry, prompt = planner.attempts[1], planner.prompts[1]
    assert retry.retry == 1 and retry.temperature == 0.2
    assert prompt.startswith("YOUR PREVIOUS PLAN WAS REJECTED")
    assert prompt.index(retry.feedback) == 0
    assert prompt.index("YOUR PREVIOUS PLAN") < prompt.index("Available Agents:")
    feedback = retry.feedback
    assert "'calculation-agent'" in feedback and "does NOT exist" in feedback
    assert "- stock-service" in feedback and "- weather-service" in feedback
    assert "ZERO steps" in feedback
    assert "DIFFERENT name" in feedback and "'calculate'" in feedback


def test_custom_retry_temperature_is_used():
    planner = ScriptedPlanner(CALCULATION_PLAN, STOCK_WEATHER_PLAN)
    generate_validated_plan(REQUEST, planner, ALLOWED,
                            config=PlanRetryConfig(retry_temperature=0.05))
    assert planner.attempts[1].temperature == 0.05


def test_seed_time_tool_retry_may_answer_with_zero_steps():
    planner = ScriptedPlanner(TIME_TOOL_PLAN, ZERO_STEPS)
    with capture() as cap:
        out = generate_validated_plan("what is the time right in CST", planner,
                                      WEATHER_ONLY_TEXT, request_id="orch-2")
    assert out.steps == () and out.retries_used == 1
    feedback = planner.attempts[1].feedback
    assert "time-tool-v1" in feedback
    assert "weather-tool-v2 (capabilities: get_current_weather)" in feedback
    assert "'get_current_time'" in feedback  # the capability, not the agent, is hinted
    assert cap.counter_total(names.METRIC_HALLUCINATION_RECOVERED, retries_used="1") == 1


def test_retry_that_still_hallucinates_raises_an_actionable_error(caplog):
    planner = ScriptedPlanner(CALCULATION_PLAN, CALCULATION_PLAN)
    with capture() as cap, pytest.raises(PlanHallucinationError) as info:
        generate_validated_plan(REQUEST, planner, ALLOWED, request_id="orch-3")
    err = info.value
    assert isinstance(err, RuntimeError) and isinstance(err, PlanGenerationError)
    message = str(err)
    assert "'calculation-agent'" in message and "after 1 retry" in message
    assert "stock-service" in message and "weather-service" in message
    assert ("verify the tool is registered and included in the list given to the planner"
            in message.lower())
    assert err.retries_used == 1 and err.request_id == "orch-3"
    assert err.result.hallucinated_names == ("calculation-agent",)
    assert err.plan is CALCULATION_PLAN
    # Telemetry: two detections, one unrecoverable.
    (event,) = cap.events(names.EVENT_HALLUCINATION_UNRECOVERABLE)
    assert list(event.attributes)[0] == "request_id"
    assert event.attributes[names.ATTR_HALLUCINATED_AGENT] == "calculation-agent"
    assert event.attributes[names.ATTR_RETRIES_EXHAUSTED] == 1
    assert cap.counter_total(names.METRIC_HALLUCINATION_UNRECOVERABLE,
                             module=names.MODULE_PLANNING, agent="calculation-agent") == 1
    assert cap.counter_total(names.METRIC_HALLUCINATIONS, agent="calculation-agent") == 2
    assert cap.events(names.EVENT_HALLUCINATION_RECOVERED) == []
    (record,) = [r for r in guard_logs(caplog) if r.levelno == logging.ERROR]
    fields = record.guardtrace
    assert fields["status"] == "unrecoverable" and fields["request_id"] == "orch-3"
    assert fields["operation"] == "hallucination_detection"
    assert "calculation-agent" in fields["error"] and fields["duration_ms"] >= 0


def test_disabled_retry_raises_immediately():
    planner = ScriptedPlanner(CALCULATION_PLAN)
    with capture() as cap, pytest.raises(PlanHallucinationError) as info:
        generate_validated_plan(REQUEST, planner, ALLOWED,
                                config=PlanRetryConfig(enabled=False))
    assert len(planner.attempts) == 1
    assert info.value.retries_used == 0
    assert "after 0 retries (retry disabled)" in str(info.value)
    (detected,) = cap.events(names.EVENT_HALLUCINATION_DETECTED)
    assert detected.attributes[names.ATTR_MAX_HALL_RETRIES] == 0
    assert len(cap.events(names.EVENT_HALLUCINATION_UNRECOVERABLE)) == 1


def test_more_retries_are_bounded_and_counted():
    planner = ScriptedPlanner(CALCULATION_PLAN, CALCULATION_PLAN, STOCK_WEATHER_PLAN)
    with capture() as cap:
        out = generate_validated_plan(REQUEST, planner, ALLOWED,
                                      config=PlanRetryConfig(max_retries=2))
    assert out.retries_used == 2 and len(planner.attempts) == 3
    assert [e.attributes[names.ATTR_HALL_RETRY]
            for e in cap.events(names.EVENT_HALLUCINATION_DETECTED)] == [0, 1]
    assert [e.attributes[names.ATTR_HALL_RETRY]
            for e in cap.events(names.EVENT_HALLUCINATION_REGENERATION_COMPLETE)] == [1, 2]
    assert cap.counter_total(names.METRIC_HALLUCINATION_RECOVERED, retries_used="2") == 1

    planner = ScriptedPlanner(*[CALCULATION_PLAN] * 3)
    with pytest.raises(PlanHallucinationError, match="after 2 retries"):
        generate_validated_plan(REQUEST, planner, ALLOWED,
                                config=PlanRetryConfig(max_retries=2))
    assert len(planner.attempts) == 3


def test_reselect_failure_falls_back_to_the_old_list(caplog):
    planner = ScriptedPlanner(CALCULATION_PLAN, STOCK_WEATHER_PLAN)
    out = generate_validated_plan(REQUEST, planner, ALLOWED,
                                  reselect=Reselector(TimeoutError("selector down")))
    assert out.retries_used == 1 and out.allowed == ALLOWED
    assert planner.attempts[1].allowed == ALLOWED
    (warning,) = [r for r in guard_logs(caplog)
                  if r.guardtrace.get("status") == "reselect_failed"]
    assert "selector down" in warning.guardtrace["error"]


def test_unreadable_reselection_falls_back_too():
    planner = ScriptedPlanner(CALCULATION_PLAN, STOCK_WEATHER_PLAN)
    out = generate_validated_plan(REQUEST, planner, ALLOWED, reselect=Reselector(42))
    assert out.allowed == ALLOWED


def test_enhanced_retry_off_keeps_request_and_list():
    planner = ScriptedPlanner(CALCULATION_PLAN, STOCK_WEATHER_PLAN)
    reselect = Reselector(WITH_MATH)
    generate_validated_plan(REQUEST, planner, ALLOWED, reselect=reselect,
                            config=PlanRetryConfig(enhanced_retry=False))
    assert reselect.requests == []
    assert planner.attempts[1].request == REQUEST
    assert planner.attempts[1].allowed == ALLOWED
    assert planner.attempts[1].feedback  # feedback is sent regardless


def test_several_invented_tools_in_one_plan_are_each_reported():
    tools = ["search_documents", "compose_email", "organize_files"]
    plan = [{"id": "step_1", "tool": "create_folder", "inputs": {"name": "music"}},
            {"id": "step_2", "tool": "move_files", "depends_on": ["step_1"]}]
    fixed = [{"id": "step_1", "tool": "organize_files", "inputs": {"category": "music"}}]
    planner = ScriptedPlanner(plan, fixed)
    with capture() as cap:
        generate_validated_plan("Organize music files", planner, tools)
    detected = cap.events(names.EVENT_HALLUCINATION_DETECTED)
    assert [e.attributes[names.ATTR_HALLUCINATED_AGENT] for e in detected] == [
        "create_folder", "move_files"]
    assert list(detected[1].attributes[names.ATTR_SUGGESTED_TOOLS]) == ["organize_files"]
    assert cap.counter_total(names.METRIC_HALLUCINATIONS, agent="move_files") == 1
    feedback = planner.attempts[1].feedback
    assert "'create_folder'" in feedback and "'move_files'" in feedback
    assert "Closest allowed: organize_files" in feedback


def test_hallucinated_capability_is_retried_and_reported():
    plan = [{"step_id": "s1", "agent_name": "weather-tool-v2",
             "metadata": {"capability": "get_current_time"}}]
    planner = ScriptedPlanner(plan, ZERO_STEPS)
    with capture() as cap:
        generate_validated_plan("time in CST", planner, WEATHER_ONLY_TEXT)
    (event,) = cap.events(names.EVENT_HALLUCINATION_DETECTED)
    assert event.attributes[names.ATTR_ERROR_TYPE] == "hallucinated_capability"
    assert event.attributes[names.ATTR_HALLUCINATED_CAPABILITY] == "get_current_time"
    assert event.attributes[names.ATTR_HALLUCINATED_AGENT] == "weather-tool-v2"
    assert "capability 'get_current_time'" in planner.attempts[1].feedback


# --- dependency problems -----------------------------------------------------------------

CYCLE_PLAN = [{"id": "a", "tool": "stock-service", "depends_on": ["b"]},
              {"id": "b", "tool": "weather-service", "depends_on": ["a"]}]


def test_dependency_errors_are_retried_with_feedback_but_are_not_hallucinations():
    planner = ScriptedPlanner(CYCLE_PLAN, STOCK_WEATHER_PLAN)
    reselect = Reselector(WITH_MATH)
    with capture() as cap:
        out = generate_validated_plan(REQUEST, planner, ALLOWED, reselect=reselect)
    assert out.retries_used == 1
    feedback = planner.attempts[1].feedback
    assert "Dependency cycle: a -> b -> a" in feedback
    assert "never in a cycle" in feedback
    assert reselect.requests == []  # tool choice was fine: no reselection
    assert cap.events(names.EVENT_HALLUCINATION_DETECTED) == []
    assert cap.events(names.EVENT_HALLUCINATION_RECOVERED) == []


def test_dependency_errors_after_retries_raise_dependency_error():
    planner = ScriptedPlanner(CYCLE_PLAN, CYCLE_PLAN)
    with pytest.raises(PlanDependencyError) as info:
        generate_validated_plan(REQUEST, planner, ALLOWED)
    assert not isinstance(info.value, PlanHallucinationError)
    assert "after 1 retry" in str(info.value) and "a -> b -> a" in str(info.value)


# --- failures of generate ----------------------------------------------------------------

def test_generate_raising_during_retry_raises_regeneration_error(caplog):
    cause = ConnectionError("LLM endpoint unreachable")
    planner = ScriptedPlanner(CALCULATION_PLAN, cause)
    with capture() as cap, pytest.raises(PlanRegenerationError) as info:
        generate_validated_plan(REQUEST, planner, ALLOWED, request_id="orch-4")
    err = info.value
    assert err.__cause__ is cause
    assert "retry 1 of 1" in str(err) and "calculation-agent" in str(err)
    assert "LLM endpoint unreachable" in str(err)
    assert err.result.hallucinated_names == ("calculation-agent",)
    (event,) = cap.events(names.EVENT_HALLUCINATION_REGENERATION_FAILED)
    assert list(event.attributes)[0] == "request_id"
    assert "LLM endpoint unreachable" in event.attributes[names.ATTR_ERROR]
    assert event.attributes[names.ATTR_HALL_RETRY] == 1
    assert cap.events(names.EVENT_HALLUCINATION_REGENERATION_COMPLETE) == []
    (record,) = [r for r in guard_logs(caplog) if r.levelno == logging.ERROR]
    assert record.guardtrace["status"] == "regeneration_failed"
    assert "LLM endpoint unreachable" in record.guardtrace["error"]


def test_unreadable_retry_plan_is_a_regeneration_failure():
    planner = ScriptedPlanner(CALCULATION_PLAN, "this is not JSON")
    with pytest.raises(PlanRegenerationError) as info:
        generate_validated_plan(REQUEST, planner, ALLOWED)
    assert isinstance(info.value.__cause__, GuardInputError)


def test_first_generate_failure_and_bad_first_plan_propagate_unchanged():
    cause = ConnectionError("down")
    with pytest.raises(ConnectionError) as info:
        generate_validated_plan(REQUEST, ScriptedPlanner(cause), ALLOWED)
    assert info.value is cause
    with pytest.raises(GuardInputError, match="plan step 1: missing 'tool'"):
        generate_validated_plan(REQUEST, ScriptedPlanner([{"id": "s1"}]), ALLOWED)
    with pytest.raises(GuardInputError, match="allowed"):
        generate_validated_plan(REQUEST, ScriptedPlanner([]), 42)


# --- telemetry ---------------------------------------------------------------------------

def test_recovery_telemetry_events_counters_logs_and_payload(caplog):
    planner = ScriptedPlanner(CALCULATION_PLAN, MATH_PLAN)
    with capture() as cap:
        generate_validated_plan(REQUEST, planner, ALLOWED, reselect=Reselector(WITH_MATH),
                                request_id="orch-1770268232220395625")
    assert [e.name for e in cap.events()] == [
        names.EVENT_HALLUCINATION_DETECTED,
        names.EVENT_EVALUATION_RESULT,  # the first plan's verdict: fail
        names.EVENT_EVALUATION_RESULT,  # the retried plan's: pass
        names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
        names.EVENT_HALLUCINATION_RECOVERED,
    ]
    assert [e.attributes[names.ATTR_EVALUATION_SCORE_LABEL]
            for e in cap.events(names.EVENT_EVALUATION_RESULT)] == [
        names.EVALUATION_FAIL, names.EVALUATION_PASS]
    for event in cap.events():
        assert list(event.attributes)[0] == "request_id"
        assert event.attributes["request_id"] == "orch-1770268232220395625"
        assert event.attributes[names.ATTR_MODULE] == names.MODULE_PLANNING
    detected = cap.events(names.EVENT_HALLUCINATION_DETECTED)[0].attributes
    assert detected[names.ATTR_HALLUCINATED_AGENT] == "calculation-agent"
    assert detected[names.ATTR_AGENT] == "calculation-agent"
    assert detected[names.ATTR_ALLOWED_AGENT_COUNT] == 2
    assert detected[names.ATTR_HALL_RETRY] == 0
    assert detected[names.ATTR_MAX_HALL_RETRIES] == 1
    assert list(detected[names.ATTR_SUGGESTED_TOOLS]) == []
    assert detected[names.ATTR_ERROR_TYPE] == "hallucinated_tool"
    recovered = cap.events(names.EVENT_HALLUCINATION_RECOVERED)[0].attributes
    assert recovered[names.ATTR_RETRIES_USED] == 1

    assert cap.metric_points(names.METRIC_HALLUCINATIONS) == [
        ({"module": "planning", "agent": "calculation-agent"}, 1)]
    assert cap.metric_points(names.METRIC_HALLUCINATION_RECOVERED) == [
        ({"module": "planning", "retries_used": "1"}, 1)]
    assert cap.metric_points(names.METRIC_HALLUCINATION_UNRECOVERABLE) == []

    (payload,) = cap.payloads
    assert payload.request_id == "orch-1770268232220395625"
    assert payload.kind == names.PAYLOAD_KIND_HALLUCINATION
    body = json.loads(payload.body)
    assert body["response"] == CALCULATION_PLAN
    assert body["allowed"] == ALLOWED
    assert body[names.ATTR_HALLUCINATED_AGENT] == "calculation-agent"
    assert body["retry"] == 0
    assert body["prompt"] == REQUEST  # no prompt reported: what guardtrace knows
    assert payload.attributes[names.ATTR_HALLUCINATED_AGENT] == "calculation-agent"

    levels = {r.guardtrace["status"]: r.levelno for r in guard_logs(caplog)
              if "status" in r.guardtrace}
    assert levels == {"detected": logging.WARNING, "recovered": logging.INFO}
    (warn,) = [r for r in guard_logs(caplog) if r.levelno == logging.WARNING]
    assert warn.guardtrace["request_id"] == "orch-1770268232220395625"
    assert warn.guardtrace[names.ATTR_ALLOWED_AGENTS] == ALLOWED
    assert "calculation-agent" in warn.guardtrace["error"]
    (info,) = [r for r in guard_logs(caplog) if r.levelno == logging.INFO]
    assert info.guardtrace[names.ATTR_RETRIES_USED] == 1
    assert info.guardtrace["duration_ms"] >= 0


def test_generated_plan_prompt_goes_into_the_payload():
    def generate(attempt: PlanAttempt) -> GeneratedPlan:
        plan = CALCULATION_PLAN if attempt.retry == 0 else STOCK_WEATHER_PLAN
        return GeneratedPlan(plan, prompt=attempt.compose("FULL PLANNING PROMPT"))

    with capture() as cap:
        out = generate_validated_plan(REQUEST, generate, ALLOWED)
    assert out.plan is STOCK_WEATHER_PLAN
    assert json.loads(cap.payloads[0].body)["prompt"] == "FULL PLANNING PROMPT"


def test_generated_request_id_is_used_when_none_given():
    with capture() as cap:
        out = generate_validated_plan(REQUEST, ScriptedPlanner(CALCULATION_PLAN, ZERO_STEPS),
                                      ALLOWED)
    assert out.request_id
    assert {e.attributes["request_id"] for e in cap.events()} == {out.request_id}


@pytest.mark.expect_hook_errors
def test_failing_payload_sink_does_not_break_the_loop(monkeypatch):
    def broken(*args: Any, **kwargs: Any) -> bool:
        raise OSError("debug store unreachable")

    with capture() as cap:
        monkeypatch.setattr(cap.payload_sink, "record", broken)
        out = generate_validated_plan(REQUEST, ScriptedPlanner(CALCULATION_PLAN, MATH_PLAN),
                                      ALLOWED, reselect=Reselector(WITH_MATH))
    assert out.retries_used == 1
    assert cap.payloads == []
    assert len(cap.events(names.EVENT_HALLUCINATION_RECOVERED)) == 1


@pytest.mark.expect_hook_errors
def test_telemetry_that_raises_never_changes_the_outcome():
    telemetry = ExplodingTelemetry(names.MODULE_PLANNING, "hallucination_detection")
    out = generate_validated_plan(REQUEST, ScriptedPlanner(CALCULATION_PLAN, MATH_PLAN),
                                  ALLOWED, reselect=Reselector(WITH_MATH),
                                  telemetry=telemetry)
    assert out.retries_used == 1
    with pytest.raises(PlanHallucinationError):
        generate_validated_plan(REQUEST, ScriptedPlanner(CALCULATION_PLAN, CALCULATION_PLAN),
                                ALLOWED, telemetry=telemetry)


def test_decisions_work_with_no_telemetry_configured():
    out = generate_validated_plan(REQUEST, ScriptedPlanner(CALCULATION_PLAN, ZERO_STEPS),
                                  ALLOWED)
    assert out.retries_used == 1 and out.steps == ()


# --- config ------------------------------------------------------------------------------

def test_config_defaults_and_validation():
    config = PlanRetryConfig()
    assert (config.enabled, config.max_retries, config.enhanced_retry,
            config.retry_temperature) == (True, 1, True, 0.2)
    assert PlanRetryConfig(enabled=False, max_retries=3).retry_budget == 0
    with pytest.raises(ValueError):
        PlanRetryConfig(max_retries=-1)
    with pytest.raises(ValueError):
        PlanRetryConfig(retry_temperature=-0.1)
    with pytest.raises(AttributeError):
        config.max_retries = 2  # type: ignore[misc]


# --- model tool calls as plans, abstentions ----------------------------------------------

def _chat_message(*tools: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        for i, tool in enumerate(tools)]}


def test_the_loop_takes_model_tool_calls_and_reports_each_detection_once(caplog):
    planner = ScriptedPlanner(_chat_message("calculation-agent"),
                              _chat_message("stock-service", "weather-service"))
    with capture() as cap:
        out = generate_validated_plan(REQUEST, planner, ALLOWED, request_id="r-calls")
    assert out.retries_used == 1
    assert [s.step_id for s in out.steps] == ["call_0", "call_1"]
    # validate_plan ran twice inside the loop; the detection is reported once, by the loop.
    (detected,) = cap.events(names.EVENT_HALLUCINATION_DETECTED)
    assert detected.attributes[names.ATTR_HALL_RETRY] == 0
    assert cap.counter_total(names.METRIC_HALLUCINATIONS, agent="calculation-agent") == 1
    assert len([r for r in guard_logs(caplog)
                if r.guardtrace.get("status") == "detected"]) == 1


def test_an_abstention_is_retried_toward_a_zero_step_plan_without_hallucination_telemetry():
    planner = ScriptedPlanner([{"name": "no_function", "arguments": {}}], ZERO_STEPS)
    with capture() as cap:
        out = generate_validated_plan(REQUEST, planner, ALLOWED)
    assert out.retries_used == 1 and out.steps == ()
    feedback = planner.attempts[1].feedback
    assert "'no_function'" in feedback and "zero steps" in feedback
    assert cap.events(names.EVENT_HALLUCINATION_DETECTED) == []
    assert cap.metric_points(names.METRIC_HALLUCINATIONS) == []
