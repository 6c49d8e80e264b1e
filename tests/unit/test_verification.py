"""Forced verification (guard family 3): criticality gate, budget, nudge loop, telemetry."""

from __future__ import annotations

import json
import logging

import pytest

from guardtrace.collectors.criticality import (
    DEFAULT_PATTERNS,
    NOT_REQUIRED,
    CriticalityGate,
    CriticalityPattern,
    ReasoningDepth,
    default_gate,
    scan_question_input,
)
from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.testing import capture
from guardtrace.collectors.verification import (
    NUDGE_PREFIX,
    REASON_SYSTEM_PROMPT,
    REASON_TOOL_NAME,
    BudgetToken,
    TurnActionKind,
    VerificationLoop,
    VerificationOutcome,
    build_nudge,
    ensure_reason_tool,
    reason_messages,
    reason_tool_schema,
)
from guardtrace.schemas import names

OCTOBER = "Which month of the year is spelled with an X?"
VERIFY = ReasoningDepth.VERIFY
STANDARD = ReasoningDepth.STANDARD


# -- criticality gate -------------------------------------------------------------------
@pytest.mark.parametrize(("question", "family", "depth"), [
    (OCTOBER, "spelling", VERIFY),
    ("Which month is spelt with an X?", "spelling", VERIFY),
    ("how do you spell 'necessary'?", "spelling", VERIFY),
    ("How to spell rhythm", "spelling", VERIFY),
    ("What's the spelling of 'accommodate'?", "spelling", VERIFY),
    ("What is the third letter of 'banana'?", "spelling", VERIFY),
    ("How many r's are in strawberry?", "counting", VERIFY),
    ("How many r\u2019s are in strawberry?", "counting", VERIFY),  # curly apostrophe
    ("how many Rs in strawberry", "counting", VERIFY),
    ("how many letters in 'onomatopoeia'", "counting", VERIFY),
    ("How many vowels does 'queue' have?", "counting", VERIFY),
    ("how many syllables in 'fire'?", "counting", VERIFY),
    ("How many words are in this sentence?", "counting", VERIFY),
    ("how many times does the letter e appear in 'excellence'?", "counting", VERIFY),
    ("Count the vowels in 'banana'.", "counting", VERIFY),
    ("What is the number of characters in 'hello world'?", "counting", VERIFY),
    ("Does 'February' contain the letter R?", "containment", VERIFY),
    ("what month has an X in it?", "containment", VERIFY),
    ("Name a country with a 'q' in its name", "containment", VERIFY),
    ("Which word has the letter Z in it?", "containment", VERIFY),
    ("Which country starts with Q?", "containment", VERIFY),
    ("Name a state that ends with the letter A", "containment", VERIFY),
    ("WHICH MONTH IS SPELLED WITH AN X?", "spelling", VERIFY),  # case-insensitive
    ("Which planet is closest to the sun?", "which_what", STANDARD),
    ("What year was the Eiffel Tower built?", "which_what", STANDARD),
    ("What state is Denver in?", "which_what", STANDARD),
])
def test_gate_fires_on_each_family(question: str, family: str, depth: ReasoningDepth) -> None:
    decision = default_gate().assess(question)
    assert decision.should_reason
    assert decision.family == family
    assert decision.depth is depth
    assert decision.trigger_pattern in {p.regex for p in DEFAULT_PATTERNS if p.family == family}


@pytest.mark.parametrize("question", [
    "write a poem about October",
    "deploy the service",
    "what's up",
    "thanks!",
    "What is the capital of France?",
    "Can you help me refactor the login handler?",
    "Summarize this document in three bullet points.",
    "How many users signed up yesterday?",
    "how many is enough?",
    "The story starts with a bang.",
    "Tell me what this is",
    "Which one is better?",
    "",
])
def test_gate_stays_quiet_on_ordinary_requests(question: str) -> None:
    assert default_gate().assess(question) == NOT_REQUIRED


