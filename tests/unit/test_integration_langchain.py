"""The LangChain/LangGraph adapter, run on the real langchain-core and langgraph, offline.

The chat model is LangChain's own fake (``FakeMessagesListChatModel``), scripted with
the ``AIMessage`` objects a provider integration returns (tool calls with ids and args),
and the agent is LangGraph's ``create_react_agent`` with a real ``ToolNode``.
"""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from guardtrace.collectors import GuardInputError, TurnAction, VerificationLoop
from guardtrace.collectors.emit.internal import internal_totals
from guardtrace.collectors.questions.reason_tool import REASON_SYSTEM_PROMPT, REASON_TOOL_NAME
from guardtrace.collectors.questions.verification import TurnActionKind
from guardtrace.collectors.testing import Capture, capture
from guardtrace.integrations._messages import DISCLAIMERS_KEY, from_langchain
from guardtrace.integrations.langchain import (
    GUARDED_TAG,
    GuardedChatModel,
    GuardtraceCallbackHandler,
)
from guardtrace.schemas import names
from tests.support.verification_cases import ANSWER, SPELLED, STRAWBERRY, verification_events

with warnings.catch_warnings():
    # create_react_agent moved to the `langchain` package, which the extra does not
    # install; langgraph 1.x still ships it (deprecated), and it is what users of the
    # extra build agents with.
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

