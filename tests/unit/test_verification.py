"""Forced verification (guard family 3): criticality gate, budget, nudge loop, telemetry.

Long because the gate, the budget, the nudge loop and their telemetry are one state
machine, tested through its one entry point.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest

from guardtrace.cli.scan_records import scan_question_input
from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.questions.criticality import (
    DEFAULT_PATTERNS,
    NOT_REQUIRED,
    WHICH_WHAT_PATTERNS,
    CriticalityGate,
    CriticalityPattern,
    ReasoningDepth,
    default_gate,
)
from guardtrace.collectors.questions.verification import (
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
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names
from tests.support.timing import cpu_seconds

OCTOBER = "Which month of the year is spelled with an X?"
VERIFY = ReasoningDepth.VERIFY
STANDARD = ReasoningDepth.STANDARD


# -- criticality gate -------------------------------------------------------------------
_FAMILY_CASES = [
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
    # The families issue 11 found missing, and their neighbours.
    ("Is there any month whose name contains a Z?", "containment", VERIFY),
    ("Which US state names start and end with the same letter?", "containment", VERIFY),
    ("write a sentence without the letter e", "containment", VERIFY),
    ("does 'rhythm' have any vowels?", "containment", VERIFY),
    ("Which of these words has the most letters: apple, banana, kiwi?", "length", VERIFY),
    ("Which country has the longest name?", "length", VERIFY),
    ("Which word is longer, 'queue' or 'quiet'?", "length", VERIFY),
    ("give me a 7-letter word for happy", "length", VERIFY),
    ("Spell 'necessary' backwards", "spelling", VERIFY),
    ("what's 'stressed' spelled backwards", "wordplay", VERIFY),
    ("Reverse the word 'desserts'.", "wordplay", VERIFY),
    ('Is "racecar" a palindrome?', "wordplay", VERIFY),
    ("Put these words in alphabetical order: pear, apple, fig", "wordplay", VERIFY),
    ("Swap 'l' and 'b' in 'alphabet'", "wordplay", VERIFY),
    ("what is the 3rd letter of 'banana'?", "spelling", VERIFY),
    ("how do u spell accomodate", "spelling", VERIFY),  # typos and lower case
    ("how many Rs in strawbery", "counting", VERIFY),
    ("Count the number of l in parallel", "counting", VERIFY),  # a bare letter counted
    ("How many words are in this sentence: the cat sat on the mat?", "counting", VERIFY),
    # A character of a quoted word, a count of one letter, single words compared, the
    # alphabet reversed, a length the question gives.
    ("What's the third character in 'pneumonia'?", "spelling", VERIFY),
    ("Does 'banana' contain two n's?", "containment", VERIFY),
    ("Which is longer, 'elephant' or 'hippopotamus'?", "length", VERIFY),
    ("Write the alphabet backwards.", "wordplay", VERIFY),
    ("Is there a country whose name ends in 'stan' and has 5 letters?", "length", VERIFY),
]


@pytest.mark.parametrize(("question", "family", "depth"), _FAMILY_CASES)
def test_gate_fires_on_each_family(question: str, family: str, depth: ReasoningDepth) -> None:
    decision = default_gate().assess(question)
    assert decision.should_reason
    assert decision.family == family
    assert decision.depth is depth
    assert decision.trigger_pattern in {p.regex for p in DEFAULT_PATTERNS if p.family == family}


_QUIET_CASES = [
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
    # Ordinary which/what questions: the broad which_what family is opt-in now.
    "Which file is the config?",
    "What year was the tower built?",
    "which flight is cheaper?",
    "Which planet is closest to the sun?",
    "What state is Denver in?",
    "What time is it currently in London, UK in 24 hour format?",
    # Questions that share the letter vocabulary in another sense.
    "What letter grade did I get in chemistry?",
    "How many bags can I bring?",
    "How many characters can a tweet have?",
    "How many words should my cover letter be?",
    "How many characters are in Game of Thrones?",
    "How many letters are in the mail today?",
    "How many times do I have to call before someone helps me?",
    "Please spell out the cancellation policy for me.",
    "How do I cast the fireball spell?",
    "Is my name spelled right on the ticket?",
    "Can you reverse the charge on my card?",
    "In other words, the charge was reversed.",
    "I'm sorry, I don't want to go backwards on this.",  # apostrophes are not quotes
    "What's the longest flight you have to Tokyo?",
    "Which movie has the most characters?",
    "Did you get all the letters I sent?",
    "My user ID starts with a J, I think.",
    "I'll go with option B.",
    "Let's start with A.",
    "You are given a dataset with variables including 'Age', 'Income' and 'Gender'.",
    # Their neighbours in another sense.
    "What should the first character of my password be?",
    "Does my order contain two items?",
    "Which is longer, the flight to Paris or the one to Rome?",
    "Use the standard English alphabet, which has 26 letters.",
]


@pytest.mark.parametrize("question", _QUIET_CASES)
def test_gate_stays_quiet_on_ordinary_requests(question: str) -> None:
    assert default_gate().assess(question) == NOT_REQUIRED


_OPT_IN = CriticalityGate(DEFAULT_PATTERNS + WHICH_WHAT_PATTERNS)


@pytest.mark.parametrize("question", [
    "Which planet is closest to the sun?",
    "What year was the Eiffel Tower built?",
    "What state is Denver in?",
])
def test_which_what_family_is_opt_in(question: str) -> None:
    assert not default_gate().assess(question).should_reason
    decision = _OPT_IN.assess(question)
    assert (decision.should_reason, decision.family, decision.depth) == (
        True, "which_what", STANDARD)
    assert decision.trigger_pattern in {p.regex for p in WHICH_WHAT_PATTERNS}
    assert not any(p.family == "which_what" for p in DEFAULT_PATTERNS)


def test_letter_families_outweigh_the_broad_which_what_family() -> None:
    gate = _OPT_IN
    # "what month has an X in it?" matches both containment and which/what (Wire 1).
    decision = gate.assess("what month has an X in it?")
    assert (decision.family, decision.depth, decision.score) == ("containment", VERIFY, 0.85)
    assert gate.assess("Which planet is closest to the sun?").score == 0.4


def test_min_score_mutes_the_broad_family_only() -> None:
    gate = CriticalityGate(DEFAULT_PATTERNS + WHICH_WHAT_PATTERNS, min_score=0.5)
    assert _OPT_IN.assess("Which planet is closest to the sun?").should_reason
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


def test_the_regex_is_tried_only_when_an_anchor_occurs() -> None:
    pattern = CriticalityPattern("horses", r"\bhorse\b", VERIFY, 0.7, anchors=("HORSE", "mare"))
    assert pattern.anchors == ("horse", "mare")  # compared with the lower-cased question
    assert CriticalityGate([pattern]).assess("A HORSE, a horse!").should_reason
    # An anchor the regex does not need hides every match without it: anchors must be
    # necessary, and an empty tuple means the regex is always tried.
    blind = dataclasses.replace(pattern, anchors=("zebra",))
    assert not CriticalityGate([blind]).assess("a horse").should_reason
    assert CriticalityGate([dataclasses.replace(blind, anchors=())]).assess(
        "a horse").should_reason


def test_default_anchors_never_change_a_decision() -> None:
    # Each default pattern's anchors are necessary: without them the bank decides every
    # question of this file the same way (tests/unit/test_criticality_realdata.py checks
    # the real messages and the benchmark's question sets).
    unanchored = CriticalityGate([dataclasses.replace(p, anchors=()) for p in DEFAULT_PATTERNS])
    questions = [case[0] for case in _FAMILY_CASES] + _QUIET_CASES
    for question in questions:
        assert default_gate().assess(question) == unanchored.assess(question), question


def test_a_long_question_is_read_at_its_head_and_tail_only() -> None:
    filler = "Lorem ipsum dolor sit amet. " * 2000  # 56 KB of pasted text
    gate = default_gate()
    assert gate.assess(f"Count the words in this: {filler}").should_reason
    assert gate.assess(f"{filler} How many r's are in strawberry?").should_reason
    assert not gate.assess(f"{filler[:20_000]} How many r's in strawberry? {filler}").should_reason
    # Nothing matches across the cut: here the first 8 KB end in "how many" and the last
    # 2 KB begin with "r's in strawberry".
    head = f"{'x' * (8192 - 9)} how many"
    tail = f"r's in strawberry{' z' * 1100}"[:2048]
    assert gate.assess(f"how many\n{tail}").should_reason  # a newline alone would not do
    assert not gate.assess(f"{head}{'y' * 5000}{tail}").should_reason


# Fragments of the default patterns: openings that make a pattern start matching and then
# fail, quotes and apostrophes, bare letters, long runs of one character.
_ADVERSARIAL = (
    "how many letters are in the ", "count the ", "number of ", "spell ", "how do you ",
    "the letter a ", "starts with ", "with a ", "first letter is ", "'a' ", "'abc'x", '"',
    "'s ", "a-", "1st ", "words by ", "reverse the ", "backwards ", "swap 'a' and ",
    "in the alphabet ", "is there a ", "to start with ", "id ", "longest ", "\n", "x", "?",
)


def _bank_seconds(text: str) -> float:
    def every_pattern() -> None:
        for pattern in DEFAULT_PATTERNS:  # every regex on the whole text, no bound
            pattern.compiled.search(text)
    return cpu_seconds(every_pattern, repeats=3)


@pytest.mark.parametrize("fragment", ["".join(_ADVERSARIAL), "x", " ", "\n", "'", "a ", "a-",
                                      "1st ", "'abc'x", "how many letters are in the "])
def test_every_default_pattern_is_linear_in_its_input(fragment: str) -> None:
    # By growth, not by a time limit: 8x the text must cost about 8x, where a pattern
    # that backtracks quadratically would cost 64x. 16x leaves room for a noisy machine.
    small, large = ((fragment * (n // len(fragment) + 1))[:n] for n in (4_000, 32_000))
    ratio = _bank_seconds(large) / _bank_seconds(small)
    assert ratio < 16, f"8x the text cost {ratio:.1f}x: a pattern is not linear"


def test_the_gate_reads_a_bounded_window_of_a_huge_question() -> None:
    text = "".join(_ADVERSARIAL) * 40_000  # about 1.2 MB
    gate = default_gate()

    def seconds(question: str) -> float:
        return cpu_seconds(lambda: gate.assess(question), repeats=3)

    # 100x the text costs about the same: only the head and the tail are read.
    assert seconds(text) / seconds(text[:12_000]) < 5


@pytest.mark.parametrize(("regex", "weight", "message"), [
    (r"(unclosed", 0.5, "invalid regex"),
    (r"\bok\b", 1.5, "weight"),
])
def test_bad_patterns_are_rejected_at_construction(regex: str, weight: float,
                                                   message: str) -> None:
    with pytest.raises(GuardInputError, match=message):
        CriticalityPattern("broken", regex, VERIFY, weight)


def test_the_shipped_bank_compiles_on_first_use_and_every_regex_in_it_compiles() -> None:
    deferred = CriticalityPattern("broken", r"(unclosed", VERIFY, 0.5, compile_now=False)
    with pytest.raises(GuardInputError, match="invalid regex"):
        _ = deferred.compiled
    for pattern in DEFAULT_PATTERNS + WHICH_WHAT_PATTERNS:
        assert pattern.compiled.pattern == pattern.regex


def test_deferred_and_eager_patterns_decide_alike() -> None:
    eager = CriticalityGate([dataclasses.replace(p, compile_now=True) for p in DEFAULT_PATTERNS])
    for question in (OCTOBER, "How many r's are in strawberry?", "Which flight is cheapest?"):
        assert eager.assess(question) == default_gate().assess(question)


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
    required, nudged, completed, evaluation = events
    assert evaluation.name == names.EVENT_EVALUATION_RESULT
    assert evaluation.attributes[names.ATTR_EVALUATION_SCORE_LABEL] == names.EVALUATION_PASS
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
    with (capture() as cap, pytest.raises(RuntimeError, match="llm down"),
          VerificationLoop(OCTOBER, request_id="r") as loop):
        loop.on_model_turn(wants_to_finish=False)
        raise RuntimeError("llm down")
    assert cap.events(names.EVENT_VERIFICATION_BYPASSED)[0].attributes[
        names.ATTR_REASON] == "error"


def test_questions_not_requiring_reasoning_emit_only_their_pass() -> None:
    with capture() as cap:
        with VerificationLoop("write a poem about October", request_id="r") as loop:
            assert not loop.required
            assert loop.tools([])[0]["function"]["name"] == REASON_TOOL_NAME
            assert loop.on_model_turn(wants_to_finish=True).allow_finish
        assert loop.outcome is VerificationOutcome.NOT_REQUIRED
    assert [(e.name, e.attributes[names.ATTR_EVALUATION_SCORE_LABEL]) for e in cap.events()] \
        == [(names.EVENT_EVALUATION_RESULT, names.EVALUATION_PASS)]
    assert cap.payloads == []
    assert cap.counter_total(names.METRIC_VERIFICATION_REQUIRED) == 0


def test_module_label_defaults_to_verification_and_can_be_set() -> None:
    with capture() as cap:
        VerificationLoop(OCTOBER, request_id="r1", agent="a").close("turn_limit")
        VerificationLoop(OCTOBER, request_id="r2", agent="a", module="helpdesk").close(
            "turn_limit")
    modules = [(e.attributes[names.ATTR_REQUEST_ID], e.attributes[names.ATTR_MODULE])
               for e in cap.events()]
    # required, bypassed and the evaluation result of each loop
    assert modules == [("r1", names.MODULE_VERIFICATION)] * 3 + [("r2", "helpdesk")] * 3
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


@pytest.mark.expect_hook_errors
def test_a_failing_gate_means_no_verification_required() -> None:
    with capture() as cap:
        loop = VerificationLoop(OCTOBER, request_id="r", gate=_BrokenGate())
        assert loop.decision == NOT_REQUIRED
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
        # The shipped gate is guarded itself: a non-string question is "not required".
        assert default_gate().assess(12345) == NOT_REQUIRED  # type: ignore[arg-type]
    assert cap.counter_total(names.METRIC_HOOK_ERRORS) == 2
    assert _event_names(cap) == []


@pytest.mark.expect_hook_errors
def test_a_failing_loop_allows_the_finish() -> None:
    def broken_nudge(question: str) -> str:
        raise RuntimeError("template exploded")

    with capture() as cap:
        loop = VerificationLoop(OCTOBER, request_id="r", nudge_text=broken_nudge)
        assert loop.on_model_turn(wants_to_finish=True).allow_finish
        assert loop.tools(object()) == []  # not even iterable: no tools, no exception
        assert loop.close("turn_limit") is VerificationOutcome.BYPASSED
    assert cap.counter_total(names.METRIC_HOOK_ERRORS) == 2
