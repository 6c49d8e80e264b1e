"""A LangGraph agent guarded by the LangChain adapter, through Kafka, as rows in ClickHouse.

The agent is LangGraph's own ``create_react_agent`` with a real ``ToolNode``; only the
chat model is scripted (LangChain's fake chat model answering with the ``AIMessage``
objects a provider integration returns). Everything after the hooks is the real
pipeline: configure(), the Kafka exporters, a Tansu broker, the consumer, chDB.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from guardtrace import collectors
from guardtrace.integrations.langchain import GuardedChatModel, GuardtraceCallbackHandler
from guardtrace.schemas import names

from .conftest import Pipeline

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # deprecated in favour of the `langchain` package
    from langgraph.prebuilt import create_react_agent

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

WEATHER = "It is sunny in Oslo today, with light winds and around 18 degrees."
BOOKED = "I've booked your flight to Oslo for tomorrow."


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: sunny, light winds, 18 degrees"


class ScriptedChatModel(FakeMessagesListChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


def call(name: str, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": {"city": "Oslo"},
                                              "id": call_id}])


def agent(model: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, [get_weather], **kwargs)


def run_config(request_id: str, **extra: Any) -> Any:
    return {"callbacks": [GuardtraceCallbackHandler(agent="travel")],
            "metadata": {"request_id": request_id}, **extra}


def test_a_guarded_langgraph_agents_findings_land_in_clickhouse(pipeline: Pipeline) -> None:
    collectors.configure(set_global=False, **pipeline.collector_settings())

    # A hallucinated tool: the guarded model is asked again and recovers.
    model = ScriptedChatModel(responses=[call("get_wether", "c1"), call("get_weather", "c2"),
                                         AIMessage(WEATHER)])
    agent(GuardedChatModel(model)).invoke(
        {"messages": [HumanMessage("Weather in Oslo?")]}, run_config("lc-tool"))

    # A fabrication: no tool booked anything.
    model = ScriptedChatModel(responses=[AIMessage(BOOKED)])
    out = agent(GuardedChatModel(model)).invoke(
        {"messages": [HumanMessage("Book me a flight to Oslo")]}, run_config("lc-fabrication"))
    assert "⚠️" in out["messages"][-1].content

    # A loop: the second turn of the thread repeats the first answer, nothing new since.
    model = ScriptedChatModel(responses=[call("get_weather", "c1"), AIMessage(WEATHER),
                                         AIMessage(WEATHER)])
    looping = agent(model, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "thread-1"}}
    looping.invoke({"messages": [HumanMessage("Weather in Oslo?")]},
                   run_config("lc-loop-first", **thread))
    looping.invoke({"messages": [HumanMessage("And is it nice out?")]},
                   run_config("lc-loop", **thread))

    collectors.shutdown()  # flushes spans and payloads
    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0

    events: dict[str, list[tuple[str, str, str]]] = {}
    # The guard events (each verdict's evaluation result is a row too; not read here).
    for request_id, name, module, tier in pipeline.rows(
            "SELECT request_id, name, module, tier FROM {db}.span_events FINAL "
            "WHERE name IN {g:Array(String)} ORDER BY request_id, timestamp",
            g=list(names.GUARD_EVENTS)):
        events.setdefault(request_id, []).append((name, module, tier))
    assert events["lc-tool"] == [
        (names.EVENT_HALLUCINATION_DETECTED, names.MODULE_PLANNING, ""),
        (names.EVENT_HALLUCINATION_REGENERATION_COMPLETE, names.MODULE_PLANNING, ""),
        (names.EVENT_HALLUCINATION_RECOVERED, names.MODULE_PLANNING, "")]
    assert events["lc-fabrication"] == [
        (names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES, names.TIER_ACTION)]
    assert events["lc-loop"] == [
        (names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES, names.TIER_REPETITION)]
    assert "lc-loop-first" not in events

    agents = dict(pipeline.rows(
        "SELECT request_id, any(agent) FROM {db}.span_events FINAL "
        "WHERE name = {n:String} GROUP BY request_id", n=names.EVENT_HALLUCINATION_DETECTED))
    assert agents == {"lc-tool": "get_wether"}

    kinds: dict[str, list[str]] = {}
    for request_id, kind in pipeline.rows(
            "SELECT request_id, toString(kind) FROM {db}.payloads FINAL"):
        kinds.setdefault(request_id, []).append(kind)
    assert sorted(kinds["lc-tool"]) == sorted(
        [names.PAYLOAD_KIND_HALLUCINATION] + [names.PAYLOAD_KIND_LLM_EXCHANGE] * 3)
    assert names.PAYLOAD_KIND_FABRICATION in kinds["lc-loop"]