BOOKED = "I've booked your flight to Oslo for tomorrow."
WEATHER = "It is sunny in Oslo today, with light winds and around 18 degrees."


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: sunny, light winds, 18 degrees"


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, binding tools as provider models do, and keeping
    every message list it was called with."""

    seen: list[list[BaseMessage]] = []
    options: list[dict[str, Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        self.options.append(kwargs)
        return super()._generate(messages, *args, **kwargs)


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def react_agent(model: Any, **kwargs: Any) -> Any:
    return react_agent_with(model, [get_weather], **kwargs)


def react_agent_with(model: Any, tools: list[Any], **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, **kwargs)


def events(cap: Capture) -> list[tuple[str, dict[str, Any]]]:
    """The guard events (each verdict's evaluation result is checked by verdicts())."""
    return [(e.name, e.attributes) for e in cap.events() if e.name in names.GUARD_EVENTS]


PLAN_TOOLS, FABRICATION = names.EVALUATION_PLAN_TOOLS, names.EVALUATION_FABRICATION
PASS, FAIL = names.EVALUATION_PASS, names.EVALUATION_FAIL


def verdicts(cap: Capture) -> list[tuple[str, str]]:
    """(evaluation name, label) of every evaluation result, in order."""
    return [(e.attributes[names.ATTR_EVALUATION_NAME],
             e.attributes[names.ATTR_EVALUATION_SCORE_LABEL])
            for e in cap.events(names.EVENT_EVALUATION_RESULT)]


@pytest.fixture
def cap() -> Iterator[Capture]:
    with capture() as captured:
        yield captured


# --- the message converter ------------------------------------------------------------------

def test_langchain_messages_convert_to_openai_chat_with_calls_results_and_text() -> None:
    messages = [
        SystemMessage("You are a travel agent."),
        HumanMessage([{"type": "text", "text": "Weather in"}, {"type": "text", "text": "Oslo?"}]),
        AIMessage(content=[{"type": "text", "text": "Checking."},
                           {"type": "tool_use", "id": "c1", "name": "get_weather",
                            "input": {"city": "Oslo"}}],
                  tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1"}]),
        ToolMessage("sunny", tool_call_id="c1"),
        ToolMessage("timeout", tool_call_id="c2", status="error"),
        RemoveMessage(id="gone"),
        ChatMessage(role="assistant", content="Sunny."),
    ]
    assert from_langchain(messages) == [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Weather in\nOslo?"},
        {"role": "assistant", "content": "Checking.",
         "tool_calls": [{"type": "function", "id": "c1",
                         "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        {"role": "tool", "content": "timeout", "tool_call_id": "c2", "is_error": True},
        {"role": "assistant", "content": "Sunny."},
    ]


def test_a_disclaimer_the_adapter_appended_is_not_read_as_the_models_words() -> None:
    annotated = AIMessage(content=BOOKED + "\n\n⚠️ warning one\n⚠️ warning two",
                          response_metadata={DISCLAIMERS_KEY: ["⚠️ warning one",
                                                               "⚠️ warning two"]})
    assert from_langchain([annotated]) == [{"role": "assistant", "content": BOOKED}]


# --- observing: the callback handler ---------------------------------------------------------

def test_the_handler_reports_a_tool_the_bound_model_was_not_given(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_wether", "c1", city="Oslo")])
    bound = model.bind_tools([get_weather])
    reply = bound.invoke("Weather in Oslo?", config={
        "callbacks": [GuardtraceCallbackHandler(agent="travel")],
        "metadata": {"request_id": "lc-req-1"}})

    assert reply.tool_calls[0]["name"] == "get_wether"  # observing changes nothing
    detected = cap.events(names.EVENT_HALLUCINATION_DETECTED)
    assert [e.attributes[names.ATTR_HALLUCINATED_AGENT] for e in detected] == ["get_wether"]
    assert detected[0].attributes[names.ATTR_REQUEST_ID] == "lc-req-1"
    assert detected[0].attributes[names.ATTR_SUGGESTED_TOOLS] == ("get_weather",)


def test_the_handler_reports_a_fabricated_reply_and_records_the_exchange(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[AIMessage(BOOKED)])
    chain = RunnableLambda(lambda text: [HumanMessage(text)]) | model.bind_tools([get_weather])
    reply = chain.invoke("Book me a flight to Oslo", config={
        "callbacks": [GuardtraceCallbackHandler(agent="travel")]})

    assert reply.content == BOOKED  # a callback cannot change the reply
    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert event.attributes[names.ATTR_TIER] == names.TIER_ACTION
    assert event.attributes[names.ATTR_AGENT] == "travel"
    exchanges = [p for p in cap.payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    assert len(exchanges) == 1
    assert exchanges[0].request_id == event.attributes[names.ATTR_REQUEST_ID]
    assert "Book me a flight to Oslo" in exchanges[0].body and BOOKED in exchanges[0].body


def test_the_handler_sees_a_loop_across_turns_of_a_langgraph_thread(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_weather", "c1", city="Oslo"),
                                         AIMessage(WEATHER), AIMessage(WEATHER)])
    app = react_agent(model, checkpointer=InMemorySaver())
    config: Any = {"callbacks": [GuardtraceCallbackHandler()],
                   "configurable": {"thread_id": "thread-7"}}
    app.invoke({"messages": [HumanMessage("Weather in Oslo?")]}, config)
    assert cap.events(names.EVENT_FABRICATION_DETECTED) == []  # the first answer is fine
    app.invoke({"messages": [HumanMessage("And is it nice out?")]}, config)

    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert event.attributes[names.ATTR_TIER] == names.TIER_REPETITION
    assert event.attributes[names.ATTR_CHANNEL] == "thread-7"


def test_every_model_call_of_one_graph_run_shares_the_runs_request_id(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_wether", "c1", city="Oslo"),
                                         call("get_weather", "c2", city="Oslo"),
                                         AIMessage(BOOKED)])
    react_agent(model).invoke({"messages": [HumanMessage("Book me a flight")]},
                              {"callbacks": [GuardtraceCallbackHandler()]})

    exchanges = [p for p in cap.payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    assert len(exchanges) == 3
    request_ids = {p.request_id for p in cap.payloads}
    request_ids |= {e.attributes[names.ATTR_REQUEST_ID] for e in cap.events()}
    assert len(request_ids) == 1
    assert {name for name, _ in events(cap)} == {names.EVENT_HALLUCINATION_DETECTED,
                                                  names.EVENT_FABRICATION_DETECTED}
    # One verdict per check: the tools of each of the three replies, the text of the last.
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, PASS), (PLAN_TOOLS, PASS),
                             (FABRICATION, FAIL)]


@pytest.mark.expect_hook_errors
def test_a_failing_check_never_reaches_the_chain(cap: Capture) -> None:
    before = sum(internal_totals(names.METRIC_HOOK_ERRORS).values())
    # A bound tool list no reader understands: the checks fail inside the handler.
    model = ScriptedChatModel(responses=[AIMessage(BOOKED)]).bind(
        tools=[{"type": "function", "function": 42}])
    handler = GuardtraceCallbackHandler()
    reply = model.invoke("Book me a flight", config={"callbacks": [handler]})

    assert reply.content == BOOKED
    assert sum(internal_totals(names.METRIC_HOOK_ERRORS).values()) > before


# --- acting: the guarded chat model ----------------------------------------------------------

def test_a_hallucinated_tool_is_asked_again_with_feedback_before_any_tool_runs(
        cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_wether", "c1", city="Oslo"),
                                         call("get_weather", "c2", city="Oslo"),
                                         AIMessage(WEATHER)], seen=[])
    result = react_agent(GuardedChatModel(model, agent="travel")).invoke(
        {"messages": [HumanMessage("Weather in Oslo?")]})

    tool_results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in tool_results] == [("c2", "success")]
    feedback = model.seen[1][-1]
    assert isinstance(feedback, HumanMessage)
    assert "'get_wether'" in feedback.content and "Closest allowed: get_weather" in feedback.content
    assert not any(getattr(m, "tool_calls", None) for m in model.seen[1])  # not sent back
    assert [name for name, _ in events(cap)] == [
        names.EVENT_HALLUCINATION_DETECTED,
        names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
        names.EVENT_HALLUCINATION_RECOVERED]
    # The retry's two attempts (fail, then pass), then the final reply's tools and text.
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, PASS), (PLAN_TOOLS, PASS),
                             (FABRICATION, PASS)]


