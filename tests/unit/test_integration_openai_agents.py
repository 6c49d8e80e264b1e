"""The OpenAI Agents SDK adapter, run on the real SDK, offline.

The model is a ``Model`` of the SDK's interface returning the output items the
Responses API returns (``ResponseOutputMessage``, ``ResponseFunctionToolCall``), as the
SDK's own tests do; everything else (the runner, tools, guardrails, hooks, tracing) is
the SDK's.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    ModelBehaviorError,
    ModelResponse,
    ModelSettings,
    OutputGuardrailTripwireTriggered,
    RunHooks,
    Runner,
    Usage,
    function_tool,
    testing,
)
from agents.models.interface import Model
from agents.tracing import get_trace_provider, set_trace_processors
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from guardtrace.collectors import VerificationLoop
from guardtrace.collectors.questions.reason_tool import REASON_SYSTEM_PROMPT, REASON_TOOL_NAME
from guardtrace.collectors.testing import Capture, capture
from guardtrace.integrations import openai_agents
from guardtrace.integrations._messages import from_responses_items
from guardtrace.integrations.openai_agents import (
    AgentsGuard,
    GuardtraceRunHooks,
    GuardtraceTracingProcessor,
    install_tracing,
)
from guardtrace.schemas import names
from tests.support.verification_cases import ANSWER, SPELLED, STRAWBERRY, verification_events

WEATHER = "I checked the weather: it is sunny in Oslo, with light winds."
BOOKED = "It is sunny in Oslo. I've booked your hotel there for tonight."


def message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[],
                                    logprobs=[])])


def call(name: str, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{call_id}", call_id=call_id, type="function_call",
                                    name=name, arguments='{"city": "Oslo"}')


class ScriptedModel(Model):
    """The SDK's model interface, answering each call with the next scripted output."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []
        self.settings: list[ModelSettings] = []
        self.systems: list[Any] = []
        self.tools: list[list[str]] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any, *,
                           previous_response_id: Any = None, conversation_id: Any = None,
                           prompt: Any = None, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        self.settings.append(model_settings)
        self.systems.append(system_instructions)
        self.tools.append([tool.name for tool in tools])
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("these tests do not stream")


@function_tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: sunny, light winds"


def travel_agent(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="travel", instructions="You help travellers.", tools=[get_weather],
                 model=model)


@pytest.fixture
def sdk_processors() -> Iterator[None]:
    """The SDK's trace processors, put back after the test (they are process-wide);
    none by default, so no test talks to the SDK's exporter."""
    provider: Any = get_trace_provider()
    saved = list(provider._multi_processor._processors)
    set_trace_processors([])
    yield
    set_trace_processors(saved)


@pytest.fixture
def cap(sdk_processors: None) -> Iterator[Capture]:
    with capture() as captured:
        yield captured


def names_of(cap: Capture) -> list[str]:
    """The guard events' names (each verdict's evaluation result is checked by verdicts())."""
    return [e.name for e in cap.events() if e.name in names.GUARD_EVENTS]


PLAN_TOOLS, FABRICATION = names.EVALUATION_PLAN_TOOLS, names.EVALUATION_FABRICATION
PASS, FAIL = names.EVALUATION_PASS, names.EVALUATION_FAIL


def verdicts(cap: Capture) -> list[tuple[str, str]]:
    """(evaluation name, label) of every evaluation result, in order."""
    return [(e.attributes[names.ATTR_EVALUATION_NAME],
             e.attributes[names.ATTR_EVALUATION_SCORE_LABEL])
            for e in cap.events(names.EVENT_EVALUATION_RESULT)]


# --- the item converter -------------------------------------------------------------------

def test_responses_items_convert_to_openai_chat_with_calls_and_results() -> None:
    items = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        call("get_weather", "c1"),
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        message("Sunny."),
    ]
    assert from_responses_items(items) == [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "id": "c1",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "id": "ws_1",
             "function": {"name": "web_search", "arguments": "{}"}}]},
        {"role": "assistant", "content": "Sunny."},
    ]


# --- a tool the agent does not have --------------------------------------------------------

