"""The request-id rule, one for the side that writes ids and the side that reads them.

Request ids are opaque to guardtrace: callers pass their own (a uuid, a hex trace id, a
slug such as ``sim-1a2b-000042``, an id from an upstream ``X-Request-Id`` header). An id
is letters, digits and ``. _ : / @ + = -``, starts with a letter or a digit, and has at
most :data:`MAX_LENGTH` characters. Both sides apply this one rule, so an id a hook
stored is always one the CLI and the dashboard accept:

* the hooks store a valid id as given (surrounding whitespace dropped) and turn any other
  into a valid one (:func:`storable_request_id`): a hook never raises into the agent,
  and an id can come from outside the agent (a header), so it must not break a guard;
* the readers reject an invalid id with a message that names the problem
  (:func:`validate_request_id`) instead of looking it up and finding nothing.

Parameters keep ids out of SQL either way; the rule is about clear errors, keeping
control characters and markup out of stored text, and bounding the key's size.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["ALLOWED_PUNCTUATION", "MAX_LENGTH", "RULE", "InvalidRequestId", "is_valid_request_id",
           "storable_request_id", "validate_request_id"]

MAX_LENGTH: Final = 200
ALLOWED_PUNCTUATION: Final = "._:/@+=-"
RULE: Final = (f"ids are letters, digits and {' '.join(ALLOWED_PUNCTUATION)}, start with a "
               f"letter or a digit, and have at most {MAX_LENGTH} characters")

_ALLOWED_CLASS = f"A-Za-z0-9{re.escape(ALLOWED_PUNCTUATION)}"
_VALID = re.compile(f"[A-Za-z0-9][{_ALLOWED_CLASS}]{{0,{MAX_LENGTH - 1}}}")
_DISALLOWED = re.compile(f"[^{_ALLOWED_CLASS}]")
_LEADING_NON_ALPHANUMERIC = re.compile("^[^A-Za-z0-9]+")
# A rewritten id ends in a digest of the original, so two different invalid ids never
# become the same stored id. 16 hex digits: 64 bits, no collision in practice.
_DIGEST_CHARS = 16
# How much of an invalid id an error message quotes (the id may be huge or hostile).
_QUOTED_CHARS = 60


class InvalidRequestId(ValueError):
    """A read was asked for something that is not a request id; the message says why."""


def is_valid_request_id(text: str) -> bool:
    """Whether ``text``, exactly as given, follows the rule."""
    return _VALID.fullmatch(text) is not None


def storable_request_id(given: str) -> str:
    """The id the hooks store for ``given``: itself when valid, else a valid id made of it.

    Whitespace around ``given`` is dropped (the readers drop it too). Any other invalid id
    becomes its allowed characters (each other character replaced by ``_``, leading
    punctuation dropped, cut to fit) followed by ``-`` and a digest of the whole id,
    e.g. ``"order 42"`` -> ``"order_42-59096d5ad4f7817d"``: still recognisable, and two
    different ids stay different.
    """
    # An untyped caller may pass a number (request_id=42): stored as its text, as before.
    text = given if isinstance(given, str) else str(given)
    stripped = text.strip()
    if is_valid_request_id(stripped):
        return stripped
    # surrogatepass: an id decoded from JSON may hold a lone surrogate; hash it, not fail.
    digest = hashlib.sha256(stripped.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    stem = _LEADING_NON_ALPHANUMERIC.sub("", _DISALLOWED.sub("_", stripped))
    stem = stem[:MAX_LENGTH - _DIGEST_CHARS - 1]
    return f"{stem}-{digest}" if stem else digest


def validate_request_id(text: str) -> str:
    """``text`` without surrounding whitespace, if it is a request id.

    Raises:
        InvalidRequestId: naming the problem (empty, too long, which characters), and,
            when a hook given this text would have stored it under another id, that id.
    """
    request_id = text.strip()
    if is_valid_request_id(request_id):
        return request_id
    if not request_id:
        raise InvalidRequestId("a request id is required")
    if len(request_id) > MAX_LENGTH:
        problem = f"{len(request_id)} characters, more than {MAX_LENGTH}"
    elif bad := sorted(set(_DISALLOWED.findall(request_id))):
        problem = f"unexpected characters {''.join(bad)[:20]!r}"
    else:
        problem = f"it starts with {request_id[0]!r}"
    raise InvalidRequestId(
        f"not a request id: {request_id[:_QUOTED_CHARS]!r}"
        f"{'...' if len(request_id) > _QUOTED_CHARS else ''} ({problem}; {RULE}). "
        f"A hook given this id stores it as {storable_request_id(text)!r}")
