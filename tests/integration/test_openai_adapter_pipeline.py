"""An instrumented OpenAI client, through configure() and Kafka, as rows in ClickHouse.

The real SDK client is answered offline (recorded-shape replies); everything after it is
the real pipeline: the hooks' exporters, the Tansu broker, the consumer, the store.
"""

from __future__ import annotations

import json

import openai
import pytest

from guardtrace import collectors
from guardtrace.integrations.openai import instrument
from guardtrace.schemas import names
from tests.support.llm_wire import ScriptedAPI, chat_chunks, chat_completion

from .conftest import Pipeline

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object",
                                          "properties": {"city": {"type": "string"}}}}}
SECRET = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
FABRICATED = "I've deployed the fix to production and restarted the servers."
LOOPING = "Could you share the order number and the email address on the account, please?"


def test_hallucination_fabrication_and_loop_land_as_guard_events(pipeline: Pipeline) -> None:
    collectors.configure(set_global=False, **pipeline.collector_settings())
    api = ScriptedAPI(
        chat_completion(calls=[("call_1", "get_wether_forecast", {"city": "Paris"})]),
        chat_completion(FABRICATED),
        chat_chunks(LOOPING))
    client = instrument(openai.OpenAI(api_key="sk-test", max_retries=0,
                                      http_client=api.http_client()), agent="trip-bot")

    client.chat.completions.create(
        model="gpt-4.1", tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": f"Weather in Paris? My key: {SECRET}"}])
    client.chat.completions.create(
        model="gpt-4.1", tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": "Ship the hotfix"}])
    stream = client.chat.completions.create(
        model="gpt-4.1", tools=[WEATHER_TOOL], stream=True,
        messages=[{"role": "user", "content": "Where is my order?"},
                  {"role": "assistant", "content": LOOPING},
                  {"role": "user", "content": "It is late."}])
    assert "".join(c.choices[0].delta.content or "" for c in stream) == LOOPING

    collectors.shutdown()  # flushes spans, the final metric export and payloads
    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0

    events = pipeline.rows(
        "SELECT request_id, name, module, agent, tier FROM {db}.span_events FINAL "
        "WHERE name IN {n:Array(String)} ORDER BY timestamp",
        n=[names.EVENT_HALLUCINATION_DETECTED, names.EVENT_FABRICATION_DETECTED])
    found = [tuple(row[1:]) for row in events]
    assert found == [
        (names.EVENT_HALLUCINATION_DETECTED, names.MODULE_PLANNING, "get_wether_forecast", ""),
        (names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES, "trip-bot", names.TIER_ACTION),
        (names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES, "trip-bot",
         names.TIER_REPETITION),
    ]

    # Each call is one request: its finding and its exchange share the request id.
    payloads = pipeline.rows(
        "SELECT request_id, toString(kind), body FROM {db}.payloads FINAL")
    kinds: dict[str, set[str]] = {}
    for request_id, kind, _ in payloads:
        kinds.setdefault(request_id, set()).add(kind)
    assert [kinds[row[0]] for row in events] == [
        {names.PAYLOAD_KIND_LLM_EXCHANGE},
        {names.PAYLOAD_KIND_LLM_EXCHANGE, names.PAYLOAD_KIND_FABRICATION},
        {names.PAYLOAD_KIND_LLM_EXCHANGE, names.PAYLOAD_KIND_FABRICATION},
    ]
    exchanges = [json.loads(body) for _, kind, body in payloads
                 if kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    assert len(exchanges) == 3
    stored = json.dumps(exchanges)
    assert SECRET not in stored and "Weather in Paris? My key: [REDACTED:" in stored

    # Cumulative counters: the last value of each series (a series per agent and tier).
    counters = pipeline.rows(
        "SELECT metric_name, agent, attributes['tier'], max(value) FROM {db}.metric_points "
        "FINAL WHERE metric_name IN {m:Array(String)} GROUP BY metric_name, agent, "
        "attributes['tier'] ORDER BY metric_name, attributes['tier']",
        m=[names.METRIC_HALLUCINATIONS, names.METRIC_FABRICATIONS])
    assert counters == [
        (names.METRIC_HALLUCINATIONS, "get_wether_forecast", "", 1.0),
        (names.METRIC_FABRICATIONS, "trip-bot", names.TIER_ACTION, 1.0),
        (names.METRIC_FABRICATIONS, "trip-bot", names.TIER_REPETITION, 1.0),
    ]