def test_without_the_guard_the_sdk_dies_on_an_invented_tool(sdk_processors: None) -> None:
    model = ScriptedModel([call("get_wether", "c1")], [message(WEATHER)])
    with pytest.raises(ModelBehaviorError, match="get_wether not found"):
        asyncio.run(Runner.run(travel_agent(model), "Weather in Oslo?"))


def test_an_invented_tool_gets_feedback_and_the_retry_lifecycle_is_reported(
        cap: Capture) -> None:
    model = ScriptedModel([call("get_wether", "c1")], [call("get_weather", "c2")],
                          [message(WEATHER)])
    result = asyncio.run(AgentsGuard().run(travel_agent(model), "Weather in Oslo?"))

    assert result.final_output == WEATHER
    feedback = model.inputs[1][-1]
    assert feedback["type"] == "function_call_output" and feedback["call_id"] == "c1"
    assert "'get_wether', which does NOT exist" in feedback["output"]
    assert "Closest allowed: get_weather" in feedback["output"]
    assert names_of(cap) == [names.EVENT_HALLUCINATION_DETECTED,
                             names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
                             names.EVENT_HALLUCINATION_RECOVERED]
    # The invented call's fail, the regenerated response's pass, the final text's pass.
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, PASS), (FABRICATION, PASS)]
    assert len({e.attributes[names.ATTR_REQUEST_ID] for e in cap.events()}) == 1


def test_an_invented_tool_past_the_budget_is_unrecoverable_and_the_run_goes_on(
        cap: Capture) -> None:
    model = ScriptedModel([call("get_wether", "c1")], [call("weather_now", "c2")],
                          [message("Sorry, I cannot check the weather right now.")])
    result = asyncio.run(AgentsGuard(tool_retries=1).run(travel_agent(model), "Weather?"))

    assert result.final_output == "Sorry, I cannot check the weather right now."
    assert [(e.name, e.attributes.get(names.ATTR_HALL_RETRY)) for e in cap.events()
            if e.name in names.GUARD_EVENTS] == [
        (names.EVENT_HALLUCINATION_DETECTED, 0),
        (names.EVENT_HALLUCINATION_REGENERATION_COMPLETE, 1),
        (names.EVENT_HALLUCINATION_DETECTED, 1),
        (names.EVENT_HALLUCINATION_UNRECOVERABLE, None)]
    # Both invented calls fail; the last response, which calls nothing, passes.
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, FAIL), (PLAN_TOOLS, PASS),
                             (FABRICATION, PASS)]


def test_a_streamed_run_is_guarded_alike(cap: Capture) -> None:
    # The SDK's own scripted model streams the recorded items as Responses events.
    model = testing.ScriptedModel([
        [testing.function_call("get_wether", {"city": "Oslo"}, call_id="c1")],
        [testing.function_call("get_weather", {"city": "Oslo"}, call_id="c2")],
        [testing.assistant_message(BOOKED)]])
    guard = AgentsGuard()

    async def stream() -> Any:
        result = Runner.run_streamed(Agent(name="travel", tools=[get_weather], model=model),
                                     "Weather in Oslo?", hooks=guard.hooks,
                                     run_config=guard.run_config())
        async for _event in result.stream_events():
            pass
        return result

    result = asyncio.run(stream())
    assert guard.annotate(result).startswith(BOOKED + "\n\n⚠️ I said I did")
    assert names_of(cap) == [names.EVENT_HALLUCINATION_DETECTED,
                             names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
                             names.EVENT_HALLUCINATION_RECOVERED,
                             names.EVENT_FABRICATION_DETECTED]
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, PASS), (FABRICATION, FAIL)]


# --- fabrication and loops -------------------------------------------------------------------

def test_a_fabricated_output_is_annotated_and_reported(cap: Capture) -> None:
    model = ScriptedModel([call("get_weather", "c1")], [message(BOOKED)])
    guard = AgentsGuard()
    result = asyncio.run(guard.run(travel_agent(model), "Weather in Oslo?"))

    assert result.final_output.startswith(BOOKED + "\n\n⚠️ I said I did")
    verdict = guard.verdict(result)
    assert verdict is not None and verdict.tiers == (names.TIER_ACTION,)
    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert event.attributes[names.ATTR_AGENT] == "travel"
    assert event.attributes[names.ATTR_TOOLS_FIRED] == ("get_weather",)


