"""guardtrace.integrations.anthropic: the real Anthropic SDK clients, answered offline.

Each test drives ``Anthropic`` / ``AsyncAnthropic`` through an ``httpx2.MockTransport``
that returns recorded-shape replies (tests/support/llm_wire.py) and reads what the hooks
emitted with ``collectors.testing.capture``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from anthropic.lib.streaming import AsyncMessageStream, MessageStream

from guardtrace.collectors.questions.reason_tool import (
    REASON_SYSTEM_PROMPT,
    REASON_TOOL_NAME,
    reason_tool_schema,
)
from guardtrace.collectors.testing import Capture, capture
from guardtrace.integrations import anthropic as gt_anthropic
from guardtrace.schemas import names
from tests.support.llm_wire import ScriptedAPI, anthropic_events, anthropic_message
from tests.support.verification_cases import ANSWER, SPELLED, STRAWBERRY, verification_events

MODEL = "claude-sonnet-4-6"
WEATHER_TOOL = {"name": "get_weather", "description": "Current weather for a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                 "required": ["city"]}}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
INVENTED = [("toolu_01A", "get_wether_forecast", {"city": "Paris"})]
REAL = [("toolu_01B", "get_weather", {"city": "Paris"})]
FABRICATED = "I've deployed the fix to production and restarted the servers."
LOOPING = "Could you share the order number and the email address on the account, please?"
FEEDBACK_START = "YOUR PREVIOUS PLAN WAS REJECTED"


@pytest.fixture
def cap() -> Iterator[Capture]:
    with capture() as captured:
        yield captured


def client_for(api: ScriptedAPI, *, asynchronous: bool = False, **settings: Any) -> Any:
    if asynchronous:
        client: Any = anthropic.AsyncAnthropic(api_key="sk-ant-test", max_retries=0,
                                               http_client=api.async_http_client())
    else:
        client = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0,
                                     http_client=api.http_client())
    return gt_anthropic.instrument(client, **settings)


def request(messages: Any = ASK, **kwargs: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1024, "messages": messages,
            "tools": [WEATHER_TOOL], **kwargs}


def hallucinated(cap: Capture) -> list[str]:
    return [e.attributes[names.ATTR_AGENT]
            for e in cap.events(names.EVENT_HALLUCINATION_DETECTED)]


def tiers(cap: Capture) -> list[str]:
    return [e.attributes[names.ATTR_TIER] for e in cap.events(names.EVENT_FABRICATION_DETECTED)]


def exchanges(cap: Capture) -> list[dict[str, Any]]:
    return [json.loads(p.body) for p in cap.payloads
            if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]


# -- observing ------------------------------------------------------------------------------

def test_a_reply_is_checked_and_left_as_it_came(cap: Capture) -> None:
    reference = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0, http_client=ScriptedAPI(
        anthropic_message(FABRICATED, INVENTED)).http_client()).messages.create(**request())
    reply = client_for(ScriptedAPI(anthropic_message(FABRICATED, INVENTED)),
                       agent="ops-bot").messages.create(**request(system="You run deploys."))
    assert reply.model_dump() == reference.model_dump()
    assert hallucinated(cap) == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]
    [body] = exchanges(cap)
    assert body["system"] == "You run deploys."
    assert body["response"]["content"][1]["name"] == "get_wether_forecast"
    assert cap.payloads[-1].attributes["api"] == "messages"


def test_a_grounded_reply_after_a_tool_result_is_not_flagged(cap: Capture) -> None:
    turn = [*ASK,
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_01B", "name": "get_weather",
                 "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01B",
                 "content": [{"type": "text", "text": "18 C, sunny"}]}]}]
    client_for(ScriptedAPI(anthropic_message("I checked: it is 18 C and sunny in Paris."))
               ).messages.create(**request(turn))
    assert tiers(cap) == [] and hallucinated(cap) == []


def test_server_tools_are_tools_that_were_sent(cap: Capture) -> None:
    reply = anthropic_message("Searching.", REAL)
    reply["content"].append({"type": "server_tool_use", "id": "srvtoolu_1",
                             "name": "web_search", "input": {"query": "Paris weather"}})
    client_for(ScriptedAPI(reply)).messages.create(
        **request(tools=[WEATHER_TOOL, WEB_SEARCH]))
    assert hallucinated(cap) == []


def test_a_reply_that_repeats_the_last_one_is_a_loop(cap: Capture) -> None:
    history = [{"role": "user", "content": "Where is my order?"},
               {"role": "assistant", "content": [{"type": "text", "text": LOOPING}]},
               {"role": "user", "content": "It is late."}]
    client_for(ScriptedAPI(anthropic_message(LOOPING))).messages.create(**request(history))
    assert tiers(cap) == [names.TIER_REPETITION]


def test_a_stream_reaches_the_caller_unchanged_and_is_checked_at_its_end(cap: Capture) -> None:
    reference = list(anthropic.Anthropic(
        api_key="sk-ant-test", max_retries=0,
        http_client=ScriptedAPI(anthropic_events(FABRICATED, INVENTED)).http_client(),
    ).messages.create(**request(), stream=True))
    stream = client_for(ScriptedAPI(anthropic_events(FABRICATED, INVENTED))).messages.create(
        **request(), stream=True)
    assert isinstance(stream, anthropic.Stream)
    first = next(stream)
    assert cap.events() == []
    events = [first, *stream]
    assert [e.model_dump() for e in events] == [e.model_dump() for e in reference]
    assert hallucinated(cap) == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]
    [body] = exchanges(cap)
    assert body["response"]["content"] == [
        {"type": "text", "text": FABRICATED},
        {"type": "tool_use", "id": "toolu_01A", "name": "get_wether_forecast",
         "input": {"city": "Paris"}}]


def test_the_stream_helper_is_checked(cap: Capture) -> None:
    client = client_for(ScriptedAPI(anthropic_events(FABRICATED, INVENTED)))
    with client.messages.stream(**request()) as stream:
        assert isinstance(stream, MessageStream)
        assert cap.events() == []  # the check runs once the stream is read
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == FABRICATED == final.content[0].text
    assert hallucinated(cap) == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]


def test_a_helper_stream_left_unread_is_not_judged(cap: Capture) -> None:
    with client_for(ScriptedAPI(anthropic_events(FABRICATED))).messages.stream(**request()):
        pass
    assert cap.events() == [] and cap.payloads == []


def test_the_async_client_streamed_or_not(cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message(calls=INVENTED), anthropic_events(FABRICATED),
                      anthropic_events(LOOPING))

    async def run() -> list[Any]:
        client = client_for(api, asynchronous=True)
        await client.messages.create(**request())
        stream = await client.messages.create(
            **request([{"role": "user", "content": "Ship it"}]), stream=True)
        events = [event async for event in stream]
        history = [{"role": "user", "content": "Where is my order?"},
                   {"role": "assistant", "content": LOOPING},
                   {"role": "user", "content": "It is late."}]
        async with client.messages.stream(**request(history)) as helper:
            assert isinstance(helper, AsyncMessageStream)
            await helper.get_final_message()
        return events

    events = asyncio.run(run())
    assert events[-1].type == "message_stop"
    assert hallucinated(cap) == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION, names.TIER_REPETITION]


# -- acting ---------------------------------------------------------------------------------

def test_acting_retries_with_the_feedback_first_in_system(cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message(calls=INVENTED), anthropic_message(calls=REAL))
    reply = client_for(api, act=True).messages.create(**request(system="You plan trips."))
    assert [b.name for b in reply.content if b.type == "tool_use"] == ["get_weather"]
    system = api.requests[1]["system"]
    assert system.startswith(FEEDBACK_START) and system.endswith("\n\nYou plan trips.")
    assert api.requests[1]["messages"] == api.requests[0]["messages"]
    assert [e.name for e in cap.events() if e.name.startswith("llm.hallucination")] == [
        names.EVENT_HALLUCINATION_DETECTED, names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
        names.EVENT_HALLUCINATION_RECOVERED]


def test_acting_keeps_a_system_prompt_of_blocks_as_blocks(cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message(calls=INVENTED), anthropic_message(calls=REAL))
    blocks = [{"type": "text", "text": "You plan trips.",
               "cache_control": {"type": "ephemeral"}}]
    client_for(api, act=True).messages.create(**request(system=blocks))
    sent = api.requests[1]["system"]
    assert sent[0]["type"] == "text" and sent[0]["text"].startswith(FEEDBACK_START)
    assert sent[1:] == blocks


def test_acting_appends_the_disclaimer_to_the_last_text_block(cap: Capture) -> None:
    reply = anthropic_message("Done.", ())
    reply["content"] = [{"type": "text", "text": "Sure."}, {"type": "text", "text": FABRICATED}]
    annotated = client_for(ScriptedAPI(reply), act=True).messages.create(
        **request([{"role": "user", "content": "Ship the hotfix"}]))
    assert annotated.content[0].text == "Sure."
    assert annotated.content[1].text.startswith(FABRICATED + "\n\n⚠️ I said I did")
    assert tiers(cap) == [names.TIER_ACTION]


def test_acting_on_the_async_client(cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message(calls=INVENTED), anthropic_message(FABRICATED))

    async def run() -> Any:
        return await client_for(api, asynchronous=True, act=True).messages.create(**request())

    reply = asyncio.run(run())
    assert len(api.requests) == 2 and api.requests[1]["system"].startswith(FEEDBACK_START)
    assert reply.content[0].text.startswith(FABRICATED + "\n\n⚠️")


def test_acting_leaves_the_stream_helper_as_it_came(cap: Capture) -> None:
    api = ScriptedAPI(anthropic_events(FABRICATED, INVENTED))
    with client_for(api, act=True).messages.stream(**request()) as stream:
        assert stream.get_final_message().content[0].text == FABRICATED
    assert len(api.requests) == 1
    assert hallucinated(cap) == ["get_wether_forecast"] and tiers(cap) == [names.TIER_ACTION]


# -- forced verification (verify=True) -----------------------------------------------------




def assert_verified(verifying: dict[str, Any], final: dict[str, Any]) -> None:
    """``verifying`` executes the reason tool on the same model, with the caller's
    max_tokens; ``final`` carries a tool_use of reason and its tool_result after the
    question."""
    assert verifying == {"model": MODEL, "max_tokens": final["max_tokens"],
                         "system": REASON_SYSTEM_PROMPT,
                         "messages": [{"role": "user", "content": f"Question: {STRAWBERRY}"}]}
    asked, call, result = final["messages"]
    assert asked == {"role": "user", "content": STRAWBERRY}
    [use] = call["content"]
    assert (call["role"], use["type"], use["name"], use["input"]) == (
        "assistant", "tool_use", REASON_TOOL_NAME, {"question": STRAWBERRY})
    assert result == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": use["id"], "content": SPELLED}]}


def test_a_character_level_question_is_verified_before_the_model_answers(
        cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message(SPELLED), anthropic_message(ANSWER))
    reply = client_for(api, agent="helpdesk", verify=True).messages.create(
        **request([{"role": "user", "content": STRAWBERRY}]))

    assert reply.content[0].text == ANSWER
    assert_verified(*api.requests)
    assert api.requests[1]["tools"] == [WEATHER_TOOL]
    [exchange] = exchanges_of(cap)
    assert verification_events(cap) == [
        (names.EVENT_VERIFICATION_REQUIRED, exchange.request_id, "helpdesk"),
        (names.EVENT_VERIFICATION_COMPLETED, exchange.request_id, "helpdesk")]


def exchanges_of(cap: Capture) -> list[Any]:
    return [p for p in cap.payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]


def test_a_request_without_tools_gets_the_reason_tool_and_no_tool_choice(
        cap: Capture) -> None:
    # The API refuses tool blocks in a request that defines no tools; offered only so
    # the request is taken, the tool may not be called: the model answers in text.
    api = ScriptedAPI(anthropic_message(SPELLED), anthropic_message(ANSWER))
    ask = {"model": MODEL, "max_tokens": 512,
           "messages": [{"role": "user", "content": STRAWBERRY}]}
    client_for(api, verify=True).messages.create(**ask)

    assert_verified(*api.requests)
    assert api.requests[1]["tools"] == [reason_tool_schema("anthropic")]
    assert api.requests[1]["tool_choice"] == {"type": "none"}


def test_an_ordinary_question_makes_one_unchanged_request(cap: Capture) -> None:
    ask = request([{"role": "user", "content": "Which flight is cheapest?"}])
    reference = ScriptedAPI(anthropic_message("The 7:05 to Oslo, at 89 EUR."))
    anthropic.Anthropic(api_key="sk-ant-test", max_retries=0,
                        http_client=reference.http_client()).messages.create(**ask)
    api = ScriptedAPI(anthropic_message("The 7:05 to Oslo, at 89 EUR."))
    client_for(api, verify=True).messages.create(**ask)

    assert api.requests == reference.requests
    assert verification_events(cap) == []


def test_the_async_client_verifies_and_streams_as_asked(cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message(SPELLED), anthropic_events(ANSWER))

    async def run() -> str:
        client = client_for(api, asynchronous=True, verify=True)
        stream = await client.messages.create(
            **request([{"role": "user", "content": STRAWBERRY}]), stream=True)
        return "".join([event.delta.text async for event in stream
                        if event.type == "content_block_delta"])

    assert asyncio.run(run()) == ANSWER
    assert_verified(*api.requests)
    assert api.requests[1]["stream"] is True
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


def test_tool_results_after_the_question_are_not_the_question(cap: Capture) -> None:
    # Mid-turn, the last user message holds only a tool_result: the question is the one
    # before it, and the turn's verification goes back in right after that.
    api = ScriptedAPI(anthropic_message(SPELLED), anthropic_message(calls=REAL),
                      anthropic_message(ANSWER))
    client = client_for(api, verify=True)
    messages: list[Any] = [{"role": "user", "content": STRAWBERRY}]
    reply = client.messages.create(**request(messages))
    messages += [{"role": "assistant", "content": [b.model_dump() for b in reply.content]},
                 {"role": "user", "content": [{"type": "tool_result",
                                               "tool_use_id": "toolu_01B",
                                               "content": "Paris: sunny"}]}]
    client.messages.create(**request(messages))

    verifying, first, later = api.requests
    assert_verified(verifying, first)
    assert later["messages"][:3] == first["messages"]
    assert later["messages"][3:] == messages[1:]
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


def test_a_request_with_extended_thinking_is_not_verified(cap: Capture) -> None:
    api = ScriptedAPI(anthropic_message(ANSWER))
    client_for(api, verify=True).messages.create(**request(
        [{"role": "user", "content": STRAWBERRY}],
        thinking={"type": "enabled", "budget_tokens": 1024}))
    assert len(api.requests) == 1 and len(api.requests[0]["messages"]) == 1
    assert verification_events(cap) == []


def test_verify_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="verify must be True or False, got 1"):
        gt_anthropic.instrument(anthropic.Anthropic(api_key="sk-ant-test"), verify=1)


# -- the client ------------------------------------------------------------------------------

def test_uninstrument_puts_the_methods_back(cap: Capture) -> None:
    client = client_for(ScriptedAPI(anthropic_message(FABRICATED)))
    assert {"create", "parse", "stream"} <= set(vars(client.messages))
    gt_anthropic.uninstrument(client)
    assert not {"create", "parse", "stream"} & set(vars(client.messages))
    client.messages.create(**request())
    assert cap.events() == []


@pytest.mark.parametrize(("wrong", "named"), [
    (None, "NoneType"),
    (anthropic.AsyncAnthropic, "pass a client, not the class"),
    (openai.OpenAI(api_key="sk-test"), "openai.OpenAI"),
])
def test_a_value_that_is_not_a_client_is_refused_naming_what_was_expected(
        wrong: Any, named: str) -> None:
    with pytest.raises(TypeError, match=r"expects an anthropic\.Anthropic or "
                                        r"anthropic\.AsyncAnthropic client") as raised:
        gt_anthropic.instrument(wrong)
    assert named in str(raised.value)


def test_a_missing_sdk_names_the_extra() -> None:
    missing = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['anthropic'] = None\n"
                               "import guardtrace.integrations.anthropic"],
        capture_output=True, text=True, check=False)
    assert "pip install 'guardtrace[anthropic]'" in missing.stderr
