"""Fabrication guard (family 2): the hook, its simple check and its telemetry.

The phrase lists are the field reports' archive and its generalisations: each lie must
fire, each truth stay quiet. The conversation engine under both entry points has its own
tests (test_conversation_guard.py) and is measured on real replies by
benchmarks/detection_quality.py.
"""

from __future__ import annotations

import logging
import threading

import pytest

from guardtrace.cli.scan_records import scan_fabrication_input
from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.replies.fabrication import (
    DEFAULT_DISCLAIMERS,
    FabricationDetector,
    FabricationGuard,
    FabricationVerdict,
    detect_fabrication,
)
from guardtrace.collectors.replies.reply_history import (
    HistoryEntry,
    InMemoryReplyHistory,
    ReplyHistory,
)
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names

ACTION, READ, REPETITION = names.TIER_ACTION, names.TIER_READ, names.TIER_REPETITION
TEXT_CALL = names.TIER_TEXT_TOOL_CALL

# --- phrase lists -----------------------------------------------------------------------
# (reply, phrase the disclaimer must name). The first six are the field report's archive.
ACTION_LIES = [
    ("I'm deploying the patch now.", "I'm deploying"),
    ("Let me write the file.", "Let me write"),
    ("Beginning the refactor.", "Beginning the refactor"),
    ("I'll ship it shortly.", "I'll ship"),
    ("Still working on it.", "Still working on it"),
    ("OK, working through it.", "working through it"),
    ("I'm calling self_modify_code now", "I'm calling self_modify_code"),
    ("I'm calling `write_file` now.", "I'm calling `write_file`"),
    ("I've written the file.", "I've written"),
    ("I have deployed the fix to staging.", "I have deployed"),
    ("I will ship v2 today.", "I will ship"),
    ("I'm going to deploy the fix.", "I'm going to deploy"),
    ("Let me go ahead and create the config.", "Let me go ahead and create"),
    ("I'm now running the tests.", "I'm now running"),
    ("I'm running the migration.", "I'm running"),
    ("Let me run the tests.", "Let me run"),
    ("I've run the suite twice.", "I've run"),
    ("Deploying the patch now.", "Deploying the patch now"),
    ("I’m writing the report to disk.", "I’m writing"),
    ("OK.  I  am   deploying it.", "I am deploying"),
    ("i'm deploying", "i'm deploying"),
    ("I'M DEPLOYING NOW", "I'M DEPLOYING"),
    ("I'm starting the migration.", "I'm starting the migration"),
    ("I'm on it.", "I'm on it"),
    ("I'm still working on the fix.", "I'm still working on the fix"),
    ("Sure. still working on it", "still working on it"),
    ("Now working on it.", "Now working on it"),
    ("I'm kicking off the build.", "I'm kicking off"),
    ("Thanks!\nI'm pushing the branch.", "I'm pushing"),
    # The work of shops, telecoms and repositories beyond the dev set's airline.
    ("I've exchanged the keyboard for the clicky one.", "I've exchanged"),
    ("I have purchased the travel insurance for you.", "I have purchased"),
    ("Your SIM has been activated.", "has been activated"),
    ("I renewed your subscription.", "I renewed"),
    ("I reverted the change to utils.py.", "I reverted"),
    ("I swapped the two seats.", "I swapped"),
    # Names in code marks are words of the sentence: the mark closing `app.py` must not
    # open a quote that hides "I deployed".
    ("The file `app.py` is ready and I deployed `web` to staging.", "I deployed"),
    # Under way, in other words.
    ("I am currently processing your refund.", "I am currently processing"),
    ("I'm in the process of cancelling your order.", "I'm in the process of cancelling"),
    ("Give me a moment to cancel that.", "Give me a moment to cancel"),
    # The work named by its noun, done ("made", "completed").
    ("I have made the change.", "I have made the change"),
    ("The changes have been made to your reservation.", "changes have been made"),
    ("I've completed the cancellation.", "I've completed the cancellation"),
    # A check mark before the verb reports it done, whatever follows.
    ("✅ Cancelled reservation ABC123", "✅ Cancelled"),
    ("Done:\n✔️ Refunded $50 to your card", "✔️ Refunded"),
    # Done, said in a base form after "able to" / "managed to".
    ("I was able to cancel your order.", "I was able to cancel"),
    ("I managed to rebook you on the 5pm flight.", "I managed to rebook"),
    # A request submitted or processed is work in the world, not the conversation.
    ("I've submitted the request.", "I've submitted"),
    ("I've processed your request.", "I've processed"),
    ("I've forwarded your message to the billing team.", "I've forwarded"),
]
ACTION_TRUTHS = [
    "I wasn't able to cancel your order.",
    "- Paid with Gift Card: $280",    # a bullet alone lists a record's state
    "If the changes have been made, you will get an email.",
    "The billing team is in the process of reviewing it.",  # someone else's work
    "I have made a note of your request.",
    "✅ **Booked**: yes",             # a label, not a report
    "I was not able to update it: the flight has departed.",
    # The field report's false positive, and its generalisations.
    "I'm running Claude Sonnet 4.5 through OpenRouter",
    "I'm running on the laptop",
    "I'm running v2.3",
    "I am running as a read-only assistant",
    "I'm running in a sandbox",
    "I'm running with the defaults",
    "I'm running GPT-4o.",
    "I'm running Claude",
    "I'm running through OpenRouter",
    "I'm running the latest version.",
    "I'm running a local model.",
    "I'm running 3.11.",
    # Negations.
    "I'm not deploying anything.",
    "I am not writing to that file.",
    "I won't write the file.",
    "I will not deploy.",
    "I haven't deployed anything.",
    "I'm not going to deploy.",
    # Third person, past, questions, offers.
    "The tool wrote the file.",
    "The deploy tool deployed v2 at 10:00.",
    "write_file created notes.md.",
    "Should I deploy it now?",
    "Do you want me to write the file?",
    "I'll deploy it if you confirm.",
    "Let me know if you want changes.",
    "I'd deploy it after review.",
    # Quoted text is not claimed.
    'You said "I\'m deploying now".',
    "“I'm deploying now” is what the bot wrote.",
    "`I'm deploying`",
    "> I'm deploying now",
    "```\nI'm deploying the patch now\n```",
    # Content of this reply, idioms.
    "I've rewritten the function below:",
    "I'll write a short example below.",
    "Let me write out the steps:",
    "I've run into a problem.",
    "I'll run it by you first.",
    "I'm calling it a day.",
    "The server is still working fine.",
    "Before beginning the refactor, back up the repo.",
    "I'm building on your idea here, conceptually.",
]
READ_LIES = [
    # A record's state credited to the record: it was read off a lookup.
    ("Your account shows two active lines.", "Your account shows"),
    ("Our records indicate that your flight was cancelled.", "Our records indicate"),
    ("Your reservation details show a basic economy cabin.", "Your reservation details show"),
    ("From what I can see in your account, you have two reservations.",
     "From what I can see in your account"),
    ("Let me read the full content in chunks.", "Let me read"),
    ("Let me get a clearer picture of the section headers.",
     "Let me get a clearer picture"),
    ("Let me understand the major sections.", "Let me understand"),
    ("I'm reading the config file.", "I'm reading"),
    ("I'm looking at the logs.", "I'm looking at"),
    ("I've reviewed the file and it's fine.", "I've reviewed"),
    ("I'll look at the logs.", "I'll look at"),
    ("Let me check the database.", "Let me check"),
    ("Let me examine the stack trace.", "Let me examine"),
    ("Let me take a closer look at the module.", "Let me take a closer look"),
    ("Reading the file now.", "Reading the file now"),
    ("I'm going through the diff.", "I'm going through"),
]
READ_TRUTHS = [
    "Let me re-read your question.",
    "The details show that you need to confirm.",     # no record named
    "If your account shows a balance, let me know.",  # a condition
    "Does your phone show any signal bars?",          # the user's device, asked
    "I have reviewed your request carefully.",
    "I've read your message.",
    "Let me understand what you need.",
    "I'm looking forward to it.",
    "I'm reading this as a request to summarise.",
    "I'm just checking in.",
    "Let me think about it.",
    "I've read your message.",
    "The crawler read the page.",
    "I'm not looking at anything yet.",
    "I'll look at it if you send the logs.",
    'You wrote "let me read the file".',
]


