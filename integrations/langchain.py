"""Guard a LangChain or LangGraph agent: observe with a callback handler, act with a
guarded chat model.

Observe (the guards judge every model call, nothing in the chain changes)::

    from guardtrace.integrations.langchain import GuardtraceCallbackHandler
    app.invoke(inputs, config={"callbacks": [GuardtraceCallbackHandler(agent="travel")]})

Act (a hallucinated tool call is retried with feedback before any tool runs, and a
fabricated or looping reply reaches the user with its disclaimer)::

    from guardtrace.integrations.langchain import GuardedChatModel
    app = create_react_agent(GuardedChatModel(ChatOpenAI(model="gpt-4.1")), tools)

Why two pieces: a LangChain callback sees every model call but cannot change a reply,
so acting needs a runnable in the model's place. :class:`GuardedChatModel` is one (it
binds tools like a chat model, so LangGraph's ``create_react_agent`` and hand-built
graphs take it as their model); LangGraph's ``post_model_hook`` could annotate too, but
not retry the call, and LangChain's agent middleware lives in the ``langchain`` package,
which this extra does not install. Use both pieces together: the handler then only
records the exchanges (calls the wrapper made are tagged, and the wrapper judges them),
and it lends the wrapper its request ids, one per top-level run.

Request ids: ``metadata={"request_id": ...}`` in the run's config when given, else the
current OpenTelemetry trace id (run inside your request's span and the guard events
join its trace), else the id of the top-level LangChain run the handler saw start.

Forced verification with one argument: ``GuardedChatModel(llm, verify=True)`` verifies a
question the criticality gate flags before the model answers it (a call of the reason
tool's prompt on the same model, then the model's call with that ``reason`` call and its
result after the question; see :class:`GuardedChatModel`), so a LangGraph agent built on
it is verified as it is. To force the agent's own ``reason`` tool instead, through
LangGraph's mechanism (a dynamic model binding it with ``tool_choice``), or to nudge in
LangChain alone, see :data:`VERIFICATION_HOWTO`.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import LanguageModelInput
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        ToolMessage,
        convert_to_messages,
    )
    from langchain_core.outputs import LLMResult
    from langchain_core.prompt_values import PromptValue
    from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
    from langchain_core.runnables.config import ensure_config, merge_configs
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError:
    # Not installed: one clear error naming the extra. Installed but broken: as raised.
    from ._sdk import import_sdk

    import_sdk("langchain_core", "langchain")
    raise
from opentelemetry import trace

from ..collectors.emit.internal import count_hook_error
from ..collectors.emit.telemetry import guarded
from ..collectors.plans.validation import report_pass, report_unevaluated, validate_plan
from ..collectors.questions.reason_tool import REASON_TOOL_NAME, reason_messages
from ..collectors.replies.fabrication import FabricationGuard
from ..collectors.tool_catalog import read_tool_specs
from ..schemas import names
from ._exchange import Exchange, ExchangeGuard, last_user_text, response_id
from ._messages import (
    DISCLAIMERS_KEY,
    from_langchain,
    text_of,
    with_disclaimers,
)
from ._settings import check_flag, check_guard, check_retries, check_tool_list
from ._tool_feedback import TOOL_CALL_NOTE
from ._tool_retry import retry_async, retry_sync, tool_retry
from ._verification import (
    Question,
    Step,
    Verification,
    Verifier,
    answering,
    find_question,
    verify_async,
    verify_sync,
)

__all__ = ["GUARDED_TAG", "VERIFICATION_HOWTO", "GuardedChatModel",
           "GuardtraceCallbackHandler"]

#: The tag on model calls a :class:`GuardedChatModel` makes: the handler leaves judging
#: them to the wrapper, so nothing is reported twice.
GUARDED_TAG = "guardtrace:guarded"
#: The ``metadata`` key of a run's config that sets its request id.
REQUEST_ID_KEY = names.ATTR_REQUEST_ID
# LangGraph puts a checkpointed run's thread id in the metadata: the conversation.
_THREAD_ID_KEY = "thread_id"
#: The ``api`` attribute of the exchanges this adapter records.
API = "langchain"
# LangGraph streams the tokens of every chat model call of a node (stream_mode="messages")
# except calls tagged so: the verification call is the guard's, not the agent's reply.
_NO_STREAM_TAG = "nostream"

VERIFICATION_HOWTO = """\
Forced verification in LangGraph: the gate decides before the run, and LangGraph's
dynamic model (a function that picks the model for each call) forces the reason tool
with tool_choice until it has run:

    with VerificationLoop(question, agent="helpdesk") as loop:  # the gate decides
        tools = [*tools, reason_tool]                    # a @tool named "reason"
        guarded = GuardedChatModel(chat_model)

        def model(state, runtime):                       # called before each model call
            verified = any(m.type == "tool" and m.name == "reason"
                           for m in state["messages"])
            forced = "reason" if loop.required and not verified else None
            return guarded.bind_tools(tools, tool_choice=forced)

        result = create_react_agent(model, tools).invoke({"messages": [("user", question)]})
        for message in result["messages"]:              # what the model called
            if message.type == "tool":
                loop.on_tool_call(message.name)
        loop.on_model_turn(wants_to_finish=True)         # the run answered

