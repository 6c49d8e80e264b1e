"""Guarding an SDK client's calls in place, and putting its methods back.

An adapter describes its SDK once: the methods to guard (:class:`Endpoint`) and, for
each API, a :class:`Dialect` that reads a call into an :class:`Exchange`, assembles a
streamed reply, places retry feedback in a request and appends a disclaimer to a reply.
:class:`Instrumentation` does the rest, the same for every SDK:

* each guarded method is replaced on the client's own resource object (an instance
  attribute over the class's method), so other clients of the process are untouched and
  ``uninstrument`` only has to delete the attribute again;
* a complete reply is checked as it returns; a stream is watched and checked once read
  to its end (:mod:`._streams`); anything else the method returns (a raw HTTP response
  from ``with_raw_response``) passes unchecked;
* observing (the default) never changes what the caller gets and never raises into it;
  acting (``act=True``) retries a hallucinated tool with feedback and appends the
  fabrication disclaimer, on complete replies (a stream has reached the caller already);
* forced verification (``verify=True``, :mod:`._verification`): a question the gate
  flags is verified by a call of its own before the caller's call, which then carries
  the verification; its lifecycle shares the call's request id with the checks;
* ``client.copy()`` / ``client.with_options()`` give clients guarded alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..collectors.emit.internal import count_hook_error, log_rate_limited
from ..collectors.emit.telemetry import new_request_id
from ..collectors.replies.fabrication import FabricationGuard
from ..collectors.replies.fabrication_detector import FabricationDetector
from ..schemas.request_ids import storable_request_id
from ._exchange import Exchange, ExchangeGuard, disclaimer_suffix, last_user_text
from ._sdk import given
from ._settings import check_flag, check_guard, check_retries, check_tool_kinds
from ._streams import Accumulator, ObservedStreamManager, observe_stream
from ._tool_feedback import TOOL_CALL_NOTE
from ._tool_retry import retry_async, retry_sync, tool_retry
from ._verification import (
    Question,
    Step,
    Verification,
    Verifier,
    answering,
    verify_async,
    verify_sync,
)

__all__ = ["Dialect", "Endpoint", "Instrumentation", "guard_client", "installed", "remove"]

# Where a client keeps its instrumentation (one attribute, on the client object itself).
_ATTRIBUTE = "_guardtrace_instrumentation"
# Client methods that return a new client configured like this one.
_COPY_METHODS = ("copy", "with_options")


class Dialect(Protocol):
    """How one API's calls are read and acted on."""

    api: str

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments with one-shot iterables made lists (see ``listed``)."""

    def reply_of(self, result: Any) -> Any | None:
        """``result`` when it is a complete reply of this API, else None."""

    def stream_of(self, result: Any) -> Any | None:
        """The stream to watch when ``result`` is one (or holds one), else None."""

    def accumulator(self) -> Accumulator:
        """A new accumulator for one stream of this API."""

    def exchange(self, kwargs: dict[str, Any], reply: Any, *, streamed: bool) -> Exchange:
        """The call as the guards see it."""

    def with_feedback(self, kwargs: dict[str, Any], feedback: str) -> dict[str, Any]:
        """The arguments of a retry: ``kwargs`` with ``feedback`` first in the prompt."""

    def with_disclaimer(self, reply: Any, suffix: str) -> Any:
        """A copy of ``reply`` with ``suffix`` appended to its last text."""

    def question(self, kwargs: dict[str, Any]) -> Question | None:
        """The latest user question of the request, if it has one."""

    def reason_request(self, kwargs: dict[str, Any], question: str) -> dict[str, Any]:
        """The arguments of the verification call of ``question`` (same model)."""

    def reason_text(self, reply: Any) -> str:
        """The text of the verification call's reply."""

    def with_verification(self, kwargs: dict[str, Any], question: Question,
                          verification: Verification) -> dict[str, Any]:
        """The arguments with the ``reason`` call and its result right after ``question``."""