def test_when_retries_run_out_the_last_reply_goes_on_and_is_unrecoverable(
        cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_wether", "c1"), call("weather_now", "c2")])
    reply = GuardedChatModel(model, tool_retries=1).bind_tools([get_weather]).invoke("Weather?")

    assert reply.tool_calls[0]["name"] == "weather_now"
    assert [(name, attrs.get(names.ATTR_HALL_RETRY)) for name, attrs in events(cap)] == [
        (names.EVENT_HALLUCINATION_DETECTED, 0),
        (names.EVENT_HALLUCINATION_REGENERATION_COMPLETE, 1),
        (names.EVENT_HALLUCINATION_DETECTED, 1),
        (names.EVENT_HALLUCINATION_UNRECOVERABLE, None)]
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, FAIL)]


def test_a_fabricated_reply_reaches_the_user_with_its_disclaimer(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[AIMessage(BOOKED, id="m1")])
    result = react_agent(GuardedChatModel(model)).invoke(
        {"messages": [HumanMessage("Book me a flight to Oslo")]})

    final = result["messages"][-1]
    assert final.content.startswith(BOOKED + "\n\n⚠️ I said I did")
    assert final.response_metadata[DISCLAIMERS_KEY] == [final.content[len(BOOKED) + 2:]]
    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert event.attributes[names.ATTR_TIER] == names.TIER_ACTION


def test_a_grounded_reply_is_returned_unchanged(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_weather", "c1", city="Oslo"),
                                         AIMessage("I checked: it is sunny in Oslo.")])
    result = react_agent(GuardedChatModel(model)).invoke(
        {"messages": [HumanMessage("Weather in Oslo?")]})

    assert result["messages"][-1].content == "I checked: it is sunny in Oslo."
    assert events(cap) == []
    assert verdicts(cap) == [(PLAN_TOOLS, PASS), (PLAN_TOOLS, PASS), (FABRICATION, PASS)]


def test_the_async_path_retries_and_annotates_too(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_wether", "c1", city="Oslo"),
                                         call("get_weather", "c2", city="Oslo"),
                                         AIMessage(BOOKED)])
    result = asyncio.run(react_agent(GuardedChatModel(model)).ainvoke(
        {"messages": [HumanMessage("Book me a flight")]}))

    assert result["messages"][-1].content.startswith(BOOKED + "\n\n⚠️")
    assert [name for name, _ in events(cap)] == [
        names.EVENT_HALLUCINATION_DETECTED,
        names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
        names.EVENT_HALLUCINATION_RECOVERED,
        names.EVENT_FABRICATION_DETECTED]
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, PASS), (PLAN_TOOLS, PASS),
                             (FABRICATION, FAIL)]