def test_a_claim_the_runs_tool_calls_back_is_not_flagged(cap: Capture) -> None:
    # Judged alone, "I checked the weather" is a claimed lookup; within the run's
    # conversation (which the hooks record) the get_weather call backs it.
    model = ScriptedModel([call("get_weather", "c1")], [message(WEATHER)])
    result = asyncio.run(AgentsGuard().run(travel_agent(model), "Weather in Oslo?"))

    assert result.final_output == WEATHER
    assert cap.events(names.EVENT_FABRICATION_DETECTED) == []


def test_the_guardrail_trips_on_the_tiers_asked_for(cap: Capture) -> None:
    model = ScriptedModel([message("I've booked your hotel in Oslo.")])
    with pytest.raises(OutputGuardrailTripwireTriggered):
        asyncio.run(AgentsGuard(trip_on=[names.TIER_ACTION]).run(travel_agent(model),
                                                                  "Book a hotel"))


def test_a_reply_repeated_in_the_next_run_is_a_loop(cap: Capture) -> None:
    model = ScriptedModel([call("get_weather", "c1")], [message(WEATHER)], [message(WEATHER)])
    guard = AgentsGuard()
    agent = travel_agent(model)
    first = asyncio.run(guard.run(agent, "Weather in Oslo?"))
    asyncio.run(guard.run(agent, [*first.to_input_list(),
                                  {"role": "user", "content": "And is it nice out?"}]))

    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert event.attributes[names.ATTR_TIER] == names.TIER_REPETITION


def test_the_guardrail_alone_does_not_judge_without_the_runs_conversation(
        cap: Capture) -> None:
    guard = AgentsGuard()
    model = ScriptedModel([call("get_weather", "c1")], [message(WEATHER)])
    agent = travel_agent(model).clone(output_guardrails=[guard.output_guardrail])
    result = asyncio.run(Runner.run(agent, "Weather in Oslo?"))  # no hooks

    assert guard.verdict(result) is None and guard.annotate(result) == WEATHER
    assert cap.events() == []


def test_the_documented_verification_recipe_runs_as_written(cap: Capture) -> None:
    # VERIFICATION_HOWTO with a model that follows the forced tool_choice: it calls
    # reason first, then answers.
    @function_tool
    def reason(question: str) -> str:
        """Verify the answer step by step."""
        return "No month name contains the letter X."

    question = "Which month is spelled with an X?"
    model = ScriptedModel([call("reason", "r1")], [message("None of them.")])
    agent, guard = travel_agent(model), AgentsGuard()
    with VerificationLoop(question, agent="helpdesk") as loop:
        if loop.required:
            agent = agent.clone(tools=[*agent.tools, reason],
                                model_settings=ModelSettings(tool_choice="reason"))
        result = asyncio.run(guard.run(agent, question))
        for item in result.new_items:
            if item.type == "tool_call_item":
                loop.on_tool_call(item.raw_item.name)
        loop.on_model_turn(wants_to_finish=True)

    assert result.final_output == "None of them."
    # The SDK's own mechanism forced the call: tool_choice reached the first model call
    # only (reset after the tool ran), so the model was free to answer next.
    assert [s.tool_choice for s in model.settings] == ["reason", None]
    assert [n for n in names_of(cap) if n.startswith("llm.verification")] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


# --- forced verification with one argument (verify=True) -------------------------------------



def reason_call(call_id: str = "r1") -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{call_id}", call_id=call_id, type="function_call",
                                    name=REASON_TOOL_NAME,
                                    arguments=json.dumps({"question": STRAWBERRY}))