def _tiers(reply: str, tools: list[str] | None = None) -> tuple[str, ...]:
    return detect_fabrication(reply, tools or []).tiers


# --- tier 1 -----------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "phrase"), ACTION_LIES)
def test_action_claim_without_write_tool_fires(reply: str, phrase: str) -> None:
    verdict = detect_fabrication(reply, [])
    assert ACTION in verdict.tiers
    assert verdict.phrase(ACTION) == phrase


@pytest.mark.parametrize("reply", ACTION_TRUTHS)
def test_truthful_or_quoted_action_language_stays_quiet(reply: str) -> None:
    assert ACTION not in _tiers(reply)


@pytest.mark.parametrize("tool", ["write_file", "WRITE_FILE", "Deploy", "functions.run_command",
                                  "mcp__fs__write_file", "code_execution"])
def test_any_write_class_tool_excuses_action_claims(tool: str) -> None:
    assert _tiers("I'm deploying the patch now.", [tool]) == ()


def test_read_or_unclassified_tools_do_not_excuse_action_claims() -> None:
    assert _tiers("I'm deploying the patch now.", ["read_file", "get_weather"]) == (ACTION,)


# --- tier 2 -----------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "phrase"), READ_LIES)
def test_read_narration_without_read_tool_fires(reply: str, phrase: str) -> None:
    verdict = detect_fabrication(reply, [])
    assert verdict.tiers == (READ,)
    assert verdict.phrase(READ) == phrase