def test_with_both_pieces_each_finding_is_reported_once_under_one_request_id(
        cap: Capture) -> None:
    model = ScriptedChatModel(responses=[call("get_wether", "c1", city="Oslo"),
                                         call("get_weather", "c2", city="Oslo"),
                                         AIMessage(BOOKED)])
    react_agent(GuardedChatModel(model)).invoke(
        {"messages": [HumanMessage("Book me a flight")]},
        {"callbacks": [GuardtraceCallbackHandler()]})

    assert [name for name, _ in events(cap)] == [
        names.EVENT_HALLUCINATION_DETECTED,
        names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
        names.EVENT_HALLUCINATION_RECOVERED,
        names.EVENT_FABRICATION_DETECTED]
    assert verdicts(cap) == [(PLAN_TOOLS, FAIL), (PLAN_TOOLS, PASS), (PLAN_TOOLS, PASS),
                             (FABRICATION, FAIL)]
    exchanges = [p for p in cap.payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    assert len(exchanges) == 3  # the retry's exchange too
    request_ids = {p.request_id for p in cap.payloads}
    request_ids |= {attrs[names.ATTR_REQUEST_ID] for _, attrs in events(cap)}
    assert len(request_ids) == 1


def test_the_wrapped_models_calls_are_tagged_for_the_handler() -> None:
    seen: list[list[str]] = []

    def model(messages: Any, config: Any) -> AIMessage:
        seen.append(list(config.get("tags", [])))
        return AIMessage("ok")

    GuardedChatModel(RunnableLambda(model)).invoke("hi")
    assert seen == [[GUARDED_TAG]]


def test_an_error_of_the_models_own_call_is_raised_as_without_the_wrapper() -> None:
    def broken(_messages: Any) -> AIMessage:
        raise TimeoutError("provider timed out")

    with pytest.raises(TimeoutError, match="provider timed out"):
        GuardedChatModel(RunnableLambda(broken)).invoke("hi")
    with pytest.raises(ValueError, match="tool_retries"):
        GuardedChatModel(RunnableLambda(broken), tool_retries=-1)


@pytest.mark.parametrize(("model", "named"), [
    ("gpt-4.1", "builtins.str"),
    (None, "NoneType"),
    (ScriptedChatModel, "the class ScriptedChatModel (pass a model"),
])
def test_a_model_that_is_not_a_runnable_is_refused_naming_what_was_expected(
        model: Any, named: str) -> None:
    with pytest.raises(TypeError, match="expects a LangChain chat model") as raised:
        GuardedChatModel(model)
    assert named in str(raised.value)


@pytest.mark.parametrize(("settings", "error", "says"), [
    ({"tools": "get_weather"}, TypeError, "tools must be a list of tools, got str"),
    ({"tools": {"name": "get_weather"}}, TypeError, "tools must be a list of tools"),
    ({"tools": [get_weather, 42]}, GuardInputError, "tools[1]"),
    ({"guard": "strict"}, TypeError, "guard must be a guardtrace FabricationGuard"),
    ({"tool_retries": "1"}, ValueError, "tool_retries must be an integer >= 0, got '1'"),
    ({"tool_retries": True}, ValueError, "tool_retries must be an integer >= 0"),
    ({"annotate": "false"}, TypeError, "annotate must be True or False"),
    ({"verify": "on"}, TypeError, "verify must be True or False, got 'on'"),
])
def test_wrong_settings_of_the_guarded_model_are_refused_at_construction(
        settings: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error) as raised:
        GuardedChatModel(ScriptedChatModel(responses=[]), **settings)
    assert says in str(raised.value)


@pytest.mark.parametrize(("settings", "error", "says"), [
    ({"tools": "get_weather"}, TypeError, "tools must be a list of tools, got str"),
    ({"tools": [{"type": "function", "function": 42}]}, GuardInputError, "tools[0]"),
    ({"guard": 1}, TypeError, "guard must be a guardtrace FabricationGuard"),
    ({"record_exchanges": "no"}, TypeError, "record_exchanges must be True or False"),
])
def test_wrong_settings_of_the_handler_are_refused_at_construction(
        settings: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error) as raised:
        GuardtraceCallbackHandler(**settings)
    assert says in str(raised.value)


def test_bind_tools_gives_a_guarded_model_with_the_same_settings(cap: Capture) -> None:
    model = GuardedChatModel(ScriptedChatModel(responses=[call("get_wether", "c1")]),
                             agent="travel", tool_retries=0, annotate=False)
    bound = model.bind_tools([get_weather])
    assert (bound.agent, bound.tool_retries, bound.annotate) == ("travel", 0, False)
    assert [t["function"]["name"] for t in bound.tools] == ["get_weather"]
    assert model.tools == []  # the unbound wrapper is left as it was
    assert bound.invoke("Weather in Oslo?").tool_calls[0]["name"] == "get_wether"
    # Judged against the bound tool, and with no retry left: reported, not asked again.
    assert [name for name, _ in events(cap)] == [
        names.EVENT_HALLUCINATION_DETECTED, names.EVENT_HALLUCINATION_UNRECOVERABLE]


@tool
def reason(question: str) -> str:
    """Verify the answer step by step."""
    return "No month name contains the letter X."


def test_the_documented_langgraph_verification_runs_as_written(cap: Capture) -> None:
    # The first recipe of VERIFICATION_HOWTO: LangGraph's dynamic model forces the
    # reason tool with tool_choice until it has run, then the model answers.
    question = "Which month is spelled with an X?"
    chat_model = ScriptedChatModel(responses=[call("reason", "r1", question=question),
                                              AIMessage("None of them.")],
                                   seen=[], options=[])
    tools: list[Any] = [get_weather]
    with VerificationLoop(question, agent="helpdesk") as loop:
        tools = [*tools, reason]
        guarded = GuardedChatModel(chat_model)

        def model(state: Any, runtime: Any) -> Any:
            verified = any(m.type == "tool" and m.name == "reason"
                           for m in state["messages"])
            forced = "reason" if loop.required and not verified else None
            return guarded.bind_tools(tools, tool_choice=forced)

        result = react_agent_with(model, tools).invoke({"messages": [("user", question)]})
        for message in result["messages"]:
            if message.type == "tool":
                loop.on_tool_call(message.name)
        loop.on_model_turn(wants_to_finish=True)

    assert result["messages"][-1].content == "None of them."
    assert [o["tool_choice"] for o in chat_model.options] == ["reason", None]
    assert [e.name for e in cap.events() if e.name.startswith("llm.verification")] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


def test_the_documented_nudging_loop_runs_as_written(cap: Capture) -> None:
    # The second recipe of VERIFICATION_HOWTO, with a model that answers too early, is
    # nudged, then calls the reason tool and answers.
    question = "Which month is spelled with an X?"
    chat_model = ScriptedChatModel(responses=[AIMessage("October."),
                                              call("reason", "r1", question=question),
                                              AIMessage("None of them.")], seen=[])
    tools: list[Any] = [get_weather]
    messages: list[Any] = [HumanMessage(question)]
    with VerificationLoop(question, agent="helpdesk") as loop:
        tools = [*tools, reason]
        by_name = {t.name: t for t in tools}
        model = GuardedChatModel(chat_model).bind_tools(tools)
        while True:
            reply = model.invoke(messages)
            action: TurnAction = loop.on_model_turn(wants_to_finish=not reply.tool_calls)
            if action.kind is TurnActionKind.FINISH:
                break
            if action.kind is TurnActionKind.NUDGE:
                messages.append(HumanMessage(action.message))
                continue
            messages.append(reply)
            for tool_call in reply.tool_calls:
                loop.on_tool_call(tool_call["name"])
                messages.append(by_name[tool_call["name"]].invoke(tool_call))

    assert reply.content == "None of them."
    assert [e.name for e in cap.events() if e.name.startswith("llm.verification")] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_NUDGED,
        names.EVENT_VERIFICATION_COMPLETED]


