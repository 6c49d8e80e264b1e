"""The conversation engine: every tier judged within its turn, on both message shapes.

Each rule is pinned by a lie that must fire and a truth that must stay quiet. Real
replies of public agent runs are pinned in test_realdata_cases.py; the figures over all
of them come from benchmarks/detection_quality.py.

Long because each of the five tiers is pinned by a lie and a truth, on both message
shapes.
"""

from __future__ import annotations

import json
import re
import string
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.replies.claims import _UNLOWERED_LETTERS, DONE, NOW, find_claims
from guardtrace.collectors.replies.conversation import read_conversation
from guardtrace.collectors.replies.conversation_guard import (
    ConversationDetector,
    judge_conversation,
)
from guardtrace.collectors.replies.fabrication import FabricationGuard
from guardtrace.collectors.replies.grounding import result_amounts
from guardtrace.collectors.replies.loops import content_words, reports_failure
from guardtrace.collectors.replies.text_tool_calls import find_text_tool_calls
from guardtrace.collectors.replies.tool_kinds import ToolKinds, command_kind, kind_from_text
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names
from tests.support.timing import cpu_seconds

ACTION, READ, REPETITION = names.TIER_ACTION, names.TIER_READ, names.TIER_REPETITION
TEXT_CALL, UNGROUNDED = names.TIER_TEXT_TOOL_CALL, names.TIER_UNGROUNDED_RESULT


def tool(name: str, description: str = "", kind: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "function", "function": {
        "name": name, "description": description, "parameters": {"type": "object"}}}
    if kind:
        spec["x-guardtrace-kind"] = kind
    return spec


AIRLINE = [tool(n) for n in (
    "get_user_details", "get_reservation_details", "search_direct_flight", "book_reservation",
    "cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
    "transfer_to_human_agents", "calculate", "think")]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def said(text: str, *calls: tuple[str, dict[str, Any]] | str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": f"c-{c if isinstance(c, str) else c[0]}-{i}", "type": "function",
             "function": {"name": c if isinstance(c, str) else c[0],
                          "arguments": json.dumps({} if isinstance(c, str) else c[1])}}
            for i, c in enumerate(calls)]
    return message


def called(*calls: str) -> dict[str, Any]:
    return said(None, *calls)  # type: ignore[arg-type]


def result(call_name: str, content: Any, n: int = 0) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"role": "tool", "tool_call_id": f"c-{call_name}-{n}", "content": text}


def tiers_of(messages: list[dict[str, Any]], tools: Any = AIRLINE, index: int = -1) -> tuple:
    verdicts = {v.msg_index: v for v in judge_conversation(messages, tools)}
    return verdicts[index % len(messages)].tiers


# --- the conversation model -------------------------------------------------------------
def test_turns_run_from_one_user_message_to_the_next() -> None:
    conv = read_conversation([
        {"role": "system", "content": "policy"}, user("hi"), said("Hello!"),
        user("cancel ABC"), called("cancel_reservation"), result("cancel_reservation", "ok"),
        said("Done."), user("thanks")])
    assert conv.turn_bounds(2) == (1, 3)
    assert conv.turn_bounds(6) == (3, 7)
    assert [c.name for _, c in conv.agent_calls(3, 7)] == ["cancel_reservation"]
    assert conv.replies() == [2, 6]