def test_letter_families_outweigh_the_broad_which_what_family() -> None:
    gate = default_gate()
    # "what month has an X in it?" matches both containment and which/what (Wire 1).
    decision = gate.assess("what month has an X in it?")
    assert (decision.family, decision.depth, decision.score) == ("containment", VERIFY, 0.85)
    assert gate.assess("Which planet is closest to the sun?").score == 0.4


def test_min_score_mutes_the_broad_family_only() -> None:
    gate = CriticalityGate(min_score=0.5)
    assert not gate.assess("Which planet is closest to the sun?").should_reason
    assert gate.assess(OCTOBER).should_reason
    assert gate.assess("what month has an X in it?").should_reason


def test_score_is_the_highest_weight_and_depth_the_deepest_match() -> None:
    gate = CriticalityGate([
        CriticalityPattern("shallow_heavy", r"\bzebra\b", STANDARD, 0.9),
        CriticalityPattern("deep_light", r"\bstripes\b", VERIFY, 0.3),
        CriticalityPattern("muted", r"\bzebra\b", ReasoningDepth.NONE, 1.0),
    ])
    decision = gate.assess("Why does a zebra have stripes?")
    assert (decision.family, decision.score, decision.depth) == ("shallow_heavy", 0.9, VERIFY)
    assert decision.trigger_pattern == r"\bzebra\b"


def test_custom_pattern_bank_replaces_the_default() -> None:
    gate = CriticalityGate([CriticalityPattern("date", r"\btoday'?s\s+date\b", VERIFY, 0.7)])
    decision = gate.assess("What is TODAY\u2019S date?")
    assert (decision.should_reason, decision.family, decision.score) == (True, "date", 0.7)
    assert not gate.assess(OCTOBER).should_reason
    extended = CriticalityGate(DEFAULT_PATTERNS + gate.patterns)
    assert extended.assess(OCTOBER).should_reason
    assert extended.assess("what is today's date").family == "date"


@pytest.mark.parametrize(("regex", "weight", "message"), [
    (r"(unclosed", 0.5, "invalid regex"),
    (r"\bok\b", 1.5, "weight"),
])
def test_bad_patterns_are_rejected_at_construction(regex: str, weight: float,
                                                   message: str) -> None:
    with pytest.raises(GuardInputError, match=message):
        CriticalityPattern("broken", regex, VERIFY, weight)


# -- offline scanner input --------------------------------------------------------------
def test_scan_question_input() -> None:
    out = scan_question_input({"id": "q1", "question": OCTOBER})
    assert out == {"id": "q1", "should_reason": True, "depth": "verify",
                   "trigger_pattern": DEFAULT_PATTERNS[0].regex}
    assert scan_question_input({"id": 7, "question": "thanks!"}) == {
        "id": 7, "should_reason": False, "depth": "none", "trigger_pattern": None}
    assert json.dumps(out)  # the scanner writes JSON lines


@pytest.mark.parametrize(("obj", "message"), [
    ({"id": "q1"}, r"question input 'q1': missing 'question'"),
    ({"id": "q2", "question": 42}, r"'question' must be a string, got int"),
    ({"question": None}, r"'question' must be a string, got NoneType"),
    (["not", "an", "object"], r"must be an object .* got list"),
])
def test_scan_question_input_rejects_malformed_records(obj: object, message: str) -> None:
    with pytest.raises(GuardInputError, match=message):
        scan_question_input(obj)  # type: ignore[arg-type]


# -- budget token -----------------------------------------------------------------------
def test_budget_counts_only_the_forced_tool() -> None:
    budget = BudgetToken(min_tool_calls=1)
    assert not budget.can_finish
    assert budget.record_tool_call("web_search") is False
    assert not budget.can_finish and budget.other_tool_calls == 1
    assert budget.record_tool_call(REASON_TOOL_NAME) is True
    assert budget.can_finish and budget.tool_calls_used == 1


def test_budget_turn_minimum_and_any_tool_mode() -> None:
    budget = BudgetToken(min_turns=2, min_tool_calls=1, required_tools=frozenset())
    budget.record_tool_call("web_search")  # any tool counts when none is required
    assert budget.tool_calls_used == 1 and not budget.can_finish
    budget.record_turn()
    assert not budget.can_finish
    budget.record_turn()
    assert budget.can_finish
    assert BudgetToken(min_tool_calls=0).can_finish