# --- forced verification with one argument (verify=True) -------------------------------------




def assert_verified(model: ScriptedChatModel) -> None:
    """The model's first call executes the reason tool, without the bound tools; its
    second carries that call and its result right after the question."""
    verifying, final = model.seen[:2]
    assert [(m.type, m.content) for m in verifying] == [
        ("system", REASON_SYSTEM_PROMPT), ("human", f"Question: {STRAWBERRY}")]
    assert "tools" not in model.options[0] and "tools" in model.options[1]
    asked, call_message, result = final
    assert (asked.type, asked.content) == ("human", STRAWBERRY)
    [synthetic] = call_message.tool_calls
    assert (synthetic["name"], synthetic["args"]) == (REASON_TOOL_NAME, {"question": STRAWBERRY})
    assert isinstance(result, ToolMessage)
    assert (result.tool_call_id, result.content) == (synthetic["id"], SPELLED)


def test_a_langgraph_agent_verifies_a_character_level_question_with_one_argument(
        cap: Capture) -> None:
    model = ScriptedChatModel(responses=[AIMessage(SPELLED), AIMessage(ANSWER)],
                              seen=[], options=[])
    agent = react_agent(GuardedChatModel(model, agent="helpdesk", verify=True))
    result = agent.invoke({"messages": [("user", STRAWBERRY)]})

    assert result["messages"][-1].content == ANSWER
    assert_verified(model)
    # The pair is in the model's request, not in the graph's state.
    assert [m.type for m in result["messages"]] == ["human", "ai"]
    [fabrication] = [e for e in cap.events(names.EVENT_EVALUATION_RESULT)
                     if e.attributes[names.ATTR_EVALUATION_NAME] == FABRICATION]
    rid = fabrication.attributes[names.ATTR_REQUEST_ID]
    assert verification_events(cap) == [
        (names.EVENT_VERIFICATION_REQUIRED, rid, "helpdesk"),
        (names.EVENT_VERIFICATION_COMPLETED, rid, "helpdesk")]