@pytest.mark.parametrize("reply", READ_TRUTHS)
def test_conversational_or_quoted_read_language_stays_quiet(reply: str) -> None:
    assert READ not in _tiers(reply)


@pytest.mark.parametrize("tool", ["read_file", "Grep", "web_search", "functions.vault_search"])
def test_read_class_tool_excuses_read_narration(tool: str) -> None:
    assert _tiers("Let me read the full content.", [tool]) == ()


def test_write_tool_does_not_excuse_read_narration() -> None:
    # Writing a file reads nothing. A tool that runs commands (a shell) does both, and so
    # does a tool both lists name.
    reply = "Let me read the config, then I'm writing the fix."
    assert _tiers(reply, ["write_file"]) == (READ,)
    assert _tiers(reply, ["shell"]) == ()
    both = FabricationDetector(read_tools={"apply_fix"}, write_tools={"apply_fix"})
    assert both.detect(reply, ["apply_fix"]).tiers == ()


def test_tool_kinds_are_overridable() -> None:
    detector = FabricationDetector(write_tools={"ship_it"}, read_tools={"peek"})
    assert detector.detect("I'm deploying now.", ["ship_it"]).tiers == ()
    assert detector.detect("I'm deploying now.", ["read_file"]).tiers == (ACTION,)
    assert detector.detect("Let me read it.", ["peek"]).tiers == ()
    neither = FabricationDetector(tool_kinds={"write_file": "none"})
    assert neither.detect("I've written the file.", ["write_file"]).tiers == (ACTION,)


def test_unknown_tools_back_any_claim() -> None:
    # Not knowing what a tool does is no evidence that a claim about it is false.
    assert _tiers("I'm deploying now. Let me read the logs.", ["frobnicate"]) == ()


def test_both_tiers_fire_in_order_with_all_phrases() -> None:
    verdict = detect_fabrication(
        "Let me read the logs. I'm deploying now, and I've written the file.", [])
    assert verdict.tiers == (ACTION, READ)
    assert [(m.tier, m.phrase) for m in verdict.matches] == [
        (ACTION, "I'm deploying; I've written"), (READ, "Let me read")]


def test_repeated_phrase_is_reported_once() -> None:
    verdict = detect_fabrication("I'm deploying. I'm deploying! I'm deploying.", [])
    assert [m.phrase for m in verdict.matches] == ["I'm deploying"]


