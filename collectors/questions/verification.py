"""Forced verification: make the model call ``reason`` before it answers a trick question.

Guard family 3 (the "October bug"). When the criticality gate
(:mod:`guardtrace.collectors.questions.criticality`) marks a question as hallucination-prone, the
ReAct loop may not finish until the ``reason`` tool has been called: a
:class:`BudgetToken` refuses to finish, a ``[REASONING BUDGET]`` nudge is injected when
the model tries anyway, and the reason tool's prompt (:data:`REASON_SYSTEM_PROMPT`, in
:mod:`~guardtrace.collectors.questions.reason_tool`) demands enumeration and distrust of
the obvious answer. The ``reason`` tool is offered
on every request (:func:`ensure_reason_tool`), so the model can verify itself even when
no pattern fires.

A ReAct loop wires it like this::

    with VerificationLoop(question, request_id=rid, agent="helpdesk") as guard:
        tools = guard.tools(tools)                      # "reason" always offered
        for _ in range(max_turns):
            reply = llm(messages, tools=tools)
            action = guard.on_model_turn(wants_to_finish=not reply.tool_calls)
            if action.kind is TurnActionKind.FINISH:
                return reply.text
            if action.kind is TurnActionKind.NUDGE:
                messages.append({"role": "system", "content": action.message})
                continue
            for call in reply.tool_calls:
                guard.on_tool_call(call.name)
                messages.append(run_tool(call))         # reason -> reason_messages(...)
        guard.close("turn_limit")                       # without the call: bypassed

Telemetry (module ``verification``): ``llm.verification_required`` when the gate fires,
``llm.verification_nudged`` per nudge, then exactly one of ``llm.verification_completed``
(the required calls were made) or ``llm.verification_bypassed`` (the loop ended, or the
nudges ran out, without them), each with a counter of the same name labelled with
``module`` and the capped ``agent``, a structured log line and, once the outcome is
known, a debug payload with the question, the decision and the outcome. Questions the
gate does not flag emit none of these.

Every loop is also one ``gen_ai.evaluation.result`` event named
``guardtrace.verification``, emitted when its outcome is known: ``pass`` when the gate
did not fire (at construction) or the required calls were made, ``fail`` when the loop
ended without them; the explanation names the gate's family, depth and score and what
the loop did. A gate that failed on the question gives an evaluation with ``error.type``.

Every hook is ``guarded``: an error in the gate means "no verification required", an
error in the loop means "allow finish".
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from ...schemas import names
from ...schemas.request_ids import storable_request_id
from ..emit.internal import count_hook_error
from ..emit.telemetry import GuardTelemetry, guarded, new_request_id
from .criticality import CriticalityDecision, CriticalityGate, default_gate
from .reason_tool import (
    NUDGE_PREFIX,
    REASON_SYSTEM_PROMPT,
    REASON_TOOL_NAME,
    ToolStyle,
    build_nudge,
    ensure_reason_tool,
    reason_messages,
    reason_tool_schema,
)

# The reason tool's names stay importable from here, their home before reason_tool.py.
__all__ = [
    "NUDGE_PREFIX", "REASON_SYSTEM_PROMPT", "REASON_TOOL_NAME", "BudgetToken", "TurnAction",
    "TurnActionKind", "VerificationLoop", "VerificationOutcome", "build_nudge",
    "ensure_reason_tool", "reason_messages", "reason_tool_schema",
]


@dataclass
class BudgetToken:
    """Refuses to let the loop finish until the minimum turns and tool calls are made.

    Which calls count: with ``required_tools`` set (the forced tools, by default just
    ``reason``), only calls to those tools count toward ``min_tool_calls``. The seed
    counted any tool, which let a model satisfy the budget with a ``web_search`` and
    still answer "October"; other calls are tallied in ``other_tool_calls`` only. With
    an empty ``required_tools`` every call counts, as in the seed.

    Attributes:
        min_turns: Model turns (including the current one) needed before finishing.
        min_tool_calls: Counted tool calls needed before finishing.
        required_tools: Names of the tools whose calls count; empty means any tool.
        turns_used: Model turns recorded so far.
        tool_calls_used: Calls that counted toward ``min_tool_calls``.
        other_tool_calls: Calls that did not count.
    """

    min_turns: int = 0
    min_tool_calls: int = 1
    required_tools: frozenset[str] = frozenset({REASON_TOOL_NAME})
    turns_used: int = 0
    tool_calls_used: int = 0
    other_tool_calls: int = 0

    @property
    def can_finish(self) -> bool:
        """True once both minimums are met."""
        return (self.turns_used >= self.min_turns
                and self.tool_calls_used >= self.min_tool_calls)

    def record_turn(self) -> None:
        """Count one model turn."""
        self.turns_used += 1

    def record_tool_call(self, name: str) -> bool:
        """Count a call to tool ``name``; return True if it counted toward the budget."""
        if not self.required_tools or name in self.required_tools:
            self.tool_calls_used += 1
            return True
        self.other_tool_calls += 1
        return False


class TurnActionKind(enum.Enum):
    """What the loop should do with the model's turn."""

    CONTINUE = "continue"  # the model is calling tools: run them and ask again
    FINISH = "finish"      # the answer may be returned
    NUDGE = "nudge"        # do not return the answer: inject ``message`` and ask again