# -- reason tool, prompt, nudge ---------------------------------------------------------
def test_reason_tool_schema_renders_one_definition_in_both_styles() -> None:
    openai = reason_tool_schema("openai")
    anthropic = reason_tool_schema("anthropic")
    assert openai["type"] == "function"
    assert openai["function"]["name"] == anthropic["name"] == REASON_TOOL_NAME
    assert openai["function"]["parameters"] == anthropic["input_schema"]
    assert anthropic["input_schema"]["required"] == ["question"]
    assert anthropic["input_schema"]["properties"]["question"]["type"] == "string"
    openai["function"]["parameters"]["required"].append("mutated")
    assert reason_tool_schema("openai")["function"]["parameters"]["required"] == ["question"]
    with pytest.raises(GuardInputError, match="unknown tool style"):
        reason_tool_schema("gemini")  # type: ignore[arg-type]


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_ensure_reason_tool_adds_once(style: str) -> None:
    other = ({"type": "function", "function": {"name": "web_search", "parameters": {}}}
             if style == "openai" else {"name": "web_search", "input_schema": {}})
    tools = [other]
    once = ensure_reason_tool(tools, style)  # type: ignore[arg-type]
    assert tools == [other]  # input untouched
    assert once[-1] == reason_tool_schema(style)  # type: ignore[arg-type]
    twice = ensure_reason_tool(once, style)  # type: ignore[arg-type]
    assert twice == once
    assert ensure_reason_tool(None, style) == [reason_tool_schema(style)]  # type: ignore[arg-type]


def test_ensure_reason_tool_recognises_either_style() -> None:
    anthropic_tools = [reason_tool_schema("anthropic")]
    assert ensure_reason_tool(anthropic_tools, "openai") == anthropic_tools


def test_prompt_and_nudge_texts() -> None:
    for phrase in ("letter by letter", "count explicitly", "obvious answer",
                   "Do NOT trust your intuition", "the first model already got this wrong"):
        assert phrase in REASON_SYSTEM_PROMPT
    messages = reason_messages(OCTOBER, context="Gregorian calendar")
    assert messages[0] == {"role": "system", "content": REASON_SYSTEM_PROMPT}
    assert OCTOBER in messages[1]["content"] and "Gregorian" in messages[1]["content"]
    nudge = build_nudge(OCTOBER)
    assert nudge.startswith(NUDGE_PREFIX) and "`reason`" in nudge and OCTOBER in nudge
    assert "IMMEDIATELY" in nudge
    assert len(build_nudge("x" * 10_000)) < 1_000


# -- the loop ---------------------------------------------------------------------------
def _event_names(cap) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.name for e in cap.events() if e.name in names.GUARD_EVENTS]