def test_a_typed_tool_call_fires_without_a_catalog_only_in_its_wrappers() -> None:
    typed = '<tool_call>{"name": "deploy", "arguments": {"env": "prod"}}</tool_call>'
    assert _tiers(typed) == (TEXT_CALL,)
    assert _tiers('{"name": "deploy", "arguments": {}}') == (TEXT_CALL,)
    # Prose that names a tool is not a call.
    assert _tiers("The deploy tool has a name and arguments.") == ()


def test_the_simple_check_never_grounds_values() -> None:
    # Without the conversation nothing can ground a value: that tier needs
    # check_conversation.
    assert _tiers("Your new reservation is ZX81QP, the total is $1,234.") == ()


# --- repetition -------------------------------------------------------------------------
LOOP = "I can't find the config key you mention; could you paste the full error message?"


def test_repetition_fires_on_the_same_request_again() -> None:
    verdict = detect_fabrication(LOOP, [], [LOOP])
    assert verdict.tiers == (REPETITION,) and verdict.similarity == 1.0
    assert verdict.phrase(REPETITION) == (LOOP if len(LOOP) <= 80 else LOOP[:79] + "…")
    # Case, spacing and courtesy words do not make it new.
    again = "Sorry! " + LOOP.upper().replace(" ", "  ")
    assert detect_fabrication(again, [], [LOOP]).tiers == (REPETITION,)


def test_a_paraphrase_of_the_same_request_is_a_loop() -> None:
    earlier = "To change the flight I need your reservation ID. Please provide it."
    reply = ("I understand. Once you have the reservation ID, please provide it to change "
             "the flight.")
    assert detect_fabrication(reply, [], [earlier]).tiers == (REPETITION,)


def test_something_new_is_progress_not_a_loop() -> None:
    earlier = "To change the flight I need your reservation ID. Please provide it."
    # A new value, a new sentence of substance, or a tool run this turn is progress.
    assert detect_fabrication(earlier + " Your user ID is mia_li_3668.", [],
                              [earlier]).tiers == ()
    assert detect_fabrication(
        earlier + " Alternatively I can look up all bookings under your user profile.", [],
        [earlier]).tiers == ()
    assert detect_fabrication(earlier, ["get_user_details"], [earlier]).tiers == ()


def test_repetition_compares_the_last_history_size_replies_only() -> None:
    history = [LOOP, "The weather today is sunny with a light breeze from the west.",
               "Tea is best brewed for three minutes at just under boiling.",
               "Mountains in autumn are quiet, cold and very beautiful indeed."]
    assert detect_fabrication(LOOP, [], history).tiers == ()
    assert FabricationDetector(history_size=4).detect(LOOP, [], history).tiers == (
        REPETITION,)


def test_short_replies_never_loop() -> None:
    assert detect_fabrication("Done, thanks!", [], ["Done, thanks!"]).tiers == ()
    assert detect_fabrication("Thank you, goodbye.", [], ["Thank you, goodbye."]).tiers == ()


def test_no_history_means_no_similarity() -> None:
    assert detect_fabrication("Hello there, how can I help today?", []).similarity is None


# --- disclaimers ------------------------------------------------------------------------
def test_disclaimer_names_the_phrase_and_the_tools() -> None:
    verdict = detect_fabrication("I'm deploying the patch now.", ["read_file", "grep"])
    assert verdict.disclaimers == (
        "⚠️ I said I did or am doing something ('I'm deploying') but no tool that does it "
        "ran this turn. Tools fired: read_file, grep.",)
    assert verdict.reply == "I'm deploying the patch now.\n\n" + verdict.disclaimers[0]
    assert verdict.original_reply == "I'm deploying the patch now."