@dataclass(frozen=True)
class TurnAction:
    """The verdict on one model turn.

    Attributes:
        kind: CONTINUE, FINISH or NUDGE.
        message: The nudge text to inject when ``kind`` is NUDGE, else None.
    """

    kind: TurnActionKind
    message: str | None = None

    @property
    def allow_finish(self) -> bool:
        """True if the model's final answer may be returned."""
        return self.kind is TurnActionKind.FINISH


_CONTINUE = TurnAction(TurnActionKind.CONTINUE)
_FINISH = TurnAction(TurnActionKind.FINISH)


class VerificationOutcome(enum.StrEnum):
    """How a loop ended with respect to verification."""

    NOT_REQUIRED = "not_required"  # the gate did not fire
    COMPLETED = "completed"        # the required calls were made
    BYPASSED = "bypassed"          # the loop ended (or gave up nudging) without them


def _allow_finish(*_args: Any, **_kwargs: Any) -> TurnAction:
    return _FINISH


def _tools_unchanged(_self: Any, tools: Iterable[Any] | None = None, *_args: Any,
                     **_kwargs: Any) -> list[Any]:
    try:
        return list(tools or ())
    except Exception:  # noqa: BLE001 - not even iterable: offer no tools rather than raise
        return []


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


def _nothing_reported(*_args: Any, **_kwargs: Any) -> None:
    return None


# The explanation of a verification evaluation when the gate did not fire.
_NOT_REQUIRED_EXPLANATION = "the question matches no hallucination-prone pattern"


def _outcome_unknown(*_args: Any, **_kwargs: Any) -> VerificationOutcome | None:
    return None


@dataclass
class _Stats:
    nudges: int = 0
    outcome: VerificationOutcome | None = None
    started: float = field(default_factory=time.perf_counter)


