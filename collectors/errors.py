"""Errors the hook package raises on purpose (bad input, exhausted retries)."""

from __future__ import annotations

__all__ = ["GuardInputError"]


class GuardInputError(ValueError):
    """Input a guard cannot interpret (a plan that is not JSON, a step without a tool).

    The message names what is wrong and where, e.g. ``"plan step 2: missing 'tool'"``.
    """