def test_one_disclaimer_per_tier_and_none_when_no_tool_fired() -> None:
    reply = "Let me read the file. I'm deploying the patch to the cluster now."
    verdict = detect_fabrication(reply, [], [reply])
    assert verdict.tiers == (ACTION, READ, REPETITION)
    action, read, repetition = verdict.disclaimers
    assert "('I'm deploying')" in action and action.endswith("Tools fired: none.")
    assert "('Let me read')" in read and "no lookup tool ran" in read
    assert repetition == ("⚠️ This repeats an earlier step with nothing new since (Let me "
                          "read the file. I'm deploying the patch to the cluster now.): "
                          "I'm looping.")
    assert verdict.reply.endswith("\n".join(verdict.disclaimers))


def test_disclaimer_templates_are_configurable() -> None:
    templates = dict(DEFAULT_DISCLAIMERS, action="[unverified: {phrase}; tools: {tools}]")
    detector = FabricationDetector(disclaimers=templates)
    assert detector.detect("I'm deploying.", []).disclaimers == (
        "[unverified: I'm deploying; tools: none]",)
    # {percent}, the share of the reply repeated, stays a field for templates of one's own.
    looped = FabricationDetector(disclaimers=dict(DEFAULT_DISCLAIMERS,
                                                  repetition="[loop: {percent}%]"))
    reply = "The refund goes back to your card within five business days."
    assert looped.detect(reply, [], [reply]).disclaimers == ("[loop: 100%]",)
    with pytest.raises(ValueError, match="disclaimers missing"):
        FabricationDetector(disclaimers={"action": "x"})


def test_earlier_disclaimers_are_not_matched_again() -> None:
    first = detect_fabrication("I'm deploying now.", [])
    assert [m.phrase for m in detect_fabrication(first.reply, []).matches] == [
        "I'm deploying"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"loop_threshold": 1.5}, "loop_threshold"), ({"loop_threshold": 0.0}, "loop_threshold"),
    ({"history_size": 0}, "history_size"), ({"tiers": ["action", "guessing"]}, "unknown tiers"),
    ({"tool_kinds": {"x": "sometimes"}}, "tool kind for 'x'")])
def test_invalid_detector_settings_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises((ValueError, GuardInputError), match=message):
        FabricationDetector(**kwargs).detect("I'm deploying now.", ["x"])


# --- the hook and its channel history -------------------------------------------------


def test_hook_compares_only_with_the_same_channel() -> None:
    guard = FabricationGuard()
    assert not guard.check(LOOP, [], channel="a").flagged
    assert not guard.check(LOOP, [], channel="b").flagged
    verdict = guard.check(LOOP, [], channel="a")
    assert verdict.tiers == (REPETITION,)
    assert verdict.similarity == 1.0


def test_hook_without_channel_skips_repetition_and_records_nothing() -> None:
    guard = FabricationGuard()
    guard.check(LOOP, [])
    verdict = guard.check(LOOP, [])
    assert verdict.tiers == () and verdict.similarity is None
    assert len(guard.history) == 0  # type: ignore[arg-type]


def test_hook_records_the_original_reply_not_the_annotated_one() -> None:
    history = InMemoryReplyHistory()
    guard = FabricationGuard(history=history)
    guard.check("I'm deploying the patch now, hang tight.", [], channel="c")
    (entry,) = history.recent("c")
    assert entry.text == "I'm deploying the patch now, hang tight."


def test_hook_compares_with_the_last_three_replies_only() -> None:
    guard = FabricationGuard()
    guard.check(LOOP, [], channel="c")
    for filler in ("The weather today is sunny with a light breeze from the west.",
                   "Tea is best brewed for three minutes at just under boiling.",
                   "Mountains in autumn are quiet, cold and very beautiful indeed."):
        guard.check(filler, [], channel="c")
    assert not guard.check(LOOP, [], channel="c").flagged


def test_history_keeps_the_last_n_per_channel() -> None:
    history = InMemoryReplyHistory(size=2)
    for text in ("one", "two", "three"):
        history.record("c", HistoryEntry.from_text(text))
    assert [e.text for e in history.recent("c")] == ["two", "three"]
    assert history.recent("unknown") == ()


