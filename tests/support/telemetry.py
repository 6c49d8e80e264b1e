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

    def evaluation(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("evaluation exploded")

    def evaluation_failed(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("evaluation exploded")

    def verdict_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("span exploded")
