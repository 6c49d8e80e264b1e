"""One model call as the guards see it, and the checks every adapter runs on it.

An adapter turns each call it intercepts (what was sent, what came back, streamed or
not) into an :class:`Exchange`; :class:`ExchangeGuard` then runs the hooks on it, the
same for every SDK and framework:

* hallucinated tools: the reply's tool calls against the ``tools`` sent, by
  :func:`~guardtrace.collectors.plans.validation.validate_plan` (its detection event,
  counter and log line);
* fabrication and loops: :meth:`~guardtrace.collectors.FabricationGuard.check_conversation`
  on the conversation with the new reply last;
* the exchange itself, recorded as an ``llm_exchange`` debug payload (redacted by the
  payload sink, as every payload is).

Both checks also emit their verdict as a GenAI evaluation result (pass or fail), with
the response's id as ``gen_ai.response.id``.

Nothing here raises: a failing check is counted in ``guardtrace.hook_errors`` and
reported as not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..collectors.emit.internal import count_hook_error
from ..collectors.emit.telemetry import new_request_id, record_payload
from ..collectors.plans.validation import PlanValidationResult, validate_plan
from ..collectors.replies.fabrication import FabricationGuard, FabricationVerdict
from ..schemas import names
from ..schemas.request_ids import storable_request_id
from ._sdk import attr, given, plain

__all__ = ["Exchange", "ExchangeGuard", "Findings", "disclaimer_suffix", "last_user_text",
           "response_id"]

# Attributes of the exchange payload (beside `agent`).
ATTR_API = "api"
ATTR_MODEL = "model"
ATTR_STREAMED = "streamed"


@dataclass(frozen=True)
class Exchange:
    """One model call: what was sent and what came back.

    Attributes:
        api: Which API it was (``chat.completions``, ``responses``, ``messages``).
        model: The model asked for, when known.
        tools: The tool list sent, as sent (any shape the hooks read); None when the
            call sent none (then no call can be checked against it).
        conversation: The conversation in OpenAI chat or Anthropic messages shape, the
            new reply last.
        reply: The response (an SDK object, or the dict a stream was assembled into),
            as :func:`validate_plan` reads tool calls from it.
        reply_text: The new reply's text ("" when it only calls tools).
        system: A system prompt sent apart from the conversation (Anthropic's
            ``system``, the Responses API's ``instructions``).
        request: What was sent, as JSON data, for the payload.
        streamed: The reply arrived as a stream.
    """

    api: str
    model: str | None
    tools: Any
    conversation: Sequence[Any]
    reply: Any
    reply_text: str = ""
    system: Any = None
    request: Mapping[str, Any] = field(default_factory=dict)
    streamed: bool = False


@dataclass(frozen=True)
class Findings:
    """What the checks of one exchange found (None for a check that did not run)."""

    request_id: str
    plan: PlanValidationResult | None = None
    verdict: FabricationVerdict | None = None

    @property
    def hallucinated(self) -> bool:
        return self.plan is not None and bool(self.plan.hallucinations)

    @property
    def fabricated(self) -> bool:
        return self.verdict is not None and self.verdict.flagged


class ExchangeGuard:
    """Runs the hooks on exchanges; one per instrumented client (or framework hook).

    Args:
        agent: The ``agent`` label and attribute of the telemetry.
        guard: The fabrication guard to use (its detector's tool kinds, tiers and
            disclaimers); a default one when None.
        record_exchanges: Record each exchange as an ``llm_exchange`` payload.
    """

    def __init__(self, *, agent: str | None = None, guard: FabricationGuard | None = None,
                 record_exchanges: bool = True) -> None:
        self.agent = agent
        self.guard = guard if guard is not None else FabricationGuard()
        self.record_exchanges = record_exchanges

    def check(self, exchange: Exchange, *, request_id: str | None = None,
              plan: bool = True) -> Findings:
        """Run every check on ``exchange``; never raises.

        Args:
            exchange: The call to check.
            request_id: Correlates the telemetry of all checks; the current trace id or
                a random id when None.
            plan: Check tool calls against the tools sent (False when a retry loop
                already reported them).

        Returns:
            What was found.
        """
        rid = storable_request_id(request_id or new_request_id())
        result = self.check_tools(exchange, rid) if plan else None
        verdict = self.check_reply(exchange, rid)
        self.record(exchange, rid)
        return Findings(rid, result, verdict)

    def check_tools(self, exchange: Exchange, request_id: str, *,
                    emit: bool = True) -> PlanValidationResult | None:
        """The reply's tool calls against the tools sent (None when none were sent)."""
        if not given(exchange.tools):
            return None
        try:
            return validate_plan(exchange.reply, exchange.tools, request_id=request_id,
                                 emit=emit, response_id=response_id(exchange.reply))
        except Exception as exc:  # noqa: BLE001 - the hooks never raise into the agent
            count_hook_error("integrations.check_tools", exc)
            return None

    def check_reply(self, exchange: Exchange, request_id: str) -> FabricationVerdict | None:
        """The new reply within its conversation (None when it has no text: judging the
        last reply with text would judge an older one again)."""
        if not exchange.reply_text.strip():
            return None
        tools = exchange.tools if given(exchange.tools) else None
        # check_conversation is guarded itself: it counts its own errors.
        return self.guard.check_conversation(exchange.conversation, tools,
                                             system=exchange.system, request_id=request_id,
                                             agent=self.agent,
                                             response_id=response_id(exchange.reply))

    def record(self, exchange: Exchange, request_id: str) -> None:
        """Record the exchange as an ``llm_exchange`` payload (redacted by the sink)."""
        if not self.record_exchanges:
            return
        try:
            body = {**exchange.request, "response": plain(exchange.reply)}
            record_payload(request_id, names.PAYLOAD_KIND_LLM_EXCHANGE, body, **{
                names.ATTR_AGENT: self.agent, ATTR_API: exchange.api,
                ATTR_MODEL: exchange.model, ATTR_STREAMED: str(exchange.streamed).lower()})
        except Exception as exc:  # noqa: BLE001 - the hooks never raise into the agent
            count_hook_error("integrations.record", exc)


# LangChain gives a message the provider gave no id one of its own, made of the run's
# id ("lc_run-<uuid>", "run-<uuid>" in older versions): not a response's id.
_FRAMEWORK_ID_PREFIXES = ("lc_", "run-")


def response_id(reply: Any) -> str | None:
    """The id the provider gave a response (``chatcmpl-…``, ``resp_…``, ``msg_…``), as
    an SDK object, a LangChain message or the dict a stream was assembled into; None
    when it has none."""
    value = attr(reply, "id")
    if not isinstance(value, str) or not value or value.startswith(_FRAMEWORK_ID_PREFIXES):
        return None
    return value


def disclaimer_suffix(verdict: FabricationVerdict) -> str:
    """What the fabrication guard appended to the reply (blank line, disclaimers), to
    append to the reply's last text part when acting."""
    kept = verdict.original_reply.rstrip()
    if verdict.reply.startswith(kept):
        return verdict.reply[len(kept):]
    return "\n\n" + "\n".join(verdict.disclaimers)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            text = part if isinstance(part, str) else attr(part, "text")
            if isinstance(text, str):
                parts.append(text)
        return "\n".join(parts)
    return ""


def last_user_text(conversation: Sequence[Any]) -> str:
    """The text of the last user message that says something (the request a retry is
    for); "" when there is none."""
    for message in reversed(conversation):
        if attr(message, "role") == "user":
            text = _text_of(attr(message, "content")).strip()
            if text:
                return text
    return ""