def test_anthropic_tool_results_in_a_user_message_do_not_start_a_turn() -> None:
    messages = [
        {"role": "user", "content": "Cancel reservation ABC, please."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I'm cancelling it now."},
            {"type": "tool_use", "id": "tu1", "name": "cancel_reservation", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                      "content": [{"type": "text", "text": "cancelled"}]}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I've cancelled it."}]},
    ]
    conv = read_conversation(messages, system="You are an airline agent.")
    assert [m.role for m in conv.messages] == ["system", "user", "assistant", "tool",
                                               "assistant"]
    assert conv.messages[0].index == -1 and conv.messages[3].result_ids == ("tu1",)
    assert conv.turn_bounds(4) == (1, 5)
    verdicts = judge_conversation(messages, AIRLINE, system="You are an airline agent.")
    assert [(v.msg_index, v.tiers) for v in verdicts] == [(1, ()), (3, ())]


def test_sdk_objects_are_read_like_dicts() -> None:
    call = SimpleNamespace(id="c1", type="function", function=SimpleNamespace(
        name="cancel_reservation", arguments="{}"))
    messages = [SimpleNamespace(role="user", content="cancel it"),
                SimpleNamespace(role="assistant", content="I've cancelled it.",
                                tool_calls=[call])]
    assert [v.tiers for v in judge_conversation(messages, AIRLINE)] == [()]


def test_only_calls_that_ran_count_as_fired() -> None:
    # A call of a name the catalog does not have never ran (the API rejected it).
    messages = [user("cancel ABC"), said("I'm cancelling your reservation now.",
                                         "cancel_booking_v2")]
    assert tiers_of(messages) == (ACTION,)
    # Without a catalog, every requested call counts.
    assert tiers_of(messages, tools=None) == ()


def test_a_simulated_users_own_calls_are_not_the_agents() -> None:
    messages = [user("My data is slow."),
                {"role": "user", "content": None, "tool_calls": [
                    {"id": "u1", "function": {"name": "enable_roaming", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "u1", "x-requestor": "user", "content": "ON"},
                said("I've enabled roaming on your line.")]
    tools = [tool("enable_roaming", kind="write"), tool("get_data_usage", kind="read")]
    assert tiers_of(messages, tools) == (ACTION,)


@pytest.mark.parametrize(("messages", "message"), [
    ("not a list", "messages must be a list of messages, got str"),
    ([user("hi"), "oops"], "message 1: expected an object with a 'role', got str"),
    ([{"content": "x"}], "message 0: missing 'role'"),
    ([{"role": "robot", "content": "x"}], "message 0: unknown role 'robot'"),
])
def test_unreadable_conversations_are_refused_with_the_position(messages: Any,
                                                                message: str) -> None:
    with pytest.raises(GuardInputError, match=message):
        judge_conversation(messages, AIRLINE)


# --- claims: what time they speak of ----------------------------------------------------
@pytest.mark.parametrize(("text", "kind", "when"), [
    ("I've cancelled your reservation.", "write", DONE),
    ("Your reservation has been cancelled.", "write", DONE),
    ("I double-checked your account.", "read", DONE),
    ("- **Checked bags:** 2 bags added to your reservation", "write", DONE),
    ("Upon reviewing the details again, it shows one passenger.", "read", DONE),
    ("I'm updating your booking now.", "write", NOW),
    ("Let me check the flights for you.", "read", NOW),
    ("Please hold on while I look that up.", "read", NOW),
    ("I'll proceed with the cancellation now.", "write", NOW),
    ("Still working on it.", "write", NOW),
    # The shapes other models report in: a check mark, the work's noun, "as requested",
    # "transferred" (its doubled consonant), a run.
    ("✅ Order #W123 cancelled.", "write", DONE),
    ("The cancellation went through.", "write", DONE),
    ("I have cancelled the order as requested.", "write", DONE),
    ("I've transferred you to a human agent.", "write", DONE),
    ("I ran the test suite.", "write", DONE),
    ("Let me run the tests.", "write", NOW),
    # A result credited to a lookup claims the lookup.
    ("According to our records, your order shipped on May 2.", "read", DONE),
    ("Based on my search, the lamp comes in blue.", "read", DONE),
    ("My search shows the blue lamp in stock.", "read", DONE),
    ("Looking at your order, it shipped on May 2.", "read", DONE),
    # "'s been" is "has been"; "taken care of" is work done by whatever write fits.
    ("Your reservation's been cancelled.", "write", DONE),
    ("It’s been updated.", "write", DONE),
    ("I've taken care of the refund.", "write", DONE),
    ("That has been taken care of.", "write", DONE),
    ("I'm taking care of it now.", "write", NOW),
])
def test_claims_of_work_done_or_under_way(text: str, kind: str, when: str) -> None:
    (claim,) = find_claims(text)
    assert (claim.kind, claim.time) == (kind, when)


@pytest.mark.parametrize(("text", "verb", "when"), [
    # Patterns whose starts are found in the lower-cased reply: any space after "I" or
    # "we", and letters that a case-insensitive pattern takes for others ("ı" for "i").
    ("I've run the tests.", "run", DONE),
    ("I\thave run the tests.", "run", DONE),
    ("WE HAVE RUN THE TESTS.", "run", DONE),
    ("ı've run the tests.", "run", DONE),
    ("Let me\u00a0run the tests.", "run", NOW),
    ("I’ve called the search_flights tool.", "invoke", DONE),
    ("The cancellation went through.", "cancel", DONE),
    ("The cancellation request has been completed.", "cancel", DONE),
    ("Sure, still working on the fix.", "working", NOW),
    ("Beginning the refactor of the parser now.", "beginning", NOW),
    # Patterns that need a whole word ("now", not the one in "know").
    ("Updating your reservation now.", "update", NOW),
    ("The payment was now processed.", "process", DONE),
    ("My check confirmed the refund.", "check", DONE),
    # "ſearch" is "search" to the pattern; the lower-cased text holds it only in "research".
    ("We did some research. The ſearch shows two flights.", "check", DONE),
])
def test_claims_whose_start_is_looked_for_before_the_pattern_runs(text: str, verb: str,
                                                                   when: str) -> None:
    (claim,) = find_claims(text)
    assert (claim.verb, claim.time) == (verb, when)


def test_the_letters_lower_casing_hides_from_start_finders_are_the_known_ones() -> None:
    # Start finders read the lower-cased reply case-sensitively, which finds every start
    # of a case-insensitive pattern only where each character the pattern takes for a
    # letter lower-cases to that letter. Replies with the exceptions are not read so.
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    taken = {c for letter in string.ascii_lowercase
             for c in re.findall(f"[{letter}]", every, re.IGNORECASE) if c.lower() != letter}
    two_characters = {c for c in taken if len(c.lower()) > 1}  # no offsets: never read so
    assert taken - two_characters == set(_UNLOWERED_LETTERS)


def test_lower_casing_makes_no_word_character_of_another() -> None:
    # A pattern's whole word stays one in the lower-cased reply (the needed-words test
    # relies on it): no character outside \w lower-cases to one inside it.
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    outside = re.sub(r"\w", "", every)
    assert re.search(r"\w", outside.lower()) is None


@pytest.mark.parametrize("text", [
    # Offers and conditions on the user, placed before or after the verb.
    "I can update the reservation for you.",
    "Once you confirm, I'll update the reservation.",
    "Please confirm the details above, and I'll update your booking.",
    "If you'd like, I can check other dates.",
    # A plan followed by a question or a request to the user.
    "I'll search for flights. Could you tell me the date?",
    "I will proceed with the cancellation. Please confirm (yes) to continue.",
    # Negations, possibility, reports of a state, the policy, text in this reply.
    "I haven't cancelled anything yet.",
    "The flight might have been booked under another user ID.",
    "I'm glad to hear that roaming is now enabled.",
    "I will check your eligibility based on our policy.",
    "Let me review the details: the flight leaves at 9am.",
    "I've rewritten the function below:",
    # Quoted words are not said.
    'You wrote "I have cancelled it".',
    # A record's status, a clause of time, the idioms of "run".
    "- Status: cancelled",
    "I can't add insurance after the booking has been completed.",
    "I'm running Claude through OpenRouter.",
    "We ran out of seats on that flight.",
    "According to our policy, basic economy cannot be changed.",
    # "'s been" with no participle after it, and taking care of it on a condition.
    "It's been more than 24 hours since the booking was made.",
    "It's been a pleasure helping you today.",
    "Please confirm, and I'll take care of it for you.",
])
def test_offers_conditions_and_reports_are_not_claims(text: str) -> None:
    assert find_claims(text) == []


def test_a_stalled_intent_is_a_claim_and_a_later_call_in_the_turn_backs_it() -> None:
    stalled = [user("Any flights to SEA on May 20?"), said("Let me check the flights for you."),
               user("Hello?")]
    assert tiers_of(stalled, index=1) == (READ,)
    backed = [user("Any flights to SEA on May 20?"), said("Let me check the flights for you."),
              called("search_direct_flight"), result("search_direct_flight", "[]"),
              said("There are no direct flights that day.")]
    assert tiers_of(backed, index=1) == ()


def test_a_transfer_announced_but_never_made_is_an_action_claim() -> None:
    messages = [user("I want a human."), said("Let me initiate that transfer for you.")]
    assert tiers_of(messages) == (ACTION,)
    messages[-1] = said("Let me initiate that transfer for you.", "transfer_to_human_agents")
    assert tiers_of(messages) == ()


def test_a_check_joined_to_a_write_is_part_of_the_write() -> None:
    # tau2 telecom: "I'll check and enable it now." with the enable call in the message.
    tools = [tool("enable_roaming"), tool("get_details_by_id")]
    messages = [user("Roaming still fails."),
                said("I'll check and enable it now.", "enable_roaming")]
    assert tiers_of(messages, tools) == ()
    # Without the call both joined verbs are claims of work that did not happen.
    messages[-1] = said("I'll check and enable it now.")
    assert tiers_of(messages, tools) == (ACTION, READ)


@pytest.mark.parametrize("reply", [
    "According to our records, your order shipped on May 2.",
    # A record's state as seen or confirmed (tau2 grok-3 says both, after its lookups).
    "I can see that your order shipped on May 2.",
    "I see that the order associated with your account shipped on May 2.",
    "I've confirmed that your order shipped on May 2.",
])
def test_a_result_credited_to_a_lookup_needs_the_lookup(reply: str) -> None:
    assert tiers_of([user("Has my order shipped?"), said(reply)]) == (READ,)
    assert tiers_of([user("Has my order shipped?"), called("get_reservation_details"),
                     result("get_reservation_details", {"status": "shipped"}),
                     said(reply)]) == ()


@pytest.mark.parametrize("reply", ["I see what you mean.", "I see, thanks for explaining.",
                                   "Let me know once I can see the plan you mean."])
def test_seeing_what_the_user_means_is_no_lookup(reply: str) -> None:
    assert tiers_of([user("The order is late."), said(reply)]) == ()


def test_a_true_report_of_an_earlier_turn_is_not_a_fabrication() -> None:
    messages = [user("Find my bookings."), called("get_user_details"),
                result("get_user_details", {"reservations": ["ABC123"]}), said("Found one."),
                user("Is that all?"),
                said("I've already checked your reservations, and ABC123 is the only one.")]
    assert tiers_of(messages) == ()
    # A claimed fresh check needs a read in this very turn.
    messages[-1] = said("I've double-checked your reservations again: ABC123 is the only one.")
    assert tiers_of(messages) == (READ,)


# --- claims: which tool backs them -------------------------------------------------------
def test_a_write_of_another_tool_does_not_back_a_claim_about_a_named_one() -> None:
    turn = [user("Change my flight and add a bag."),
            called("update_reservation_flights"), result("update_reservation_flights", "{}")]
    assert tiers_of([*turn, said("One checked bag has been added to your reservation.")]) == (
        ACTION,)
    assert tiers_of([*turn, said("Your flight has been updated.")]) == ()
    assert tiers_of([*turn, said("Your reservation has been rebooked on the new flight.")]) == ()


def test_a_write_backs_a_claim_that_names_none_of_the_catalog() -> None:
    # Words that match no tool ("refund", "processed") cannot single one out.
    messages = [user("Cancel it."), called("cancel_reservation"),
                result("cancel_reservation", {"status": "cancelled"}),
                said("Your refund has been processed.")]
    assert tiers_of(messages) == ()
    # "Taken care of" names no work of its own: the write that ran backs it, and with
    # none in the turn it is the claim of an action no tool took.
    messages[-1] = said("That's been taken care of.")
    assert tiers_of(messages) == ()
    assert tiers_of([user("Cancel it."), said("That's been taken care of.")]) == (ACTION,)


def test_read_claims_are_backed_by_any_read() -> None:
    # Reservation ids come from the user's record: a read claim names what it found, not
    # the tool that found it.
    messages = [user("What are my bookings?"), called("get_user_details"),
                result("get_user_details", {"reservations": ["ABC123", "XYZ789"]}),
                said("I found two reservations under your profile: ABC123 and XYZ789.")]
    assert tiers_of(messages) == ()


def test_reasoning_tools_back_a_review_but_not_a_lookup() -> None:
    base = [user("Which option is cheapest?"), called("calculate"),
            result("calculate", "255")]
    assert tiers_of([*base, said("I'll review the options and compare them.")]) == ()
    assert tiers_of([*base, said("I'll check the available flights again.")]) == (READ,)


@pytest.mark.parametrize(("name", "description", "kinds"), [
    ("update_reservation_flights", "", {"write"}),
    ("get_reservation_details", "", {"read"}),
    ("mcp__github__create_issue", "", {"write"}),
    ("str_replace_based_edit_tool", "", {"write"}),
    ("search_dir", "", {"read"}),
    ("bash", "", {"read", "write"}),
    ("functions.python", "", {"read", "write"}),
    ("calculate", "", set()),
    ("reservation_lookup", "", {"read"}),
    ("decompile", "Prints the decompilation of a function.", None),
    ("foo", "Retrieves the customer's bills.", {"read"}),
    ("foo", "Cancel the whole reservation.", {"write"}),
    ("exchange_delivered_order_items", "", {"write"}),
    ("activate_line", "", {"write"}),
    ("purchase_insurance", "", {"write"}),
    ("browser_navigate", "", {"read"}),
    ("validate_address", "", {"read"}),
    # "return" is a function's word too ("the search returned 3 flights"): no kind.
    ("return_delivered_order_items", "", None),
])
def test_tool_kinds_come_from_names_and_descriptions(name: str, description: str,
                                                     kinds: set[str] | None) -> None:
    found = kind_from_text(name, description)
    assert (None if found is None else set(found)) == kinds


def test_declared_kinds_and_overrides_win_over_names() -> None:
    mcp_tool = SimpleNamespace(name="delete_everything", description="",
                               inputSchema={"type": "object"},
                               annotations=SimpleNamespace(readOnlyHint=True,
                                                           destructiveHint=None))
    messages = [user("Any news?"), said("Let me look up the latest.", "delete_everything")]
    assert tiers_of(messages, tools=[mcp_tool]) == ()
    messages[-1] = said("I've updated it.", "get_status")
    assert tiers_of(messages, tools=[tool("get_status", kind="write")]) == ()
    detector = ConversationDetector(tool_kinds={"get_status": "read"})
    (verdict,) = detector.judge(messages, [tool("get_status", kind="write")])
    assert verdict.tiers == (ACTION,)
    with pytest.raises(GuardInputError, match="tool kind for 'x'"):
        ToolKinds.from_catalog((), {"x": "sometimes"})


# An editor and a shell in Anthropic's shape, as coding agents hold them.
CODING = [
    {"name": "str_replace_based_edit_tool", "description": "View, create and edit files.",
     "input_schema": {"type": "object"}},
    {"name": "bash", "description": "Run commands in a bash shell.",
     "input_schema": {"type": "object"}},
]


def _coding_turn(reply: str, *calls: tuple[str, dict[str, Any]]) -> tuple:
    messages: list[dict[str, Any]] = [user("parse_date fails on empty strings; fix it.")]
    for i, (name, arguments) in enumerate(calls):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{i}", "name": name, "input": arguments}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": reply}]})
    return tiers_of(messages, CODING)