@dataclass(frozen=True)
class Endpoint:
    """One method to guard.

    Attributes:
        resource: The attribute path from the client to the resource object
            (``("chat", "completions")``).
        method: The method's name (``create``).
        dialect: How its calls are read.
        stream_helper: The method returns a stream manager (``with ... as stream``).
    """

    resource: tuple[str, ...]
    method: str
    dialect: Dialect
    stream_helper: bool = False


def _said(feedback: str) -> str:
    """The retry feedback as the model reads it: it speaks of plans, the model made calls."""
    return f"{feedback}\n\n{TOOL_CALL_NOTE}"


def guard_client(client: Any, endpoints: tuple[Endpoint, ...], *, is_async: bool,
                 agent: str | None, act: bool, tool_retries: int,
                 guard: FabricationGuard | None, tool_kinds: Any,
                 record_exchanges: bool, verify: bool = False) -> Any:
    """Instrument ``client`` (again, if it already was: the new settings replace the old).

    The keyword arguments are those of the adapters' ``instrument``; see there.

    Raises:
        ValueError: ``tool_retries`` is not an integer >= 0, or both ``guard`` and
            ``tool_kinds`` are given.
        TypeError: ``guard`` is not a FabricationGuard, ``tool_kinds`` not a mapping,
            ``act``, ``record_exchanges`` or ``verify`` not a bool.
    """
    check_retries(tool_retries)
    check_flag(act, "act")
    check_flag(record_exchanges, "record_exchanges")
    check_flag(verify, "verify")
    check_guard(guard)
    check_tool_kinds(tool_kinds)
    if guard is not None and tool_kinds is not None:
        raise ValueError("pass either guard= or tool_kinds= (a guard has its own tool kinds: "
                         "FabricationGuard(FabricationDetector(tool_kinds=...)))")
    if tool_kinds is not None:
        guard = FabricationGuard(FabricationDetector(tool_kinds=tool_kinds))
    remove(client)
    checker = ExchangeGuard(agent=agent, guard=guard, record_exchanges=record_exchanges)
    Instrumentation(checker, endpoints, is_async=is_async, act=act,
                    tool_retries=tool_retries,
                    verifier=Verifier(agent) if verify else None).install(client)
    return client


def installed(client: Any) -> Instrumentation | None:
    """The instrumentation of ``client``, if it has one."""
    found = getattr(client, _ATTRIBUTE, None)
    return found if isinstance(found, Instrumentation) else None


def remove(client: Any) -> None:
    """Undo the instrumentation of ``client`` (nothing when it has none)."""
    found = installed(client)
    if found is not None:
        found.undo()