def test_october_flow_nudge_then_reason_then_completed(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="guardtrace")
    with capture() as cap:
        loop = VerificationLoop(OCTOBER, request_id="req-oct", agent="helpdesk")
        assert loop.required and loop.decision.family == "spelling"
        tools = loop.tools([])
        assert [t["function"]["name"] for t in tools] == [REASON_TOOL_NAME]

        # Turn 1: the model answers "October" straight away.
        action = loop.on_model_turn(wants_to_finish=True)
        assert action.kind is TurnActionKind.NUDGE and not action.allow_finish
        assert action.message is not None and action.message.startswith(NUDGE_PREFIX)
        # Turn 2: it calls reason.
        assert loop.on_model_turn(wants_to_finish=False).kind is TurnActionKind.CONTINUE
        loop.on_tool_call(REASON_TOOL_NAME)
        # Turn 3: it answers with the verified result.
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
        assert loop.close() is VerificationOutcome.COMPLETED
        assert loop.close("again") is VerificationOutcome.COMPLETED  # idempotent

    assert _event_names(cap) == [names.EVENT_VERIFICATION_REQUIRED,
                                 names.EVENT_VERIFICATION_NUDGED,
                                 names.EVENT_VERIFICATION_COMPLETED]
    events = cap.events()
    for event in events:
        assert list(event.attributes)[0] == names.ATTR_REQUEST_ID
        assert event.attributes[names.ATTR_REQUEST_ID] == "req-oct"
        assert event.attributes[names.ATTR_MODULE] == names.MODULE_VERIFICATION
    required, nudged, completed = events
    assert required.attributes[names.ATTR_DEPTH] == "verify"
    assert required.attributes[names.ATTR_FAMILY] == "spelling"
    assert required.attributes[names.ATTR_SCORE] == 0.9
    assert required.attributes[names.ATTR_TRIGGER_PATTERN] == DEFAULT_PATTERNS[0].regex
    assert (nudged.attributes[names.ATTR_TURNS_USED],
            nudged.attributes[names.ATTR_TOOL_CALLS_USED],
            nudged.attributes[names.ATTR_MIN_TOOL_CALLS]) == (1, 0, 1)
    assert (completed.attributes[names.ATTR_TURNS_USED],
            completed.attributes[names.ATTR_TOOL_CALLS_USED],
            completed.attributes[names.ATTR_NUDGES]) == (3, 1, 1)

    labels = {"module": names.MODULE_VERIFICATION, "agent": "helpdesk"}
    assert cap.counter_total(names.METRIC_VERIFICATION_REQUIRED, **labels) == 1
    assert cap.counter_total(names.METRIC_VERIFICATION_NUDGED, **labels) == 1
    assert cap.counter_total(names.METRIC_VERIFICATION_COMPLETED, **labels) == 1
    assert cap.counter_total(names.METRIC_VERIFICATION_BYPASSED) == 0

    [payload] = cap.payloads
    assert (payload.request_id, payload.kind) == ("req-oct", names.PAYLOAD_KIND_VERIFICATION)
    body = json.loads(payload.body)
    assert body["question"] == OCTOBER and body["outcome"] == "completed"
    assert body["decision"]["family"] == "spelling"

    records = [r.guardtrace for r in caplog.records if hasattr(r, "guardtrace")]
    assert [r["status"] for r in records] == ["required", "nudged", "completed"]
    for record in records:
        assert record["operation"] == "forced_verification"
        assert record["request_id"] == "req-oct"
        assert record["duration_ms"] >= 0


def test_other_tools_do_not_satisfy_the_budget() -> None:
    with capture():
        loop = VerificationLoop("How many r's are in strawberry?", request_id="r")
        loop.on_model_turn(wants_to_finish=False)
        loop.on_tool_call("web_search")
        assert loop.on_model_turn(wants_to_finish=True).kind is TurnActionKind.NUDGE


def test_turn_limit_without_reason_is_bypassed() -> None:
    with capture() as cap:
        loop = VerificationLoop(OCTOBER, request_id="req-limit", agent="a1", max_nudges=None)
        for _ in range(5):  # the host loop's turn limit
            assert loop.on_model_turn(wants_to_finish=True).kind is TurnActionKind.NUDGE
        assert loop.close("turn_limit") is VerificationOutcome.BYPASSED
    assert _event_names(cap) == ([names.EVENT_VERIFICATION_REQUIRED]
                                 + [names.EVENT_VERIFICATION_NUDGED] * 5
                                 + [names.EVENT_VERIFICATION_BYPASSED])
    bypassed = cap.events(names.EVENT_VERIFICATION_BYPASSED)[0]
    assert bypassed.attributes[names.ATTR_REASON] == "turn_limit"
    assert bypassed.attributes[names.ATTR_TOOL_CALLS_USED] == 0
    assert cap.counter_total(names.METRIC_VERIFICATION_BYPASSED, agent="a1") == 1
    assert cap.counter_total(names.METRIC_VERIFICATION_NUDGED, agent="a1") == 5
    assert json.loads(cap.payloads[0].body)["outcome"] == "bypassed"