def test_the_guard_forces_the_reason_tool_on_a_character_level_question(
        cap: Capture) -> None:
    # The model's calls: the forced reason call, the reason tool's own call (the
    # verification prompt on the same model), then the answer.
    model = ScriptedModel([reason_call()], [message(SPELLED)], [message(ANSWER)])
    agent = travel_agent(model)
    result = asyncio.run(AgentsGuard(verify=True).run(agent, STRAWBERRY))

    assert result.final_output == ANSWER
    assert [s.tool_choice for s in model.settings] == [REASON_TOOL_NAME, None, None]
    assert model.tools[0] == ["get_weather", REASON_TOOL_NAME]
    assert (model.systems[1], model.inputs[1], model.tools[1]) == (
        REASON_SYSTEM_PROMPT, [{"role": "user", "content": f"Question: {STRAWBERRY}"}], [])
    answered = from_responses_items(model.inputs[2])
    assert answered[1]["tool_calls"][0]["function"]["name"] == REASON_TOOL_NAME
    assert answered[2] == {"role": "tool", "tool_call_id": "r1", "content": SPELLED}
    assert [t.name for t in agent.tools] == ["get_weather"]  # the caller's agent as it was
    [judged] = [e for e in cap.events(names.EVENT_EVALUATION_RESULT)
                if e.attributes[names.ATTR_EVALUATION_NAME] == FABRICATION]
    rid = judged.attributes[names.ATTR_REQUEST_ID]
    assert verification_events(cap) == [
        (names.EVENT_VERIFICATION_REQUIRED, rid, "travel"),
        (names.EVENT_VERIFICATION_COMPLETED, rid, "travel")]


def test_an_ordinary_question_runs_the_agent_as_it_is(cap: Capture) -> None:
    model = ScriptedModel([message("Which dates are you travelling on?")])
    result = asyncio.run(AgentsGuard(verify=True).run(travel_agent(model),
                                                      "Which flight is cheapest?"))

    assert result.final_output == "Which dates are you travelling on?"
    assert [s.tool_choice for s in model.settings] == [None]
    assert model.tools == [["get_weather"]]
    assert verification_events(cap) == []


def test_a_failed_verification_is_told_to_the_model_and_reported_bypassed(
        cap: Capture) -> None:
    # The reason tool's model call gets no turn: the script has run out there.
    class FailingOnce(ScriptedModel):
        async def get_response(self, system_instructions: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:
            if system_instructions == REASON_SYSTEM_PROMPT:
                raise RuntimeError("rate limited")
            return await super().get_response(system_instructions, *args, **kwargs)

    model = FailingOnce([reason_call()], [message(ANSWER)])
    result = asyncio.run(AgentsGuard(verify=True).run(travel_agent(model), STRAWBERRY))

    assert result.final_output == ANSWER
    told = from_responses_items(model.inputs[1])[-1]
    assert told["role"] == "tool" and told["content"].startswith("The verification could not")
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_BYPASSED]
    assert cap.events(names.EVENT_VERIFICATION_BYPASSED)[0].attributes[
        names.ATTR_REASON] == "verification_failed"


# --- one trace -------------------------------------------------------------------------------

def test_the_sdks_spans_and_the_guard_events_share_one_trace(cap: Capture) -> None:
    bridge = GuardtraceTracingProcessor()
    set_trace_processors([bridge])
    model = ScriptedModel([call("get_wether", "c1")], [call("get_weather", "c2")],
                          [message(BOOKED)])
    asyncio.run(AgentsGuard(tracing=bridge).run(travel_agent(model), "Weather in Oslo?"))

    spans = cap.spans()
    by_name = {span.name: span for span in spans}
    assert {"Agent workflow", "invoke_agent travel", "execute_tool get_weather",
            "guardrail guardtrace_fabrication"} <= set(by_name)
    (trace_id,) = {span.context.trace_id for span in spans}
    request_id = f"{trace_id:032x}"
    assert {span.attributes[names.ATTR_REQUEST_ID] for span in spans} == {request_id}
    assert {e.attributes[names.ATTR_REQUEST_ID] for e in cap.events()} == {request_id}
    assert names.EVENT_FABRICATION_DETECTED in [
        e.name for e in by_name["guardrail guardtrace_fabrication"].events]
    root = by_name["Agent workflow"]
    assert str(root.attributes["openai_agents.trace_id"]).startswith("trace_")
    agent_span = by_name["invoke_agent travel"]
    assert agent_span.attributes["gen_ai.agent.name"] == "travel"
    assert tuple(agent_span.attributes["openai_agents.tools"]) == ("get_weather",)
    tool_span = by_name["execute_tool get_weather"]
    assert "openai_agents.output" not in tool_span.attributes  # payload, not attribute
    # Parents mirror the SDK's: the tool ran inside the agent, inside the workflow.
    parents = {span.context.span_id: span for span in spans}
    chain = []
    span = tool_span
    while span.parent is not None:
        span = parents[span.parent.span_id]
        chain.append(span.name)
    assert chain[-1] == "Agent workflow" and "invoke_agent travel" in chain


