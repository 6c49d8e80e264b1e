"""Telemetry attributes iterated as a plain dict.

The SDK keeps the attributes of spans, events, links and scopes in ``BoundedAttributes``,
a ``MutableMapping`` written in Python: its ``items()`` is the abstract base class's
generator, with a Python ``__getitem__`` call per key, and a span's ``attributes`` is a
``MappingProxyType`` over one. Both ``copy()`` to the plain dict inside, which iterates
in C: the export path (redaction, then encoding) walks every attribute of every event,
so it iterates the copy.
"""

from __future__ import annotations

from collections.abc import ItemsView, Mapping
from typing import Any

__all__ = ["attribute_items"]


def attribute_items(attributes: Mapping[Any, Any]) -> ItemsView[Any, Any]:
    """``attributes.items()``, from a plain-dict copy where the mapping gives one."""
    if type(attributes) is not dict:
        copy = getattr(attributes, "copy", None)
        if copy is not None:
            copied = copy()
            if type(copied) is dict:
                return copied.items()
    return attributes.items()
