"""A payload body on its way to the debug store: encoded, snapshotted, sized.

The Kafka sink JSON-encodes a body on its worker thread, not on the agent's; what the
caller hands over must then be a copy it can no longer change (:func:`snapshot_body`),
and the sink's memory bound must be charged without encoding (:func:`text_bytes`).
"""

from __future__ import annotations

import json
from typing import Any

from .redaction import Redactor

__all__ = ["BODY_ENCODER", "EncodedJSON", "attribute_text", "encode_body", "redact_body",
           "snapshot_body", "text_bytes"]

# json.dumps(body, default=str, ensure_ascii=False), without building an encoder per call.
BODY_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)

# Bodies of more values than this (containers, keys, values) are encoded on the caller's
# thread, as before: copying one in Python costs about 3x what the C encoder spends on
# a value, so the snapshot only pays off where the body is mostly text. A container
# with more items than the budget has left is refused before it is walked, so a large
# body (a 50-step plan) costs the caller at most a partial walk on top of the encoding.
_SNAPSHOT_MAX_VALUES = 32
# Larger ints are encoded on the caller: ``int.__repr__`` refuses more than 4300 digits,
# and that error belongs to the caller (a counted hook error), not to the worker.
_SNAPSHOT_MAX_INT_BITS = 1024
# What each value costs the queue's byte bound on top of its text: quotes, separators.
_SNAPSHOT_ITEM_BYTES = 4
# ... and a number's text: repr of a float is at most 24 characters.
_SNAPSHOT_SCALAR_BYTES = 24 + _SNAPSHOT_ITEM_BYTES


class EncodedJSON(str):
    """A body the caller had to JSON-encode itself (see :func:`snapshot_body`), marked so
    the redactor decodes it again and redacts it string by string, like a snapshot.
    Any sink takes it as text."""

    __slots__ = ()


def redact_body(redactor: Redactor, body: Any) -> tuple[str, int]:
    """The body as stored, redacted: ``(text, secrets replaced)``.

    Text is redacted as it is. JSON data (a snapshot, or :class:`EncodedJSON` decoded
    again) is redacted string by string and then encoded: a secret alone on a line of a
    reply starts its string there, where in encoded JSON it would follow the ``n`` of
    ``\\n``, and a value under a secret's key is seen with its key.
    """
    if not redactor.enabled:
        return encode_body(body), 0
    if isinstance(body, EncodedJSON):
        try:
            data = json.loads(body)
        except ValueError:  # not ours to judge: redact the text as it is
            return redactor.redact_counted(str(body))
        redacted, count = redactor.redact_structure(data)
        return BODY_ENCODER.encode(redacted), count
    if isinstance(body, str):
        return redactor.redact_counted(body)
    redacted, count = redactor.redact_structure(body)
    return BODY_ENCODER.encode(redacted), count


def encode_body(body: Any) -> str:
    """A payload body as stored: text as it is, anything else as JSON (``default=str``)."""
    return body if isinstance(body, str) else BODY_ENCODER.encode(body)


def text_bytes(text: str) -> int:
    """What ``text`` costs the payload queue's byte bound, without encoding it.

    ``len()`` of a str is characters, not bytes; 4 bytes a character bounds UTF-8.
    """
    return len(text) if text.isascii() else 4 * len(text)


class _NotSnapshottableError(Exception):
    """The body holds something :func:`snapshot_body` does not copy; encode it now."""


def snapshot_body(body: Any) -> tuple[Any, int] | None:
    """A copy of ``body`` the caller cannot change, and its size for the queue bound.

    The copy lets the payload worker do the JSON encoding (about 7 us for a 2 KB reply
    on the benchmark machine) off the agent's thread, and still ship the body as it was
    at the call. Containers (exact ``dict`` with ``str`` keys, ``list``, ``tuple``) are
    copied all the way down; ``str``, ``int``, ``float``, ``bool`` and ``None`` are
    immutable and shared, so the bulk of a body, its text, is never copied. A top-level
    ``copy.copy`` would not be enough: a caller appending to a nested list after the
    call would change what is shipped.

    Anything else returns None, to be encoded on the caller as before: an object (or a
    subclass of a container or scalar) may change after the call, and ``default=str``
    must see it as it was at the call; its ``__str__`` may also run arbitrary code,
    which belongs on the caller's thread, as do the errors of keys JSON rejects and of
    cycles. Bodies of more than ``_SNAPSHOT_MAX_VALUES`` values return None too.

    The size is what the queue holds, estimated without encoding: each string's length
    (4 bytes a character when it is not ASCII, the bound of UTF-8, as for text bodies)
    plus ``_SNAPSHOT_ITEM_BYTES`` a value. JSON escapes are not counted: the escaped
    text exists only on the worker, for the one payload being shipped.

    Returns:
        ``(copy, size)``, or None when the body must be encoded on the caller.
    """
    budget = [_SNAPSHOT_MAX_VALUES - 1]
    try:
        return _snapshot(body, budget)
    except (_NotSnapshottableError, RecursionError):
        return None


def _snapshot(value: Any, budget: list[int]) -> tuple[Any, int]:
    """Copy one value (already counted against ``budget``) and estimate its size."""
    kind = type(value)
    if kind is str:
        return value, text_bytes(value) + _SNAPSHOT_ITEM_BYTES
    if kind is dict:
        budget[0] -= len(value)
        if budget[0] < 0:
            raise _NotSnapshottableError
        copied: dict[str, Any] = {}
        size = _SNAPSHOT_ITEM_BYTES
        for key, item in value.items():
            if type(key) is not str:
                raise _NotSnapshottableError  # json converts or rejects it: leave that to json
            size += len(key) if key.isascii() else 4 * len(key)
            if type(item) is str:  # the common value, without a call
                copied[key] = item
                size += (len(item) if item.isascii() else 4 * len(item)) + _SNAPSHOT_ITEM_BYTES
            else:
                copied[key], item_size = _snapshot(item, budget)
                size += item_size
        return copied, size
    if kind is list or kind is tuple:
        budget[0] -= len(value)
        if budget[0] < 0:
            raise _NotSnapshottableError
        items = list(value)  # a tuple encodes as a list
        size = _SNAPSHOT_ITEM_BYTES
        for index, item in enumerate(items):
            if type(item) is str:
                size += (len(item) if item.isascii() else 4 * len(item)) + _SNAPSHOT_ITEM_BYTES
            else:
                items[index], item_size = _snapshot(item, budget)
                size += item_size
        return items, size
    if value is None or kind is bool or kind is float:
        return value, _SNAPSHOT_SCALAR_BYTES
    if kind is int and value.bit_length() <= _SNAPSHOT_MAX_INT_BITS:
        return value, _SNAPSHOT_SCALAR_BYTES
    raise _NotSnapshottableError


def attribute_text(value: Any) -> Any:
    """An attribute as the sink takes it: text, or an immutable scalar it formats later."""
    if isinstance(value, str):
        return value
    kind = type(value)
    if kind is bool or kind is float or (kind is int
                                         and value.bit_length() <= _SNAPSHOT_MAX_INT_BITS):
        return value  # json.dumps on the worker gives the same text, and cannot fail
    return json.dumps(value, default=str)
