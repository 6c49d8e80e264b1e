"""OTLP trace requests written straight from the SDK's spans: the same bytes as
``encode_spans(spans).SerializeToString()``, at a fraction of its cost.

Why not the SDK's encoder: it builds a protobuf object for every attribute of every span
and event (a ``KeyValue`` holding an ``AnyValue``), then serializes the tree. On guard
events that was the largest part of the agent's CPU per event, more than recording the
event. Here each message is written as bytes, field by field, in field-number order as
the protobuf runtime writes it, and a guard event's attributes are mostly values seen
before (module, tier, agent, tool names), so each (key, value) pair of a string, an int
or a tuple of strings is encoded once and its bytes reused.

What goes out is what the SDK's encoder would send: spans grouped by resource, then by
instrumentation scope (equal objects share a group, as in its dicts), in the order they
came; the same defaults left out. A span this writer cannot take (a value of a type it
does not know, a string that is not valid UTF-8, an out-of-range number) is encoded by
the SDK's own ``_encode_span``, so it leaves exactly as it would have (the SDK logs and
skips an attribute it cannot encode). tests/unit/test_otlp_span_encoder.py compares the
two byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from ..emit.attribute_items import attribute_items

__all__ = ["encode_trace_request"]

# Attributes remembered, encoded: guard attributes repeat; long values rarely do.
_MEMO_MAX_BYTES = 512
_MEMO_ENTRIES = 8192
# Resources and scopes remembered by identity (a process has a handful).
_OBJECTS_REMEMBERED = 64

# Field tags (field number << 3 | wire type), by message, from opentelemetry-proto.
_REQUEST_RESOURCE_SPANS = b"\x0a"
_RESOURCE_SPANS_RESOURCE, _RESOURCE_SPANS_SCOPE_SPANS, _RESOURCE_SPANS_SCHEMA = (
    b"\x0a", b"\x12", b"\x1a")
_RESOURCE_ATTRIBUTES = b"\x0a"
_SCOPE_SPANS_SCOPE, _SCOPE_SPANS_SPANS, _SCOPE_SPANS_SCHEMA = b"\x0a", b"\x12", b"\x1a"
_SCOPE_NAME, _SCOPE_VERSION, _SCOPE_ATTRIBUTES = b"\x0a", b"\x12", b"\x1a"
_SPAN_TRACE_ID = b"\x0a\x10"  # with the length: ids are fixed-size bytes
_SPAN_SPAN_ID = b"\x12\x08"
_SPAN_TRACE_STATE = b"\x1a"
_SPAN_PARENT_ID = b"\x22\x08"
_SPAN_NAME = b"\x2a"
_SPAN_START = b"\x39"
_SPAN_END = b"\x41"
_SPAN_ATTRIBUTES = b"\x4a"
_SPAN_DROPPED_ATTRIBUTES = b"\x50"
_SPAN_EVENTS = b"\x5a"
_SPAN_DROPPED_EVENTS = b"\x60"
_SPAN_LINKS = b"\x6a"
_SPAN_DROPPED_LINKS = b"\x70"
_SPAN_STATUS = b"\x7a"
_SPAN_FLAGS = b"\x85\x01"
_EVENT_TIME, _EVENT_NAME, _EVENT_ATTRIBUTES, _EVENT_DROPPED = b"\x09", b"\x12", b"\x1a", b"\x20"
_LINK_TRACE_ID, _LINK_SPAN_ID, _LINK_ATTRIBUTES, _LINK_DROPPED, _LINK_FLAGS = (
    b"\x0a\x10", b"\x12\x08", b"\x22", b"\x28", b"\x35")
_STATUS_MESSAGE, _STATUS_CODE = b"\x12", b"\x18"
_KEY_VALUE_KEY, _KEY_VALUE_VALUE = b"\x0a", b"\x12"
_ANY_STRING, _ANY_BOOL, _ANY_INT, _ANY_DOUBLE = b"\x0a", b"\x10", b"\x18", b"\x21"
_ANY_ARRAY, _ANY_KVLIST, _ANY_BYTES = b"\x2a", b"\x32", b"\x3a"
_LIST_VALUES = b"\x0a"  # ArrayValue.values and KeyValueList.values

# SpanFlags: the parent's is_remote is known (always), and whether it is remote.
_FLAGS_HAS_IS_REMOTE = 0x100
_FLAGS_IS_REMOTE = 0x200
_FLAGS_LOCAL = struct.pack("<I", _FLAGS_HAS_IS_REMOTE)
_FLAGS_REMOTE = struct.pack("<I", _FLAGS_HAS_IS_REMOTE | _FLAGS_IS_REMOTE)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# The kind field of each span kind (the API's INTERNAL=0 is OTLP's SPAN_KIND_INTERNAL=1).
_KIND_FIELDS = {kind: b"\x30" + bytes((kind.value + 1,)) for kind in SpanKind}
_REMEMBERED_KINDS = frozenset((str, int, tuple))

_fixed64 = struct.Struct("<Q").pack
_double = struct.Struct("<d").pack
_SMALL_VARINTS = [bytes((n,)) for n in range(128)]


class _Unsupported(Exception):
    """A value or field this writer does not take: the SDK's encoder does the span."""


