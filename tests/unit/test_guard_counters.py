"""collectors/emit/guard_counters.py: guard counters keep their totals in-process and the
SDK observes them; what is exported is the cumulative sum the synchronous counter gave."""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.metrics import CallbackOptions
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

from guardtrace.collectors.emit.guard_counters import ObservedCounter
from guardtrace.collectors.emit.telemetry import GuardTelemetry
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names


def _points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return [(metric, point) for resource in data.resource_metrics
            for scope in resource.scope_metrics for metric in scope.metrics
            if metric.name == name for point in metric.data.data_points]


def _counter() -> tuple[ObservedCounter, InMemoryMetricReader, list[str]]:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("m")
    warnings: list[str] = []
    return ObservedCounter(meter, "guard.count", warnings.append), reader, warnings


def test_totals_per_label_set_leave_as_a_monotonic_cumulative_sum() -> None:
    counter, reader, _ = _counter()
    for n in range(5):
        counter.add(1, {"module": "replies", "agent": f"a{n % 2}"})
    counter.add(3, {"agent": "a0", "module": "replies"})  # the same set, another order
    assert len(counter._observe(CallbackOptions())) == 2  # one observation per set
    points = _points(reader, "guard.count")
    by_agent = {point.attributes["agent"]: point.value for _, point in points}
    assert by_agent == {"a0": 6, "a1": 2}
    metric = points[0][0]
    assert metric.data.is_monotonic
    assert metric.data.aggregation_temporality == AggregationTemporality.CUMULATIVE
    counter.add(1, {"module": "replies", "agent": "a1"})
    later = {point.attributes["agent"]: point.value for _, point in _points(reader, "guard.count")}
    assert later == {"a0": 6, "a1": 3}  # cumulative: the totals, not what came since


def test_a_negative_amount_is_refused_with_a_warning() -> None:
    counter, reader, warnings = _counter()
    counter.add(2, {"module": "m"})
    counter.add(-1, {"module": "m"})
    assert [point.value for _, point in _points(reader, "guard.count")] == [2]
    assert warnings and "-1" in warnings[0]


def test_counts_from_many_threads_are_all_kept() -> None:
    counter, reader, _ = _counter()
    attributes = {"module": "replies", "agent": "a"}

    def count() -> None:
        for _ in range(5000):
            counter.add(1, attributes)

    threads = [threading.Thread(target=count) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [point.value for _, point in _points(reader, "guard.count")] == [20_000]


def test_guard_telemetry_counts_through_them_and_a_new_state_starts_from_zero() -> None:
    guard = GuardTelemetry(names.MODULE_REPLIES, "test")
    with capture() as cap:
        for _ in range(3):
            guard.count(names.METRIC_FABRICATIONS, agent="bot",
                        labels={names.ATTR_TIER: names.TIER_ACTION})
        assert cap.counter_total(names.METRIC_FABRICATIONS, agent="bot",
                                 module=names.MODULE_REPLIES, tier=names.TIER_ACTION) == 3
    with capture() as cap:
        guard.count(names.METRIC_FABRICATIONS, agent="bot")
        assert cap.counter_total(names.METRIC_FABRICATIONS) == 1


def test_the_agent_label_cap_still_folds_into_other() -> None:
    guard = GuardTelemetry(names.MODULE_PLANNING, "test")
    with capture(agent_label_cap=2) as cap:
        for agent in ("a", "b", "c", "d"):
            guard.count(names.METRIC_HALLUCINATIONS, agent=agent)
        points = cap.metric_points(names.METRIC_HALLUCINATIONS)
        assert sorted(attrs[names.ATTR_AGENT] for attrs, _ in points) == [
            names.OVERFLOW_LABEL, "a", "b"]
        assert cap.counter_total(names.METRIC_HALLUCINATIONS, agent=names.OVERFLOW_LABEL) == 2
        assert cap.counter_total(names.METRIC_LABEL_OVERFLOW) == 2