def test_exhausted_nudges_allow_the_answer_and_record_a_bypass() -> None:
    with capture() as cap:
        loop = VerificationLoop(OCTOBER, request_id="r", max_nudges=1)
        assert loop.on_model_turn(wants_to_finish=True).kind is TurnActionKind.NUDGE
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
        assert loop.outcome is VerificationOutcome.BYPASSED
        loop.close()
    assert cap.events(names.EVENT_VERIFICATION_BYPASSED)[0].attributes[
        names.ATTR_REASON] == "nudges_exhausted"
    assert len(cap.events(names.EVENT_VERIFICATION_BYPASSED)) == 1
    assert len(cap.payloads) == 1


def test_context_manager_closes_on_error_and_reraises() -> None:
    with capture() as cap:
        with pytest.raises(RuntimeError, match="llm down"):
            with VerificationLoop(OCTOBER, request_id="r") as loop:
                loop.on_model_turn(wants_to_finish=False)
                raise RuntimeError("llm down")
    assert cap.events(names.EVENT_VERIFICATION_BYPASSED)[0].attributes[
        names.ATTR_REASON] == "error"


def test_questions_not_requiring_reasoning_emit_nothing() -> None:
    with capture() as cap:
        with VerificationLoop("write a poem about October", request_id="r") as loop:
            assert not loop.required
            assert loop.tools([])[0]["function"]["name"] == REASON_TOOL_NAME
            assert loop.on_model_turn(wants_to_finish=True).allow_finish
        assert loop.outcome is VerificationOutcome.NOT_REQUIRED
    assert cap.events() == []
    assert cap.payloads == []
    assert cap.counter_total(names.METRIC_VERIFICATION_REQUIRED) == 0


def test_module_label_defaults_to_verification_and_can_be_set() -> None:
    with capture() as cap:
        VerificationLoop(OCTOBER, request_id="r1", agent="a").close("turn_limit")
        VerificationLoop(OCTOBER, request_id="r2", agent="a", module="helpdesk").close(
            "turn_limit")
    modules = [(e.attributes[names.ATTR_REQUEST_ID], e.attributes[names.ATTR_MODULE])
               for e in cap.events()]
    assert modules == [("r1", names.MODULE_VERIFICATION)] * 2 + [("r2", "helpdesk")] * 2
    assert cap.counter_total(names.METRIC_VERIFICATION_REQUIRED,
                             module=names.MODULE_VERIFICATION) == 1
    assert cap.counter_total(names.METRIC_VERIFICATION_BYPASSED, module="helpdesk",
                             agent="a") == 1


def test_decisions_work_with_no_telemetry_configured() -> None:
    loop = VerificationLoop(OCTOBER)
    assert loop.request_id
    assert loop.on_model_turn(wants_to_finish=True).kind is TurnActionKind.NUDGE
    loop.on_tool_call(REASON_TOOL_NAME)
    assert loop.on_model_turn(wants_to_finish=True).allow_finish


# -- hooks never break the agent --------------------------------------------------------
class _BrokenGate(CriticalityGate):
    def assess(self, question: str):  # type: ignore[no-untyped-def, override]
        raise RuntimeError("gate exploded")


def test_a_failing_gate_means_no_verification_required() -> None:
    with capture() as cap:
        loop = VerificationLoop(OCTOBER, request_id="r", gate=_BrokenGate())
        assert loop.decision == NOT_REQUIRED
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
        # The shipped gate is guarded itself: a non-string question is "not required".
        assert default_gate().assess(12345) == NOT_REQUIRED  # type: ignore[arg-type]
    assert cap.counter_total(names.METRIC_HOOK_ERRORS) == 2
    assert _event_names(cap) == []


def test_a_failing_loop_allows_the_finish() -> None:
    def broken_nudge(question: str) -> str:
        raise RuntimeError("template exploded")

    with capture() as cap:
        loop = VerificationLoop(OCTOBER, request_id="r", nudge_text=broken_nudge)
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
        assert loop.tools(object()) == []  # not even iterable: no tools, no exception
        assert loop.close("turn_limit") is VerificationOutcome.BYPASSED
    assert cap.counter_total(names.METRIC_HOOK_ERRORS) == 2