VIEW = ("str_replace_based_edit_tool", {"command": "view", "path": "utils.py"})
EDIT = ("str_replace_based_edit_tool", {"command": "str_replace", "path": "utils.py",
                                        "old_str": "a", "new_str": "b"})


def test_what_a_call_did_comes_from_its_command() -> None:
    # The editor writes, but a call that only viewed backs no fix.
    assert _coding_turn("I've fixed parse_date.", VIEW) == (ACTION,)
    assert _coding_turn("I've fixed parse_date.", VIEW, EDIT) == ()
    # A shell that only searched did no edit; one that ran a script may have.
    assert _coding_turn("I've fixed parse_date.", ("bash", {"command": "grep -rn x ."})) == (
        ACTION,)
    assert _coding_turn("I've fixed parse_date.", ("bash", {"command": "python fix.py"})) == ()


def test_a_run_is_backed_by_a_runner_not_by_an_edit() -> None:
    assert _coding_turn("I've updated it and I ran the tests: all pass.", VIEW, EDIT) == (
        ACTION,)
    assert _coding_turn("I ran the tests: all pass.", EDIT,
                        ("bash", {"command": "pytest -q"})) == ()
    # A tool named for what was run backs the run.
    messages = [user("Flights to Paris?"), called("search_direct_flight"),
                result("search_direct_flight", []), said("I ran a search: nothing direct.")]
    assert tiers_of(messages) == ()


def test_a_run_said_beside_an_edit_needs_a_runner() -> None:
    # "and ran": a done verb coordinated with a backed one is a claim of its own.
    ran = "I fixed the bug in utils.py and ran the test suite: all tests pass."
    # ... and the outcome of the run no one made is an invented result
    # (tests/unit/test_run_outcomes.py).
    assert _coding_turn(ran, EDIT) == (ACTION, UNGROUNDED)
    assert _coding_turn(ran, EDIT, ("bash", {"command": "pytest -q"})) == ()
    # "Running the tests now" and the turn ends: a run that never started.
    assert _coding_turn("Running the tests now.", EDIT) == (ACTION,)
    # "to confirm the fix" is the run's purpose, not a request to the user.
    assert _coding_turn("Running the tests now to confirm the fix.", EDIT) == (ACTION,)
    assert _coding_turn("I'll update it once you confirm the new date.", EDIT) == ()
    assert _coding_turn("Running the tests now.", EDIT, ("bash", {"command": "pytest -q"})
                        ) == ()
    # A coordinated verb with its own subject, or denied, is no claim of the reporter's.
    assert _coding_turn("I fixed the bug and you can run the tests.", EDIT) == ()
    assert _coding_turn("I fixed the bug, and have not run the tests yet.", EDIT) == ()


