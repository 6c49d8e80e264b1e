"""collectors/emit/sdk_events.py: a guard event added on the quick path is the event
``span.add_event`` adds, and whatever the quick path cannot vouch for takes the public
path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import SpanLimits, TracerProvider

from guardtrace.collectors.emit import sdk_events
from guardtrace.collectors.emit.sdk_events import add_event


@pytest.fixture
def public_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the events that went through the SDK's public ``add_event``."""
    calls: list[str] = []
    original = SdkSpan.add_event

    def counting(self: Any, name: str, attributes: Any = None, timestamp: Any = None) -> None:
        calls.append(name)
        original(self, name, attributes, timestamp)

    # Counted without overriding the span class's method: sdk_events compares the class's
    # add_event with the SDK's own, so it patches the reference it compares with too.
    monkeypatch.setattr(SdkSpan, "add_event", counting)
    monkeypatch.setattr(sdk_events, "_SDK_ADD_EVENT", counting)
    yield calls


def _both(attributes: dict[str, Any], limits: SpanLimits | None = None) -> tuple[Any, Any]:
    """The event the quick path adds and the one span.add_event adds."""
    tracer = TracerProvider(span_limits=limits).get_tracer("t")
    span = tracer.start_span("s")
    add_event(span, "guard.event", dict(attributes))
    span.add_event("guard.event", dict(attributes))
    span.end()
    ours, theirs = span.events
    return ours, theirs


def _same(ours: Any, theirs: Any) -> None:
    assert ours.name == theirs.name
    assert isinstance(ours.attributes, BoundedAttributes)
    assert list(ours.attributes.items()) == list(theirs.attributes.items())
    assert [type(v) for v in ours.attributes.values()] == [
        type(v) for v in theirs.attributes.values()]
    assert ours.dropped_attributes == theirs.dropped_attributes
    assert ours.attributes.maxlen == theirs.attributes.maxlen
    assert ours.timestamp <= theirs.timestamp
    with pytest.raises(TypeError):
        ours.attributes["added"] = "later"  # immutable, as the SDK's


GUARD_ATTRIBUTES = {
    "request_id": "req-1", "module": "replies", "tier": "action", "score": 0.9,
    "allowed_agent_count": 12, "hall_retry": 0, "ok": True,
    "tools_fired": ["read_file", "search_docs"], "suggested": ("a", "b"), "empty": [],
    "mixed": [1, "two", 3.0, False],
}


def test_a_guard_event_takes_the_quick_path_and_is_the_sdks_event(
        public_calls: list[str]) -> None:
    ours, theirs = _both(GUARD_ATTRIBUTES)
    _same(ours, theirs)
    assert public_calls == ["guard.event"]  # only the comparison's own call


@pytest.mark.parametrize("attributes, limits", [
    ({"nested": [["a"]]}, None),  # a sequence in a sequence
    ({"raw": b"bytes"}, None),
    ({"mapping": {"a": 1}}, None),
    ({"other": object()}, None),
    ({1: "not a str key"}, None),
    ({"": "empty key"}, None),
    ({"long": "x" * 50}, SpanLimits(max_attribute_length=10)),  # the SDK cuts it
    ({f"k{n}": n for n in range(5)}, SpanLimits(max_event_attributes=3)),  # it drops two
])
def test_what_the_quick_path_cannot_vouch_for_takes_the_public_path(
        public_calls: list[str], attributes: dict[Any, Any], limits: SpanLimits | None) -> None:
    ours, theirs = _both(attributes, limits)
    assert public_calls == ["guard.event", "guard.event"]
    assert dict(ours.attributes) == dict(theirs.attributes)
    assert ours.dropped_attributes == theirs.dropped_attributes


def test_a_span_class_with_its_own_add_event_is_left_to_it() -> None:
    seen: list[str] = []

    class Subclassed(SdkSpan):
        def add_event(self, name: str, attributes: Any = None, timestamp: Any = None) -> None:
            seen.append(name)
            super().add_event(name, attributes, timestamp)

    span = TracerProvider().get_tracer("t").start_span("s")
    span.__class__ = Subclassed
    add_event(span, "guard.event", {"module": "replies"})
    assert seen == ["guard.event"]


def test_an_ended_span_takes_no_event_either_way() -> None:
    span = TracerProvider().get_tracer("t").start_span("s")
    span.end()
    add_event(span, "late", {"module": "replies"})
    assert span.events == ()
