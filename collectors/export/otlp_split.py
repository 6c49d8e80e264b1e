"""Split OTLP export requests so that no Kafka message exceeds a size limit.

A request is a tree: resource entries, each with scope entries, each with items (spans,
metrics or log records). Splitting keeps that shape: items are packed greedily into
requests that repeat their resource and scope, so every message is a valid,
self-describing OTLP request a Collector could read. An item that alone exceeds the limit cannot be sent and
is reported back to the caller to count as dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["SplitResult", "split_logs_request", "split_metrics_request", "split_trace_request"]

# Bytes a repeated-field tag and length prefix add around an embedded message.
_FIELD_OVERHEAD = 6


@dataclass(frozen=True)
class SplitResult:
    """Serialized requests, each at most the limit, and how many items did not fit.

    ``item_counts[i]`` is how many spans, metrics or log records ``messages[i]`` carries,
    so a failed delivery can be counted in items, not messages.
    """

    messages: list[bytes]
    item_counts: list[int]
    oversize_items: int


def split_trace_request(request: ExportTraceServiceRequest, max_bytes: int) -> SplitResult:
    """Serialize ``request`` as one or more requests of at most ``max_bytes`` each."""
    return _split(request, max_bytes, ExportTraceServiceRequest,
                  "resource_spans", "scope_spans", "spans")


def split_metrics_request(request: ExportMetricsServiceRequest, max_bytes: int) -> SplitResult:
    """Serialize ``request`` as one or more requests of at most ``max_bytes`` each."""
    return _split(request, max_bytes, ExportMetricsServiceRequest,
                  "resource_metrics", "scope_metrics", "metrics")


def split_logs_request(request: ExportLogsServiceRequest, max_bytes: int) -> SplitResult:
    """Serialize ``request`` as one or more requests of at most ``max_bytes`` each."""
    return _split(request, max_bytes, ExportLogsServiceRequest,
                  "resource_logs", "scope_logs", "log_records")


def _split(request: Any, max_bytes: int, request_type: type, resource_field: str,
           scope_field: str, item_field: str) -> SplitResult:
    if request.ByteSize() <= max_bytes:
        total = sum(len(getattr(scope_entry, item_field))
                    for resource_entry in getattr(request, resource_field)
                    for scope_entry in getattr(resource_entry, scope_field))
        return SplitResult([request.SerializeToString()], [total], 0)
    messages: list[bytes] = []
    counts: list[int] = []
    oversize = 0
    for resource_entry in getattr(request, resource_field):
        for scope_entry in getattr(resource_entry, scope_field):
            current, current_items, base = _empty(request_type, resource_entry, scope_entry,
                                                  resource_field, scope_field, item_field)
            size = base
            for item in getattr(scope_entry, item_field):
                item_size = item.ByteSize() + _FIELD_OVERHEAD
                if base + item_size > max_bytes:
                    oversize += 1
                    continue
                if size + item_size > max_bytes and len(current_items):
                    messages.append(current.SerializeToString())
                    counts.append(len(current_items))
                    current, current_items, base = _empty(
                        request_type, resource_entry, scope_entry,
                        resource_field, scope_field, item_field)
                    size = base
                current_items.add().CopyFrom(item)
                size += item_size
            if len(current_items):
                messages.append(current.SerializeToString())
                counts.append(len(current_items))
    return SplitResult(messages, counts, oversize)


def _empty(request_type: type, resource_entry: Any, scope_entry: Any, resource_field: str,
           scope_field: str, item_field: str) -> tuple[Any, Any, int]:
    """A request holding copies of the resource and scope with no items yet."""
    request = request_type()
    new_resource = getattr(request, resource_field).add()
    new_resource.resource.CopyFrom(resource_entry.resource)
    new_resource.schema_url = resource_entry.schema_url
    new_scope = getattr(new_resource, scope_field).add()
    new_scope.scope.CopyFrom(scope_entry.scope)
    new_scope.schema_url = scope_entry.schema_url
    return request, getattr(new_scope, item_field), request.ByteSize() + 2 * _FIELD_OVERHEAD