def test_a_declared_kind_wins_over_the_command() -> None:
    declared = [dict(CODING[0], annotations={"readOnlyHint": False})]
    assert _coding_turn("I've fixed parse_date.", VIEW) == (ACTION,)
    messages: list[dict[str, Any]] = [
        user("Fix it."),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t0",
                                           "name": "str_replace_based_edit_tool",
                                           "input": {"command": "view"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0",
                                      "content": "ok"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I've fixed it."}]}]
    assert tiers_of(messages, declared) == ()


@pytest.mark.parametrize(("command", "kinds"), [
    ("view", {"read"}), ("str_replace", {"write"}), ("undo_edit", {"write"}),
    ("grep -rn parse_date .", {"read"}), ("/usr/bin/find . -name x", {"read"}),
    ("python3 reproduce.py", {"read", "write"}), ("submit", {"write"}),
    # The program's name tells nothing: the tool's own kind stands.
    ("git log --oneline", None), ("cat utils.py", None), ("", None),
])
def test_command_kind(command: str, kinds: set[str] | None) -> None:
    found = command_kind(command)
    assert (None if found is None else set(found)) == kinds


# --- tool calls typed as text ------------------------------------------------------------
@pytest.mark.parametrize("text", [
    'I will cancel it now.\n{"name": "cancel_reservation", "arguments": {"reservation_id": "A1"}}',
    '```json\n{"tool": "cancel_reservation", "parameters": {"reservation_id": "A1"}}\n```',
    '<tool_call>{"name": "cancel_reservation", "arguments": {}}</tool_call>',
    '<function=cancel_reservation>{"reservation_id": "A1"}</function>',
    'Action: cancel_reservation\nAction Input: {"reservation_id": "A1"}',
    "cancel_reservation(reservation_id='A1')",
    "Sure.\n[cancel_reservation(reservation_id=\"A1\")]",
    '{"cancel_reservation": {"reservation_id": "A1"}}',
    '<invoke name="functions.cancel_reservation"><parameter name="id">A1</parameter></invoke>',
    # Shapes public bug reports show models printing instead of calling (llama.cpp #14697,
    # native_tool_call_adapter #3), in our catalog's words.
    '{\n  "tool_calls": [\n    {\n      "name": "cancel_reservation",\n      "arguments": '
    '{"reservation_id": "A1"},\n      "id": "162875335"\n    }\n  ]\n}',
    'Tool: cancel_reservation\nreservation_id: "A1"',
    '{\n"name": "cancel_reservation",\n"arguments": "{\\"reservation_id\\": \\"A1\\"}"\n}',
    # The formats models are trained to emit, typed into the reply: Gemini's tool code,
    # Phi's and GLM's wrappers with the bare name, a tag named after the tool, harmony.
    'print(default_api.cancel_reservation(reservation_id="A1"))',
    '<|tool_call|>cancel_reservation\n{"reservation_id": "A1"}',
    '<tool_call>cancel_reservation\n<arg_key>reservation_id</arg_key>\n'
    '<arg_value>A1</arg_value>\n</tool_call>',
    '<cancel_reservation>\n<reservation_id>A1</reservation_id>\n</cancel_reservation>',
    'to=functions.cancel_reservation json\n{"reservation_id": "A1"}',
    # Special tokens before the name: DeepSeek V3/R1 and V3.1 (also as detokenised to
    # ASCII), Kimi K2, Mistral's v11 tokenizer, Functionary v2 and v3.
    '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>cancel_reservation\n'
    '```json\n{"reservation_id": "A1"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>cancel_reservation<｜tool▁sep｜>'
    '{"reservation_id": "A1"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    '<|tool_call_begin|>function<|tool_sep|>cancel_reservation\n```json\n{}\n```',
    '<|tool_calls_section_begin|><|tool_call_begin|>functions.cancel_reservation:0'
    '<|tool_call_argument_begin|>{"reservation_id": "A1"}<|tool_call_end|>',
    '[TOOL_CALLS]cancel_reservation[ARGS]{"reservation_id": "A1"}',
    '<|from|>assistant\n<|recipient|>cancel_reservation\n<|content|>{"reservation_id": "A1"}',
    'Cancelling now.\n>>>cancel_reservation\n{"reservation_id": "A1"}',
])
def test_a_tool_call_written_as_text_fires(text: str) -> None:
    assert TEXT_CALL in tiers_of([user("Cancel A1."), said(text)])


@pytest.mark.parametrize("text", [
    # Naming a tool in prose, or a call the same message really made.
    "I used `cancel_reservation` to cancel it.",
    "To cancel, I call cancel_reservation(reservation_id=...) once you confirm.",
    # A tool the agent does not have (the user's phone tools), or JSON that names none.
    "Please run `toggle_roaming()` on your phone.",
    '{"status": "cancelled", "reservation_id": "A1"}',
    # A tag named after a tool that never closes is a mention, and print() of anything
    # but a catalog tool is code.
    "The <cancel_reservation> step comes after you confirm.",
    'print(default_api.toggle_roaming(on=True))',
    # A Python prompt, and special tokens named in prose, are not calls.
    '>>> cancel_reservation\nNameError: name is not defined',
    "Kimi starts each call with <|tool_call_begin|> and the tool's name.",
])
def test_prose_and_foreign_tools_are_not_text_calls(text: str) -> None:
    assert TEXT_CALL not in tiers_of([user("Cancel A1."), said(text)])
    typed = '{"name": "cancel_reservation", "arguments": {}}'
    assert TEXT_CALL not in tiers_of([user("Cancel A1."), said(typed, "cancel_reservation")])


def test_a_call_in_two_shapes_is_one_finding_shown_from_its_start() -> None:
    # JSON inside a <tool_call> tag reads as a tag and as JSON: one call, one excerpt.
    text = 'On it.\n<tool_call>\n{"name": "cancel_reservation", "arguments": {}}\n</tool_call>'
    verdict = judge_conversation([user("Cancel A1."), said(text)], AIRLINE)[-1]
    finding = next(f for f in verdict.findings if f.tier == TEXT_CALL)
    assert finding.evidence == '<tool_call> {"name": "cancel_reservation", "arguments": {}} ' \
                               "</tool_call>"
    # Two calls of one tool far apart are both shown.
    two = ('{"name": "cancel_reservation", "arguments": {"id": "A1"}}' + " then" * 30
           + ' <tool_call>{"name": "cancel_reservation", "arguments": {"id": "B2"}}</tool_call>')
    found = find_text_tool_calls(two, {"cancel_reservation"})
    assert [c.shape for c in found] == ["json", "tag"]


# --- values with no source ---------------------------------------------------------------
def _booked(reply: str) -> tuple:
    return tiers_of([
        {"role": "system", "content": "Each extra bag costs $50."},
        user("Book HAT136 for me and my son, user mia_li_3668."),
        called("book_reservation"),
        result("book_reservation", {"reservation_id": "HATHAT", "flights": [
            {"flight_number": "HAT136", "price": 152}, {"flight_number": "HAT039",
                                                        "price": 103}],
            "payment_history": [{"payment_id": "credit_card_4421486", "amount": 510}],
            "departure": "19:00:00"}),
        said(reply)])


@pytest.mark.parametrize("reply", [
    "Booked! Your reservation ID is HATHAT, paid with credit_card_4421486.",
    "The fares are $152 and $103, $255 per passenger; $510 has been charged in total.",
    "The refund of $255 per passenger will follow; an extra bag is $50. It departs at 7:00 PM.",
    # An estimate needs only an amount it rounds; a long number the result gave is seen.
    "That is about $150 per seat, card 4421486 on file.",
])
def test_values_from_results_users_and_the_policy_are_grounded(reply: str) -> None:
    assert _booked(reply) == ()


@pytest.mark.parametrize(("reply", "value"), [
    ("Your confirmation number is ZX81QP.", "ZX81QP"),
    ("The total came to $1,818 for both of you.", "$1,818"),
    ("It departs at 11:45 AM.", "11:45 AM"),
    ("$300 has been charged to your card.", "$300"),  # the result charged 510
    # A run of 8 digits or more is an id (order, item, tracking number), and an estimate
    # still needs an amount near it.
    ("Your tracking number is 843102937199.", "843102937199"),
    ("That comes to about $900.", "$900"),
])
def test_values_no_source_gave_are_ungrounded(reply: str, value: str) -> None:
    assert _booked(reply) == (UNGROUNDED,)
    (verdict,) = list(judge_conversation([user("x"), said(reply)], AIRLINE))
    assert value in (verdict.evidence(UNGROUNDED) or value)


def test_a_date_or_a_clock_time_grounds_no_amount() -> None:
    # "2024-05-20" and "19:00:00" hold no amount: $20 or $19 read off them, or a total
    # made with one ($260 = 240 + the 20 of the date), has no source.
    messages = [user("What do I owe?"), called("get_reservation_details"),
                result("get_reservation_details", {
                    "flights": [{"price": 120, "date": "2024-05-20", "departure": "19:00:00"}],
                    "total": 240})]
    assert tiers_of([*messages, said("Your total is $240, $360 with the new flight.")]) == ()
    for made_up in ("$260", "$20", "$19"):
        assert tiers_of([*messages, said(f"Your total is {made_up}.")]) == (UNGROUNDED,), made_up


def test_a_refund_reported_as_a_charge_is_misreported() -> None:
    messages = [user("Downgrade me."), called("update_reservation_flights"),
                result("update_reservation_flights",
                       {"payment_history": [{"payment_id": "gc_1", "amount": -114}]})]
    assert tiers_of([*messages, said("A refund of $114 has been credited to your card.")]) == ()
    assert tiers_of([*messages, said("The additional cost of $114 has been charged.")]) == (
        UNGROUNDED,)


def test_the_list_a_write_report_introduces_is_part_of_the_report() -> None:
    # "...updated with the following details:" and then the list: the total stated there
    # is the write's outcome; a payment method's balance listed beside it is not. The $897
    # was the agent's own estimate before the write, so only the write's result can say
    # it is wrong.
    messages = [user("Upgrade me if it costs less than $1,000. My gift card holds $500."),
                called("calculate"), result("calculate", "897.0"),
                said("The upgrade would cost $897. Shall I go ahead?"), user("Yes."),
                called("update_reservation_flights"),
                result("update_reservation_flights", {
                    "flights": [{"flight_number": "HAT286"}, {"flight_number": "HAT047"}],
                    "payment_history": [{"payment_id": "credit_card_7434610",
                                         "amount": 1815}]})]
    report = ("Your reservation has been successfully updated with the following details:"
              "\n\n- **Flights:** HAT286, HAT047\n- **Total Additional Cost:** {total}\n"
              "- **Payment Method:** Gift card (balance $500)")
    assert tiers_of([*messages, said(report.format(total="$897"))]) == (UNGROUNDED,)
    assert tiers_of([*messages, said(report.format(total="$1,815"))]) == ()
    # A list that no report introduced is not checked as an outcome.
    assert tiers_of([*messages, said("Here is what I can offer:\n\n- **Total Cost:** "
                                     "$1,815\n- **Balance:** $500")]) == ()


def test_result_amounts_read_json_keys_and_prose() -> None:
    assert result_amounts('{"price": 12, "seats": 4, "payment_history": '
                          '[{"amount": -3.5}]}') == [12.0, -3.5]
    assert result_amounts("Error: total price is 1,002, but paid 955") == [1002.0, 955.0]


# --- loops -------------------------------------------------------------------------------
ASK = "To modify your flight I need your reservation ID. Could you please provide it?"


def test_the_same_request_again_with_nothing_new_is_a_loop() -> None:
    messages = [user("Change my flight."), said(ASK), user("I don't have it with me."),
                said("I understand. I need the reservation ID to modify your flight; "
                     "please provide it when you can.")]
    assert tiers_of(messages) == (REPETITION,)
    (verdict,) = [v for v in judge_conversation(messages, AIRLINE) if v.msg_index == 3]
    assert verdict.repeats == 1 and verdict.similarity is not None


def test_progress_between_or_in_the_reply_is_not_a_loop() -> None:
    base = [user("Change my flight."), said(ASK), user("I don't have it.")]
    # Something new in the reply: a new way forward.
    assert tiers_of([*base, said(ASK + " Alternatively, I can look up all bookings under "
                                       "your user ID instead.")]) == ()
    # A new tool result between the two replies.
    assert tiers_of([*base, called("get_user_details"),
                     result("get_user_details", {"reservations": ["ABC123"]}),
                     said(ASK)]) == ()
    # The reply makes a call of its own.
    assert tiers_of([*base, said(ASK, "get_user_details")]) == ()


def test_a_new_way_forward_or_a_new_request_answered_is_not_a_loop() -> None:
    base = [user("Change my flight."), said(ASK), user("I don't remember the reservation ID.")]
    # Asking for less, with an offer to look the rest up (tau-bench t3r0 [4]).
    assert tiers_of([*base, said("No worries! Could you please provide your user ID? With "
                                 "that, I can look up your reservation details.")]) == ()
    # The user asks for something new; asking for the id it needs answers it.
    upgrade = [*base[:2], user("I also want to upgrade my seat to business class.")]
    assert tiers_of([*upgrade, said("To upgrade your seat to business class I need your "
                                    "reservation ID. Could you please provide it?")]) == ()
    # A refusal that echoes the user's words is still the same refusal.
    refused = "I'm unable to modify basic economy flights; the policy does not allow it."
    assert tiers_of([user("Change my flight."), said(refused),
                     user("But my flight is basic economy, can't you modify it anyway?"),
                     said("I'm sorry, but I'm unable to modify basic economy flights anyway; "
                          "the policy does not allow it.")]) == (REPETITION,)


def test_a_refusal_echoing_the_users_insistence_is_a_loop_but_one_answering_a_fact_is_not(
        ) -> None:
    refused = ("I'm sorry, but the policy does not allow adding travel insurance after the "
               "booking is made.")
    base = [user("Add insurance to my booking."), said(refused)]
    # tau-bench t36r0 [14]: the user insists; the reply words the same refusal with the
    # user's own words ("exception", "workaround").
    insisted = [*base, user("Isn't there any special exception or workaround you could "
                            "explore to resolve this?"),
                said("I understand, but the policy is strict: there are no exceptions or "
                     "workarounds for adding travel insurance after the booking is made.")]
    assert tiers_of(insisted) == (REPETITION,)
    # A new fact from the user, answered in the user's words: not the same refusal again.
    fact = [*base, user("My travel insurance was purchased separately through my bank."),
            said("Insurance purchased separately through a bank is not part of this "
                 "reservation, so the policy does not allow adding it.")]
    assert tiers_of(fact) == ()


def test_a_closing_is_not_news_and_a_new_question_answered_is_not_a_loop() -> None:
    base = [user("Change my flight."), said(ASK), user("I don't have it with me.")]
    # The same request with an agent's usual closing added is still the same request.
    assert tiers_of([*base, said("I need the reservation ID to modify your flight; please "
                                 "provide it. If you need further assistance with "
                                 "anything else, feel free to let me know.")]) == (REPETITION,)
    # tau-bench t9r0 [4]: the same refusal, about the new thing the user asked.
    gift = ("I'm unable to provide information about the balance of your gift cards. You "
            "may want to check your user profile.")
    assert tiers_of([user("What is my gift card balance?"), said(gift),
                     user("Could you then tell me the balance of my certificates?"),
                     said(gift.replace("gift cards", "certificates"))]) == ()
    # ... and asked in another form of the word ("certificate balances": every form of a
    # word meets its base, "certificates" included).
    assert tiers_of([user("What is my gift card balance?"), said(gift),
                     user("Could you then tell me the sum of my certificate balances?"),
                     said(gift.replace("gift cards", "certificates"))]) == ()


@pytest.mark.parametrize(("one", "other"), [
    ("update certificate", "updated certificates"),
    ("updating the change", "update changes"),
    ("policies applied", "policy apply"),
])
def test_every_form_of_a_word_meets_its_base(one: str, other: str) -> None:
    # What two replies share is counted in content words: a word's forms must be one.
    assert content_words(one) == content_words(other)


def test_the_same_refusal_word_for_word_answers_no_new_question() -> None:
    # tau-bench t15r3 [4]: the user asks the same thing in new words; the reply is the
    # earlier refusal with the user's verb swapped in. Picking up the user's word makes
    # an answer new only when the rest changed too.
    refusal = ("I'm sorry, but I cannot assist with {} a passenger from an existing "
               "reservation. You may need to contact a human agent for further assistance. "
               "Would you like me to transfer you to a human agent?")
    messages = [user("Hi, I need to cancel a passenger from my upcoming flights."),
                said(refusal.format("canceling")),
                user("Well, actually, I need to remove one passenger named Sophia from my "
                     "flights. Can you help with that?"),
                said(refusal.format("removing"))]
    assert tiers_of(messages) == (REPETITION,)
    # An answer that takes the new words up and changes more is an answer.
    assert tiers_of([*messages[:3], said(
        "Removing a passenger named Sophia needs a new booking for the others, which I "
        "cannot make for you. Would you like me to transfer you to a human agent?")]) == ()


def test_the_same_error_result_again_is_not_progress() -> None:
    error = "Error: flight HAT030 not available on date 2024-05-13"
    failed = "It seems flight HAT030 is not available on May 13. Shall I search alternatives?"
    messages = [user("Change to HAT030."), called("update_reservation_flights"),
                result("update_reservation_flights", error), said(failed),
                user("Try again."), called("update_reservation_flights"),
                result("update_reservation_flights", error), said(failed)]
    assert tiers_of(messages) == (REPETITION,)


def test_a_failed_call_tried_again_does_not_reset_the_loop() -> None:
    # tau-bench t13r0 [36]-[42]: the same update (one flight fewer) fails with the same
    # error, and the agent says the same thing again. A call is not progress; its result
    # is, and the same error is no new result.
    error = "Error: flight HAT030 not available on date 2024-05-13"
    failed = ("It seems there is still an issue with flight HAT030 on May 13. Would you "
              "like me to search for alternative flights for that segment?")
    trying = "Let's proceed with changing your flight to HAT052. I'll make the changes now."
    messages = [user("Change my flight to HAT052."),
                said(trying, ("update_reservation_flights", {"flights": ["HAT030", "HAT052",
                                                                        "HAT124"]})),
                result("update_reservation_flights", error), said(failed),
                user("Let's focus on the Atlanta segment."),
                said(trying, ("update_reservation_flights", {"flights": ["HAT030",
                                                                        "HAT052"]})),
                result("update_reservation_flights", error), said(failed)]
    assert tiers_of(messages) == (REPETITION,)
    # A reply making a call it had not made is not judged a loop itself ...
    assert tiers_of(messages, index=5) == ()
    # ... and a new result after it is progress.
    fixed = [*messages[:6], result("update_reservation_flights", {"status": "updated"}),
             said(failed)]
    assert tiers_of(fixed) == ()


def test_the_same_call_retried_in_the_same_words_is_a_loop() -> None:
    # tau-bench t13r0 [40]: after the update failed, the agent makes the same update with
    # the same words; its result is the same error. The call was made before, so it is
    # no new attempt.
    error = "Error: flight HAT030 not available on date 2024-05-13"
    trying = ("Let's proceed with changing your flight from Atlanta to Las Vegas to flight "
              "HAT052 on May 21, and upgrade to economy class. I'll make the changes now.")
    update = ("update_reservation_flights", {"flights": ["HAT030", "HAT052"], "cabin": "economy"})
    base = [user("Change my flight to HAT052."), said(None, update),  # type: ignore[arg-type]
            result("update_reservation_flights", error), said(trying, update),
            result("update_reservation_flights", error),  # the same error: nothing new
            said("It seems flight HAT030 is not available on May 13."),
            user("Let's focus on the Atlanta to Las Vegas segment.")]
    assert tiers_of([*base, said(trying, update)]) == (REPETITION,)
    # The same arguments written in another order are the same call.
    reordered = ("update_reservation_flights", {"cabin": "economy",
                                                "flights": ["HAT030", "HAT052"]})
    assert tiers_of([*base, said(trying, reordered)]) == (REPETITION,)
    # A call not made before is a new attempt, and other words are not a repeat.
    assert tiers_of([*base, said(trying, ("update_reservation_flights",
                                          {"flights": ["HAT052"]}))]) == ()
    assert tiers_of([*base, said("Let me retry the change to HAT052 with only that "
                                 "flight, leaving HAT030 out of it.", update)]) == ()


def test_the_call_that_just_failed_made_again_unchanged_is_a_loop() -> None:
    # SWE-agent pydicom-1458 [16]: the edit failed with a syntax error; the agent says it
    # will correct the syntax and sends the same edit. Whatever the words, the same call
    # after nothing changed can only return the same error.
    edit = ("edit", {"command": "edit 287:295\n    required = [\n    ]]\nend_of_edit"})
    error = ("Your proposed edit has introduced new syntax error(s). ERRORS: - E999 "
             "SyntaxError: unmatched ']'")
    base = [user("Fix the pixel handler."),
            said("Let me edit the check of required elements.", edit),
            result("edit", error)]
    retry = said("It seems there was a syntax error. I will correct the syntax and try the "
                 "edit command again.", edit)
    verdict = judge_conversation([*base, retry], None)[-1]
    assert verdict.tiers == (REPETITION,)
    assert verdict.repeats == 1 and verdict.similarity == 1.0
    assert verdict.findings[0].evidence.startswith("edit again after it failed: Your proposed")
    # The neighbours that are no loop: another edit, ...
    other = ("edit", {"command": "edit 287:295\n    required = [\n    ]\nend_of_edit"})
    assert tiers_of([*base, said(retry["content"], other)], None) == ()
    # ... the same call after a result that was no failure, ...
    assert tiers_of([*base[:2], result("edit", "File updated."), retry], None) == ()
    # ... or after a failure that may pass by itself, ...
    assert tiers_of([*base[:2], result("edit", "Error: request timed out, try again later"),
                     retry], None) == ()
    # ... and after the user spoke: they may have changed what made it fail.
    assert tiers_of([*base, user("I fixed the permissions, go ahead."), retry], None) == ()
    # A result its shape marks as an error failed, whatever its words (Anthropic's
    # is_error, the x-error of the dev data).
    marked = {**result("edit", "The edit was not applied."), "is_error": True}
    assert tiers_of([*base[:2], marked, retry], None) == (REPETITION,)
    # In Anthropic's shape: the result is a block of a user message, the calls tool_use.
    use = {"type": "tool_use", "id": "tu1", "name": "edit", "input": edit[1]}
    anthropic = [user("Fix the pixel handler."),
                 {"role": "assistant", "content": [{"type": "text", "text": "Editing."}, use]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                               "is_error": True, "content": "Not applied."}]},
                 {"role": "assistant", "content": [{"type": "text", "text": "Again."},
                                                   {**use, "id": "tu2"}]}]
    assert judge_conversation(anthropic, None)[-1].tiers == (REPETITION,)


