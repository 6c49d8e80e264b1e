"""The fast path of span decoding: rows straight from an OTLP trace request's wire bytes.

Split from :mod:`.decode` because it is a hand-written protobuf reader with its own
invariants (tags, caches, the fallback); :func:`guardtrace.consumers.decode.decode_spans`
is the only caller, and its reference decoder defines the rows this must equal.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from ..schemas import names
from ..store.rows import DecodedRows
from .otlp_values import (
    SPAN_KINDS,
    STATUS,
    PoisonRecord,
    any_value_text,
    attributes_map,
    event_id,
    invalid_ids,
)

__all__ = ["Irregular", "spans_from_wire"]

# --- the fast path: spans straight from the wire bytes --------------------------------
#
# Reading attributes through protobuf objects costs about a microsecond per attribute
# (a wrapper object per KeyValue and AnyValue), and it was most of the consumer's CPU.
# Yet nearly every attribute repeats byte for byte (module, tier, agent, the request id
# on the span and on each of its events), so the wire walker below finds each KeyValue's
# bytes and converts each distinct one once (with the same ``any_value_text``), through
# a bounded cache; resources, scopes and statuses likewise. Only messages that upb has
# already parsed (validated) reach it, and anything it does not expect (a singular
# message field given twice, which protobuf merges) raises ``Irregular`` and the
# reference decoder takes over, so the rows are always exactly those of
# :func:`guardtrace.consumers.decode._spans_from_objects`.

class Irregular(Exception):
    """The wire walker met something it leaves to the reference decoder."""


_CACHE_ENTRIES = 8192
_CACHE_MAX_KEY_BYTES = 512
_kv_cache: dict[bytes, tuple[str, str]] = {}
_resource_cache: dict[bytes, tuple[dict[str, str], str]] = {}
_scope_cache: dict[bytes, str] = {}
_status_cache: dict[bytes, tuple[str, str]] = {}
_fixed64 = struct.Struct("<Q").unpack_from

# Wire tags (field number << 3 | wire type) of the fields the walker reads.
_TAG_LEN_1, _TAG_LEN_2 = 0x0A, 0x12       # field 1 / field 2, length-delimited
_SPAN_TRACE_ID, _SPAN_SPAN_ID, _SPAN_PARENT, _SPAN_NAME = 0x0A, 0x12, 0x22, 0x2A
_SPAN_KIND, _SPAN_START, _SPAN_END = 0x30, 0x39, 0x41
_SPAN_ATTRIBUTE, _SPAN_EVENT, _SPAN_STATUS = 0x4A, 0x5A, 0x7A
_EVENT_TIME, _EVENT_NAME, _EVENT_ATTRIBUTE = 0x09, 0x12, 0x1A


def _cached(cache: dict[bytes, Any], raw: bytes, convert: Callable[[bytes], Any]) -> Any:
    hit = cache.get(raw)
    if hit is None:
        hit = convert(raw)
        if len(raw) <= _CACHE_MAX_KEY_BYTES:
            if len(cache) >= _CACHE_ENTRIES:
                cache.clear()  # unique values (request ids) would otherwise pile up
            cache[raw] = hit
    return hit


def _key_value(raw: bytes) -> tuple[str, str]:
    kv = KeyValue.FromString(raw)
    return kv.key, any_value_text(kv.value)


def _resource(raw: bytes) -> tuple[dict[str, str], str]:
    attrs = attributes_map(Resource.FromString(raw).attributes)
    return attrs, attrs.get("service.name", "")


def _scope_name(raw: bytes) -> str:
    return str(InstrumentationScope.FromString(raw).name)


def _status(raw: bytes) -> tuple[str, str]:
    status = Status.FromString(raw)
    return STATUS.get(status.code, str(status.code)), status.message


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def _field_end(data: bytes, i: int) -> tuple[int, int]:
    """(start, end) of the length-delimited value whose length varint is at ``i``."""
    length = data[i]
    if length < 0x80:
        return i + 1, i + 1 + length
    length, i = _varint(data, i)
    return i, i + length


def _skip_field(data: bytes, i: int) -> int:
    """The index after the field whose tag starts at ``i`` (a field the walker ignores)."""
    tag, i = _varint(data, i)
    wire = tag & 7
    if wire == 0:
        return _varint(data, i)[1]
    if wire == 1:
        return i + 8
    if wire == 2:
        return _field_end(data, i)[1]
    if wire == 5:
        return i + 4
    raise Irregular(f"wire type {wire}")


def _children(data: bytes, start: int, end: int, first: str, second: str
              ) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """Fields 1 (singular message ``first``) and 2 (repeated ``second``) of a message."""
    one: tuple[int, int] | None = None
    many: list[tuple[int, int]] = []
    i = start
    while i < end:
        tag = data[i]
        if tag == _TAG_LEN_1:
            if one is not None:
                raise Irregular(f"{first} given twice")
            one = _field_end(data, i + 1)
            i = one[1]
        elif tag == _TAG_LEN_2:
            many.append(_field_end(data, i + 1))
            i = many[-1][1]
        else:
            i = _skip_field(data, i)
    return one, many


def spans_from_wire(data: bytes) -> DecodedRows:
    rows = DecodedRows()
    spans_out, events_out = rows.spans, rows.span_events
    kv_cache = _kv_cache
    kv_get = kv_cache.get
    request_key, module_key = names.ATTR_REQUEST_ID, names.ATTR_MODULE
    agent_key, hallucinated_key = names.ATTR_AGENT, names.ATTR_HALLUCINATED_AGENT
    tier_key = names.ATTR_TIER
    # ExportTraceServiceRequest: repeated ResourceSpans resource_spans = 1.
    all_resource_spans: list[tuple[int, int]] = []
    i = 0
    while i < len(data):
        if data[i] == _TAG_LEN_1:
            all_resource_spans.append(_field_end(data, i + 1))
            i = all_resource_spans[-1][1]
        else:
            i = _skip_field(data, i)
    for rs_start, rs_end in all_resource_spans:
        resource_at, scope_spans = _children(data, rs_start, rs_end, "resource", "scope_spans")
        resource, service = (_cached(_resource_cache, data[resource_at[0]:resource_at[1]],
                                     _resource) if resource_at else ({}, ""))
        for ss_start, ss_end in scope_spans:
            scope_at, spans = _children(data, ss_start, ss_end, "scope", "spans")
            scope_name = (_cached(_scope_cache, data[scope_at[0]:scope_at[1]], _scope_name)
                          if scope_at else "")
            for span_start, span_end in spans:
                trace = span = parent = b""
                name = ""
                kind = start = end = 0
                status = ("unset", "")
                seen_status = False
                attrs: dict[str, str] = {}
                events: list[tuple[int, int]] = []
                i = span_start
                while i < span_end:
                    tag = data[i]
                    if tag == _SPAN_ATTRIBUTE:
                        a, i = _field_end(data, i + 1)
                        key, text = _cached(kv_cache, data[a:i], _key_value)
                        attrs[key] = text
                    elif tag == _SPAN_EVENT:
                        events.append(_field_end(data, i + 1))
                        i = events[-1][1]
                    elif tag == _SPAN_TRACE_ID:
                        a, i = _field_end(data, i + 1)
                        trace = data[a:i]
                    elif tag == _SPAN_SPAN_ID:
                        a, i = _field_end(data, i + 1)
                        span = data[a:i]
                    elif tag == _SPAN_PARENT:
                        a, i = _field_end(data, i + 1)
                        parent = data[a:i]
                    elif tag == _SPAN_NAME:
                        a, i = _field_end(data, i + 1)
                        name = data[a:i].decode("utf-8")
                    elif tag == _SPAN_KIND:
                        kind, i = _varint(data, i + 1)
                        if kind >= 1 << 31:
                            raise Irregular("negative or oversized span kind")
                    elif tag == _SPAN_START:
                        start = _fixed64(data, i + 1)[0]
                        i += 9
                    elif tag == _SPAN_END:
                        end = _fixed64(data, i + 1)[0]
                        i += 9
                    elif tag == _SPAN_STATUS:
                        if seen_status:
                            raise Irregular("status given twice")
                        seen_status = True
                        a, i = _field_end(data, i + 1)
                        status = _cached(_status_cache, data[a:i], _status)
                    else:
                        i = _skip_field(data, i)
                if len(trace) != 16 or len(span) != 8:
                    raise invalid_ids(len(trace), len(span))
                trace_id, span_id = trace.hex(), span.hex()
                span_request_id = attrs.get(request_key, "")
                span_module = attrs.get(module_key, "")
                spans_out.append([
                    trace_id, span_id, parent.hex(), name, SPAN_KINDS.get(kind, str(kind)),
                    service, scope_name, start, end, max(0, end - start), status[0],
                    status[1], span_request_id, attrs, resource])
                for index, (event_start, event_end) in enumerate(events):
                    event_attrs: dict[str, str] = {}
                    event_name = ""
                    event_time = 0
                    i = event_start
                    while i < event_end:
                        tag = data[i]
                        if tag == _EVENT_ATTRIBUTE:  # the hot loop: inlined _field_end
                            length = data[i + 1]
                            if length < 0x80:
                                a = i + 2
                            else:
                                length, a = _varint(data, i + 1)
                            i = a + length
                            raw_kv = data[a:i]
                            hit = kv_get(raw_kv)
                            if hit is None:
                                hit = _cached(kv_cache, raw_kv, _key_value)
                            event_attrs[hit[0]] = hit[1]
                        elif tag == _EVENT_TIME:
                            event_time = _fixed64(data, i + 1)[0]
                            i += 9
                        elif tag == _EVENT_NAME:
                            a, i = _field_end(data, i + 1)
                            event_name = data[a:i].decode("utf-8")
                        else:
                            i = _skip_field(data, i)
                    get = event_attrs.get
                    events_out.append([
                        event_id(trace_id, span_id, index, event_time, event_name),
                        event_time, event_name, trace_id, span_id,
                        get(request_key, span_request_id), get(module_key, span_module),
                        get(agent_key, get(hallucinated_key, "")), get(tier_key, ""),
                        service, event_attrs])
    if not rows.spans:
        raise PoisonRecord("OTLP trace request with no spans")
    return rows