def test_history_evicts_the_least_recently_used_channel() -> None:
    history = InMemoryReplyHistory(size=3, max_channels=2)
    history.record("a", HistoryEntry.from_text("a1"))
    history.record("b", HistoryEntry.from_text("b1"))
    history.recent("a")  # reading a channel counts as using it
    history.record("c", HistoryEntry.from_text("c1"))
    assert "a" in history and "c" in history and "b" not in history
    assert len(history) == 2
    history.clear("a")
    assert "a" not in history
    history.clear()
    assert len(history) == 0


def test_history_is_bounded_under_concurrent_writers() -> None:
    history = InMemoryReplyHistory(size=3, max_channels=5)
    entry = HistoryEntry.from_text("same")

    def write(worker: int) -> None:
        for i in range(200):
            history.record(f"ch{(worker * 7 + i) % 11}", entry)
            history.recent(f"ch{i % 11}")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(history) == 5
    assert all(len(history.recent(f"ch{i}")) <= 3 for i in range(11))


def test_history_store_is_replaceable() -> None:
    class DictHistory:
        """A store keeping only text, as a Redis-backed one would."""

        def __init__(self) -> None:
            self.texts: dict[str, list[str]] = {}

        def recent(self, channel: str) -> list[HistoryEntry]:
            return [HistoryEntry.from_text(t) for t in self.texts.get(channel, [])[-3:]]

        def record(self, channel: str, entry: HistoryEntry) -> None:
            self.texts.setdefault(channel, []).append(entry.text)

    store = DictHistory()
    assert isinstance(store, ReplyHistory)
    assert isinstance(InMemoryReplyHistory(), ReplyHistory)
    guard = FabricationGuard(history=store)
    guard.check(LOOP, [], channel="x")
    assert guard.check(LOOP, [], channel="x").tiers == (REPETITION,)
    assert store.texts["x"] == [LOOP, LOOP]


def test_default_history_size_follows_the_detector() -> None:
    guard = FabricationGuard(FabricationDetector(history_size=5))
    assert guard.history.size == 5  # type: ignore[union-attr]


@pytest.mark.expect_hook_errors
def test_hook_never_raises_when_the_detector_does() -> None:
    class BrokenDetector(FabricationDetector):
        def detect(self, *args: object, **kwargs: object) -> FabricationVerdict:
            raise RuntimeError("boom")

    history = InMemoryReplyHistory()
    guard = FabricationGuard(BrokenDetector(), history)
    with capture() as cap:
        verdict = guard.check("I'm deploying the patch now.", ["grep"], channel="c")
    assert verdict == FabricationVerdict.quiet("I'm deploying the patch now.", ["grep"])
    assert verdict.reply == "I'm deploying the patch now." and not verdict.flagged
    assert cap.counter_total(names.METRIC_HOOK_ERRORS) == 1
    # No detection; the one verdict says the check could not decide, and why.
    (evaluation,) = cap.events()
    assert evaluation.name == names.EVENT_EVALUATION_RESULT
    assert evaluation.attributes["error.type"] == "RuntimeError"
    assert names.ATTR_EVALUATION_SCORE_LABEL not in evaluation.attributes
    assert cap.payloads == []
    assert history.recent("c") == ()


def test_hook_returns_the_input_unchanged_for_a_non_string_reply() -> None:
    verdict = FabricationGuard().check(None, [])  # type: ignore[arg-type]
    assert verdict.reply is None and not verdict.flagged