def _varint(n: int) -> bytes:
    if n < 128:
        if n < 0:
            raise _Unsupported  # only int64 values are negative; see _any_value
        return _SMALL_VARINTS[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag + _varint(len(payload)) + payload


def _text(value: Any) -> bytes:
    if not isinstance(value, str):
        raise _Unsupported
    try:
        return value.encode()
    except UnicodeEncodeError:  # lone surrogates: the protobuf runtime refuses them too
        raise _Unsupported from None


def _any_value(value: Any) -> bytes:
    """An AnyValue's body, with the SDK encoder's choice of field for each type."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return _ANY_BOOL + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        return _field(_ANY_STRING, _text(value))
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise _Unsupported
        return _ANY_INT + _varint(value if value >= 0 else value + (1 << 64))
    if isinstance(value, float):
        return _ANY_DOUBLE + _double(value)
    if isinstance(value, bytes):
        return _field(_ANY_BYTES, value)
    if type(value) in (tuple, list):  # other Sequence and Mapping types: the SDK's way
        return _field(_ANY_ARRAY, b"".join(
            [_field(_LIST_VALUES, _any_value(item)) for item in value]))
    if type(value) is dict:
        return _field(_ANY_KVLIST, b"".join(
            [_field(_LIST_VALUES, _key_value(str(k), v)) for k, v in value.items()]))
    raise _Unsupported


def _key_value(key: Any, value: Any) -> bytes:
    key_bytes = _text(key)
    return ((_field(_KEY_VALUE_KEY, key_bytes) if key_bytes else b"")
            + _field(_KEY_VALUE_VALUE, _any_value(value)))


def _items(attributes: Any) -> Iterable[tuple[Any, Any]]:
    return attribute_items(attributes) if attributes else ()


class _Writer:
    """The encoder's memory: encoded attribute fields and names, resources and scopes."""

    def __init__(self) -> None:
        # tag -> key -> value -> the whole field (tag, length, KeyValue): nested, so a
        # lookup allocates nothing (a tuple key would, per attribute)
        self.fields: dict[bytes, dict[Any, dict[Any, bytes]]] = {}
        self.fields_remembered = 0
        self.names: dict[bytes, dict[str, bytes]] = {}  # tag -> name -> field
        self.resources: dict[int, tuple[Any, bytes]] = {}
        self.scopes: dict[int, tuple[Any, bytes]] = {}

    # -- attributes ------------------------------------------------------------------
    def attributes(self, tag: bytes, attributes: Any, parts: list[bytes]) -> None:
        """Append each attribute as a ``tag`` field (a KeyValue) to ``parts``."""
        by_key = self.fields.get(tag)
        if by_key is None:
            by_key = self.fields.setdefault(tag, {})
        for key, value in _items(attributes):
            # Strings, ints and tuples of strings are remembered. No two of these kinds
            # compare equal (True and 1.0 are not among them), so a hit is the same value.
            if type(value) in _REMEMBERED_KINDS:
                values = by_key.get(key)
                try:
                    field = values.get(value) if values is not None else None
                except TypeError:  # a tuple holding a dict: not hashable, not remembered
                    parts.append(_field(tag, _key_value(key, value)))
                    continue
                if field is None:
                    field = _field(tag, _key_value(key, value))
                    if len(field) <= _MEMO_MAX_BYTES and (
                            type(value) is not tuple or all(type(v) is str for v in value)):
                        self._remember(by_key, key, value, field)
                parts.append(field)
            else:
                parts.append(_field(tag, _key_value(key, value)))

    def _remember(self, by_key: dict[Any, dict[Any, bytes]], key: Any, value: Any,
                  field: bytes) -> None:
        if self.fields_remembered >= _MEMO_ENTRIES:
            self.fields.clear()  # by_key goes with it once the caller's loop ends
            self.fields_remembered = 0
        by_key.setdefault(key, {})[value] = field
        self.fields_remembered += 1

    def name(self, tag: bytes, name: Any) -> bytes:
        """The ``tag`` field of ``name``, or nothing for an empty name (a proto3 default)."""
        by_name = self.names.get(tag)
        if by_name is None:
            by_name = self.names.setdefault(tag, {})
        field = by_name.get(name) if type(name) is str else None
        if field is None:
            text = _text(name) if name is not None else b""
            field = _field(tag, text) if text else b""
            if type(name) is str and len(field) <= _MEMO_MAX_BYTES:
                if len(by_name) >= _MEMO_ENTRIES:
                    by_name.clear()
                by_name[name] = field
        return field

    # -- spans -------------------------------------------------------------------------
    def span(self, span: ReadableSpan) -> bytes:
        context = span.get_span_context()
        if context is None:
            raise _Unsupported
        parts = [_SPAN_TRACE_ID, context.trace_id.to_bytes(16, "big"),
                 _SPAN_SPAN_ID, context.span_id.to_bytes(8, "big")]
        trace_state = context.trace_state
        if trace_state is not None:
            state = ",".join([f"{key}={value}" for key, value in trace_state.items()])
            if state:
                parts.append(_field(_SPAN_TRACE_STATE, _text(state)))
        parent = span.parent
        if parent:
            parts += (_SPAN_PARENT_ID, parent.span_id.to_bytes(8, "big"))
        parts.append(self.name(_SPAN_NAME, span.name))
        parts.append(_KIND_FIELDS[span.kind])
        if span.start_time:
            parts += (_SPAN_START, _fixed64(span.start_time))
        if span.end_time:
            parts += (_SPAN_END, _fixed64(span.end_time))
        self.attributes(_SPAN_ATTRIBUTES, span.attributes, parts)
        if span.dropped_attributes:
            parts += (_SPAN_DROPPED_ATTRIBUTES, _varint(span.dropped_attributes))
        for event in span.events:
            body = self.event(event)
            parts += (_SPAN_EVENTS, _varint(len(body)), body)
        if span.dropped_events:
            parts += (_SPAN_DROPPED_EVENTS, _varint(span.dropped_events))
        for link in span.links:
            parts.append(_field(_SPAN_LINKS, self.link(link)))
        if span.dropped_links:
            parts += (_SPAN_DROPPED_LINKS, _varint(span.dropped_links))
        parts.append(_field(_SPAN_STATUS, _status(span.status)))
        parts += (_SPAN_FLAGS, _FLAGS_REMOTE if parent and parent.is_remote else _FLAGS_LOCAL)
        return b"".join(parts)

    def event(self, event: Any) -> bytes:
        parts = [_EVENT_TIME, _fixed64(event.timestamp)] if event.timestamp else []
        parts.append(self.name(_EVENT_NAME, event.name))
        self.attributes(_EVENT_ATTRIBUTES, event.attributes, parts)
        if event.dropped_attributes:
            parts += (_EVENT_DROPPED, _varint(event.dropped_attributes))
        return b"".join(parts)

    def link(self, link: Any) -> bytes:
        context = link.context
        parts = [_LINK_TRACE_ID, context.trace_id.to_bytes(16, "big"),
                 _LINK_SPAN_ID, context.span_id.to_bytes(8, "big")]
        self.attributes(_LINK_ATTRIBUTES, link.attributes, parts)
        if link.dropped_attributes:
            parts += (_LINK_DROPPED, _varint(link.dropped_attributes))
        parts += (_LINK_FLAGS, _FLAGS_REMOTE if context.is_remote else _FLAGS_LOCAL)
        return b"".join(parts)

    # -- resources and scopes ----------------------------------------------------------
    def resource(self, resource: Any) -> bytes:
        hit = self.resources.get(id(resource))
        if hit is not None and hit[0] is resource:
            return hit[1]
        parts: list[bytes] = []
        self.attributes(_RESOURCE_ATTRIBUTES, resource.attributes, parts)
        return _remember(self.resources, resource, b"".join(parts))

    def scope(self, scope: Any) -> bytes:
        if scope is None:
            return b""
        hit = self.scopes.get(id(scope))
        if hit is not None and hit[0] is scope:
            return hit[1]
        parts = [self.name(_SCOPE_NAME, scope.name), self.name(_SCOPE_VERSION, scope.version)]
        self.attributes(_SCOPE_ATTRIBUTES, scope.attributes, parts)
        return _remember(self.scopes, scope, b"".join(parts))


def _remember(known: dict[int, tuple[Any, bytes]], obj: Any, encoded: bytes) -> bytes:
    """Keep ``obj``'s encoding by identity (the entry holds ``obj``, so its id is not
    reused while it is there). Resources and scopes are immutable in the SDK."""
    if len(known) >= _OBJECTS_REMEMBERED:
        known.clear()
    known[id(obj)] = (obj, encoded)
    return encoded


def _status(status: Any) -> bytes:
    if status is None:
        return b""
    message = _text(status.description) if status.description else b""
    code = status.status_code.value
    return ((_field(_STATUS_MESSAGE, message) if message else b"")
            + (_STATUS_CODE + _varint(code) if code else b""))


class _Grouper:
    """Spans by resource, then by scope, where equal objects share a group (the SDK's
    encoder groups in dicts keyed by them), in first-seen order. Hashing a resource
    serializes its attributes to JSON, so objects are compared only when one request
    holds more than one: the usual request holds one resource and one scope."""

    def __init__(self) -> None:
        self._first: dict[int, Any] = {}  # id(object) -> the first equal object
        self._equal: dict[Any, Any] | None = None

    def first(self, obj: Any) -> Any:
        first = self._first.get(id(obj))
        if first is None:
            if not self._first:
                first = obj
            else:
                if self._equal is None:
                    self._equal = {known: known for known in self._first.values()}
                first = self._equal.setdefault(obj, obj)
            self._first[id(obj)] = first
        return first


_writer = _Writer()


def _sdk_span(span: ReadableSpan) -> bytes:
    from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import _encode_span

    return bytes(_encode_span(span).SerializeToString())


def _sdk_request(spans: Sequence[ReadableSpan]) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return bytes(encode_spans(spans).SerializeToString())


# What writing a value this writer does not take raises (besides _Unsupported).
_WRITE_ERRORS = (_Unsupported, AttributeError, TypeError, ValueError, OverflowError,
                 struct.error)


def encode_trace_request(spans: Sequence[ReadableSpan]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` of ``spans``, byte for byte what
    ``encode_spans(spans).SerializeToString()`` returns."""
    writer = _writer
    resources, scopes = _Grouper(), _Grouper()
    # id(first resource) -> (resource, {id(first scope) -> (scope, [encoded spans])})
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for span in spans:
        resource = resources.first(span.resource)
        scope = span.instrumentation_scope or None
        if scope is not None:
            scope = scopes.first(scope)
        try:
            encoded = writer.span(span)
        except _WRITE_ERRORS:
            encoded = _sdk_span(span)  # raises as the SDK's encoder would, if it does
        group = groups.get(id(resource))
        if group is None:
            group = groups[id(resource)] = (resource, {})
        scoped = group[1].get(id(scope))
        if scoped is None:
            scoped = group[1][id(scope)] = (scope, [])
        scoped[1].append(encoded)
    try:
        out: list[bytes] = []
        for resource, by_scope in groups.values():
            body = [_field(_RESOURCE_SPANS_RESOURCE, writer.resource(resource))]
            for scope, encoded_spans in by_scope.values():
                scope_body = [_field(_SCOPE_SPANS_SCOPE, writer.scope(scope))]
                scope_body += [_field(_SCOPE_SPANS_SPANS, encoded) for encoded in encoded_spans]
                if scope is not None and scope.schema_url:
                    scope_body.append(_field(_SCOPE_SPANS_SCHEMA, _text(scope.schema_url)))
                body.append(_field(_RESOURCE_SPANS_SCOPE_SPANS, b"".join(scope_body)))
            if resource.schema_url:
                body.append(_field(_RESOURCE_SPANS_SCHEMA, _text(resource.schema_url)))
            out.append(_field(_REQUEST_RESOURCE_SPANS, b"".join(body)))
    except _WRITE_ERRORS:
        return _sdk_request(spans)  # a resource or scope this writer does not take
    return b"".join(out)
