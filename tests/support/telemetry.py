"""Telemetry doubles for tests of the hooks' never-raise contract."""

from __future__ import annotations

from typing import Any

from guardtrace.collectors.emit.telemetry import GuardTelemetry


class ExplodingTelemetry(GuardTelemetry):
    """A telemetry backend where every emission fails."""

    def event(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("span exporter exploded")

    def count(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("meter exploded")

    def log(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("logger exploded")

    def payload(self, *args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("sink exploded")
