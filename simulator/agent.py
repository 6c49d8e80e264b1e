"""The simulated agent: plays one request script against the real guard hooks.

It is an agent like any other that uses guardtrace: it opens a root span per request and
a child span per step, calls :func:`generate_validated_plan` with a scripted planner,
:meth:`FabricationGuard.check` on its replies and drives a :class:`VerificationLoop`
through a scripted ReAct loop, and records its LLM exchange as a debug payload. Every
span event, counter and hook payload comes from the hooks themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode, Tracer

from ..collectors.emit.telemetry import GuardTelemetry, record_payload
from ..collectors.plans import retry as plan_retry
from ..collectors.plans.retry import (
    GeneratedPlan,
    PlanAttempt,
    PlanGenerationError,
    PlanHallucinationError,
    PlanRegenerationError,
    PlanRetryConfig,
    generate_validated_plan,
)
from ..collectors.questions.verification import (
    TurnActionKind,
    VerificationLoop,
    VerificationOutcome,
)
from ..collectors.replies.fabrication import FabricationDetector, FabricationGuard
from ..schemas import names
from .catalog import GENERIC_TOOLS, MODULE_TOOLS
from .fleet import (
    FleetAgent,
    PlanScript,
    QuestionScript,
    ReplyScript,
    RequestScript,
    Scenario,
)

__all__ = ["EXCHANGE_PAYLOAD_KIND", "SimulatedAgent"]

# The kind of the payload an agent records for its own LLM exchange (prompt and
# response). schemas/names.py defines only the hooks' kinds; this one is the agent's.
EXCHANGE_PAYLOAD_KIND = names.PAYLOAD_KIND_LLM_EXCHANGE

# Span names of the simulated agent (OTel GenAI style for model and tool calls).
SPAN_REQUEST = "agent.request"
SPAN_PLAN = "agent.plan"
SPAN_REPLY = "agent.reply"
SPAN_VERIFY = "agent.verify"
SPAN_LLM = "chat"
SPAN_TOOL = "execute_tool"


def _tool_kinds() -> dict[str, str]:
    # The fleet's agents tell the fabrication guard what each of their tools does, as a
    # deployment would (over what the tools' names say): read, write, or neither.
    tools = [t for catalog in (*MODULE_TOOLS.values(), GENERIC_TOOLS) for t in catalog]
    return {t[0]: t[1] if t[1] in ("read", "write") else "none" for t in tools}


class SimulatedAgent:
    """Executes request scripts; one instance serves the whole fleet.

    Args:
        tracer: The tracer of the provider the hooks emit through, so the agent's spans
            and the hooks' events share one trace per request.

    Guards are created once per fleet agent (reply history is per agent) and per module
    (planning telemetry), as long-lived agents would hold them.
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._detector = FabricationDetector(tool_kinds=_tool_kinds())
        self._guards: dict[str, FabricationGuard] = {}
        self._planning: dict[str, GuardTelemetry] = {}

    def run(self, script: RequestScript, request_id: str) -> str:
        """Play ``script`` as request ``request_id``; return the outcome the hooks reported.

        The label is a :class:`Scenario` value when the hooks decided as the script
        intended; anything else (``reply_action_read``, ``plan_failed``) shows a mismatch.
        """
        agent = script.agent
        with self._span(SPAN_REQUEST, request_id, agent) as root:
            if isinstance(script.step, PlanScript):
                outcome = self._plan(script, script.step, request_id, root)
            elif isinstance(script.step, ReplyScript):
                outcome = self._reply(agent, script.step, request_id)
            else:
                outcome = self._question(agent, script.step, request_id)
            record_payload(request_id, EXCHANGE_PAYLOAD_KIND, script.exchange(),
                           **{names.ATTR_AGENT: agent.name, names.ATTR_MODULE: agent.module})
        return outcome

    @contextmanager
    def _span(self, name: str, request_id: str, agent: FleetAgent,
              **attributes: Any) -> Iterator[Span]:
        with self._tracer.start_as_current_span(name, attributes={
                names.ATTR_REQUEST_ID: request_id, names.ATTR_MODULE: agent.module,
                names.ATTR_AGENT: agent.name, **attributes}) as span:
            yield span

    def _tool_call(self, request_id: str, agent: FleetAgent, tool: str) -> None:
        with self._span(f"{SPAN_TOOL} {tool}", request_id, agent):
            pass

    # -- family 1 ----------------------------------------------------------------------
    def _plan(self, script: RequestScript, step: PlanScript, request_id: str,
              root: Span) -> str:
        agent = script.agent
        telemetry = self._planning.get(agent.module)
        if telemetry is None:
            telemetry = self._planning[agent.module] = GuardTelemetry(
                agent.module, plan_retry.OPERATION)

        def generate(attempt: PlanAttempt) -> GeneratedPlan:
            with self._span(SPAN_LLM, request_id, agent) as llm:
                if attempt.retry == step.fails_on_retry:
                    # Status only, raised outside the span: an `exception` span event
                    # would be one more event name than the hooks emit.
                    llm.set_status(Status(StatusCode.ERROR, "planner call timed out"))
                else:
                    # The planner is shown the feedback first, then the usual prompt.
                    return GeneratedPlan(step.plans[attempt.retry],
                                         attempt.compose(script.prompt))
            raise TimeoutError("planner call timed out after 30 s (simulated)")

        with self._span(SPAN_PLAN, request_id, agent) as span:
            try:
                plan = generate_validated_plan(
                    step.request, generate, agent.allowed, request_id=request_id,
                    config=PlanRetryConfig(max_retries=agent.max_retries),
                    telemetry=telemetry)
            except PlanGenerationError as exc:
                # This agent gives up on the request; the error is its answer.
                span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
                root.set_status(Status(StatusCode.ERROR, "no valid plan"))
                if isinstance(exc, PlanHallucinationError):
                    return Scenario.PLAN_UNRECOVERABLE
                if isinstance(exc, PlanRegenerationError):
                    return Scenario.PLAN_REGENERATION_FAILED
                return "plan_failed"
            for plan_step in plan.steps:
                self._tool_call(request_id, agent, plan_step.tool)
        return Scenario.PLAN_RECOVERED if plan.retries_used else Scenario.PLAN_VALID

    # -- family 2 ----------------------------------------------------------------------
    def _reply(self, agent: FleetAgent, step: ReplyScript, request_id: str) -> str:
        guard = self._guards.get(agent.name)
        if guard is None:
            guard = self._guards[agent.name] = FabricationGuard(self._detector,
                                                                module=agent.module)
        with self._span(SPAN_REPLY, request_id, agent):
            for tool in step.tools_fired:
                self._tool_call(request_id, agent, tool)
            with self._span(SPAN_LLM, request_id, agent):
                pass
            verdict = guard.check(step.reply, step.tools_fired, channel=step.channel,
                                  request_id=request_id, agent=agent.name)
        if not verdict.tiers:
            return Scenario.REPLY_TRUTHFUL
        return "reply_" + "_".join(verdict.tiers)

    # -- family 3 ----------------------------------------------------------------------
    def _question(self, agent: FleetAgent, step: QuestionScript,
                  request_id: str) -> str:
        with self._span(SPAN_VERIFY, request_id, agent):
            loop = VerificationLoop(step.question, request_id=request_id, agent=agent.name,
                                    module=agent.module, max_nudges=step.max_nudges)
            finished = False
            for turn in step.turns:
                with self._span(SPAN_LLM, request_id, agent):
                    pass
                action = loop.on_model_turn(wants_to_finish=turn.finishes)
                if action.kind is TurnActionKind.FINISH:
                    finished = True
                    break
                if action.kind is TurnActionKind.CONTINUE:
                    for tool in turn.tools:
                        self._tool_call(request_id, agent, tool)
                        loop.on_tool_call(tool)
            outcome = loop.close("loop_end" if finished else "turn_limit")
        if outcome is VerificationOutcome.NOT_REQUIRED:
            return Scenario.QUESTION_NEUTRAL
        if outcome is VerificationOutcome.COMPLETED:
            return Scenario.QUESTION_NUDGED if loop.nudges else Scenario.QUESTION_VERIFIED
        return Scenario.QUESTION_BYPASSED