The reason tool runs reason_messages(question) on a model of your choice. In a graph of
your own the same function goes in the model node. Without a graph (LangChain alone has
no agent loop), or with a model that takes no tool_choice, nudge instead: the hooks
decide each turn and the loop is yours:

    with VerificationLoop(question, agent="helpdesk") as loop:
        tools = [*tools, reason_tool]
        by_name = {t.name: t for t in tools}
        model = GuardedChatModel(chat_model).bind_tools(tools)
        while True:
            reply = model.invoke(messages)
            action = loop.on_model_turn(wants_to_finish=not reply.tool_calls)
            if action.kind is TurnActionKind.FINISH:
                break
            if action.kind is TurnActionKind.NUDGE:      # answered before verifying
                messages.append(HumanMessage(action.message))
                continue
            messages.append(reply)
            for call in reply.tool_calls:
                loop.on_tool_call(call["name"])
                messages.append(by_name[call["name"]].invoke(call))  # a ToolMessage

In a graph, that is on_model_turn in the conditional edge after the model node (route a
NUDGE back to the model with action.message appended) and on_tool_call where the tools
run.
"""


def _current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


def _explicit_request_id(metadata: Mapping[str, Any] | None) -> str | None:
    value = (metadata or {}).get(REQUEST_ID_KEY)
    return value if isinstance(value, str) and value else None


def _openai_tool(tool: Any) -> Any:
    try:
        return convert_to_openai_tool(tool)
    except Exception:  # noqa: BLE001 - a shape LangChain cannot convert is read as given
        return tool


def tool_catalog(tools: Any) -> list[Any]:
    """Tools in every form LangChain binds (``BaseTool``, functions, pydantic classes,
    dicts) as OpenAI tool definitions, the shape the guards read."""
    if tools is None:
        return []
    return [_openai_tool(tool) for tool in tools]


def _given_catalog(tools: Any) -> list[Any]:
    """The catalog of a ``tools=`` setting, refused with the reason when it cannot be
    read: at construction, not as a hook error on every call."""
    check_tool_list(tools)
    catalog = tool_catalog(tools)
    read_tool_specs(catalog)  # GuardInputError naming the tool that cannot be read
    return catalog


def _chat_model(model: Any) -> Runnable[Any, Any]:
    """``model`` when it is a LangChain runnable; TypeError naming what was expected."""
    if isinstance(model, Runnable):
        return model
    if isinstance(model, type) and issubclass(model, Runnable):
        got = f"the class {model.__qualname__} (pass a model: ChatOpenAI(model=...))"
    else:
        got = f"{type(model).__module__}.{type(model).__qualname__}"
    raise TypeError(f"GuardedChatModel expects a LangChain chat model (or a Runnable that "
                    f"returns an AIMessage), got {got}")


def _bound_tools(model: Any) -> list[Any]:
    # model.bind_tools(...) is a RunnableBinding whose kwargs carry the tools.
    kwargs = getattr(model, "kwargs", None)
    if isinstance(kwargs, Mapping) and kwargs.get("tools"):
        return tool_catalog(kwargs["tools"])
    return []


def _as_messages(model_input: Any) -> list[BaseMessage]:
    if isinstance(model_input, PromptValue):
        return model_input.to_messages()
    if isinstance(model_input, str):
        return [HumanMessage(content=model_input)]
    return convert_to_messages(model_input)


def _is_ai(message: Any) -> bool:
    return getattr(message, "type", None) in ("ai", "AIMessageChunk")


def _exchange(messages: Sequence[BaseMessage], reply: Any, tools: list[Any],
              model: str | None) -> Exchange:
    conversation = from_langchain([*messages, reply])
    return Exchange(
        api=API, model=model, tools=tools or None, conversation=conversation,
        reply=reply, reply_text=text_of(getattr(reply, "content", None)),
        request={"messages": conversation[:-1], "tools": _tool_names(tools)})


def _tool_names(tools: Sequence[Any]) -> list[str]:
    return [spec.name for spec in read_tool_specs(tools)] if tools else []


def _skip(*_args: Any, **_kwargs: Any) -> None:
    return None


# --- observing ---------------------------------------------------------------------------

@dataclass
class _ModelCall:
    messages: list[BaseMessage]
    tools: list[Any]
    request_id: str
    channel: str | None
    guarded: bool
    model: str | None


class GuardtraceCallbackHandler(BaseCallbackHandler):
    """Judges every chat model call of a chain or graph, and records it.

    When a chat model returns, it checks the reply's tool calls against the tools the
    model was given (``llm.hallucination_detected`` for a tool it was not given), judges
    the reply within the conversation it answered (fabrication and loop tiers,
    ``llm.fabrication_detected``) and records the exchange as an ``llm_exchange``
    payload. It changes nothing in the chain (see :class:`GuardedChatModel` to act) and
    never raises into it.

    Args:
        tools: The tool catalog, when the model is not given its tools through
            ``bind_tools`` (those are read from each call). None: only bound tools.
        agent: The ``agent`` label of the guard telemetry.
        channel: The conversation's id in telemetry; LangGraph's ``thread_id`` when None.
        guard: The fabrication guard to use (its detector sets tool kinds, tiers and
            disclaimers); a default one when None.
        record_exchanges: Record each call's messages and reply as a payload.

    Raises:
        TypeError: ``tools`` is not a list of tools, ``guard`` not a FabricationGuard,
            ``record_exchanges`` not a bool.
        GuardInputError: a tool of ``tools`` cannot be read as a tool.
    """

    # Run on the caller's thread even in async code: the checks take milliseconds, and
    # there the caller's OpenTelemetry span is current, so events join its trace.
    run_inline = True

    def __init__(self, *, tools: Any = None, agent: str | None = None,
                 channel: str | None = None, guard: FabricationGuard | None = None,
                 record_exchanges: bool = True) -> None:
        self.tools = _given_catalog(tools) if tools is not None else []
        self.agent = agent
        self.channel = channel
        self.checks = ExchangeGuard(agent=agent, guard=check_guard(guard),
                                    record_exchanges=check_flag(record_exchanges,
                                                                "record_exchanges"))
        self._lock = threading.Lock()
        self._roots: dict[UUID, UUID] = {}
        self._request_ids: dict[UUID, str] = {}
        self._calls: dict[UUID, _ModelCall] = {}

    # -- which top-level run a run belongs to ---------------------------------------------
    def _enter(self, run_id: UUID, parent_run_id: UUID | None,
               metadata: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            root = self._roots.get(parent_run_id, parent_run_id) if parent_run_id else run_id
            self._roots[run_id] = root
            if root == run_id:
                self._request_ids[run_id] = (_explicit_request_id(metadata)
                                             or _current_trace_id() or run_id.hex)

    def _leave(self, run_id: UUID) -> None:
        with self._lock:
            if self._roots.pop(run_id, None) == run_id:
                self._request_ids.pop(run_id, None)

    def request_id_for(self, run_id: UUID | None) -> str | None:
        """The request id of the top-level run that ``run_id`` belongs to, if it is open."""
        if run_id is None:
            return None
        with self._lock:
            root = self._roots.get(run_id)
            return None if root is None else self._request_ids.get(root)

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *,
                       run_id: UUID, parent_run_id: UUID | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._enter(run_id, parent_run_id, metadata)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._leave(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._leave(run_id)

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *,
                      run_id: UUID, parent_run_id: UUID | None = None,
                      metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._enter(run_id, parent_run_id, metadata)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._leave(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._leave(run_id)

    # -- chat model calls -------------------------------------------------------------------
    @guarded(_skip)
    def on_chat_model_start(self, serialized: dict[str, Any] | None,
                            messages: list[list[BaseMessage]], *, run_id: UUID,
                            parent_run_id: UUID | None = None, tags: list[str] | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._enter(run_id, parent_run_id, metadata)
        params = kwargs.get("invocation_params")
        bound = tool_catalog(params.get("tools")) if isinstance(params, Mapping) else []
        thread = (metadata or {}).get(_THREAD_ID_KEY)
        call = _ModelCall(
            messages=list(messages[0]) if messages else [],
            tools=bound or self.tools,
            request_id=(_explicit_request_id(metadata) or _current_trace_id()
                        or self.request_id_for(run_id) or run_id.hex),
            channel=self.channel or (str(thread) if thread is not None else None),
            guarded=GUARDED_TAG in (tags or ()),
            model=kwargs.get("name") or (serialized or {}).get("name"))
        with self._lock:
            self._calls[run_id] = call

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            call = self._calls.pop(run_id, None)
        self._leave(run_id)
        if call is not None:
            self._judge(call, response)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._calls.pop(run_id, None)
        self._leave(run_id)

    @guarded(_skip)
    def _judge(self, call: _ModelCall, response: LLMResult) -> None:
        generations = response.generations[0] if response.generations else []
        reply = getattr(generations[0], "message", None) if generations else None
        if reply is None or not _is_ai(reply):
            return
        exchange = _exchange(call.messages, reply, call.tools, call.model)
        if not call.guarded:  # a GuardedChatModel judges its own calls
            self.checks.check_tools(exchange, call.request_id)
            if exchange.reply_text.strip():
                self.checks.guard.check_conversation(
                    exchange.conversation, exchange.tools, channel=call.channel,
                    request_id=call.request_id, agent=self.agent,
                    response_id=response_id(reply))
        self.checks.record(exchange, call.request_id)


# --- acting --------------------------------------------------------------------------------

def _feedback_message(feedback: str) -> HumanMessage:
    # Last, as the user's: every chat model accepts a user message there (a system
    # message after the first is refused by some), and the rejected reply is not sent
    # back, since its calls have no results, which providers refuse.
    return HumanMessage(content=f"{feedback}\n\n{TOOL_CALL_NOTE}")


def _human_text(message: Any) -> str:
    return text_of(message.content) if getattr(message, "type", None) == "human" else ""


def _calls_reason(message: Any) -> bool:
    return any(call.get("name") == REASON_TOOL_NAME
               for call in getattr(message, "tool_calls", None) or ())


def _with_verification(messages: list[BaseMessage], question: Question,
                       verification: Verification) -> list[BaseMessage]:
    call = AIMessage(content="", tool_calls=[{
        "name": REASON_TOOL_NAME, "args": verification.arguments,
        "id": verification.call_id, "type": "tool_call"}])
    result = ToolMessage(content=verification.result, tool_call_id=verification.call_id,
                         name=REASON_TOOL_NAME)
    at = question.index + 1
    return [*messages[:at], call, result, *messages[at:]]


def _reply_text(reply: Any) -> str:
    return text_of(reply.content) if _is_ai(reply) else ""


def _unbound(model: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """The model without what was bound to it (tools, tool_choice): the verification
    call asks for text."""
    while isinstance(model, RunnableBinding):
        model = model.bound
    return model


class GuardedChatModel(Runnable[LanguageModelInput, BaseMessage]):
    """A chat model that retries hallucinated tool calls and annotates fabricated replies.

    Use it where the chat model goes (``create_react_agent(GuardedChatModel(llm),
    tools)``, ``prompt | GuardedChatModel(llm)``). On each call:

    1. A reply calling a tool the model was not given is not returned: the model is
       asked again, at most ``tool_retries`` times, with the plan retry's feedback (each
       invented tool, the closest allowed names, the allowed list) as a user message
       after the conversation, and the plan retry's events are emitted
       (``llm.hallucination_detected``, ``..._regeneration_complete``, then
       ``..._recovered`` or ``..._unrecoverable``). When retries run out, or a retry
       fails, the last reply is returned as it is: LangGraph's ``ToolNode`` answers the
       call with an error the model reads.
    2. A reply with text is judged within its conversation (fabrication and loop tiers,
       ``llm.fabrication_detected``); when flagged, the returned message carries the
       inline disclaimer after the model's text (and the disclaimers under
       ``response_metadata["guardtrace_disclaimers"]``).

    With ``verify=True``, before step 1: when the criticality gate flags the latest
    human message and no ``reason`` call follows it, the model (without its bound tools)
    is first asked with the reason tool's prompt (``reason_messages``), a call tagged
    ``nostream`` so LangGraph does not stream it as the agent's reply; the model's call
    is then made with an ``AIMessage`` calling ``reason`` and its ``ToolMessage`` right
    after the question, and ``llm.verification_required`` and ``..._completed`` are
    emitted under the call's request id. The graph's state does not hold that pair:
    later calls of the turn (after tool results) get the same verification again,
    without a new call. A question the gate does not flag costs the gate only.

    An error of the model's own first call is raised as it would be without the
    wrapper; nothing the guards do raises. ``stream`` yields the final message whole.
    LangGraph's ``stream_mode="messages"`` streams the model's tokens as they come,
    before the reply is judged: the disclaimer is in the graph's state (``invoke``, the
    ``values`` and ``updates`` streams), not in that token stream.
    ``with_structured_output`` is the wrapped model's business: call it on the model.

    Args:
        model: The chat model (or any runnable returning an ``AIMessage``).
        tools: The tools the model is given; read from ``bind_tools`` (this wrapper's or
            the model's) when None. Without tools, step 1 is skipped.
        agent: The ``agent`` label of the guard telemetry.
        channel: The conversation's id in telemetry.
        guard: The fabrication guard (tool kinds, tiers, disclaimers); default when None.
        tool_retries: How many times a hallucinated tool call is asked for again (0:
            report only).
        annotate: Append the disclaimer to a flagged reply (False: only report it).
        verify: Force verification of the questions the criticality gate flags (above).

    Raises:
        TypeError: ``model`` is not a LangChain runnable, ``tools`` not a list of tools,
            ``guard`` not a FabricationGuard, ``annotate`` or ``verify`` not a bool.
        ValueError: ``tool_retries`` is not an integer >= 0.
        GuardInputError: a tool of ``tools`` cannot be read as a tool.
    """

    def __init__(self, model: Runnable[Any, Any], *, tools: Any = None,
                 agent: str | None = None, channel: str | None = None,
                 guard: FabricationGuard | None = None, tool_retries: int = 1,
                 annotate: bool = True, verify: bool = False) -> None:
        self.model = _chat_model(model)
        self.tools = _given_catalog(tools) if tools is not None else _bound_tools(model)
        self.agent = agent
        self.channel = channel
        self.guard = check_guard(guard) or FabricationGuard()
        self.tool_retries = check_retries(tool_retries)
        self.annotate = check_flag(annotate, "annotate")
        self.verifier = Verifier(agent) if check_flag(verify, "verify") else None

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> GuardedChatModel:
        """The wrapped model with ``tools`` bound, guarded against exactly those tools."""
        bind = getattr(self.model, "bind_tools", None)
        model = bind(tools, **kwargs) if callable(bind) else self.model.bind(tools=tools, **kwargs)
        # Not checked as a tools= setting is: the wrapped model took these tools, and a
        # form the guards cannot read must not stop an agent that works without them.
        bound = copy.copy(self)
        bound.model, bound.tools = model, tool_catalog(tools)
        return bound

    def invoke(self, input: LanguageModelInput, config: RunnableConfig | None = None,
               **kwargs: Any) -> BaseMessage:
        config, request_id = _guarded_config(config)
        messages = _as_messages(input)
        step = self._step(messages, request_id)
        if step is not None:
            verification = verify_sync(
                step, lambda: _unbound(self.model).invoke(
                    reason_messages(step.question.text), _unstreamed(config)),
                _reply_text)
            input = messages = step.apply(verification, messages, _with_verification)
        with answering(step):
            reply = self.model.invoke(input, config, **kwargs)
        catalog = self._catalog(kwargs)
        if self._hallucinates(reply, catalog, request_id):
            try:
                reply = retry_sync(
                    self._retry_loop(messages, reply, catalog, request_id),
                    lambda feedback: self.model.invoke(
                        [*messages, _feedback_message(feedback)], config, **kwargs))
            except Exception as exc:  # noqa: BLE001 - the reply in hand is still good to give
                count_hook_error("integrations.langchain.retry", exc)
        return self._judge(messages, reply, catalog, request_id)

    async def ainvoke(self, input: LanguageModelInput, config: RunnableConfig | None = None,
                      **kwargs: Any) -> BaseMessage:
        config, request_id = _guarded_config(config)
        messages = _as_messages(input)
        step = self._step(messages, request_id)
        if step is not None:
            verification = await verify_async(
                step, lambda: _unbound(self.model).ainvoke(
                    reason_messages(step.question.text), _unstreamed(config)),
                _reply_text)
            input = messages = step.apply(verification, messages, _with_verification)
        with answering(step):
            reply = await self.model.ainvoke(input, config, **kwargs)
        catalog = self._catalog(kwargs)
        if self._hallucinates(reply, catalog, request_id):
            retry: Callable[[str], Awaitable[Any]] = lambda feedback: self.model.ainvoke(  # noqa: E731
                [*messages, _feedback_message(feedback)], config, **kwargs)
            try:
                reply = await retry_async(
                    self._retry_loop(messages, reply, catalog, request_id), retry)
            except Exception as exc:  # noqa: BLE001 - the reply in hand is still good to give
                count_hook_error("integrations.langchain.retry", exc)
        return self._judge(messages, reply, catalog, request_id)

    def _step(self, messages: list[BaseMessage], request_id: str) -> Step | None:
        if self.verifier is None:
            return None
        return self.verifier.start(
            lambda: find_question(messages, _human_text, _calls_reason), request_id)

    def _catalog(self, kwargs: Mapping[str, Any]) -> list[Any]:
        # .bind(tools=...) on this wrapper passes them with each call.
        return tool_catalog(kwargs["tools"]) if kwargs.get("tools") else self.tools

    @guarded(lambda *_args, **_kwargs: False)
    def _hallucinates(self, reply: Any, catalog: list[Any], request_id: str) -> bool:
        """Whether the reply calls a tool it was not given. A pass is reported here; a
        fail by the retry loop, which validates the reply again with its retry count."""
        if not (catalog and _is_ai(reply)):
            return False
        rid = response_id(reply)
        try:
            result = validate_plan(reply, catalog, emit=False)
        except Exception as exc:
            report_unevaluated(exc, request_id=request_id, response_id=rid)
            raise
        if not result.hallucinations:
            report_pass(request_id=request_id, response_id=rid)
        return bool(result.hallucinations)

    def _retry_loop(self, messages: list[BaseMessage], reply: Any, catalog: list[Any],
                    request_id: str) -> Any:
        return tool_retry(reply, catalog, budget=self.tool_retries, request_id=request_id,
                          request_text=last_user_text(from_langchain(messages)))

    @guarded(lambda _self, _messages, reply, *_args, **_kwargs: reply)
    def _judge(self, messages: list[BaseMessage], reply: Any, catalog: list[Any],
               request_id: str) -> Any:
        if not _is_ai(reply) or not text_of(reply.content).strip():
            return reply
        conversation = from_langchain([*messages, reply])
        verdict = self.guard.check_conversation(conversation, catalog or None,
                                                channel=self.channel,
                                                request_id=request_id, agent=self.agent,
                                                response_id=response_id(reply))
        if not (self.annotate and verdict.flagged
                and verdict.msg_index == len(conversation) - 1):
            return reply
        return reply.model_copy(update={
            "content": with_disclaimers(reply.content, verdict),
            "response_metadata": {**reply.response_metadata,
                                  DISCLAIMERS_KEY: list(verdict.disclaimers)},
        })


def _request_id(config: RunnableConfig) -> str:
    """The run's request id: given in metadata, the current trace's, the handler's for
    the top-level run, or a new one."""
    explicit = _explicit_request_id(config.get("metadata"))
    if explicit or (explicit := _current_trace_id()):
        return explicit
    callbacks = config.get("callbacks")
    handlers = getattr(callbacks, "handlers", callbacks)
    parent = getattr(callbacks, "parent_run_id", None)
    for handler in handlers if isinstance(handlers, list) else ():
        if isinstance(handler, GuardtraceCallbackHandler):
            found = handler.request_id_for(parent)
            if found:
                return found
    return uuid.uuid4().hex


def _guarded_config(config: RunnableConfig | None) -> tuple[RunnableConfig, str]:
    """The config of the wrapped model's calls, and the request id they share.

    The calls are tagged (the handler leaves judging them to the wrapper) and carry the
    request id in their metadata, so the handler files their exchanges under it too.
    """
    config = ensure_config(config)
    request_id = _request_id(config)
    return merge_configs(config, {"tags": [GUARDED_TAG],
                                  "metadata": {REQUEST_ID_KEY: request_id}}), request_id


def _unstreamed(config: RunnableConfig) -> RunnableConfig:
    """The config of the verification call: the model call's, tagged not to stream."""
    return merge_configs(config, {"tags": [_NO_STREAM_TAG]})
