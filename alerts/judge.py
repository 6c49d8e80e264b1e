"""One rule judged at one moment: its windows, its label sets, its volume, its condition.

Windows start on a minute: the rates come from a per-minute rollup, so a window of 5m
evaluated at 12:07:40 covers 12:02:00 to now, numerator and denominator alike (the
request count could be cut to the second, the event counts could not, and a rate of
the two would then be skewed). A baseline is the same metric over the
``baseline_window`` before the window, counts scaled to the window's length.

Below ``min_volume`` a rate is not judged and the condition does not hold: a firing
alert on a rate resolves once traffic stops, and one request cannot fire one.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .rules import Rule
from .sources import Measurement, MetricSource, MetricUnavailable
from .state import Labels, Verdict

__all__ = ["judge", "window_start"]

MODULE_LABEL = "module"


def window_start(now: datetime, seconds: float) -> datetime:
    """The start of a window of ``seconds`` ending ``now``, on a minute boundary."""
    start = now - timedelta(seconds=seconds)
    return start.replace(second=0, microsecond=0)


def judge(rule: Rule, source: MetricSource, now: datetime,
          tracked: list[Labels] | None = None) -> list[Verdict]:
    """Verdicts of ``rule`` at ``now``, one per label set.

    Args:
        tracked: Label sets of this rule whose alerts are pending or firing: judged even
            when their module has gone quiet, so they can resolve.

    A metric that cannot be read gives verdicts with ``error`` set (never raises).
    """
    try:
        label_sets = _label_sets(rule, source, now, tracked or [])
    except MetricUnavailable as exc:
        return [Verdict(labels, False, error=str(exc)) for labels in (tracked or [()])]
    verdicts = []
    for labels in label_sets:
        module = dict(labels).get(MODULE_LABEL)
        try:
            verdicts.append(_judge_one(rule, source, now, labels, module))
        except MetricUnavailable as exc:
            verdicts.append(Verdict(labels, False, error=str(exc)))
    return verdicts


def _label_sets(rule: Rule, source: MetricSource, now: datetime,
                tracked: list[Labels]) -> list[Labels]:
    if rule.module is not None:
        return [((MODULE_LABEL, rule.module),)]
    if not rule.per_module:
        return [()]
    assert rule.window_s is not None  # rates have windows
    seen = source.modules(window_start(now, rule.window_s))
    found = {((MODULE_LABEL, module),) for module in seen} | set(tracked)
    return sorted(found)


def _judge_one(rule: Rule, source: MetricSource, now: datetime, labels: Labels,
               module: str | None) -> Verdict:
    if rule.window_s is None:
        current = source.now(rule.metric)
    else:
        current = source.measure(rule.metric, window_start(now, rule.window_s), now, module)
    if _too_little(rule, current):
        return Verdict(labels, False, current.value, None, current.volume,
                       f"{current.detail}: below the min volume of {rule.min_volume}")
    baseline, baseline_note = _baseline(rule, source, now, module)
    threshold = rule.condition.threshold(baseline)
    if threshold is None:
        return Verdict(labels, False, current.value, None, current.volume,
                       f"{current.detail}; {baseline_note}")
    if current.value is None:
        return Verdict(labels, False, None, threshold, current.volume, current.detail)
    detail = current.detail + (f"; {baseline_note}" if baseline_note else "")
    return Verdict(labels, rule.condition.holds(current.value, threshold), current.value,
                   threshold, current.volume, detail)


def _too_little(rule: Rule, measured: Measurement) -> bool:
    return rule.min_volume is not None and (measured.volume or 0) < rule.min_volume


def _baseline(rule: Rule, source: MetricSource, now: datetime,
              module: str | None) -> tuple[float | None, str]:
    """The baseline value (None: not known) and a note saying what it was."""
    condition = rule.condition
    if condition.kind != "above_baseline":
        return None, ""
    assert rule.window_s is not None and condition.baseline_window_s is not None
    end = window_start(now, rule.window_s)
    start = window_start(now, condition.baseline_window_s)
    measured = source.measure(rule.metric, start, end, module)
    if _too_little(rule, measured):
        return None, f"baseline {measured.detail}: below the min volume of {rule.min_volume}"
    if measured.value is None:
        return None, f"no baseline ({measured.detail})"
    value = measured.value
    if rule.spec.kind == "count":
        # A count over the longer baseline period, scaled to the window's length.
        value *= (now - end).total_seconds() / max((end - start).total_seconds(), 1.0)
    return value, f"baseline {value:.4g} ({measured.detail})"