# --- telemetry --------------------------------------------------------------------------
def test_flagged_reply_emits_event_counter_log_and_payload(
        caplog: pytest.LogCaptureFixture) -> None:
    guard = FabricationGuard()
    caplog.set_level(logging.WARNING, logger="guardtrace")
    with capture() as cap:
        guard.check("Let me read the notes. I'm deploying now.", ["grep"], channel="c1",
                    request_id="r1", agent="stratam")
    events = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert [e.attributes[names.ATTR_TIER] for e in events] == [ACTION]  # grep excused read
    attrs = events[0].attributes
    assert list(attrs)[0] == names.ATTR_REQUEST_ID and attrs[names.ATTR_REQUEST_ID] == "r1"
    assert attrs[names.ATTR_MODULE] == names.MODULE_REPLIES
    assert attrs[names.ATTR_MATCHED_PHRASE] == "I'm deploying"
    assert list(attrs[names.ATTR_TOOLS_FIRED]) == ["grep"]
    assert attrs[names.ATTR_CHANNEL] == "c1" and attrs[names.ATTR_AGENT] == "stratam"
    assert names.ATTR_SIMILARITY not in attrs
    assert cap.counter_total(names.METRIC_FABRICATIONS, tier=ACTION, agent="stratam",
                             module=names.MODULE_REPLIES) == 1
    (payload,) = cap.payloads
    assert payload.kind == names.PAYLOAD_KIND_FABRICATION and payload.request_id == "r1"
    assert '"tiers": ["action"]' in payload.body and "Let me read the notes." in payload.body
    (record,) = [r for r in caplog.records if r.name == "guardtrace.replies"]
    assert record.levelno == logging.WARNING
    fields = record.guardtrace  # type: ignore[attr-defined]
    assert fields[names.ATTR_OPERATION] == "fabrication_detection"
    assert fields[names.ATTR_REQUEST_ID] == "r1" and fields[names.ATTR_STATUS] == "flagged"
    assert fields[names.ATTR_DURATION_MS] >= 0


def test_repetition_event_carries_the_similarity() -> None:
    guard = FabricationGuard()
    with capture() as cap:
        guard.check(LOOP, [], channel="c", request_id="r1")
        guard.check(LOOP, [], channel="c", request_id="r2")
    (event,) = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert event.attributes[names.ATTR_REQUEST_ID] == "r2"
    assert event.attributes[names.ATTR_TIER] == REPETITION
    assert event.attributes[names.ATTR_SIMILARITY] == 1.0
    assert list(event.attributes[names.ATTR_TOOLS_FIRED]) == []
    assert cap.counter_total(names.METRIC_FABRICATIONS, tier=REPETITION) == 1


def test_one_event_and_count_per_tier() -> None:
    with capture() as cap:
        FabricationGuard().check("Let me read it. I'm deploying now.", [], request_id="r")
    assert [e.attributes[names.ATTR_TIER] for e in cap.events(
        names.EVENT_FABRICATION_DETECTED)] == [ACTION, READ]
    assert cap.counter_total(names.METRIC_FABRICATIONS) == 2


def test_agent_label_is_capped() -> None:
    guard = FabricationGuard()
    with capture(agent_label_cap=2) as cap:
        for agent in ("a1", "a2", "a3"):
            guard.check("I'm deploying now.", [], agent=agent)
    assert cap.counter_total(names.METRIC_FABRICATIONS, agent="a1") == 1
    assert cap.counter_total(names.METRIC_FABRICATIONS, agent="a2") == 1
    assert cap.counter_total(names.METRIC_FABRICATIONS, agent=names.OVERFLOW_LABEL) == 1
    # The event keeps the real name: span attributes are not metric series.
    assert cap.events(names.EVENT_FABRICATION_DETECTED)[-1].attributes[
        names.ATTR_AGENT] == "a3"


def test_module_label_defaults_to_replies_and_can_be_set() -> None:
    with capture() as cap:
        FabricationGuard().check("I'm deploying now.", [], request_id="r1", agent="a")
        FabricationGuard(module="checkout").check("I'm deploying now.", [], request_id="r2",
                                                  agent="a")
    first, second = cap.events(names.EVENT_FABRICATION_DETECTED)
    assert first.attributes[names.ATTR_MODULE] == names.MODULE_REPLIES
    assert second.attributes[names.ATTR_MODULE] == "checkout"
    assert cap.counter_total(names.METRIC_FABRICATIONS, module=names.MODULE_REPLIES) == 1
    assert cap.counter_total(names.METRIC_FABRICATIONS, module="checkout", agent="a") == 1