def test_the_same_words_after_the_same_failure_loop_whatever_the_new_call() -> None:
    # SWE-agent BabyEncryption [20]: the edit fails; "Let me try again." with another
    # edit fails the same way; the same sentence again, now with an `open`. Nothing new
    # came back since the sentence was first said, and the words are the same.
    error = "Your proposed edit has introduced new syntax error(s). E999 IndentationError"
    again = ("The changes have not been applied correctly, because of wrong edit command. "
             "Let me try again.")
    base = [user("Decrypt msg.enc."),
            said("The flag is hex-encoded; let me read it as hex.", ("edit", {"c": "2:2"})),
            result("edit", error), said(again, ("edit", {"c": "2:2 decrypt.py"})),
            result("edit", error)]  # the same error: no new result
    assert tiers_of([*base, said(again, ("open", {"c": "decrypt.py"}))], None) == (
        REPETITION,)
    # Other words with the new call are a new attempt, ...
    assert tiers_of([*base, said("Let me open decrypt.py and look at its indentation "
                                 "before editing it again.", ("open", {"c": "decrypt.py"}))],
                    None) == ()
    # ... and so are the same words when the latest call did not fail, even if what it
    # returned was seen before.
    listing = "[File: decrypt.py (6 lines total)]"
    ok = [user("Decrypt msg.enc."), said("Let me look.", ("open", {"c": "decrypt.py"})),
          result("open", listing), said(again, ("edit", {"c": "2:2"})), result("edit", error),
          said(again, ("open", {"c": "decrypt.py"})), result("open", listing)]
    assert tiers_of([*ok, said(again, ("edit", {"c": "3:3 decrypt.py"}))], None) == ()


