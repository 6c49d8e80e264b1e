"""guardtrace.integrations.openai: the real OpenAI SDK clients, answered offline.

Each test drives ``OpenAI`` / ``AsyncOpenAI`` through an ``httpx2.MockTransport`` that
returns recorded-shape replies (tests/support/llm_wire.py) and reads what the hooks
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

from guardtrace.collectors import FabricationGuard
from guardtrace.collectors.emit.internal import internal_totals
from guardtrace.collectors.questions.reason_tool import REASON_SYSTEM_PROMPT, REASON_TOOL_NAME
from guardtrace.collectors.testing import Capture, capture
from guardtrace.integrations import openai as gt_openai
from guardtrace.integrations._openai_chat import ChatAccumulator
from guardtrace.integrations._tool_feedback import TOOL_CALL_NOTE
from guardtrace.schemas import names
from tests.support.llm_wire import (
    ScriptedAPI,
    chat_chunks,
    chat_completion,
    response_events,
    response_object,
)
from tests.support.verification_cases import ANSWER, SPELLED, STRAWBERRY, verification_events

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
RESPONSES_WEATHER_TOOL = {"type": "function", "name": "get_weather",
                          "description": "Current weather for a city",
                          "parameters": WEATHER_TOOL["function"]["parameters"]}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
INVENTED = [("call_Wq1", "get_wether_forecast", {"city": "Paris"})]
REAL = [("call_Wq2", "get_weather", {"city": "Paris"})]
FABRICATED = "I've deployed the fix to production and restarted the servers."
LOOPING = "Could you share the order number and the email address on the account, please?"
LOOP_HISTORY = [{"role": "user", "content": "Where is my order?"},
                {"role": "assistant", "content": LOOPING},
                {"role": "user", "content": "It is late."}]
FEEDBACK_START = "YOUR PREVIOUS PLAN WAS REJECTED"


@pytest.fixture
def cap() -> Iterator[Capture]:
    with capture() as captured:
        yield captured


def client_for(api: ScriptedAPI, *, asynchronous: bool = False, **settings: Any) -> Any:
    if asynchronous:
        client: Any = openai.AsyncOpenAI(api_key="sk-test", max_retries=0,
                                         http_client=api.async_http_client())
    else:
        client = openai.OpenAI(api_key="sk-test", max_retries=0, http_client=api.http_client())
    return gt_openai.instrument(client, **settings)


def chat(client: Any, messages: Any = ASK, **kwargs: Any) -> Any:
    return client.chat.completions.create(model="gpt-4.1", messages=messages,
                                          tools=[WEATHER_TOOL], **kwargs)


def event_names(cap: Capture) -> list[str]:
    return [event.name for event in cap.events()]


def hallucinations(cap: Capture) -> list[dict[str, Any]]:
    return [e.attributes for e in cap.events(names.EVENT_HALLUCINATION_DETECTED)]


def tiers(cap: Capture) -> list[str]:
    return [e.attributes[names.ATTR_TIER] for e in cap.events(names.EVENT_FABRICATION_DETECTED)]


def exchanges(cap: Capture) -> list[dict[str, Any]]:
    return [json.loads(p.body) for p in cap.payloads
            if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]


# -- observing (the default) ----------------------------------------------------------------

def test_a_hallucinated_tool_is_detected_and_the_reply_left_as_it_came(cap: Capture) -> None:
    plain_reply = chat(openai.OpenAI(api_key="sk-test", max_retries=0, http_client=ScriptedAPI(
        chat_completion(calls=INVENTED)).http_client()))
    reply = chat(client_for(ScriptedAPI(chat_completion(calls=INVENTED)), agent="trip-bot"))

    assert type(reply) is type(plain_reply)
    assert reply.model_dump() == plain_reply.model_dump()
    [found] = hallucinations(cap)
    assert found[names.ATTR_AGENT] == "get_wether_forecast"
    assert found[names.ATTR_SUGGESTED_TOOLS] == ("get_weather",)
    assert found[names.ATTR_REQUEST_ID] == cap.payloads[-1].request_id  # one request
    assert cap.counter_total(names.METRIC_HALLUCINATIONS, agent="get_wether_forecast") == 1


def test_a_call_of_a_tool_that_was_sent_is_not_a_hallucination(cap: Capture) -> None:
    chat(client_for(ScriptedAPI(chat_completion(calls=REAL))))
    assert hallucinations(cap) == []
    assert exchanges(cap)[0]["response"]["choices"][0]["message"]["tool_calls"][0][
        "function"]["name"] == "get_weather"


def test_a_fabricated_action_is_reported_and_not_annotated(cap: Capture) -> None:
    reply = chat(client_for(ScriptedAPI(chat_completion(FABRICATED)), agent="ops-bot"),
                 [{"role": "user", "content": "Ship the hotfix"}])
    assert reply.choices[0].message.content == FABRICATED
    assert tiers(cap) == [names.TIER_ACTION]
    assert cap.events(names.EVENT_FABRICATION_DETECTED)[0].attributes[
        names.ATTR_AGENT] == "ops-bot"


def test_a_reply_that_repeats_the_last_one_is_a_loop(cap: Capture) -> None:
    chat(client_for(ScriptedAPI(chat_completion(LOOPING))), LOOP_HISTORY)
    assert tiers(cap) == [names.TIER_REPETITION]


def test_a_reply_without_text_is_not_judged_again_on_an_older_reply(cap: Capture) -> None:
    # The history's last reply loops; the new reply only calls a tool. Judging "the
    # last reply with text" would judge the history again.
    chat(client_for(ScriptedAPI(chat_completion(calls=REAL))),
         [*LOOP_HISTORY, {"role": "assistant", "content": LOOPING},
          {"role": "user", "content": "Paris weather then?"}])
    assert tiers(cap) == []


def test_the_exchange_is_recorded_redacted(cap: Capture) -> None:
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    chat(client_for(ScriptedAPI(chat_completion("Sunny, 24 C.")), agent="trip-bot"),
         [{"role": "user", "content": f"My key is {secret}. Weather in Paris?"}])
    [payload] = [p for p in cap.payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    assert payload.attributes == {names.ATTR_AGENT: "trip-bot", "api": "chat.completions",
                                  "model": "gpt-4.1", "streamed": "false"}
    body = json.loads(payload.body)
    assert secret not in payload.body and "[REDACTED:" in body["messages"][0]["content"]
    assert body["tools"] == [WEATHER_TOOL]
    assert body["response"]["choices"][0]["message"]["content"] == "Sunny, 24 C."


def test_messages_and_tools_given_as_generators_reach_both_the_api_and_the_guard(
        cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(calls=INVENTED))
    client = client_for(api)
    client.chat.completions.create(model="gpt-4.1", messages=(m for m in LOOP_HISTORY),
                                   tools=(t for t in [WEATHER_TOOL]))
    assert len(api.requests[0]["messages"]) == 3
    assert api.requests[0]["tools"] == [WEATHER_TOOL]
    assert [h[names.ATTR_AGENT] for h in hallucinations(cap)] == ["get_wether_forecast"]
    assert len(exchanges(cap)[0]["messages"]) == 3


def test_an_api_error_reaches_the_caller_as_without_the_adapter(cap: Capture) -> None:
    with pytest.raises(openai.InternalServerError):
        chat(client_for(ScriptedAPI(500)))
    assert cap.events() == [] and cap.payloads == []


# -- streams --------------------------------------------------------------------------------

def test_a_stream_reaches_the_caller_unchanged_and_is_checked_at_its_end(cap: Capture) -> None:
    reference = list(chat(openai.OpenAI(api_key="sk-test", max_retries=0, http_client=ScriptedAPI(
        chat_chunks(FABRICATED, INVENTED)).http_client()), stream=True))
    stream = chat(client_for(ScriptedAPI(chat_chunks(FABRICATED, INVENTED))), stream=True)

    assert isinstance(stream, openai.Stream)
    first = next(stream)
    assert event_names(cap) == []  # nothing is judged on a partial reply
    chunks = [first, *stream]
    assert [c.model_dump() for c in chunks] == [c.model_dump() for c in reference]
    assert [h[names.ATTR_AGENT] for h in hallucinations(cap)] == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]
    [body] = exchanges(cap)
    assert body["response"]["choices"][0]["message"]["content"] == FABRICATED
    assert body["response"]["choices"][0]["message"]["tool_calls"][0]["function"] == {
        "name": "get_wether_forecast", "arguments": json.dumps({"city": "Paris"})}
    assert cap.payloads[-1].attributes["streamed"] == "true"


def test_a_stream_the_caller_stops_reading_is_not_judged(cap: Capture) -> None:
    with chat(client_for(ScriptedAPI(chat_chunks(FABRICATED))), stream=True) as stream:
        next(stream)
    assert event_names(cap) == [] and cap.payloads == []


def test_the_stream_helper_is_checked(cap: Capture) -> None:
    client = client_for(ScriptedAPI(chat_chunks(FABRICATED, INVENTED)))
    with client.chat.completions.stream(model="gpt-4.1", messages=ASK,
                                        tools=[WEATHER_TOOL]) as stream:
        text = "".join(e.delta for e in stream if e.type == "content.delta")
        final = stream.get_final_completion()
    assert text == FABRICATED == final.choices[0].message.content
    assert [h[names.ATTR_AGENT] for h in hallucinations(cap)] == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]


@pytest.mark.expect_hook_errors
def test_a_failing_accumulator_never_reaches_the_caller(
        cap: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(self: Any, chunk: Any) -> None:
        raise RuntimeError("accumulator exploded")

    monkeypatch.setattr(ChatAccumulator, "feed", explode)
    before = sum(internal_totals(names.METRIC_HOOK_ERRORS).values())
    chunks = list(chat(client_for(ScriptedAPI(chat_chunks(FABRICATED))), stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == FABRICATED
    assert sum(internal_totals(names.METRIC_HOOK_ERRORS).values()) == before + 1  # once
    assert event_names(cap) == []


@pytest.mark.expect_hook_errors
def test_a_failing_check_never_reaches_the_caller(
        cap: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("validation exploded")

    monkeypatch.setattr("guardtrace.integrations._exchange.validate_plan", explode)
    before = internal_totals(names.METRIC_HOOK_ERRORS)
    reply = chat(client_for(ScriptedAPI(chat_completion(FABRICATED, INVENTED))))
    assert reply.choices[0].message.tool_calls[0].function.name == "get_wether_forecast"
    after = internal_totals(names.METRIC_HOOK_ERRORS)
    assert sum(after.values()) == sum(before.values()) + 1
    assert tiers(cap) == [names.TIER_ACTION]  # the other checks still ran


# -- the Responses API ----------------------------------------------------------------------

def test_responses_reply_is_read_from_its_output_items(cap: Capture) -> None:
    api = ScriptedAPI(response_object(FABRICATED, INVENTED))
    reply = client_for(api).responses.create(
        model="gpt-4.1", instructions="You are an ops assistant.", input="Ship the hotfix",
        tools=[RESPONSES_WEATHER_TOOL, {"type": "web_search"}])
    assert reply.output_text == FABRICATED
    [found] = hallucinations(cap)
    assert found[names.ATTR_AGENT] == "get_wether_forecast"
    assert found[names.ATTR_ALLOWED_AGENT_COUNT] == 2  # the hosted web_search counts
    assert tiers(cap) == [names.TIER_ACTION]
    body = exchanges(cap)[0]
    assert (body["instructions"], body["input"]) == ("You are an ops assistant.",
                                                     "Ship the hotfix")


def test_responses_input_items_are_the_conversation(cap: Capture) -> None:
    # The loop check sees the earlier reply of the input items; a function call and its
    # output in the input ground nothing new here but must be readable.
    items = [{"role": "user", "content": "Where is my order?"},
             {"type": "function_call", "call_id": "c0", "name": "get_weather",
              "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c0", "output": "n/a"},
             {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": LOOPING}]},
             {"role": "user", "content": [{"type": "input_text", "text": "It is late."}]}]
    client_for(ScriptedAPI(response_object(LOOPING))).responses.create(
        model="gpt-4.1", input=items, tools=[RESPONSES_WEATHER_TOOL])
    assert tiers(cap) == [names.TIER_REPETITION]


def test_a_responses_stream_is_checked_on_its_completed_response(cap: Capture) -> None:
    stream = client_for(ScriptedAPI(response_events(FABRICATED, INVENTED))).responses.create(
        model="gpt-4.1", input="Ship the hotfix", tools=[RESPONSES_WEATHER_TOOL], stream=True)
    events = list(stream)
    assert events[-1].type == "response.completed"
    assert [h[names.ATTR_AGENT] for h in hallucinations(cap)] == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]


def test_the_responses_stream_helper_is_checked(cap: Capture) -> None:
    client = client_for(ScriptedAPI(response_events(FABRICATED)))
    with client.responses.stream(model="gpt-4.1", input="Ship the hotfix",
                                 tools=[RESPONSES_WEATHER_TOOL]) as stream:
        assert stream.get_final_response().output_text == FABRICATED
    assert tiers(cap) == [names.TIER_ACTION]


# -- async ----------------------------------------------------------------------------------

def test_the_async_client_is_checked_streamed_or_not(cap: Capture) -> None:
    async def run() -> tuple[Any, list[Any]]:
        client = client_for(ScriptedAPI(chat_completion(calls=INVENTED),
                                        chat_chunks(FABRICATED)), asynchronous=True)
        reply = await chat(client)
        stream = await chat(client, [{"role": "user", "content": "Ship it"}], stream=True)
        assert isinstance(stream, openai.AsyncStream)
        return reply, [chunk async for chunk in stream]

    reply, chunks = asyncio.run(run())
    assert reply.choices[0].message.tool_calls[0].function.name == "get_wether_forecast"
    assert len(chunks) == 4
    assert [h[names.ATTR_AGENT] for h in hallucinations(cap)] == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]


# -- acting (act=True) ----------------------------------------------------------------------

def retry_lifecycle(cap: Capture) -> list[str]:
    return [e.name for e in cap.events() if e.name.startswith("llm.hallucination")]


def test_acting_retries_a_hallucinated_tool_with_the_plan_feedback_first(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(calls=INVENTED), chat_completion(calls=REAL))
    reply = chat(client_for(api, act=True), [{"role": "system", "content": "Be brief."}, *ASK])

    assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert len(api.requests) == 2
    retry_messages = api.requests[1]["messages"]
    assert retry_messages[0]["role"] == "system"
    assert retry_messages[0]["content"].startswith(FEEDBACK_START)
    assert "'get_wether_forecast', which does NOT exist" in retry_messages[0]["content"]
    assert "Closest allowed: get_weather" in retry_messages[0]["content"]
    assert retry_messages[0]["content"].endswith(TOOL_CALL_NOTE)  # calls, not plan steps
    assert retry_messages[1:] == api.requests[0]["messages"]  # the rest as sent
    assert retry_lifecycle(cap) == [names.EVENT_HALLUCINATION_DETECTED,
                                    names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
                                    names.EVENT_HALLUCINATION_RECOVERED]
    assert hallucinations(cap)[0][names.ATTR_HALL_RETRY] == 0
    assert cap.counter_total(names.METRIC_HALLUCINATION_RECOVERED) == 1
    assert len({e.attributes[names.ATTR_REQUEST_ID] for e in cap.events()}) == 1
    kinds = [p.kind for p in cap.payloads]
    assert kinds == [names.PAYLOAD_KIND_HALLUCINATION, names.PAYLOAD_KIND_LLM_EXCHANGE]
    assert exchanges(cap)[0]["response"]["choices"][0]["message"]["tool_calls"][0][
        "function"]["name"] == "get_weather"


def test_acting_gives_the_last_reply_when_the_budget_runs_out(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(calls=INVENTED), chat_completion(calls=INVENTED),
                      chat_completion(calls=INVENTED))
    reply = chat(client_for(api, act=True, tool_retries=2))
    assert len(api.requests) == 3
    assert reply.choices[0].message.tool_calls[0].function.name == "get_wether_forecast"
    assert [h[names.ATTR_HALL_RETRY] for h in hallucinations(cap)] == [0, 1, 2]
    [gave_up] = cap.events(names.EVENT_HALLUCINATION_UNRECOVERABLE)
    assert gave_up.attributes[names.ATTR_RETRIES_EXHAUSTED] == 2


def test_acting_with_no_retries_only_reports(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(calls=INVENTED))
    chat(client_for(api, act=True, tool_retries=0))
    assert len(api.requests) == 1
    assert retry_lifecycle(cap) == [names.EVENT_HALLUCINATION_DETECTED,
                                    names.EVENT_HALLUCINATION_UNRECOVERABLE]


def test_a_failed_retry_gives_the_first_reply_and_is_reported(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(calls=INVENTED), 500)
    reply = chat(client_for(api, act=True))
    assert reply.choices[0].message.tool_calls[0].function.name == "get_wether_forecast"
    [failed] = cap.events(names.EVENT_HALLUCINATION_REGENERATION_FAILED)
    assert "InternalServerError" in failed.attributes[names.ATTR_ERROR]


def test_acting_appends_the_disclaimer_to_a_fabricated_reply(cap: Capture) -> None:
    reply = chat(client_for(ScriptedAPI(chat_completion(FABRICATED)), act=True),
                 [{"role": "user", "content": "Ship the hotfix"}])
    content = reply.choices[0].message.content
    assert content.startswith(FABRICATED + "\n\n⚠️ I said I did or am doing something")
    assert "Tools fired: none." in content
    assert tiers(cap) == [names.TIER_ACTION]


def test_acting_on_the_responses_api_uses_instructions_and_output_text(cap: Capture) -> None:
    api = ScriptedAPI(response_object(calls=INVENTED), response_object(FABRICATED))
    reply = client_for(api, act=True).responses.create(
        model="gpt-4.1", instructions="Be brief.", input="Ship the hotfix",
        tools=[RESPONSES_WEATHER_TOOL])
    instructions = api.requests[1]["instructions"]
    assert instructions.startswith(FEEDBACK_START) and instructions.endswith("\n\nBe brief.")
    assert reply.output_text.startswith(FABRICATED + "\n\n⚠️")
    assert tiers(cap) == [names.TIER_ACTION]


def test_acting_on_the_async_client(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(calls=INVENTED), chat_completion(FABRICATED))

    async def run() -> Any:
        return await chat(client_for(api, asynchronous=True, act=True))

    reply = asyncio.run(run())
    assert len(api.requests) == 2
    assert reply.choices[0].message.content.startswith(FABRICATED + "\n\n⚠️")
    assert retry_lifecycle(cap)[-1] == names.EVENT_HALLUCINATION_RECOVERED


def test_acting_leaves_a_stream_as_it_came(cap: Capture) -> None:
    api = ScriptedAPI(chat_chunks(FABRICATED, INVENTED))
    chunks = list(chat(client_for(api, act=True), stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == FABRICATED
    assert len(api.requests) == 1  # no retry: the chunks reached the caller already
    assert [h[names.ATTR_AGENT] for h in hallucinations(cap)] == ["get_wether_forecast"]
    assert tiers(cap) == [names.TIER_ACTION]


# -- forced verification (verify=True) -----------------------------------------------------




def assert_verified(verifying: dict[str, Any], final: dict[str, Any],
                    question: str = STRAWBERRY) -> dict[str, Any]:
    """``verifying`` executes the reason tool on the same model; ``final`` carries its
    result right after the question. Returns the synthetic call."""
    assert verifying["messages"] == [
        {"role": "system", "content": REASON_SYSTEM_PROMPT},
        {"role": "user", "content": f"Question: {question}"}]
    assert verifying["model"] == final["model"]
    assert "tools" not in verifying and "stream" not in verifying
    asked = [i for i, m in enumerate(final["messages"]) if m.get("content") == question][-1]
    call, result = final["messages"][asked + 1: asked + 3]
    [synthetic] = call["tool_calls"]
    assert (call["role"], synthetic["function"]["name"]) == ("assistant", REASON_TOOL_NAME)
    assert json.loads(synthetic["function"]["arguments"]) == {"question": question}
    assert result == {"role": "tool", "tool_call_id": synthetic["id"], "content": SPELLED}
    return synthetic


def test_a_character_level_question_is_verified_before_the_model_answers(
        cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(SPELLED), chat_completion(ANSWER))
    asked = [{"role": "user", "content": STRAWBERRY}]
    reply = chat(client_for(api, agent="helpdesk", verify=True), asked)

    assert reply.choices[0].message.content == ANSWER
    assert_verified(*api.requests)
    assert api.requests[1]["tools"] == [WEATHER_TOOL]  # the caller's, not the reason tool
    assert asked == [{"role": "user", "content": STRAWBERRY}]  # the caller's list untouched
    [exchange] = [p for p in cap.payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    assert verification_events(cap) == [
        (names.EVENT_VERIFICATION_REQUIRED, exchange.request_id, "helpdesk"),
        (names.EVENT_VERIFICATION_COMPLETED, exchange.request_id, "helpdesk")]


def test_an_ordinary_question_makes_one_unchanged_request(cap: Capture) -> None:
    asked = [{"role": "user", "content": "Which flight is cheapest?"}]
    reference = ScriptedAPI(chat_completion("The 7:05 to Oslo, at 89 EUR."))
    chat(openai.OpenAI(api_key="sk-test", max_retries=0, http_client=reference.http_client()),
         asked)
    api = ScriptedAPI(chat_completion("The 7:05 to Oslo, at 89 EUR."))
    chat(client_for(api, verify=True), asked)

    assert api.requests == reference.requests
    assert verification_events(cap) == []


def test_a_streamed_call_is_verified_then_streamed_as_asked(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(SPELLED), chat_chunks(ANSWER))
    stream = chat(client_for(api, verify=True), [{"role": "user", "content": STRAWBERRY}],
                  stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)

    assert text == ANSWER
    assert_verified(*api.requests)
    assert api.requests[1]["stream"] is True
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


def test_the_async_client_verifies_alike(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(SPELLED), chat_completion(ANSWER))

    async def run() -> Any:
        client = client_for(api, asynchronous=True, verify=True)
        return await chat(client, [{"role": "user", "content": STRAWBERRY}])

    assert asyncio.run(run()).choices[0].message.content == ANSWER
    assert_verified(*api.requests)
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


def test_later_calls_of_the_turn_carry_the_same_verification_without_a_new_call(
        cap: Capture) -> None:
    # An agent loop: the model calls a tool, the caller sends its result. The caller's
    # list does not hold the verification; the adapter puts the same one back.
    api = ScriptedAPI(chat_completion(SPELLED), chat_completion(calls=REAL),
                      chat_completion(ANSWER))
    client = client_for(api, verify=True)
    messages: list[Any] = [{"role": "user", "content": STRAWBERRY}]
    reply = chat(client, messages)
    messages += [reply.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "call_Wq2", "content": "Paris: sunny"}]
    chat(client, messages)

    assert len(api.requests) == 3  # one verification for the turn
    verifying, first, later = api.requests
    assert assert_verified(verifying, later) == assert_verified(verifying, first)
    assert api.requests[2]["messages"][3:] == messages[1:]  # the turn goes on after it
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


def test_a_turn_that_called_reason_already_is_not_verified_again(cap: Capture) -> None:
    turn = [{"role": "user", "content": STRAWBERRY},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "r1", "type": "function",
                 "function": {"name": REASON_TOOL_NAME, "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "r1", "content": SPELLED}]
    api = ScriptedAPI(chat_completion(ANSWER))
    chat(client_for(api, verify=True), turn)
    assert [request["messages"] for request in api.requests] == [turn]
    assert verification_events(cap) == []


def test_a_failed_verification_call_leaves_the_call_as_it_was(cap: Capture) -> None:
    api = ScriptedAPI(500, chat_completion(ANSWER))
    asked = [{"role": "user", "content": STRAWBERRY}]
    reply = chat(client_for(api, verify=True), asked)

    assert reply.choices[0].message.content == ANSWER
    assert api.requests[1]["messages"] == asked
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_BYPASSED]
    assert cap.events(names.EVENT_VERIFICATION_BYPASSED)[0].attributes[
        names.ATTR_REASON] == "verification_failed"


def test_the_responses_api_is_verified_with_function_call_items(cap: Capture) -> None:
    api = ScriptedAPI(response_object(SPELLED), response_object(ANSWER))
    client = client_for(api, verify=True)
    reply = client.responses.create(model="gpt-4.1", input=STRAWBERRY,
                                    tools=[RESPONSES_WEATHER_TOOL])

    assert reply.output_text == ANSWER
    verifying, final = api.requests
    assert verifying["input"] == [{"role": "system", "content": REASON_SYSTEM_PROMPT},
                                  {"role": "user", "content": f"Question: {STRAWBERRY}"}]
    asked, call, result = final["input"]
    assert asked == {"role": "user", "content": STRAWBERRY}
    assert (call["type"], call["name"], json.loads(call["arguments"])) == (
        "function_call", REASON_TOOL_NAME, {"question": STRAWBERRY})
    assert result == {"type": "function_call_output", "call_id": call["call_id"],
                      "output": SPELLED}
    assert [name for name, _, _ in verification_events(cap)] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_COMPLETED]


# -- the client ------------------------------------------------------------------------------

def test_uninstrument_puts_the_methods_back(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(FABRICATED), chat_completion(FABRICATED))
    client = client_for(api)
    create = type(client.chat.completions).create
    assert "create" in vars(client.chat.completions)
    assert gt_openai.uninstrument(client) is client
    assert "create" not in vars(client.chat.completions)
    assert client.chat.completions.create.__func__ is create
    chat(client)
    assert cap.events() == []
    gt_openai.uninstrument(client)  # again: nothing to undo


def test_instrumenting_twice_checks_once(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(FABRICATED))
    client = client_for(api, agent="old")
    gt_openai.instrument(client, agent="new")
    chat(client)
    assert [e.attributes[names.ATTR_AGENT] for e in
            cap.events(names.EVENT_FABRICATION_DETECTED)] == ["new"]


def test_a_copy_of_the_client_is_guarded_alike(cap: Capture) -> None:
    api = ScriptedAPI(chat_completion(FABRICATED))
    chat(client_for(api, agent="trip-bot").with_options(timeout=5.0))
    assert [e.attributes[names.ATTR_AGENT] for e in
            cap.events(names.EVENT_FABRICATION_DETECTED)] == ["trip-bot"]


@pytest.mark.parametrize(("wrong", "named"), [
    ("sk-test", "str"),
    (openai.OpenAI, "pass a client, not the class"),
    (anthropic.Anthropic(api_key="sk-ant-test"), "anthropic.Anthropic"),
])
def test_a_value_that_is_not_a_client_is_refused_naming_what_was_expected(
        wrong: Any, named: str) -> None:
    with pytest.raises(TypeError, match=r"expects an openai\.OpenAI or openai\.AsyncOpenAI "
                                        r"client") as raised:
        gt_openai.instrument(wrong)
    assert named in str(raised.value)
    with pytest.raises(TypeError, match="uninstrument expects"):
        gt_openai.uninstrument(wrong)


@pytest.mark.parametrize(("settings", "error", "says"), [
    ({"tool_retries": -1}, ValueError, "tool_retries must be an integer >= 0, got -1"),
    ({"tool_retries": True}, ValueError, "tool_retries must be an integer >= 0"),
    ({"guard": object()}, TypeError, "guard must be a guardtrace FabricationGuard"),
    ({"guard": FabricationGuard(), "tool_kinds": {"get_weather": "read"}}, ValueError,
     "either guard= or tool_kinds="),
    # A string is not read as pairs of letters, nor "false" as acting.
    ({"tool_kinds": "write"}, TypeError, "tool_kinds must map tool names to 'read'"),
    ({"act": "false"}, TypeError, "act must be True or False, got 'false'"),
    ({"record_exchanges": 0}, TypeError, "record_exchanges must be True or False"),
    ({"verify": "yes"}, TypeError, "verify must be True or False, got 'yes'"),
])
def test_settings_are_checked(settings: dict[str, Any], error: Any, says: str) -> None:
    client = openai.OpenAI(api_key="sk-test")
    with pytest.raises(error) as raised:
        gt_openai.instrument(client, **settings)
    assert says in str(raised.value)
    assert "create" not in vars(client.chat.completions)  # nothing half-installed


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)


def test_the_packages_load_no_sdk_and_a_missing_sdk_names_the_extra() -> None:
    loaded = _python("import sys, guardtrace.integrations, guardtrace.collectors\n"
                     "print(sorted({'openai', 'anthropic', 'mcp'} & set(sys.modules)))")
    assert loaded.stdout.strip() == "[]", loaded.stderr
    missing = _python("import sys; sys.modules['openai'] = None\n"
                      "import guardtrace.integrations.openai")
    assert "pip install 'guardtrace[openai]'" in missing.stderr
    assert missing.stderr.strip().splitlines()[-1].startswith("ImportError")


def test_tool_kinds_tell_the_guard_what_a_tool_does(cap: Capture) -> None:
    # A write tool that ran backs the claim of a write; by its name, get_weather reads.
    turn = [{"role": "user", "content": "Ship the hotfix"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    chat(client_for(ScriptedAPI(chat_completion(FABRICATED))), turn)
    assert tiers(cap) == [names.TIER_ACTION]
    chat(client_for(ScriptedAPI(chat_completion(FABRICATED)),
                    tool_kinds={"get_weather": "write"}), turn)
    assert tiers(cap) == [names.TIER_ACTION]  # no second detection