class VerificationLoop:
    """Per-request driver a ReAct loop calls on each model turn and tool call.

    Not thread-safe: one instance belongs to one request's loop.

    Args:
        question: The user's question the gate assesses.
        request_id: The request id for telemetry; :func:`new_request_id` when omitted.
        agent: The agent name for the (capped) ``agent`` counter label, if any.
        gate: The criticality gate; :func:`default_gate` when omitted.
        min_tool_calls: Calls to the required tools needed before finishing.
        min_turns: Model turns needed before finishing.
        required_tools: The forced tools whose calls count (see :class:`BudgetToken`).
        max_nudges: Nudges before giving up: the next early finish is allowed and the
            outcome is BYPASSED, so the user gets an answer instead of a turn-limit
            error. None nudges until the loop's own turn limit ends it.
        nudge_text: Builds the nudge from the question (default :func:`build_nudge`).
        module: The ``module`` label and attribute of this loop's telemetry, so an agent
            can report its own module; None keeps ``verification``.
    """

    def __init__(self, question: str, *, request_id: str | None = None,
                 agent: str | None = None, gate: CriticalityGate | None = None,
                 min_tool_calls: int = 1, min_turns: int = 0,
                 required_tools: Iterable[str] = (REASON_TOOL_NAME,),
                 max_nudges: int | None = 3,
                 nudge_text: Callable[[str], str] | None = None,
                 module: str | None = None) -> None:
        self.question = question
        self.request_id = storable_request_id(request_id or new_request_id())
        self.agent = agent
        self.max_nudges = max_nudges
        self._required_tools = tuple(required_tools)
        self._nudge_text = nudge_text or (
            lambda q: build_nudge(q, self._required_tools or (REASON_TOOL_NAME,)))
        self._gate = gate or default_gate()
        self._telemetry = GuardTelemetry(
            names.MODULE_VERIFICATION if module is None else module, "forced_verification")
        self._stats = _Stats()
        self.decision: CriticalityDecision = self._assess()
        # A budget of zero when the gate is quiet: finishing is then always allowed.
        self.budget = BudgetToken(
            min_turns=min_turns if self.decision.should_reason else 0,
            min_tool_calls=min_tool_calls if self.decision.should_reason else 0,
            required_tools=frozenset(self._required_tools),
        )
        if self.decision.should_reason:
            self._emit_required()
        else:
            self._stats.outcome = VerificationOutcome.NOT_REQUIRED
            self._evaluate(VerificationOutcome.NOT_REQUIRED, "")

    # -- public hooks ------------------------------------------------------------------
    @property
    def required(self) -> bool:
        """True if the gate fired for this question."""
        return self.decision.should_reason

    @property
    def nudges(self) -> int:
        """Nudges injected so far."""
        return self._stats.nudges

    @property
    def outcome(self) -> VerificationOutcome | None:
        """The outcome once known (None while verification is still pending)."""
        return self._stats.outcome

    @guarded(_tools_unchanged)
    def tools(self, tools: Iterable[Any] | None, style: ToolStyle = "openai") -> list[Any]:
        """``tools`` with the ``reason`` tool added if missing (see :func:`ensure_reason_tool`)."""
        return ensure_reason_tool(tools, style)

    @guarded(_nothing)
    def on_tool_call(self, name: str) -> None:
        """Record that the model called tool ``name``."""
        self.budget.record_tool_call(name)

    @guarded(_allow_finish)
    def on_model_turn(self, wants_to_finish: bool) -> TurnAction:
        """Record one model turn and decide what the loop does with it.

        Args:
            wants_to_finish: True if the model produced a final answer (no tool calls).

        Returns:
            CONTINUE when the model is calling tools; FINISH when it may answer; NUDGE
            (with the message to inject) when it tried to answer before verifying.
        """
        self.budget.record_turn()
        if not wants_to_finish:
            return _CONTINUE
        if not self.required or self.budget.can_finish:
            if self._stats.outcome is None:
                self._settle(VerificationOutcome.COMPLETED, "finished")
            return _FINISH
        if self._stats.outcome is not None:
            # Already given up (nudges exhausted): do not nudge again.
            return _FINISH
        if self.max_nudges is not None and self._stats.nudges >= self.max_nudges:
            self._settle(VerificationOutcome.BYPASSED, "nudges_exhausted")
            return _FINISH
        message = self._nudge_text(self.question)
        self._stats.nudges += 1
        self._emit_nudged()
        return TurnAction(TurnActionKind.NUDGE, message)

    @guarded(_outcome_unknown)
    def close(self, reason: str = "loop_end") -> VerificationOutcome | None:
        """End the loop; settles the outcome if no finishing turn did.

        Args:
            reason: Why the loop ended (``turn_limit``, ``error``, ...), reported as
                ``reason`` on the bypass event.

        Returns:
            The outcome. COMPLETED if the required calls were made (the verification
            happened even if the loop did not finish normally), else BYPASSED.
            Calling ``close`` again changes nothing.
        """
        if self._stats.outcome is None:
            outcome = (VerificationOutcome.COMPLETED if self.budget.can_finish
                       else VerificationOutcome.BYPASSED)
            self._settle(outcome, reason)
        return self._stats.outcome

    def __enter__(self) -> VerificationLoop:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close("error" if exc_type is not None else "loop_end")

    # -- internals -----------------------------------------------------------------------
    def _assess(self) -> CriticalityDecision:
        # Guarded here as well as in the gate: a custom gate's own errors must also mean
        # "no verification required". By hand, as in the gate, to keep the error's type.
        try:
            return self._gate.assess(self.question)
        except Exception as exc:  # noqa: BLE001 - the contract is to never raise
            count_hook_error("VerificationLoop._assess", exc)
            return CriticalityDecision.unassessed(exc)

    def _elapsed_ms(self) -> float:
        return (time.perf_counter() - self._stats.started) * 1000.0

    def _budget_attrs(self) -> dict[str, Any]:
        return {
            names.ATTR_AGENT: self.agent,
            names.ATTR_TURNS_USED: self.budget.turns_used,
            names.ATTR_TOOL_CALLS_USED: self.budget.tool_calls_used,
            names.ATTR_MIN_TOOL_CALLS: self.budget.min_tool_calls,
            names.ATTR_NUDGES: self._stats.nudges,
        }

    def _emit_required(self) -> None:
        d = self.decision
        t = self._telemetry
        t.event(names.EVENT_VERIFICATION_REQUIRED, self.request_id, {
            names.ATTR_TRIGGER_PATTERN: d.trigger_pattern,
            names.ATTR_DEPTH: d.depth.value,
            names.ATTR_SCORE: d.score,
            names.ATTR_FAMILY: d.family,
            names.ATTR_AGENT: self.agent,
        })
        t.count(names.METRIC_VERIFICATION_REQUIRED, agent=self.agent)
        t.log(logging.INFO, "verification required", request_id=self.request_id,
              status="required", duration_ms=self._elapsed_ms(), family=d.family,
              depth=d.depth.value, score=d.score)

    def _emit_nudged(self) -> None:
        t = self._telemetry
        t.event(names.EVENT_VERIFICATION_NUDGED, self.request_id, self._budget_attrs())
        t.count(names.METRIC_VERIFICATION_NUDGED, agent=self.agent)
        t.log(logging.INFO, "verification nudge injected", request_id=self.request_id,
              status="nudged", duration_ms=self._elapsed_ms(), nudges=self._stats.nudges,
              tool_calls_used=self.budget.tool_calls_used)

    @guarded(_nothing_reported)
    def _evaluate(self, outcome: VerificationOutcome, reason: str) -> None:
        """The loop's one evaluation result, once its outcome is known."""
        t, d = self._telemetry, self.decision
        name = names.EVALUATION_VERIFICATION
        if d.error_type is not None:
            t.evaluation_failed(name, self.request_id, d.error_type)
            return
        if outcome is VerificationOutcome.NOT_REQUIRED:
            t.evaluation(name, self.request_id, passed=True,
                         explanation=_NOT_REQUIRED_EXPLANATION)
            return
        asked = (f"{d.family} question (depth {d.depth.value}, score {d.score:g}); "
                 f"{self.budget.tool_calls_used} of {self.budget.min_tool_calls} required "
                 f"call(s) of {', '.join(self._required_tools) or 'any tool'}, "
                 f"{self._stats.nudges} nudge(s)")
        if outcome is VerificationOutcome.COMPLETED:
            t.evaluation(name, self.request_id, passed=True,
                         explanation=f"verified: {asked}")
        else:
            t.evaluation(name, self.request_id, passed=False,
                         explanation=f"answered unverified ({reason}): {asked}")

    def _settle(self, outcome: VerificationOutcome, reason: str) -> None:
        self._stats.outcome = outcome
        if outcome is VerificationOutcome.NOT_REQUIRED:
            return
        completed = outcome is VerificationOutcome.COMPLETED
        event, metric, level = (
            (names.EVENT_VERIFICATION_COMPLETED, names.METRIC_VERIFICATION_COMPLETED,
             logging.INFO) if completed else
            (names.EVENT_VERIFICATION_BYPASSED, names.METRIC_VERIFICATION_BYPASSED,
             logging.WARNING))
        attrs = self._budget_attrs()
        attrs[names.ATTR_REASON] = reason
        t = self._telemetry
        with t.verdict_span(self.request_id):
            t.event(event, self.request_id, attrs)
            self._evaluate(outcome, reason)
        t.count(metric, agent=self.agent)
        t.log(level, f"verification {outcome.value}", request_id=self.request_id,
              status=outcome.value, duration_ms=self._elapsed_ms(), reason=reason,
              nudges=self._stats.nudges, tool_calls_used=self.budget.tool_calls_used)
        # Recorded once, when the outcome is known: a loop that never calls close()
        # after a normal finish still leaves its payload.
        t.payload(self.request_id, names.PAYLOAD_KIND_VERIFICATION, {
            "question": self.question,
            "decision": {
                "should_reason": self.decision.should_reason,
                "depth": self.decision.depth.value,
                "score": self.decision.score,
                "trigger_pattern": self.decision.trigger_pattern,
                "family": self.decision.family,
            },
            "outcome": outcome.value,
            "reason": reason,
            "turns_used": self.budget.turns_used,
            "tool_calls_used": self.budget.tool_calls_used,
            "other_tool_calls": self.budget.other_tool_calls,
            "min_tool_calls": self.budget.min_tool_calls,
            "nudges": self._stats.nudges,
        }, agent=self.agent, outcome=outcome.value)