@pytest.mark.parametrize(("result_text", "failed"), [
    ("Error: flight HAT030 not available on date 2024-05-13", True),
    ("Speed test failed: No Connection.", True),
    ("Traceback (most recent call last):\n  File \"x.py\", line 5", True),
    ('{"error": "payment method not found"}', True),
    ('{"success": false, "reason": "locked"}', True),
    ("Script completed successfully, no errors.", False),
    ('{"flights": [], "status": "ok"}', False),
    ("Running the script...\nTraceback (most recent call last):\n  File", True),
    ("[File: handler.py (80 lines total)]\n1:try:\n2:    run()\n3:except Exception:", False),
    ("Warning: _curses.error: setupterm: could not find terminfo database", False),
    ("Error: upstream timed out (504)", False),  # may pass by itself
    ("HTTP 429 Too Many Requests: rate limit exceeded", False),
])
def test_a_tool_result_reports_a_failure_for_good(result_text: str, failed: bool) -> None:
    assert reports_failure(result_text) is failed


GOODBYE = "You're welcome! Feel free to reach out whenever you're ready. Have a great day!"


def test_a_goodbye_said_again_is_a_loop() -> None:
    # tau-bench t23r0 [44]-[46]: agent and user trade goodbyes with nothing new.
    base = [user("I'll find my user ID and get back to you. Thanks!"), said(GOODBYE),
            user("Thanks, you too! Talk soon.")]
    again = "Thank you! Looking forward to assisting you soon. Have a wonderful day!"
    assert tiers_of([*base, said(again)]) == (REPETITION,)
    (verdict,) = [v for v in judge_conversation([*base, said(again)], AIRLINE)
                  if v.msg_index == 3]
    assert verdict.repeats == 1
    # It shares few words with the first: the evidence says which rule matched.
    assert verdict.findings[0].evidence == "the same goodbye again: " + GOODBYE
    # The first goodbye is no loop.
    assert tiers_of(base[:2]) == ()
    # A question of the user's answered, or a new value, is something new.
    asked = [*base[:2], user("Thanks! Is the baggage allowance the same?")]
    assert tiers_of([*asked, said(again)]) == ()
    assert REPETITION not in tiers_of([*base, said("Your refund of $120 is on its way. "
                                                   "Have a wonderful day!")])
    # A goodbye after a reply that was not one (an answer, then thanks) is no repeat.
    answered = [user("Can I bring a pet?"), said("Pets travel in the cabin for $125 on "
                                                  "any flight under six hours."),
                user("Great, thanks!")]
    assert tiers_of([*answered, said(again)]) == ()