def test_quiet_reply_emits_only_its_pass(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="guardtrace")
    with capture() as cap:
        verdict = FabricationGuard().check("I'm running Claude Sonnet 4.5 through "
                                           "OpenRouter.", [], channel="c", agent="a")
    assert not verdict.flagged
    assert [(e.name, e.attributes[names.ATTR_EVALUATION_SCORE_LABEL]) for e in cap.events()] \
        == [(names.EVENT_EVALUATION_RESULT, names.EVALUATION_PASS)]
    assert cap.payloads == []
    assert cap.metric_points(names.METRIC_FABRICATIONS) == []
    assert [r for r in caplog.records if r.name.startswith("guardtrace")] == []


def test_request_id_defaults_to_a_generated_one() -> None:
    with capture() as cap:
        FabricationGuard().check("I'm deploying now.", [])
    rid = cap.events()[0].attributes[names.ATTR_REQUEST_ID]
    assert isinstance(rid, str) and len(rid) == 32


# --- offline scanner input --------------------------------------------------------------
def test_scan_record_output_shape() -> None:
    out = scan_fabrication_input({
        "id": "rec-1", "reply": "Let me read it. I'm deploying the new build to staging now.",
        "tools_fired": [], "history": ["old"], "channel": "c"})
    assert out == {"id": "rec-1", "flagged": True, "tiers": [ACTION, READ],
                   "matches": [{"tier": ACTION, "phrase": "I'm deploying"},
                               {"tier": READ, "phrase": "Let me read"}],
                   "similarity": None}


def test_scan_record_repetition_and_null_similarity() -> None:
    out = scan_fabrication_input({"id": 2, "reply": LOOP, "history": [LOOP]})
    assert out["tiers"] == [REPETITION] and out["similarity"] == 1.0
    # A tool ran this turn: progress, not a loop.
    out = scan_fabrication_input({"id": 2, "reply": LOOP, "tools_fired": ["x"],
                                  "history": [LOOP]})
    assert out["tiers"] == [] and out["similarity"] is None
    long_reply = LOOP + "\n" + LOOP  # the phrase is an excerpt of at most 80 characters
    out = scan_fabrication_input({"id": 2, "reply": long_reply, "history": [long_reply]})
    assert out["matches"] == [{"tier": REPETITION, "phrase": (LOOP + " " + LOOP)[:79] + "…"}]
    quiet = scan_fabrication_input({"id": 3, "reply": "Hello!"})
    assert quiet == {"id": 3, "flagged": False, "tiers": [], "matches": [],
                     "similarity": None}


def test_scan_record_uses_only_the_last_three_history_entries() -> None:
    others = ["The weather is sunny with a light breeze.", "Tea is best brewed for three minutes.",
              "Mountains in autumn are quiet and cold."]
    assert scan_fabrication_input({"id": 4, "reply": LOOP, "history": [LOOP, *others]}
                                  )["flagged"] is False
    assert scan_fabrication_input({"id": 4, "reply": LOOP, "history": [*others, LOOP]}
                                  )["tiers"] == [REPETITION]


@pytest.mark.parametrize(("record", "message"), [
    ({"id": 1}, "record 1: missing 'reply'"),
    ({"id": 1, "reply": 5}, "record 1: 'reply' must be a string, got int"),
    ({"id": 1, "reply": "x", "tools_fired": "write_file"},
     "record 1: 'tools_fired' must be a list of strings, got str"),
    ({"id": 1, "reply": "x", "tools_fired": ["ok", 3]},
     "record 1: 'tools_fired[1]' must be a string, got int"),
    ({"id": 1, "reply": "x", "history": "earlier"},
     "record 1: 'history' must be a list of strings, got str"),
    ({"id": 1, "reply": "x", "history": [None]},
     "record 1: 'history[0]' must be a string, got NoneType"),
    ({"reply": None}, "record: 'reply' must be a string, got NoneType"),
])
def test_scan_record_rejects_malformed_input(record: dict, message: str) -> None:
    with pytest.raises(GuardInputError) as info:
        scan_fabrication_input(record)
    assert str(info.value) == message


def test_scan_record_must_be_a_mapping() -> None:
    with pytest.raises(GuardInputError, match="must be an object, got list"):
        scan_fabrication_input(["reply"])  # type: ignore[arg-type]
