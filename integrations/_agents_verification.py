"""Forced verification of an Agents SDK run: ``AgentsGuard(verify=True)``.

The SDK runs the agent loop, so the guard applies the SDK's own mechanism (the recipe
of ``VERIFICATION_HOWTO`` in :mod:`.openai_agents`) itself. When the criticality gate
flags the run's question and no ``reason`` call follows it in the input, the run's agent
is a clone with:

* the ``reason`` tool (unless the agent has one of its own): it executes
  ``reason_messages(question)`` on the run's model, as the SDK resolves it (the run
  config's model, else the agent's), without tools;
* ``ModelSettings(tool_choice="reason")``, so the SDK forces the first model call to
  call it, and ``reset_tool_choice=True``, so the SDK lifts the constraint once it ran
  and the model answers next, with the verification in its input.

The lifecycle is a :class:`~guardtrace.collectors.VerificationLoop`'s, started at the
run's first model call (its request id is the run's, known only then) and settled when
the run returns: ``llm.verification_completed`` when the run called ``reason``,
``..._bypassed`` when it did not, or when the guard's reason tool failed (the model is
then told so, and the run goes on).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from agents import Agent, FunctionTool, Model, ModelSettings, RunConfig
from agents.models.interface import ModelTracing

from ..collectors.emit.internal import count_hook_error, log_rate_limited
from ..collectors.questions.criticality import CriticalityDecision, CriticalityGate
from ..collectors.questions.reason_tool import (
    REASON_TOOL_NAME,
    reason_messages,
    reason_tool_schema,
)
from ..collectors.questions.verification import VerificationLoop
from ._messages import from_responses_items
from ._openai_responses import input_question
from ._verification import VERIFICATION_FAILED, DecidedGate

__all__ = ["RunVerification", "current", "verified_agent", "verifying"]

# What the model reads when the guard's reason tool could not verify: the run goes on,
# so the model is asked to do the checking itself rather than trust the first answer.
UNVERIFIED = ("The verification could not be run. Check the answer step by step yourself "
              "(restate the question, enumerate, count explicitly) before replying.")

# The verification of the run in progress, for the guard's hooks: they are called in the
# run's task (and the tasks it starts), which see the value set around Runner.run.
_CURRENT: ContextVar[RunVerification | None] = ContextVar("guardtrace_run_verification",
                                                         default=None)


class RunVerification:
    """The forced verification of one run.

    Args:
        question: The run's question, which the gate flagged.
        decision: The gate's decision on it.
    """

    def __init__(self, question: str, decision: CriticalityDecision) -> None:
        self.question = question
        self.decision = decision
        self.loop: VerificationLoop | None = None
        self.failed = False

    def start(self, request_id: str, agent: str | None) -> None:
        """Emit ``llm.verification_required`` under the run's request id (once)."""
        if self.loop is None:
            self.loop = VerificationLoop(self.question, request_id=request_id, agent=agent,
                                         gate=DecidedGate(self.decision))

    def settle(self, new_items: Iterable[Any]) -> None:
        """Settle the outcome from what the run did (``RunResult.new_items``)."""
        loop = self.loop
        if loop is None or loop.outcome is not None:
            return
        if self.failed:
            loop.close(VERIFICATION_FAILED)
            return
        for item in new_items:
            if (getattr(item, "type", None) == "tool_call_item"
                    and getattr(item.raw_item, "name", None) == REASON_TOOL_NAME):
                loop.on_tool_call(REASON_TOOL_NAME)
        if loop.budget.can_finish:
            loop.on_model_turn(wants_to_finish=True)
        else:
            loop.close("loop_end")

    def broke(self) -> None:
        """The run raised."""
        if self.loop is not None:
            self.loop.close("error")


def current() -> RunVerification | None:
    """The verification of the run in progress in this task, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def verifying(verification: RunVerification | None) -> Iterator[None]:
    """Make ``verification`` the current one for the run made inside."""
    token = _CURRENT.set(verification)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def verified_agent(agent: Agent[Any], input: Any, run_config: RunConfig,
                   gate: CriticalityGate) -> tuple[Agent[Any], RunVerification | None]:
    """The agent to run and the run's verification: the agent itself and None when the
    gate is quiet (or the question is verified already, or unreadable), else the
    forcing clone (see the module docstring). Never raises."""
    try:
        question = input_question(input)
        if question is None or question.verified:
            return agent, None
        decision = gate.assess(question.text)
        if not decision.should_reason:
            return agent, None
        verification = RunVerification(question.text, decision)
        has_reason = any(getattr(tool, "name", None) == REASON_TOOL_NAME for tool in agent.tools)
        tools = agent.tools if has_reason else [
            *agent.tools, _reason_tool(verification, agent, run_config)]
        forced = agent.model_settings.resolve(ModelSettings(tool_choice=REASON_TOOL_NAME))
        return agent.clone(tools=tools, model_settings=forced,
                           reset_tool_choice=True), verification
    except Exception as exc:  # noqa: BLE001 - the run goes on unverified
        count_hook_error("integrations.openai_agents.verify", exc)
        return agent, None


def _run_model(agent: Agent[Any], run_config: RunConfig) -> Model:
    # As the SDK resolves a turn's model (run_internal.turn_preparation.get_model, not
    # public API): the run config's model first, then the agent's, by the provider.
    if isinstance(run_config.model, Model):
        return run_config.model
    if isinstance(run_config.model, str):
        return run_config.model_provider.get_model(run_config.model)
    if isinstance(agent.model, Model):
        return agent.model
    return run_config.model_provider.get_model(agent.model)


def _tracing(run_config: RunConfig) -> ModelTracing:
    # As the SDK traces its own model calls (agents.tracing.model_tracing).
    if run_config.tracing_disabled:
        return ModelTracing.DISABLED
    if run_config.trace_include_sensitive_data:
        return ModelTracing.ENABLED
    return ModelTracing.ENABLED_WITHOUT_DATA


def _reason_tool(verification: RunVerification, agent: Agent[Any],
                 run_config: RunConfig) -> FunctionTool:
    """The ``reason`` tool of one run: ``reason_messages`` on the run's model."""
    definition = reason_tool_schema("openai")["function"]

    async def reason(_context: Any, arguments: str) -> str:
        try:
            given = json.loads(arguments or "{}")
            question = given.get("question")
            context = given.get("context")
            system, task = reason_messages(
                question if isinstance(question, str) and question.strip()
                else verification.question,
                context if isinstance(context, str) else None)
            item: Any = task  # a user message: an input item of the Responses API
            response = await _run_model(agent, run_config).get_response(
                system["content"], [item], ModelSettings(), [], None, [],
                _tracing(run_config), previous_response_id=None, conversation_id=None,
                prompt=None)
            text = "\n".join(message["content"] for message in
                             from_responses_items(response.output)
                             if message["role"] == "assistant" and message["content"])
            if text.strip():
                return text
            why = "gave no text"
        except Exception as exc:  # noqa: BLE001 - the run goes on; the model is told
            why = f"failed ({type(exc).__name__})"
        verification.failed = True
        log_rate_limited("integrations.openai_agents.verify_failed",
                         "guardtrace: the verification call %s; the run goes on unverified",
                         why)
        return UNVERIFIED

    # Not strict: the optional `context` parameter is not in `required`.
    return FunctionTool(name=REASON_TOOL_NAME, description=definition["description"],
                        params_json_schema=definition["parameters"], on_invoke_tool=reason,
                        strict_json_schema=False)
