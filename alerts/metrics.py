"""What an alert rule can watch: each metric's name, what it measures and how it is read.

Three kinds, which decide the fields a rule on them takes:

* ``rate``: a ratio of guard events over a window, from the per-minute rollup and the
  request lookup (the overview's own reads). Per module, and with a minimum volume: the
  denominator must reach ``min_volume`` before the rate means anything.
* ``count``: things that went wrong in a window (dead letters, telemetry the collectors
  dropped); no module, no volume.
* ``gauge``: a reading of now (consumer lag, from the broker); no window, no baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ..schemas import names

__all__ = ["METRICS", "MODULES", "MetricSpec", "RATE_BOUNDED"]

MetricKind = Literal["rate", "count", "gauge"]


@dataclass(frozen=True)
class MetricSpec:
    """One metric a rule may name.

    Attributes:
        name: As the rules file writes it.
        kind: ``rate``, ``count`` or ``gauge`` (see the module docstring).
        meaning: What the value is, for messages and the README.
        volume: What ``min_volume`` counts (rates only), else empty.
    """

    name: str
    kind: MetricKind
    meaning: str
    volume: str = ""

    @property
    def windowed(self) -> bool:
        return self.kind != "gauge"


METRICS: Final = {spec.name: spec for spec in (
    MetricSpec("recovery_rate", "rate",
               "recovered / (recovered + unrecoverable) plan hallucinations",
               "settled plan hallucinations"),
    MetricSpec("unrecoverable_rate", "rate",
               "unrecoverable plan hallucinations / requests seen", "requests seen"),
    MetricSpec("fabrication_rate", "rate", "fabrications detected / requests seen",
               "requests seen"),
    MetricSpec("verification_bypass_rate", "rate",
               "verifications bypassed / verifications required", "verifications required"),
    MetricSpec("dead_letters", "count", "records the consumers could not decode"),
    MetricSpec("collector_drops", "count",
               "telemetry the collectors dropped or failed on (export and payload drops, "
               "hook errors)"),
    MetricSpec("consumer_lag", "gauge", "records the consumer group has not committed"),
)}
# Rates that are a share of their denominator, so never above 1 (fabrications per request
# can be: one reply may hold more than one).
RATE_BOUNDED: Final = frozenset({"recovery_rate", "unrecoverable_rate",
                                 "verification_bypass_rate"})
MODULES: Final = (names.MODULE_PLANNING, names.MODULE_REPLIES, names.MODULE_VERIFICATION)
