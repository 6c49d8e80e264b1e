"""The alert state machine, the judging of one rule, and the evaluator's bookkeeping.

Our own logic, so fakes stand in for the store and the webhooks here (the real ones are
exercised in tests/unit/test_alert_delivery.py and tests/integration/test_alerts*.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from guardtrace.alerts import (
    FIRING,
    INACTIVE,
    PENDING,
    RESOLVED,
    AlertEvaluator,
    AlertTracker,
    DeadLetterLog,
    Measurement,
    MetricUnavailable,
    Notification,
    Verdict,
    Webhook,
    judge,
    parse_rules,
)
from guardtrace.alerts.judge import window_start
from guardtrace.store.alert_events import AlertEvent

T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
HOOKS = """
[[webhook]]
name = "chat"
url = "https://chat.example/hook"
format = "slack"

[[webhook]]
name = "pager"
url = "https://pager.example/hook"
"""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def rules_of(body: str, hooks: str = HOOKS) -> Any:
    return parse_rules(f"{hooks}\n{body}", "rules.toml", {})


def one_rule(body: str) -> Any:
    [rule] = rules_of(f"[[rule]]\n{body}").rules
    return rule


RULE = one_rule('name = "fab"\nmetric = "fabrication_rate"\nabove = 0.1\nmin_volume = 5\n'
                'for = "2m"\nclear_for = "3m"\nnotify = ["chat", "pager"]')


def holds(value: float = 0.5) -> Verdict:
    return Verdict((), True, value, 0.1, 50)


def clear(value: float = 0.01) -> Verdict:
    return Verdict((), False, value, 0.1, 50)


def run(tracker: AlertTracker, rule: Any, steps: list[tuple[float, Verdict]]) -> list[str]:
    """The states entered, as ``"t:previous->state"``, over evaluations at ``steps``."""
    out = []
    for seconds, verdict in steps:
        transition = tracker.step(rule, verdict, at(seconds))
        if transition is not None:
            out.append(f"{seconds:g}:{transition.previous}->{transition.state}")
    return out


# -- the state machine -----------------------------------------------------------------------
def test_an_alert_fires_only_after_its_condition_held_for_the_whole_for() -> None:
    tracker = AlertTracker()
    assert run(tracker, RULE, [(0, holds()), (60, holds()), (120, holds())]) == [
        "0:inactive->pending", "120:pending->firing"]
    assert tracker.state("fab").state == FIRING
    assert tracker.state("fab").since == at(0)


def test_a_pending_alert_that_clears_goes_back_to_inactive_and_starts_over() -> None:
    tracker = AlertTracker()
    assert run(tracker, RULE, [(0, holds()), (60, clear()), (120, holds()), (180, holds()),
                               (240, holds())]) == [
        "0:inactive->pending", "60:pending->inactive", "120:inactive->pending",
        "240:pending->firing"]


def test_a_firing_alert_resolves_only_after_clear_for() -> None:
    tracker = AlertTracker()
    steps = [(0, holds()), (120, holds()), (180, clear()), (240, clear()), (300, clear()),
             (360, clear())]
    assert run(tracker, RULE, steps) == ["0:inactive->pending", "120:pending->firing",
                                        "360:firing->resolved"]
    assert tracker.state("fab").state == INACTIVE


def test_a_metric_hovering_at_its_threshold_does_not_flap() -> None:
    tracker = AlertTracker()
    flapping = [(120 + 60 * i, clear() if i % 2 else holds()) for i in range(20)]
    calm = [(1320 + 60 * i, clear()) for i in range(4)]
    entered = run(tracker, RULE, [(0, holds()), *flapping, *calm])
    # One firing and one resolved, however often the value crossed its threshold.
    # The last crossing is at 1260 s; it stays clear from there: resolved 180 s later.
    assert entered == ["0:inactive->pending", "120:pending->firing", "1440:firing->resolved"]


def test_for_zero_fires_at_once_and_clear_for_zero_resolves_at_once() -> None:
    rule = one_rule('name = "dl"\nmetric = "dead_letters"\nabove = 0\nfor = "0s"\n'
                    'clear_for = "0s"')
    assert run(AlertTracker(), rule, [(0, holds()), (60, holds()), (120, clear())]) == [
        "0:inactive->firing", "120:firing->resolved"]


def test_an_unreadable_metric_changes_nothing() -> None:
    tracker = AlertTracker()
    broken = Verdict((), False, error="cannot read the store")
    assert run(tracker, RULE, [(0, holds()), (120, holds()), *[(180 + 60 * i, broken)
                                                                for i in range(10)]]) == [
        "0:inactive->pending", "120:pending->firing"]
    assert tracker.state("fab").state == FIRING


def test_label_sets_are_separate_alerts() -> None:
    tracker = AlertTracker()
    replies, planning = (("module", "replies"),), (("module", "planning"),)
    tracker.step(RULE, Verdict(replies, True, 0.5, 0.1, 50), at(0))
    tracker.step(RULE, Verdict(planning, False, 0.0, 0.1, 50), at(0))
    assert tracker.labels_of("fab") == [replies]


def test_a_restored_alert_resolves_without_firing_again() -> None:
    tracker = AlertTracker()
    tracker.restore("fab", (), FIRING, at(-600))
    assert run(tracker, RULE, [(0, holds()), (60, clear()), (240, clear())]) == [
        "240:firing->resolved"]


# -- judging one rule --------------------------------------------------------------------------
@dataclass
class FakeSource:
    """Answers measure() from a function of (metric, start, end, module)."""

    answer: Callable[[str, datetime, datetime, str | None], Measurement]
    seen_modules: list[str] = field(default_factory=list)
    lag: Measurement | Exception = field(default_factory=lambda: Measurement(0.0))
    calls: list[tuple[str, datetime, datetime, str | None]] = field(default_factory=list)

    def measure(self, metric: str, start: datetime, end: datetime,
                module: str | None) -> Measurement:
        self.calls.append((metric, start, end, module))
        return self.answer(metric, start, end, module)

    def now(self, metric: str) -> Measurement:
        if isinstance(self.lag, Exception):
            raise self.lag
        return self.lag

    def modules(self, since: datetime) -> list[str]:
        return list(self.seen_modules)


def rate(value: float | None, volume: int) -> FakeSource:
    return FakeSource(lambda *_: Measurement(value, volume, f"{volume} requests"))


def test_windows_start_on_a_minute_for_numerator_and_denominator_alike() -> None:
    source = rate(0.5, 50)
    now = T0 + timedelta(minutes=7, seconds=40)
    judge(RULE, source, now)
    assert source.calls == [("fabrication_rate", T0 + timedelta(minutes=2), now, None)]
    assert window_start(now, 60) == T0 + timedelta(minutes=6)


def test_below_min_volume_a_rate_is_not_judged_however_high() -> None:
    [few] = judge(RULE, rate(1.0, 4), T0)
    assert not few.holds and few.value == 1.0 and few.threshold is None
    assert few.detail == "4 requests: below the min volume of 5"
    [enough] = judge(RULE, rate(0.2, 5), T0)
    assert enough.holds and enough.threshold == 0.1 and enough.volume == 5


def test_one_request_cannot_fire_an_alert_through_the_evaluator() -> None:
    recorder, notifier = Recorder(), Notifier()
    evaluator = AlertEvaluator(rules_of(f"[[rule]]\n{RULE_TEXT}"), rate(1.0, 1), recorder,
                               notifier)
    for minute in range(10):
        evaluator.evaluate(at(60 * minute))
    assert recorder.events == [] and notifier.sent == []


def test_a_rate_of_nothing_has_no_value_and_does_not_hold() -> None:
    rule = one_rule('name = "r"\nmetric = "recovery_rate"\nbelow = 0.5\nmin_volume = 1')
    [verdict] = judge(rule, rate(None, 0), T0)
    assert not verdict.holds and verdict.value is None


def test_above_baseline_compares_with_the_period_before_the_window() -> None:
    rule = one_rule('name = "spike"\nmetric = "fabrication_rate"\nabove_baseline = 3\n'
                    'baseline_window = "1h"\nwindow = "10m"\nmin_volume = 20')
    now = T0 + timedelta(minutes=30)

    def answer(metric: str, start: datetime, end: datetime, module: str | None) -> Measurement:
        if end == now:
            return Measurement(0.35, 40, "14 fabrications / 40 requests")
        assert (start, end) == (now - timedelta(hours=1), now - timedelta(minutes=10))
        return Measurement(0.1, 200, "20 fabrications / 200 requests")

    [verdict] = judge(rule, FakeSource(answer), now)
    assert verdict.holds and verdict.threshold == pytest.approx(0.3)
    assert "baseline 0.1" in verdict.detail

    def thin_baseline(metric: str, start: datetime, end: datetime,
                      module: str | None) -> Measurement:
        return Measurement(0.35, 40) if end == now else Measurement(0.0, 3, "0 / 3 requests")

    [unknown] = judge(rule, FakeSource(thin_baseline), now)
    assert not unknown.holds and unknown.threshold is None
    assert "baseline 0 / 3 requests: below the min volume of 20" in unknown.detail


def test_a_count_baseline_is_scaled_to_the_window() -> None:
    rule = one_rule('name = "dl"\nmetric = "dead_letters"\nabove_baseline = 2\n'
                    'baseline_window = "61m"\nwindow = "1m"')
    now = T0 + timedelta(minutes=61)  # window 1 min, baseline period 60 min before it

    def answer(metric: str, start: datetime, end: datetime, module: str | None) -> Measurement:
        return Measurement(5.0 if end == now else 120.0)

    [verdict] = judge(rule, FakeSource(answer), now)
    assert verdict.threshold == pytest.approx(2 * 120 / 60)  # 2 a minute, times 2
    assert verdict.holds


def test_per_module_judges_each_module_seen_and_each_still_tracked() -> None:
    rule = one_rule('name = "fab"\nmetric = "fabrication_rate"\nabove = 0.1\nper_module = true\n'
                    'min_volume = 1')
    source = FakeSource(lambda m, s, e, module: Measurement(
        0.5 if module == "replies" else 0.0, 10), seen_modules=["replies", "verification"])
    verdicts = judge(rule, source, T0, tracked=[(("module", "planning"),)])
    assert [(v.labels, v.holds) for v in verdicts] == [
        ((("module", "planning"),), False), ((("module", "replies"),), True),
        ((("module", "verification"),), False)]
    assert sorted(call[3] or "" for call in source.calls) == ["planning", "replies",
                                                               "verification"]


def test_a_gauge_is_read_now_and_its_failure_is_an_error_verdict() -> None:
    rule = one_rule('name = "lag"\nmetric = "consumer_lag"\nabove = 100')
    [high] = judge(rule, FakeSource(lambda *_: Measurement(None), lag=Measurement(250.0)), T0)
    assert high.holds and high.value == 250
    [broken] = judge(rule, FakeSource(lambda *_: Measurement(None),
                                      lag=MetricUnavailable("broker unreachable")), T0)
    assert broken.error == "broker unreachable" and not broken.holds


# -- the evaluator -----------------------------------------------------------------------------
RULE_TEXT = ('name = "fab"\nmetric = "fabrication_rate"\nabove = 0.1\nmin_volume = 5\n'
             'for = "1m"\nclear_for = "2m"\nnotify = ["chat", "pager"]')


@dataclass
class Recorder:
    events: list[AlertEvent] = field(default_factory=list)
    failures: int = 0

    def write(self, events: Any) -> int:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("ClickHouse is away")
        self.events.extend(events)
        return len(events)


@dataclass
class Notifier:
    sent: list[tuple[str, Notification]] = field(default_factory=list)

    def submit(self, webhook: Webhook, notification: Notification) -> None:
        self.sent.append((webhook.name, notification))


class Switch:
    """A rate the test turns up and down."""

    def __init__(self) -> None:
        self.value = 0.0

    def __call__(self, *_: Any) -> Measurement:
        return Measurement(self.value, 50, f"{self.value * 50:g} fabrications / 50 requests")


def test_transitions_are_recorded_and_firing_and_resolved_are_sent_to_each_webhook() -> None:
    switch, recorder, notifier = Switch(), Recorder(), Notifier()
    evaluator = AlertEvaluator(rules_of(f"[[rule]]\n{RULE_TEXT}"), FakeSource(switch),
                               recorder, notifier)
    switch.value = 0.4
    evaluator.evaluate(at(0))
    evaluator.evaluate(at(60))
    switch.value = 0.0
    for seconds in (120, 180, 240):
        evaluator.evaluate(at(seconds))
    assert [(e.previous, e.state) for e in recorder.events] == [
        (INACTIVE, PENDING), (PENDING, FIRING), (FIRING, RESOLVED)]
    fired = recorder.events[1]
    assert (fired.rule, fired.metric, fired.value, fired.threshold, fired.volume) == (
        "fab", "fabrication_rate", 0.4, 0.1, 50)
    assert fired.active_since == at(0) and fired.message.startswith("[FIRING] fab")
    # Pending is recorded, never sent; firing and resolved go to both webhooks.
    assert [(name, n.status) for name, n in notifier.sent] == [
        ("chat", FIRING), ("pager", FIRING), ("chat", RESOLVED), ("pager", RESOLVED)]
    resolved = notifier.sent[-1][1]
    assert resolved.since == at(0) and resolved.at == at(240)
    assert "clear of: fabrication_rate over 5m above 0.1" in resolved.text()


def test_transitions_the_store_refused_are_written_later_or_dead_lettered(
        tmp_path: Path) -> None:
    switch, recorder = Switch(), Recorder(failures=1)
    log = DeadLetterLog(tmp_path / "dead.jsonl")
    evaluator = AlertEvaluator(rules_of(f"[[rule]]\n{RULE_TEXT}"), FakeSource(switch),
                               recorder, Notifier(), log)
    switch.value = 0.4
    evaluator.evaluate(at(0))  # pending: the insert fails, the row is kept
    assert recorder.events == [] and evaluator.unwritten == 1
    evaluator.evaluate(at(60))  # firing: both rows go in, in order
    assert [e.state for e in recorder.events] == [PENDING, FIRING]
    assert evaluator.unwritten == 0

    switch.value = 0.0
    recorder.failures = 5
    evaluator.evaluate(at(120))
    evaluator.evaluate(at(240))  # resolved, and refused
    evaluator.close()  # one more try, refused too: kept in the log, not lost
    [kept] = log.records()
    assert (kept["kind"], kept["rule"], kept["state"]) == ("alert_event", "fab", RESOLVED)


def test_removing_a_firing_rule_from_the_file_resolves_it_and_says_so() -> None:
    switch, recorder, notifier = Switch(), Recorder(), Notifier()
    evaluator = AlertEvaluator(rules_of(f"[[rule]]\n{RULE_TEXT}"), FakeSource(switch),
                               recorder, notifier)
    switch.value = 0.4
    evaluator.evaluate(at(0))
    evaluator.evaluate(at(60))
    other = rules_of('[[rule]]\nname = "dl"\nmetric = "dead_letters"\nabove = 10')
    evaluator.replace_rules(other, at(90))
    assert [(e.rule, e.state) for e in recorder.events][-1] == ("fab", RESOLVED)
    name, last = notifier.sent[-1]
    assert (name, last.status, last.reason) == ("pager", RESOLVED,
                                                "the rule was removed from the rules file")
    assert evaluator.tracker.rules() == set()


def test_a_restart_takes_over_firing_alerts_and_closes_those_of_removed_rules() -> None:
    switch, recorder, notifier = Switch(), Recorder(), Notifier()
    evaluator = AlertEvaluator(rules_of(f"[[rule]]\n{RULE_TEXT}"), FakeSource(switch),
                               recorder, notifier)

    def stored(rule: str, state: str) -> AlertEvent:
        return AlertEvent(at(-300), rule, {}, state, PENDING, "fabrication_rate", "c", 0.4,
                          0.1, 50, at(-360))

    taken = evaluator.restore([stored("fab", FIRING), stored("gone", FIRING),
                               stored("old", RESOLVED)], at(0))
    assert taken == 1
    assert [(e.rule, e.previous, e.state) for e in recorder.events] == [
        ("gone", FIRING, RESOLVED)]
    switch.value = 0.4
    evaluator.evaluate(at(0))  # still bad: no second firing
    switch.value = 0.0
    evaluator.evaluate(at(60))
    evaluator.evaluate(at(180))
    assert [(name, n.status) for name, n in notifier.sent] == [("chat", RESOLVED),
                                                              ("pager", RESOLVED)]
    assert notifier.sent[0][1].since == at(-360)


def test_an_evaluation_reports_what_it_could_not_read() -> None:
    def broken(*_: Any) -> Measurement:
        raise MetricUnavailable("cannot read fabrication_rate from the store: gone")

    evaluation = AlertEvaluator(rules_of(f"[[rule]]\n{RULE_TEXT}"),
                                FakeSource(broken)).evaluate(at(0))
    [(rule, verdict)] = evaluation.errors
    assert rule.name == "fab" and "gone" in (verdict.error or "")
    assert evaluation.transitions == []