def test_without_the_mirror_the_request_id_is_the_sdks_trace_id(cap: Capture) -> None:
    model = ScriptedModel([message(BOOKED)])
    result = asyncio.run(AgentsGuard().run(travel_agent(model), "Book a hotel"))

    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    request_id = event.attributes[names.ATTR_REQUEST_ID]
    assert len(request_id) == 32
    assert result.final_output.startswith(BOOKED)


def test_install_tracing_adds_one_mirror_beside_the_sdks_processors(
        sdk_processors: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_agents, "_installed", None)
    first = install_tracing()
    assert install_tracing() is first
    provider: Any = get_trace_provider()
    assert list(provider._multi_processor._processors) == [first]


# --- packaging -------------------------------------------------------------------------------

def test_without_the_sdk_the_import_error_names_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for module in [m for m in sys.modules if m.split(".")[0] == "agents"]:
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "guardtrace.integrations.openai_agents")
    with pytest.raises(ImportError, match=r"pip install 'guardtrace\[agents\]'"):
        importlib.import_module("guardtrace.integrations.openai_agents")


def test_a_negative_retry_budget_and_hooks_the_guard_cannot_see_are_refused(
        sdk_processors: None) -> None:
    with pytest.raises(ValueError, match="tool_retries must be an integer >= 0"):
        AgentsGuard(tool_retries=-1)
    guard = AgentsGuard()
    model = ScriptedModel([message(WEATHER)])
    with pytest.raises(TypeError, match="GuardtraceRunHooks"):
        asyncio.run(guard.run(travel_agent(model), "Weather?", hooks=RunHooks()))
    with pytest.raises(TypeError, match="GuardtraceRunHooks"):
        asyncio.run(guard.run(travel_agent(model), "Weather?",
                              hooks=GuardtraceRunHooks(AgentsGuard())))


@pytest.mark.parametrize(("settings", "error", "says"), [
    ({"tool_retries": "1"}, ValueError, "tool_retries must be an integer >= 0, got '1'"),
    # A lone tier would be read letter by letter, a misspelt one would never trip.
    ({"trip_on": "action"}, TypeError, "trip_on must be a list of fabrication tiers"),
    ({"trip_on": ["action", "actoin"]}, ValueError, "trip_on: unknown tiers ['actoin']"),
    ({"guard": "strict"}, TypeError, "guard must be a guardtrace FabricationGuard"),
    ({"tracing": object()}, TypeError, "tracing must be a GuardtraceTracingProcessor"),
    ({"record_exchanges": "yes"}, TypeError, "record_exchanges must be True or False"),
    ({"verify": None}, TypeError, "verify must be True or False, got None"),
])
def test_wrong_settings_are_refused_naming_what_was_expected(
        settings: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error) as raised:
        AgentsGuard(**settings)
    assert says in str(raised.value)


def test_a_run_of_something_not_an_agent_is_refused_naming_what_was_expected(
        sdk_processors: None) -> None:
    guard = AgentsGuard()
    with pytest.raises(TypeError, match="AgentsGuard.run expects an agents.Agent, got str"):
        asyncio.run(guard.run("travel", "Weather?"))
    with pytest.raises(TypeError, match="run_config expects an agents.RunConfig, got dict"):
        guard.run_config({"max_turns": 3})
    assert AgentsGuard(trip_on=[names.TIER_ACTION]).trip_on == {names.TIER_ACTION}
