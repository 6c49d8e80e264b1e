"""The guards' counters: totals kept here, read by the SDK when it collects.

A guard counts on the agent's thread, once per verdict. The SDK's synchronous
``Counter.add`` costs some 10 to 15 us a call there (the attribute set hashed and looked
up under a lock, an exemplar offered for the current span), more than the rest of a
guard event's counting. Here a count is one dictionary update under a lock, and each
counter is an OpenTelemetry *observable* counter whose callback reports the cumulative
total of every label set when the reader collects (on its own thread, at every export
and every ``force_flush``).

What leaves is what the synchronous counter sent: a monotonic cumulative sum per metric,
one point per label set, with the same attributes (label sets compare as the SDK's do,
order aside). Two things differ: a point's start time is the first collection that saw
its label set, not the first count, and no exemplar (a sampled span id) is attached.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation

__all__ = ["ObservedCounter"]


class ObservedCounter:
    """One guard counter: ``add`` keeps the totals, the SDK observes them.

    Args:
        meter: The meter the observable counter is created on.
        name: The metric name.
        warn: Called with a message when a count is refused (a negative value), as the
            SDK's counter warns and drops it.
    """

    def __init__(self, meter: Any, name: str, warn: Any) -> None:
        self.name = name
        self._warn = warn
        self._lock = threading.Lock()
        # frozenset of the attribute items -> [total, the attributes as first given]
        self._totals: dict[frozenset[tuple[str, Any]], list[Any]] = {}
        meter.create_observable_counter(name, callbacks=[self._observe])

    def add(self, amount: int | float, attributes: Mapping[str, Any]) -> None:
        """Add ``amount`` (at least 0) to the total of ``attributes``' label set."""
        if amount < 0:
            self._warn(f"counter {self.name} takes no negative amount; {amount} dropped")
            return
        key = frozenset(attributes.items())
        with self._lock:
            entry = self._totals.get(key)
            if entry is None:
                self._totals[key] = [amount, dict(attributes)]
            else:
                entry[0] += amount

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = [(total, attributes) for total, attributes in self._totals.values()]
        return [Observation(total, attributes) for total, attributes in totals]