def test_the_same_request_pointing_to_where_to_find_it_is_a_loop() -> None:
    # tau-bench t9r1 [8]: the user has no reservation ID; the agent asks for it again and
    # says where it might be. The pointer is the request reworded, not a way forward.
    base = [user("Change my flight."), said(ASK),
            user("I don't have the reservation ID with me right now.")]
    again = ("To modify your reservation, I need the reservation ID. Please check your email "
             "or any other place where you might have stored it.")
    assert tiers_of([*base, said(again)]) == (REPETITION,)
    assert tiers_of([*base, said(again.replace("Please check your email",
                                               "You can find it in your booking "
                                               "confirmation"))]) == (REPETITION,)
    # Asking for something new, with a pointer to where it is, is a new request.
    assert tiers_of([*base, said("I will also need the passport number of each traveller; "
                                 "you can find it in your travel documents.")]) == ()
    # A place named in a sentence about something else points nowhere: new substance.
    done = "Your reservation has been cancelled as you asked."
    assert REPETITION not in tiers_of([
        user("Cancel my reservation."), said(done), user("When do I get the money back?"),
        said(done + " The refund will show up in your account within five to seven "
                    "business days.")])
    # Looking it up in the user's account is a way forward.
    assert tiers_of([*base, said("I need the reservation ID, but I can look it up in your "
                                 "account if you give me your user ID.")]) == ()


def test_the_same_transfer_offer_reworded_is_a_loop_and_the_first_offer_is_not() -> None:
    # tau-bench t48r3 [8]: the user's new plea meets the transfer already offered, in
    # other words.
    refused = ("Your reservation is in basic economy, which cannot be modified. If you need "
               "further assistance, I can transfer you to a human agent.")
    plea = user("I understand, but my wife passed away and I need to change the date. "
                "Can anything be done?")
    again = ("I'm truly sorry to hear about your loss. Given the circumstances, I recommend "
             "speaking with a human agent who may be able to assist you further. Would you "
             "like me to transfer you?")
    assert tiers_of([user("Change my flight date."), said(refused), plea, said(again)]
                    ) == (REPETITION,)
    verdict = judge_conversation([user("Change my flight date."), said(refused), plea,
                                  said(again)], AIRLINE)[-1]
    assert verdict.findings[0].evidence.startswith(
        "the same transfer offer again: Your reservation is in basic economy")
    assert tiers_of([user("Change my flight date."), said(refused), plea,
                     said("I'm so sorry for your loss. I can connect you with a specialist "
                          "who may be able to assist you further.")]) == (REPETITION,)
    assert tiers_of([user("Change my flight date."), said(refused), plea,
                     said("I'm so sorry for your loss. I can escalate your case to our "
                          "support team, who may be able to assist further.")]
                    ) == (REPETITION,)
    # The first offer of a person to take it on is a way forward (tau-bench t1r0 [8]: the
    # same refusal, and a human agent offered for the first time).
    first = [user("Change my flight date."),
             said("Your reservation is in basic economy, which cannot be modified."), plea]
    assert tiers_of([*first, said(again)]) == ()
    assert tiers_of([*first, said("I'm sorry, your reservation is in basic economy, which "
                                  "cannot be modified. I can transfer you to a human agent "
                                  "who may be able to help.")]) == ()
    # A transfer bound to a condition of policy is none offered: the first real offer
    # after it is a way forward (tau2 grok-3 airline s31).
    policy = ("I'm sorry, but the policy does not allow changing the passenger name. I can "
              "only transfer you to a human agent if the request is beyond my scope.")
    assert tiers_of([user("Change the passenger name."), said(policy),
                     user("Please, is there really nothing you can do?"),
                     said("I'm sorry, but the policy does not allow changing the passenger "
                          "name. I can transfer you to a human agent who may help.")]) == ()
    # Saying a person cannot help either is no transfer offer: a new fact.
    assert tiers_of([user("Change my flight date."), said(refused), plea,
                     said("I'm sorry for your loss. Basic economy cannot be modified, and "
                          "even a human agent would not be able to change it.")]) == ()


# --- the hook ----------------------------------------------------------------------------
def test_check_conversation_judges_the_last_reply_and_emits() -> None:
    messages = [user("Cancel ABC."), said("Your reservation ABC has been cancelled.")]
    with capture() as cap:
        verdict = FabricationGuard().check_conversation(messages, AIRLINE, request_id="r1",
                                                         channel="conv-1")
    assert verdict.tiers == (ACTION,) and verdict.msg_index == 1
    assert verdict.reply.startswith(messages[-1]["content"]) and "⚠️" in verdict.reply
    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert event.attributes[names.ATTR_TIER] == ACTION
    assert event.attributes[names.ATTR_CHANNEL] == "conv-1"
    (payload,) = cap.payloads
    assert '"msg_index": 1' in payload.body


@pytest.mark.expect_hook_errors
def test_check_conversation_never_raises() -> None:
    guard = FabricationGuard()
    with capture() as cap:
        verdict = guard.check_conversation([user("x"), {"role": "robot"},
                                            said("I've deployed it.")], AIRLINE)
    assert not verdict.flagged and verdict.reply == "I've deployed it."
    assert cap.counter_total(names.METRIC_HOOK_ERRORS) == 1
    assert guard.check_conversation([user("hi")], AIRLINE).reply == ""