def test_an_ordinary_question_makes_one_unchanged_model_call(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[AIMessage("The 7:05 to Oslo, at 89 EUR.")],
                              seen=[], options=[])
    react_agent(GuardedChatModel(model, verify=True)).invoke(
        {"messages": [("user", "Which flight is cheapest?")]})

    assert [[(m.type, m.content) for m in seen] for seen in model.seen] == [
        [("human", "Which flight is cheapest?")]]
    assert verification_events(cap) == []


def test_the_agents_later_calls_carry_the_turns_verification_without_a_new_call(
        cap: Capture) -> None:
    model = ScriptedChatModel(responses=[AIMessage(SPELLED),
                                         call("get_weather", "c1", city="Oslo"),
                                         AIMessage(ANSWER)], seen=[], options=[])
    result = react_agent(GuardedChatModel(model, verify=True)).invoke(
        {"messages": [("user", STRAWBERRY)]})

    assert result["messages"][-1].content == ANSWER
    assert len(model.seen) == 3
    assert model.seen[2][:3] == model.seen[1]  # the same pair, same call id
    assert [m.type for m in model.seen[2][3:]] == ["ai", "tool"]  # then the turn
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


def test_the_verification_is_not_streamed_as_the_agents_reply(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[AIMessage(SPELLED), AIMessage(ANSWER)],
                              seen=[], options=[])
    streamed = [chunk.content for chunk, _ in react_agent(
        GuardedChatModel(model, verify=True)).stream(
            {"messages": [("user", STRAWBERRY)]}, stream_mode="messages")]

    assert streamed == [ANSWER]
    assert_verified(model)


def test_the_async_path_verifies_too(cap: Capture) -> None:
    model = ScriptedChatModel(responses=[AIMessage(SPELLED), AIMessage(ANSWER)],
                              seen=[], options=[])
    result = asyncio.run(react_agent(GuardedChatModel(model, verify=True)).ainvoke(
        {"messages": [("user", STRAWBERRY)]}))

    assert result["messages"][-1].content == ANSWER
    assert_verified(model)
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


# --- packaging -------------------------------------------------------------------------------

def test_without_langchain_the_import_error_names_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for module in [m for m in sys.modules if m.split(".")[0] == "langchain_core"]:
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "guardtrace.integrations.langchain")
    with pytest.raises(ImportError, match=r"pip install 'guardtrace\[langchain\]'"):
        importlib.import_module("guardtrace.integrations.langchain")


def test_importing_the_hooks_and_the_adapters_package_loads_no_sdk() -> None:
    code = ("import sys, guardtrace.collectors, guardtrace.integrations; "
            "print(sorted(m for m in ('langchain_core', 'langgraph', 'agents', 'openai') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
