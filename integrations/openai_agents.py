"""Guard an OpenAI Agents SDK run: tool-not-found feedback, an output guardrail, and the
SDK's traces mirrored into OpenTelemetry.

    from guardtrace.integrations.openai_agents import AgentsGuard, install_tracing
    install_tracing()                               # SDK spans -> OTel: one trace per run
    guard = AgentsGuard()
    result = await guard.run(agent, "Book me a flight to Oslo")
    print(result.final_output)                      # with the disclaimer when fabricated

What each piece does, and why it is needed:

* **A tool the agent does not have** makes the SDK raise ``ModelBehaviorError: Tool ...
  not found`` unless ``RunConfig.tool_not_found_behavior="return_error_to_model"``.
  :meth:`AgentsGuard.run_config` sets it, with a ``tool_error_formatter`` that answers
  the call with the plan retry's feedback (the invented name, the closest real ones,
  the tools the agent has) instead of the SDK's bare "Tool 'x' not found.", and
  reports the episode as the plan retry does: ``llm.hallucination_detected`` per
  invented call, ``..._regeneration_complete`` when the model answers the feedback,
  then ``..._recovered``, or ``..._unrecoverable`` once the retry budget
  (``tool_retries``) is spent. The run is never stopped: after the
  budget the model still reads the feedback, and ``max_turns`` bounds the run. Each
  verdict is also a ``guardtrace.plan_tools`` evaluation result: a fail per invented
  call, a pass for the response that ends the episode (the SDK runs the calls it finds
  and reports only missing ones, so responses outside an episode get no tool verdict).
* **Fabrication and loops**: :attr:`AgentsGuard.output_guardrail` judges the final
  output within the run's conversation (which :class:`GuardtraceRunHooks` records: the
  guardrail itself sees only the output). An SDK guardrail can only trip (stop the
  run), not change the output, so by default it never trips (``trip_on`` names tiers
  that should); the verdict is its ``output_info``, and :meth:`AgentsGuard.annotate`
  turns a result's text output into the reply with its inline disclaimer.
  :meth:`AgentsGuard.run` does that to ``result.final_output``.
* **One trace**: the SDK's tracing is not OpenTelemetry, so its spans and the guard
  events landed in two traces. :class:`GuardtraceTracingProcessor` (registered by
  :func:`install_tracing`, beside the SDK's own exporter) mirrors each SDK trace and
  span as an OTel span through guardtrace's tracer provider; the guards of a run emit
  on the mirrored span of where they run and take its trace id as the request id, so
  the SDK's spans and the guard events share one trace and one request id. A run
  inside your own OTel span is mirrored under it.

* **Forced verification** (``AgentsGuard(verify=True)``): when the criticality gate
  flags the run's question, :meth:`AgentsGuard.run` runs a clone of the agent with the
  ``reason`` tool and ``ModelSettings(tool_choice="reason")``: the SDK forces the first
  model call to verify and resets ``tool_choice`` after the tool ran
  (``Agent.reset_tool_choice``), so the model answers next. The tool runs the reason
  prompt on the run's model; ``llm.verification_required`` and ``..._completed`` carry
  the run's request id (:mod:`._agents_verification`). A question the gate does not
  flag runs the agent as it is. The SDK's loop has no hook to nudge a model that
  answered early, and with the call forced none is needed. :data:`VERIFICATION_HOWTO`
  is the same by hand, with a reason tool of your own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import threading
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    from agents import (
        Agent,
        GuardrailFunctionOutput,
        Handoff,
        OutputGuardrail,
        RunConfig,
        RunHooks,
        Runner,
    )
    from agents.tracing import Span, Trace, TracingProcessor, add_trace_processor
    from agents.tracing import get_current_span as sdk_current_span
    from agents.tracing import get_current_trace as sdk_current_trace
except ImportError as exc:  # the adapter is useless without its SDK: say which extra
    raise ImportError(
        "guardtrace.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'guardtrace[agents]'") from exc
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from .. import __version__
from ..collectors.emit import state as telemetry_state
from ..collectors.emit.telemetry import guarded
from ..collectors.plans.retry_prompts import PlanAttempt
from ..collectors.plans.retry_telemetry import RetryReporter
from ..collectors.plans.validation import PLANNING_TELEMETRY, report_pass, validate_plan
from ..collectors.questions.criticality import default_gate
from ..collectors.replies.fabrication import FabricationGuard, FabricationVerdict
from ..schemas import names
from . import _agents_verification as verification
from ._exchange import Exchange, ExchangeGuard, last_user_text
from ._messages import from_responses_items, with_disclaimers
from ._sdk import plain
from ._settings import check_flag, check_guard, check_retries, check_tiers
from ._tool_feedback import tool_call_feedback

__all__ = [
    "VERIFICATION_HOWTO",
    "AgentsGuard",
    "GuardtraceRunHooks",
    "GuardtraceTracingProcessor",
    "install_tracing",
]

#: The name of the output guardrail in the SDK's traces and results.
GUARDRAIL_NAME = "guardtrace_fabrication"
#: The instrumentation scope of the mirrored spans.
TRACER_NAME = "guardtrace.integrations.openai_agents"
#: The ``api`` attribute of the exchanges this adapter records.
API = "openai_agents"
# Attribute prefix of what a mirrored span copies from the SDK span's data.
_ATTR_PREFIX = "openai_agents."
# Span data fields that are the model's or a tool's input and output: payload material,
# too large and too sensitive for span attributes.
_BULKY_FIELDS = frozenset({"input", "output", "response", "usage", "data"})
# Output items the client runs; anything else (messages, reasoning, hosted tool calls)
# never comes back through the tool-not-found path.
_CLIENT_CALLS = frozenset({"function_call", "custom_tool_call"})
# The SDK's generated trace ids: its 32 hex digits are a valid request id.
_SDK_TRACE_ID = re.compile(r"^trace_([0-9a-f]{32})$")

VERIFICATION_HOWTO = """\
Forced verification with the Agents SDK. The SDK runs the loop, so the gate decides
before the run and the SDK forces the call:

    with VerificationLoop(question, agent="helpdesk") as loop:  # the gate decides
        if loop.required:
            agent = agent.clone(tools=[*agent.tools, reason_tool],
                                model_settings=ModelSettings(tool_choice="reason"))
        result = await guard.run(agent, question)
        for item in result.new_items:                    # what the model called
            if item.type == "tool_call_item":
                loop.on_tool_call(item.raw_item.name)
        loop.on_model_turn(wants_to_finish=True)         # the run answered