# --- every pattern runs in time linear in its input -------------------------------------
_ADVERSARIAL = [
    "I'm " * 4000, "I have been " * 3000, "let me " * 4000, "$1," * 8000, "12:" * 8000,
    '{"name": "' * 3000, "<tool_call>" * 2000, "cancel_reservation(" * 2000,
    "- **a:** " * 3000, "A1" * 8000, "a" * 40000, "if you " * 4000, ". " * 12000,
    "`" * 20000, '"' * 20000, "Action: " * 4000, "123 " * 8000,
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" * 800, "[TOOL_CALLS]a " * 3000,
    ">>>a\n" * 6000, "I fixed it and ran " * 2000, "Running the tests " * 2000,
    "I can see that the " * 2000, "I've confirmed that " * 2000,
    "all tests pass " * 2000, "tests" + " " * 20000, "the script `a` " * 2000,
    "your account shows " * 2000, "from what I can see in your " * 1500,
    "I was able to " * 3000, "✅ Cancelled " * 3000, "\n✅ **Updated** :" * 2000,
    "I have made the " * 3000, "changes have been made " * 2000,
    "give me a moment to " * 2000, "I'm in the process of " * 2000,
    "it's been " * 3000, "'s been cancelled " * 2000, "taken care of " * 3000,
    "2024-05-20T12:30:00 $1 " * 2000, "12:30:00:" * 3000,
]
# Units for the loop rules, which read a reply only beside an earlier one.
_ADVERSARIAL_LOOPS = [
    "in your " * 4000, "check the a b " * 3000, "in your " + "a" * 40000 + " email",
    "transfer you " * 3000, "speaking with " * 3000, "contact a human " * 3000,
    "escalate your " * 3000, "hand you over " * 3000,
    "I need the ID. Check your email. " * 1000, "I can transfer you to a human agent. " * 800,
]


def _assert_linear(conversation: Callable[[str], list[dict[str, Any]]], unit: str) -> None:
    # Four times the input must take about four times as long: quadratic work would take
    # sixteen. Best of three per size keeps a busy machine from deciding.
    def seconds(text: str) -> float:
        messages = conversation(text)
        return min(cpu_seconds(lambda: judge_conversation(messages, AIRLINE))
                   for _ in range(3))
    small, large = seconds(unit), seconds(unit * 4)
    assert large < 10 * max(small, 0.002), (small, large)


@pytest.mark.parametrize("unit", _ADVERSARIAL, ids=range(len(_ADVERSARIAL)))
def test_adversarial_input_costs_time_linear_in_its_size(unit: str) -> None:
    _assert_linear(lambda text: [user(text), said(text)], unit)


@pytest.mark.parametrize("unit", _ADVERSARIAL_LOOPS, ids=range(len(_ADVERSARIAL_LOOPS)))
def test_adversarial_replies_cost_the_loop_rules_time_linear_in_their_size(unit: str) -> None:
    _assert_linear(lambda text: [user("Change my flight."), said(text),
                                 user("Is there any other way?"), said(text + " Please.")],
                   unit)


def test_typed_calls_of_many_names_cost_time_linear_in_their_number() -> None:
    # With no catalog every name counts: a reply of thousands of distinct typed calls
    # must not compare each with all found before it.
    def typed(count: int) -> str:
        return "".join(f'{{"name": "tool_{i}", "arguments": {{}}}} ' for i in range(count))
    small, large = typed(2000), typed(8000)
    small_s = min(cpu_seconds(lambda: find_text_tool_calls(small, ())) for _ in range(3))
    large_s = min(cpu_seconds(lambda: find_text_tool_calls(large, ())) for _ in range(3))
    assert large_s < 10 * max(small_s, 0.002), (small_s, large_s)
    assert len(find_text_tool_calls(small, ())) == 2000


def test_a_tool_list_is_read_once_per_object_and_again_when_it_changes() -> None:
    detector = ConversationDetector()
    tools = [tool("cancel_reservation")]
    messages = [user("Cancel it."), said("I've cancelled it.", "cancel_reservation")]
    assert detector.judge(messages, tools)[0].tiers == ()
    assert detector.judge(messages, tools)[0].tiers == ()  # the cached reading
    tools.append(tool("book_reservation"))  # the same list, grown: read again
    messages[-1] = said("I've booked it.", "book_reservation")
    assert detector.judge(messages, tools)[0].tiers == ()
    assert detector.judge(messages, [tool("cancel_reservation")])[0].tiers == (ACTION,)


def _steps(count: int) -> list[dict[str, Any]]:
    # One long turn, as a coding agent's run is: a claim, a call and a result per step.
    messages = [user("Fix the failing test.")]
    for i in range(count):
        messages += [said(f"Let me update line {i} of app.py.", ("update_reservation_flights",
                                                                   {"line": i})),
                     result("update_reservation_flights", {"line": i, "price": i})]
    return messages


def test_a_long_conversation_costs_time_linear_in_its_length() -> None:
    # 8x the steps: linear costs about 8x, quadratic 64x. The bound sits between, far
    # from both, so a loaded shared machine (best of 5) does not turn it red.
    small, large = _steps(250), _steps(2000)
    best = [min(_timed(lambda m=m: judge_conversation(m, AIRLINE)) for _ in range(5))
            for m in (small, large)]
    assert best[1] < 24 * max(best[0], 0.002), best


def test_run_outcomes_in_one_long_turn_cost_time_linear_in_its_length() -> None:
    # A coding agent's run is one turn; each reply reporting an outcome reads the calls
    # before it, a bounded window of them, not the whole turn again.
    def steps(count: int) -> list[dict[str, Any]]:
        messages = [user("Fix the failing tests.")]
        for i in range(count):
            messages += [said(f"Step {i} done and all tests pass.",
                              ("update_reservation_flights", {"line": i})),
                         result("update_reservation_flights", {"line": i})]
        return messages
    small, large = steps(150), steps(1200)
    best = [min(_timed(lambda m=m: judge_conversation(m, AIRLINE)) for _ in range(3))
            for m in (small, large)]
    assert best[1] < 24 * max(best[0], 0.002), best


def _same_result_steps(count: int) -> list[dict[str, Any]]:
    # Every edit answered "OK": no result is new, so no result ends the replies a later
    # one may repeat; nor does a chat with no tools at all.
    messages = [user("Fix the failing test.")]
    for i in range(count):
        messages += [said(f"Editing line {i} of app.py to call the helper {i} instead.",
                          ("update_reservation_flights", {"line": i})),
                     result("update_reservation_flights", "OK"),
                     said(f"Line {i} of app.py now calls helper {i}; moving on."),
                     user(f"Go on with line {i + 1}.")]
    return messages


def test_replies_with_no_new_result_between_cost_time_linear_in_their_number() -> None:
    small, large = _same_result_steps(100), _same_result_steps(800)
    best = [min(_timed(lambda m=m: judge_conversation(m, AIRLINE)) for _ in range(5))
            for m in (small, large)]
    assert best[1] < 24 * max(best[0], 0.002), best


def _timed(call: Any) -> float:
    return cpu_seconds(call)


def test_the_result_of_a_call_that_never_ran_is_no_write_outcome() -> None:
    # A name the catalog lacks never ran: whatever came back is no write's result, so a
    # refund in it does not make "$114 charged" a misreported outcome.
    refund = {"payment_history": [{"payment_id": "gc_1", "amount": -114}]}
    reply = said("The additional cost of $114 has been charged.")
    ran = [user("Downgrade me."), called("update_reservation_flights"),
           result("update_reservation_flights", refund), reply]
    assert tiers_of(ran) == (UNGROUNDED,)
    never_ran = [user("Downgrade me."), called("update_booking_v2"),
                 result("update_booking_v2", refund), reply]
    # (The claim of a charge with no write behind it is an action claim, as it should be.)
    assert tiers_of(never_ran) == (ACTION,)