class Instrumentation:
    """The guards of one client, and the methods it replaced.

    Args:
        checker: Runs the hooks on each exchange.
        endpoints: The methods to guard.
        is_async: The client's methods are coroutines.
        act: Act on findings (retry, disclaimer) instead of only reporting them.
        tool_retries: Retries allowed for a hallucinated tool when acting.
        verifier: Forced verification of the questions the gate flags; None: off.
    """

    def __init__(self, checker: ExchangeGuard, endpoints: tuple[Endpoint, ...], *,
                 is_async: bool, act: bool, tool_retries: int,
                 verifier: Verifier | None = None) -> None:
        self.checker = checker
        self.endpoints = endpoints
        self.is_async = is_async
        self.act = act
        self.tool_retries = tool_retries
        self.verifier = verifier
        self._patched: list[tuple[Any, str, Any]] = []
        self._client: Any = None

    # -- installing --------------------------------------------------------------------
    def install(self, client: Any) -> None:
        """Guard ``client``'s endpoints and copies (an instrumentation serves one client)."""
        self._client = client
        for endpoint in self.endpoints:
            owner = client
            for name in endpoint.resource:
                owner = getattr(owner, name, None)
            original = getattr(owner, endpoint.method, None) if owner is not None else None
            if original is None:
                continue  # not in this SDK version: nothing to guard
            self._patch(owner, endpoint.method, self._wrap(original, endpoint))
        for name in _COPY_METHODS:
            original = getattr(client, name, None)
            if callable(original):
                self._patch(client, name, self._wrap_copy(original))
        setattr(client, _ATTRIBUTE, self)

    def _patch(self, owner: Any, name: str, wrapper: Any) -> None:
        setattr(owner, name, wrapper)
        self._patched.append((owner, name, wrapper))

    def undo(self) -> None:
        """Put every replaced method back."""
        for owner, name, wrapper in reversed(self._patched):
            if vars(owner).get(name) is wrapper:
                delattr(owner, name)
        self._patched.clear()
        if self._client is not None and vars(self._client).get(_ATTRIBUTE) is self:
            delattr(self._client, _ATTRIBUTE)
        self._client = None

    def _wrap_copy(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def copy_guarded(*args: Any, **kwargs: Any) -> Any:
            copied = original(*args, **kwargs)
            Instrumentation(self.checker, self.endpoints, is_async=self.is_async,
                            act=self.act, tool_retries=self.tool_retries,
                            verifier=self.verifier).install(copied)
            return copied
        return copy_guarded

    def _wrap(self, original: Callable[..., Any], endpoint: Endpoint) -> Callable[..., Any]:
        dialect = endpoint.dialect
        if endpoint.stream_helper:
            @functools.wraps(original)
            def stream_guarded(*args: Any, **kwargs: Any) -> Any:
                kwargs = self._prepared(dialect, kwargs)
                if self.verifier is not None:
                    log_rate_limited("integrations.verify_stream_helper",
                                     "guardtrace: %s() is not verified (its request is made "
                                     "on entering the stream); create(stream=True) is",
                                     endpoint.method)
                rid = storable_request_id(new_request_id())
                manager = original(*args, **kwargs)
                return ObservedStreamManager(
                    manager, lambda stream: self._watch(dialect, kwargs, stream, rid))
            return stream_guarded
        if self.is_async:
            @functools.wraps(original)
            async def call_guarded_async(*args: Any, **kwargs: Any) -> Any:
                kwargs = self._prepared(dialect, kwargs)
                rid = storable_request_id(new_request_id())
                step, kwargs = await self._verified_async(dialect, kwargs, rid, original)
                with answering(step):
                    result = await original(*args, **kwargs)
                if self._passes_through(dialect, kwargs, result, rid):
                    return result
                return await self._act_async(dialect, kwargs, result, rid,
                                             lambda again: original(*args, **again))
            return call_guarded_async

        @functools.wraps(original)
        def call_guarded(*args: Any, **kwargs: Any) -> Any:
            kwargs = self._prepared(dialect, kwargs)
            rid = storable_request_id(new_request_id())
            step, kwargs = self._verified(dialect, kwargs, rid, original)
            with answering(step):
                result = original(*args, **kwargs)
            if self._passes_through(dialect, kwargs, result, rid):
                return result
            return self._act(dialect, kwargs, result, rid,
                             lambda again: original(*args, **again))
        return call_guarded

    # -- one call ----------------------------------------------------------------------
    @staticmethod
    def _prepared(dialect: Dialect, kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            return dialect.prepare(kwargs)
        except Exception as exc:  # noqa: BLE001 - the call goes on with what it was given
            count_hook_error("integrations.prepare", exc)
            return kwargs

    # -- forced verification -------------------------------------------------------------
    def _step(self, dialect: Dialect, kwargs: dict[str, Any], rid: str) -> Step | None:
        if self.verifier is None:
            return None
        return self.verifier.start(lambda: dialect.question(kwargs), rid)

    def _verified(self, dialect: Dialect, kwargs: dict[str, Any], rid: str,
                  original: Callable[..., Any]) -> tuple[Step | None, dict[str, Any]]:
        """The step and the arguments of the caller's call: with the verification when
        the gate asks for one (made here, by ``original``, not streamed)."""
        step = self._step(dialect, kwargs, rid)
        if step is None:
            return None, kwargs
        verification = verify_sync(
            step, lambda: original(**dialect.reason_request(kwargs, step.question.text)),
            dialect.reason_text)
        return step, step.apply(verification, kwargs, dialect.with_verification)

    async def _verified_async(self, dialect: Dialect, kwargs: dict[str, Any], rid: str,
                              original: Callable[..., Any]
                              ) -> tuple[Step | None, dict[str, Any]]:
        """:meth:`_verified` for an async client."""
        step = self._step(dialect, kwargs, rid)
        if step is None:
            return None, kwargs
        verification = await verify_async(
            step, lambda: original(**dialect.reason_request(kwargs, step.question.text)),
            dialect.reason_text)
        return step, step.apply(verification, kwargs, dialect.with_verification)

    # -- checking and acting -----------------------------------------------------------
    def _passes_through(self, dialect: Dialect, kwargs: dict[str, Any], result: Any,
                        rid: str) -> bool:
        """Observe ``result``; True when there is nothing more to do (not acting, a
        stream, or not a reply), so ``result`` goes to the caller as it is."""
        try:
            stream = dialect.stream_of(result)
            if stream is not None:
                self._watch(dialect, kwargs, stream, rid)
                return True
            reply = dialect.reply_of(result)
            if reply is None:
                return True
            if not self.act:
                self.checker.check(dialect.exchange(kwargs, reply, streamed=False),
                                   request_id=rid)
                return True
            return False
        except Exception as exc:  # noqa: BLE001 - the hooks never raise into the agent
            count_hook_error("integrations.observe", exc)
            return True

    def _watch(self, dialect: Dialect, kwargs: dict[str, Any], stream: Any, rid: str) -> None:
        if self.act:
            log_rate_limited("integrations.act_stream",
                             "guardtrace: a streamed reply has reached the caller as it "
                             "came; it is checked and reported, not retried or annotated")

        def check(reply: Any) -> None:
            self.checker.check(dialect.exchange(kwargs, reply, streamed=True), request_id=rid)

        if not observe_stream(stream, dialect.accumulator(), check):
            log_rate_limited("integrations.unknown_stream",
                             "guardtrace: %s stream of an unknown kind left unchecked",
                             type(stream).__name__)

    def _act(self, dialect: Dialect, kwargs: dict[str, Any], reply: Any, rid: str,
             call: Callable[[dict[str, Any]], Any]) -> Any:
        given_back = reply
        try:
            exchange, loop = self._acting(dialect, kwargs, reply, rid)
            if loop is not None:
                given_back = retry_sync(
                    loop, lambda feedback: call(dialect.with_feedback(kwargs, _said(feedback))))
            return self._annotated(dialect, kwargs, exchange, given_back, rid)
        except Exception as exc:  # noqa: BLE001 - the hooks never raise into the agent
            count_hook_error("integrations.act", exc)
            return given_back

    async def _act_async(self, dialect: Dialect, kwargs: dict[str, Any], reply: Any,
                         rid: str, call: Callable[[dict[str, Any]], Any]) -> Any:
        given_back = reply
        try:
            exchange, loop = self._acting(dialect, kwargs, reply, rid)
            if loop is not None:
                given_back = await retry_async(
                    loop, lambda feedback: call(dialect.with_feedback(kwargs, _said(feedback))))
            return self._annotated(dialect, kwargs, exchange, given_back, rid)
        except Exception as exc:  # noqa: BLE001 - the hooks never raise into the agent
            count_hook_error("integrations.act", exc)
            return given_back

    def _acting(self, dialect: Dialect, kwargs: dict[str, Any], reply: Any,
                rid: str) -> tuple[Exchange, Any]:
        """The exchange, and the retry loop when tools were sent."""
        exchange = dialect.exchange(kwargs, reply, streamed=False)
        if not given(exchange.tools):
            return exchange, None
        loop = tool_retry(reply, exchange.tools, budget=self.tool_retries, request_id=rid,
                          request_text=last_user_text(exchange.conversation))
        return exchange, loop

    def _annotated(self, dialect: Dialect, kwargs: dict[str, Any], exchange: Exchange,
                   reply: Any, rid: str) -> Any:
        """Check the reply given back (the retry loop reported its tools) and append the
        fabrication disclaimer when a tier fired."""
        if reply is not exchange.reply:
            exchange = dialect.exchange(kwargs, reply, streamed=False)
        findings = self.checker.check(exchange, request_id=rid, plan=False)
        if findings.verdict is not None and findings.verdict.flagged:
            return dialect.with_disclaimer(reply, disclaimer_suffix(findings.verdict))
        return reply