reason_tool is a @function_tool named "reason" that runs reason_messages(question) on a
model of your choice. tool_choice makes the first model call call it, and the SDK
resets tool_choice after a tool call (Agent.reset_tool_choice), so the model answers
next; the loop then reports the verification completed (bypassed if it was not called).
"""


# --- OpenTelemetry mirror of the SDK's traces ----------------------------------------------

def _skip(*_args: Any, **_kwargs: Any) -> Any:
    return None  # what a guarded hook returns when it failed: nothing, SDK defaults


def _span_name(data: Any) -> str:
    kind = getattr(data, "type", "span")
    name = getattr(data, "name", None)
    if kind == "agent":
        return f"invoke_agent {name}"
    if kind == "function":
        return f"execute_tool {name}"
    if kind in ("generation", "response"):
        model = getattr(data, "model", None)
        return f"chat {model}" if model else "chat"
    if kind == "handoff":
        return f"handoff {getattr(data, 'from_agent', None)} -> {getattr(data, 'to_agent', None)}"
    if kind == "guardrail":
        return f"guardrail {name}"
    return str(name) if kind == "custom" and name else str(kind)


def _attribute(value: Any) -> Any:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _data_attributes(data: Any) -> dict[str, Any]:
    try:
        exported = data.export()
    except Exception:  # noqa: BLE001 - span data that cannot export has no attributes
        return {}
    out: dict[str, Any] = {}
    for key, value in exported.items():
        if key in _BULKY_FIELDS or key == "type":
            continue
        value = _attribute(value)
        if value is not None:
            out[_ATTR_PREFIX + key] = value
    kind = exported.get("type")
    if kind == "agent":
        out["gen_ai.agent.name"] = exported.get("name")
    elif kind == "function":
        out["gen_ai.tool.name"] = exported.get("name")
    return {k: v for k, v in out.items() if v is not None}


@dataclass
class _MirroredTrace:
    root: Any
    request_id: str
    spans: dict[str, Any] = field(default_factory=dict)


class GuardtraceTracingProcessor(TracingProcessor):
    """Mirrors the Agents SDK's traces and spans as OpenTelemetry spans.

    Each SDK trace becomes a root span (a child of the OTel span current where the run
    started, if any) whose trace id is the run's request id; each SDK span becomes a
    child of its SDK parent's mirror, named as OTel's GenAI conventions do
    (``invoke_agent {name}``, ``execute_tool {name}``, ``chat {model}``), with the
    span data's small fields as ``openai_agents.*`` attributes and ``request_id`` set.
    Tool and model input and output are left out: they are payloads, not attributes.
    Register it with :func:`install_tracing` (or ``agents.add_trace_processor``). It
    never raises into the SDK.

    Args:
        tracer_provider: Where the mirrored spans go; guardtrace's (``configure``) when
            None, else the OTel global provider.
    """

    def __init__(self, tracer_provider: Any = None) -> None:
        self._tracer_provider = tracer_provider
        self._lock = threading.Lock()
        self._traces: dict[str, _MirroredTrace] = {}

    def _tracer(self) -> Any:
        provider = (self._tracer_provider or telemetry_state.current().tracer_provider
                    or trace.get_tracer_provider())
        return provider.get_tracer(TRACER_NAME, __version__)

    @guarded(_skip)
    def on_trace_start(self, sdk_trace: Trace) -> None:
        attributes = {_ATTR_PREFIX + "trace_id": sdk_trace.trace_id,
                      _ATTR_PREFIX + "group_id": getattr(sdk_trace, "group_id", None)}
        root = self._tracer().start_span(
            sdk_trace.name, attributes={k: v for k, v in attributes.items() if v is not None})
        context = root.get_span_context()
        request_id = f"{context.trace_id:032x}" if context.is_valid else _new_id(sdk_trace)
        root.set_attribute(names.ATTR_REQUEST_ID, request_id)
        with self._lock:
            self._traces[sdk_trace.trace_id] = _MirroredTrace(root, request_id)

    @guarded(_skip)
    def on_trace_end(self, sdk_trace: Trace) -> None:
        with self._lock:
            mirrored = self._traces.pop(sdk_trace.trace_id, None)
        if mirrored is None:
            return
        for span in mirrored.spans.values():  # spans the SDK left open
            span.end()
        mirrored.root.end()

    @guarded(_skip)
    def on_span_start(self, span: Span[Any]) -> None:
        with self._lock:
            mirrored = self._traces.get(span.trace_id)
            if mirrored is None:
                return  # a span of a trace that started before this processor was added
            parent = mirrored.spans.get(span.parent_id or "", mirrored.root)
        otel_span = self._tracer().start_span(
            _span_name(span.span_data), context=trace.set_span_in_context(parent),
            attributes={names.ATTR_REQUEST_ID: mirrored.request_id,
                        _ATTR_PREFIX + "span_id": span.span_id})
        with self._lock:
            mirrored.spans[span.span_id] = otel_span

    @guarded(_skip)
    def on_span_end(self, span: Span[Any]) -> None:
        with self._lock:
            mirrored = self._traces.get(span.trace_id)
            otel_span = None if mirrored is None else mirrored.spans.pop(span.span_id, None)
        if otel_span is None:
            return
        # The SDK fills span data in as it goes (an agent's tools, a tool's name): read
        # it now, at the end.
        otel_span.update_name(_span_name(span.span_data))
        otel_span.set_attributes(_data_attributes(span.span_data))
        error = span.error
        if error:
            otel_span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))))
        otel_span.end()

    def shutdown(self) -> None:
        return None  # the spans go through guardtrace's provider: collectors.shutdown()

    def force_flush(self) -> None:
        return None  # likewise: collectors.force_flush()

    def mirror_of(self, sdk_span: Any = None, sdk_trace: Any = None) -> Any:
        """The OTel span mirroring ``sdk_span`` (else the root of ``sdk_trace``), or None."""
        with self._lock:
            if sdk_span is not None:
                mirrored = self._traces.get(getattr(sdk_span, "trace_id", ""))
                found = None if mirrored is None else mirrored.spans.get(sdk_span.span_id)
                if found is not None:
                    return found
            mirrored = self._traces.get(getattr(sdk_trace, "trace_id", "") or "")
            return None if mirrored is None else mirrored.root

    def request_id_of(self, sdk_trace: Any) -> str | None:
        """The request id of a mirrored SDK trace (its OTel trace id), or None."""
        with self._lock:
            mirrored = self._traces.get(getattr(sdk_trace, "trace_id", "") or "")
            return None if mirrored is None else mirrored.request_id


def _new_id(sdk_trace: Any) -> str:
    # Without a recording OTel provider there is no trace id: the SDK's own id then.
    match = _SDK_TRACE_ID.match(str(getattr(sdk_trace, "trace_id", "")))
    return match.group(1) if match else uuid.uuid4().hex


_installed: GuardtraceTracingProcessor | None = None
_install_lock = threading.Lock()


def install_tracing(tracer_provider: Any = None) -> GuardtraceTracingProcessor:
    """Add the OTel mirror to the SDK's trace processors, once per process.

    The SDK's own processors stay (its default exporter still sends traces to the
    OpenAI dashboard). Returns the processor, the same one on every call.
    """
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = GuardtraceTracingProcessor(tracer_provider)
            add_trace_processor(_installed)
        return _installed


# --- per-run state -------------------------------------------------------------------------

@dataclass
class _RunState:
    request_id: str
    agent: Any = None
    system: str | None = None
    input_items: list[Any] = field(default_factory=list)
    output: list[Any] = field(default_factory=list)
    # The hallucinated-tool episode, as the plan retry counts it.
    reporter: RetryReporter | None = None
    retry: int = 0
    misses: int = 0             # not-found calls in the latest response
    regenerating: bool = False  # the current model call answers the feedback
    pending_check: bool = False  # a regenerated response awaits its verdict
    exhausted: bool = False
    not_found: set[str] = field(default_factory=set)


def _item_type(item: Any) -> Any:
    return item.get("type") if isinstance(item, Mapping) else getattr(item, "type", None)


def _has_client_calls(output: Iterable[Any]) -> bool:
    return any(_item_type(item) in _CLIENT_CALLS for item in output)


def _tool_definition(tool: Any) -> dict[str, Any] | None:
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not name:
        return None
    function: dict[str, Any] = {"name": name,
                                "description": getattr(tool, "description", "") or ""}
    parameters = getattr(tool, "params_json_schema", None)
    if isinstance(parameters, Mapping):
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def _handoff_definition(target: Any) -> dict[str, Any]:
    if isinstance(target, Handoff):
        name, description = target.tool_name, target.tool_description
    else:
        name, description = Handoff.default_tool_name(target), \
            Handoff.default_tool_description(target)
    return {"type": "function", "function": {"name": name, "description": description}}


def agent_catalog(agent: Any, extra_tools: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """The tools and handoffs of ``agent`` as OpenAI tool definitions."""
    out = []
    for tool in [*getattr(agent, "tools", ()), *extra_tools]:
        definition = _tool_definition(tool)
        if definition is not None:
            out.append(definition)
    out.extend(_handoff_definition(target) for target in getattr(agent, "handoffs", ()))
    return out


def _model_name(agent: Any) -> str | None:
    model = getattr(agent, "model", None)
    return model if isinstance(model, str) else getattr(model, "model", None)


def _catalog_names(catalog: Sequence[Mapping[str, Any]]) -> set[str]:
    return {entry["function"]["name"] for entry in catalog}


# --- the guard -----------------------------------------------------------------------------

class GuardtraceRunHooks(RunHooks[Any]):
    """Run hooks that give an :class:`AgentsGuard` what the SDK shows no guardrail: the
    model's input and output of each call, and the agent making it.

    Subclass it to add hooks of your own (call ``super()`` in ``on_llm_start`` and
    ``on_llm_end``).
    """

    def __init__(self, guard: AgentsGuard) -> None:
        self.guard = guard

    async def on_llm_start(self, context: Any, agent: Agent[Any], system_prompt: str | None,
                           input_items: list[Any]) -> None:
        self.guard.on_model_call(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Agent[Any], response: Any) -> None:
        self.guard.on_model_reply(context, agent, response)


class AgentsGuard:
    """The guards of an Agents SDK run: tool-not-found feedback, the fabrication and loop
    check of the final output, and their telemetry.

    Wire it with :meth:`run` (all of it), or by hand::

        result = await Runner.run(agent, text, hooks=guard.hooks,
                                  run_config=guard.run_config())
        reply = guard.annotate(result)

    Args:
        agent_label: The ``agent`` label of the guard telemetry; the SDK agent's name
            when None.
        channel: The conversation's id in telemetry (a session id).
        guard: The fabrication guard (tool kinds, tiers, disclaimers); default when None.
        tool_retries: How many answers to the feedback an invented tool gets before the
            episode is reported unrecoverable (the run goes on either way).
        trip_on: Fabrication tiers that trip the output guardrail (the SDK then raises
            ``OutputGuardrailTripwireTriggered``); none by default: the output is
            annotated instead.
        tracing: The OTel mirror whose spans the guards emit on; the one
            :func:`install_tracing` registered when None.
        record_exchanges: Record each model call's input and output as an
            ``llm_exchange`` payload.
        verify: Force verification in :meth:`run` of a question the criticality gate
            flags (see the module docstring).

    Raises:
        ValueError: ``tool_retries`` is not an integer >= 0; ``trip_on`` names a tier
            that does not exist (it would never trip).
        TypeError: ``trip_on`` is a lone string, ``guard`` not a FabricationGuard,
            ``tracing`` not a GuardtraceTracingProcessor, ``record_exchanges`` or
            ``verify`` not a bool.
    """

    def __init__(self, *, agent_label: str | None = None, channel: str | None = None,
                 guard: FabricationGuard | None = None, tool_retries: int = 1,
                 trip_on: Iterable[str] = (), tracing: GuardtraceTracingProcessor | None = None,
                 record_exchanges: bool = True, verify: bool = False) -> None:
        if tracing is not None and not isinstance(tracing, GuardtraceTracingProcessor):
            raise TypeError(f"tracing must be a GuardtraceTracingProcessor (from "
                            f"install_tracing()), got {type(tracing).__name__}")
        self.agent_label = agent_label
        self.channel = channel
        self.checks = ExchangeGuard(agent=agent_label, guard=check_guard(guard),
                                    record_exchanges=check_flag(record_exchanges,
                                                                "record_exchanges"))
        self.guard = self.checks.guard
        self.tool_retries = check_retries(tool_retries)
        self.trip_on = check_tiers(trip_on, "trip_on")
        self.tracing = tracing
        self.verify = check_flag(verify, "verify")
        self.hooks = GuardtraceRunHooks(self)
        self.output_guardrail: OutputGuardrail[Any] = OutputGuardrail(
            guardrail_function=self._check_output, name=GUARDRAIL_NAME)
        self._lock = threading.Lock()
        # Keyed by the run's context wrapper (one per run, hashable by identity): the
        # state goes when the run's objects do.
        self._runs: weakref.WeakKeyDictionary[Any, _RunState] = weakref.WeakKeyDictionary()

    # -- wiring -------------------------------------------------------------------------------
    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a default ``RunConfig``) with the guards added: invented tools are
        answered with feedback, not raised, and the output guardrail runs.

        Raises:
            TypeError: ``base`` is not a ``RunConfig``.
        """
        if base is not None and not isinstance(base, RunConfig):
            raise TypeError(f"run_config expects an agents.RunConfig, got "
                            f"{type(base).__name__}")
        base = base or RunConfig()
        formatter = base.tool_error_formatter

        async def format_tool_error(args: Any) -> str | None:
            if args.kind == "tool_not_found":
                feedback = await self._tool_not_found(args)
                if feedback is not None:
                    return feedback
            if formatter is None:
                return None
            message = formatter(args)
            return await message if inspect.isawaitable(message) else message

        return dataclasses.replace(
            base, tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=format_tool_error,
            output_guardrails=[*(base.output_guardrails or []), self.output_guardrail])

    async def run(self, agent: Agent[Any], input: Any, *, run_config: RunConfig | None = None,
                  **kwargs: Any) -> Any:
        """``Runner.run`` with the guards; ``final_output`` is the annotated reply.

        With ``verify=True``, a question the criticality gate flags runs a clone of
        ``agent`` that must call ``reason`` first (see the module docstring).

        Keyword arguments go to ``Runner.run`` (``context``, ``max_turns``, ``session``
        ...); hooks of your own must subclass :class:`GuardtraceRunHooks`, made with this
        guard, since the guard sees the run through them.

        Raises:
            TypeError: ``agent`` is not an ``agents.Agent``; ``hooks`` that do not
                report to this guard; ``run_config`` that is not a ``RunConfig``.
        """
        if not isinstance(agent, Agent):
            raise TypeError(f"AgentsGuard.run expects an agents.Agent, got "
                            f"{type(agent).__name__}")
        hooks = kwargs.pop("hooks", None) or self.hooks
        if not (isinstance(hooks, GuardtraceRunHooks) and hooks.guard is self):
            raise TypeError("hooks must be a GuardtraceRunHooks (subclass) made with this "
                            "guard: without them the guard cannot see the run")
        run_config = self.run_config(run_config)
        verified = None
        if self.verify:
            agent, verified = verification.verified_agent(agent, input, run_config,
                                                          default_gate())
        with verification.verifying(verified):
            try:
                result = await Runner.run(agent, input, hooks=hooks, run_config=run_config,
                                          **kwargs)
            except BaseException:
                if verified is not None:
                    verified.broke()
                raise
        if verified is not None:
            verified.settle(result.new_items)
        result.final_output = self.annotate(result)
        return result

    def verdict(self, result: Any) -> FabricationVerdict | None:
        """The output guardrail's verdict on a run's final output (None: not judged)."""
        for guardrail_result in getattr(result, "output_guardrail_results", ()) or ():
            if guardrail_result.guardrail is self.output_guardrail:
                info = guardrail_result.output.output_info
                return info if isinstance(info, FabricationVerdict) else None
        return None

    def annotate(self, result: Any) -> Any:
        """The run's final output, with the inline disclaimer when it was flagged.

        Only a text output is annotated; a structured output comes back as it is (its
        verdict is in :meth:`verdict`).
        """
        output = result.final_output
        verdict = self.verdict(result)
        if verdict is None or not verdict.flagged or not isinstance(output, str):
            return output
        return with_disclaimers(output, verdict)

    # -- per-run state ------------------------------------------------------------------------
    def _state(self, context: Any) -> _RunState:
        with self._lock:
            state = self._runs.get(context)
            if state is None:
                state = _RunState(request_id=self._request_id())
                self._runs[context] = state
            return state

    def _bridge(self) -> GuardtraceTracingProcessor | None:
        return self.tracing or _installed

    def _request_id(self) -> str:
        bridge = self._bridge()
        current = sdk_current_trace()
        mirrored = None if bridge is None else bridge.request_id_of(current)
        if mirrored:
            return mirrored
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return f"{context.trace_id:032x}"
        return _new_id(current)

    @contextlib.contextmanager
    def _on_mirrored_span(self) -> Iterator[None]:
        """Make the OTel mirror of the current SDK span current, so guard events land in
        the run's trace."""
        bridge = self._bridge()
        span = None if bridge is None else bridge.mirror_of(sdk_current_span(),
                                                            sdk_current_trace())
        if span is None:
            yield
            return
        with trace.use_span(span, end_on_exit=False):
            yield

    def _label(self, agent: Any) -> str | None:
        return self.agent_label or getattr(agent, "name", None)

    # -- the hooks' side ------------------------------------------------------------------------
    @guarded(_skip)
    def on_model_call(self, context: Any, agent: Any, system: str | None,
                       input_items: list[Any]) -> None:
        state = self._state(context)
        state.agent, state.system, state.input_items = agent, system, list(input_items)
        with self._on_mirrored_span():
            verified = verification.current()
            if verified is not None:
                verified.start(state.request_id, self._label(agent))
            if state.misses:
                # The previous response called tools that do not exist and got feedback:
                # this call is the regeneration.
                state.misses = 0
                if state.exhausted:
                    state.pending_check = True  # a valid response ends the episode quietly
                else:
                    state.retry += 1
                    state.regenerating = True
            elif state.pending_check:
                self._recovered(state)

    @guarded(_skip)
    def on_model_reply(self, context: Any, agent: Any, response: Any) -> None:
        state = self._state(context)
        state.output = list(response.output)
        with self._on_mirrored_span():
            if state.regenerating and state.reporter is not None:
                state.reporter.regeneration_complete(state.retry)
                state.regenerating, state.pending_check = False, True
            if state.pending_check and not _has_client_calls(state.output):
                self._recovered(state)  # no call left that could be missing
            self.checks.record(Exchange(
                api=API, model=_model_name(agent), tools=None, conversation=(),
                reply=state.output, system=state.system,
                request={"instructions": state.system, "input": plain(state.input_items)},
            ), state.request_id)

    def _recovered(self, state: _RunState) -> None:
        # A response of the episode whose calls all ran: the plan_tools verdict is a pass.
        if state.reporter is not None:
            state.reporter.passed()
            if not state.exhausted:
                state.reporter.recovered(state.retry)
        state.reporter, state.retry, state.pending_check = None, 0, False
        state.regenerating = state.exhausted = False

    # -- tool not found -----------------------------------------------------------------------
    async def _tool_not_found(self, args: Any) -> str | None:
        state = self._state(args.run_context)
        catalog = agent_catalog(state.agent)
        if getattr(state.agent, "mcp_servers", None):
            # Only on this rare path: listing MCP tools may cost a round trip.
            try:
                catalog = agent_catalog(state.agent,
                                        await state.agent.get_mcp_tools(args.run_context))
            except Exception:  # noqa: BLE001 - the feedback then lists the agent's own tools
                pass
        return self._report_missing_tool(state, args.tool_name, args.call_id, catalog)

    @guarded(_skip)
    def _report_missing_tool(self, state: _RunState, tool_name: str, call_id: str,
                             catalog: list[dict[str, Any]]) -> str | None:
        call = {"name": tool_name, "arguments": self._arguments_of(state, call_id),
                "id": call_id}
        result = validate_plan([call], catalog, emit=False)
        if not result.hallucinations:
            # It exists, but the SDK could not run it: its own message fits.
            with self._on_mirrored_span():
                report_pass(request_id=state.request_id)
            return None
        state.misses += 1
        state.pending_check = state.regenerating = False
        state.not_found.add(tool_name)
        if state.reporter is None:
            state.reporter = RetryReporter(PLANNING_TELEMETRY, state.request_id,
                                           self.tool_retries)
        with self._on_mirrored_span():
            attempt = PlanAttempt(
                request=last_user_text(from_responses_items(state.input_items)),
                allowed=catalog, retry=state.retry)
            state.reporter.detected(result, attempt, [call], None)
            if state.retry >= self.tool_retries and not state.exhausted:
                state.exhausted = True
                state.reporter.unrecoverable(result, state.retry, (
                    f"The model called '{tool_name}', which agent "
                    f"'{getattr(state.agent, 'name', None)}' does not have, after "
                    f"{state.retry} of {self.tool_retries} retries."))
        return tool_call_feedback(result, catalog)

    @staticmethod
    def _arguments_of(state: _RunState, call_id: str) -> Any:
        for item in state.output:
            if _item_type(item) in _CLIENT_CALLS and getattr(item, "call_id", None) == call_id:
                return getattr(item, "arguments", None)
        return None

    # -- the output guardrail -----------------------------------------------------------------
    async def _check_output(self, context: Any, agent: Agent[Any],
                            output: Any) -> GuardrailFunctionOutput:
        verdict = self._judge_output(context, agent, output)
        tripped = verdict is not None and bool(self.trip_on.intersection(verdict.tiers))
        return GuardrailFunctionOutput(output_info=verdict, tripwire_triggered=tripped)

    @guarded(_skip)
    def _judge_output(self, context: Any, agent: Any, output: Any) -> FabricationVerdict | None:
        with self._lock:
            state = self._runs.get(context)
        if state is None or not isinstance(output, str) or not output.strip():
            # Without the hooks the conversation is unknown, and judging the output
            # alone would call every claim the run's tools backed a fabrication.
            return None
        conversation = from_responses_items([*state.input_items, *state.output])
        last = conversation[-1] if conversation else None
        if last is None or last["role"] != "assistant" or last["content"].strip() != \
                output.strip():
            conversation.append({"role": "assistant", "content": output})
        with self._on_mirrored_span():
            if state.pending_check and not state.misses:
                self._recovered(state)
            return self.guard.check_conversation(
                conversation, self._judging_catalog(state, conversation),
                system=state.system, channel=self.channel, request_id=state.request_id,
                agent=self._label(agent))

    @staticmethod
    def _judging_catalog(state: _RunState, conversation: list[dict[str, Any]]) -> list[Any]:
        # The catalog says which calls ran: the agent's tools and handoffs, plus the
        # tools the run called that the SDK found (MCP and hosted tools are not listed
        # on the agent), never the invented ones.
        catalog: list[Any] = agent_catalog(state.agent)
        known = _catalog_names(catalog)
        for message in conversation:
            for call in message.get("tool_calls", ()):
                name = call["function"]["name"]
                if name not in known and name not in state.not_found:
                    known.add(name)
                    catalog.append({"type": "function", "function": {"name": name}})
        return catalog

