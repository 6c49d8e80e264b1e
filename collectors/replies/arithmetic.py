"""Calculator calls, and whether their results are grounded.

Agents compute totals with a calculator tool, and a calculator answers whatever it is
asked: ``498 * 1.5`` returns 747.0 whether or not anything in the conversation said
"1.5". A result is only as grounded as its operands. So a calculator call whose
expression holds a number that no earlier tool result, user message or system prompt
gave (an invented fee, a guessed multiplier) does not ground its result: a reply that
states that result as a price stated a value it made up.

A calculator call is recognised by its arguments, whatever the tool's name: a single
argument whose text is an arithmetic expression (digits, operators, brackets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

__all__ = ["expression_operands", "invented_operands"]

# One argument, all arithmetic, with an operator a phone number or a date does not use.
_EXPRESSION_RE = re.compile(r"[\d\s.+\-*/()%^,]{3,256}")
_OPERATOR_RE = re.compile(r"[+*/()%^]|\s-\s")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
# Numbers an agent may bring without a source: counts and small multipliers (passengers,
# bags, nights), and the constants of percentages and unit changes.
_MAX_FREE_COUNT = 10
_FREE_CONSTANTS = frozenset({12.0, 24.0, 60.0, 100.0, 1000.0})


def expression_operands(arguments: str) -> tuple[float, ...] | None:
    """The numbers of a calculator call's expression; None when the arguments are not
    one arithmetic expression."""
    text = arguments.strip()
    if not text.startswith("{") or len(text) > 1024:
        return None
    try:
        args = json.loads(text)
    except ValueError:
        return None
    if not isinstance(args, dict) or len(args) != 1:
        return None
    (expression,) = args.values()
    if (not isinstance(expression, str) or not _EXPRESSION_RE.fullmatch(expression)
            or not _OPERATOR_RE.search(expression)):
        return None
    return tuple(float(n) for n in _NUMBER_RE.findall(expression))


def invented_operands(operands: tuple[float, ...], seen: Callable[[float], bool],
                      percent: Callable[[float], bool] = lambda _: False) -> list[float]:
    """The operands no source gave, other than small counts, unit constants and
    percentages a source gave ("15%" is 0.15, 0.85 or 1.15 in an expression).

    Args:
        operands: The expression's numbers.
        seen: Whether a source gave a number.
        percent: Whether a source gave a number as a percentage ("15%", "15 percent").
    """
    return [x for x in operands
            if not (x.is_integer() and 0 <= x <= _MAX_FREE_COUNT)
            and x not in _FREE_CONSTANTS and not seen(x) and not _percentage(x, percent)]


def _percentage(x: float, percent: Callable[[float], bool]) -> bool:
    if not 0 < x < 2:
        return False
    share = round(x * 100, 6)
    return percent(share) or percent(round(abs(100 - share), 6))
