"""Forced verification made by an adapter itself: ``verify=True``.

The criticality gate (:mod:`guardtrace.collectors.questions.criticality`) reads the
latest user question of each model call. When it fires and the current turn holds no
``reason`` call yet, the adapter executes the reason tool before the caller's call: one
model call with :func:`~guardtrace.collectors.questions.reason_tool.reason_messages` (the
verification prompt, then the question), on the same model. The caller's call is then
made with that verification in its conversation, as the model would have seen it had it
called the tool: an assistant call of ``reason`` and its result, right after the
question. The lifecycle is the :class:`~guardtrace.collectors.VerificationLoop`'s own
(``llm.verification_required``, then ``..._completed``, or ``..._bypassed`` with reason
``verification_failed`` when the verification call raised or gave no text: the
caller's call is then made as it was), under the request id of the call's other checks.

A question the gate does not flag costs the gate only: no call, no event, the request
untouched.

An agent loop makes several model calls for one question: the caller's conversation
then ends with the model's tool calls and their results, not with the question, and it
does not hold the verification (the adapter added it to the request, not to the
caller's list). Those calls reuse the verification of the question (:class:`Verifier`
keeps the recent ones), placed again right after it, without another call or event:
the turn was verified once. A question that is the last message starts a turn and is
always verified afresh.

Each adapter reads its own message shape (:func:`find_question` takes the readers);
this module holds what is common and imports no SDK.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..collectors.emit.internal import count_hook_error, log_rate_limited
from ..collectors.questions.criticality import (
    CriticalityDecision,
    CriticalityGate,
    default_gate,
)
from ..collectors.questions.reason_tool import REASON_TOOL_NAME
from ..collectors.questions.verification import VerificationLoop

__all__ = ["VERIFICATION_FAILED", "DecidedGate", "Question", "Step", "Verification",
           "Verifier", "answering", "find_question", "new_call_id", "request_options",
           "verify_async", "verify_sync"]

# Questions whose verification is kept for the later calls of their turn. An agent loop
# makes a few calls per turn, and concurrent conversations interleave: a few hundred
# recent questions cover both, at a few kilobytes of reasoning each.
_RECENT_QUESTIONS = 256
#: The bypass reason (the loop's ``reason`` attribute) when the verification call failed
#: or gave no text: the caller's call was made unverified.
VERIFICATION_FAILED = "verification_failed"
# The caller's request options the verification call keeps (both SDKs name them so):
# where and how the request goes, not what it asks. `extra_body` is left out: it carries
# model parameters (an OpenAI-compatible server's own) meant for the caller's request.
_REQUEST_OPTIONS = ("extra_headers", "extra_query", "timeout")

R = TypeVar("R")


def request_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The request options of the caller's call that the verification call keeps."""
    return {key: kwargs[key] for key in _REQUEST_OPTIONS if key in kwargs}


def new_call_id() -> str:
    """An id for the synthetic ``reason`` call, valid for every API (letters, digits, _)."""
    return f"call_{REASON_TOOL_NAME}_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class Question:
    """The latest user question of a request.

    Attributes:
        text: What the user asked.
        index: The position of its message in the request's messages.
        last: Nothing follows it: the call starts the turn.
        verified: A ``reason`` call follows it already (the caller's own, or one an
            agent framework kept): nothing to add.
    """

    text: str
    index: int
    last: bool
    verified: bool


@dataclass(frozen=True)
class Verification:
    """The reason tool's result for one question, as the synthetic call carries it."""

    question: str
    call_id: str
    result: str

    @property
    def arguments(self) -> dict[str, str]:
        """The synthetic call's arguments (the reason tool's ``question``)."""
        return {"question": self.question}


def find_question(messages: Sequence[Any], question_text: Callable[[Any], str],
                  calls_reason: Callable[[Any], bool]) -> Question | None:
    """The latest message whose ``question_text`` is not blank, as a :class:`Question`.

    Args:
        messages: The request's messages, oldest first.
        question_text: The text of a user message that says something ("" for any other
            message, and for a user message holding only tool results).
        calls_reason: Whether a message calls (or answers a call of) ``reason``.
    """
    for index in range(len(messages) - 1, -1, -1):
        text = question_text(messages[index]).strip()
        if text:
            after = messages[index + 1:]
            return Question(text, index, not after, any(calls_reason(m) for m in after))
    return None


class DecidedGate(CriticalityGate):
    """A gate that already decided: a loop made with it emits what the adapter's gate
    found, without assessing the question a second time."""

    def __init__(self, decision: CriticalityDecision) -> None:
        super().__init__(())
        self.decision = decision

    def assess(self, question: str) -> CriticalityDecision:
        return self.decision


class Step:
    """The verification of one model call: made (with its loop), or reused.

    Args:
        verifier: Remembers the verification once made.
        question: The question verified, where the request holds it.
        loop: The lifecycle of a verification made for this call; None when reused.
        reused: The turn's earlier verification, when reused.
    """

    def __init__(self, verifier: Verifier, question: Question, loop: VerificationLoop | None,
                 reused: Verification | None = None) -> None:
        self._verifier = verifier
        self.question = question
        self.loop = loop
        self.reused = reused

    def answer(self, reply: Any, read: Callable[[Any], str]) -> Verification | None:
        """The verification the call's ``reply`` gives (its text read by ``read``); None
        when it has no text, and the verification is then bypassed."""
        try:
            result = read(reply)
        except Exception as exc:  # noqa: BLE001 - a reply we cannot read verifies nothing
            count_hook_error("integrations.verify", exc)
            result = ""
        if not result.strip():
            self._bypass("the verification call gave no text")
            return None
        verification = Verification(self.question.text, new_call_id(), result)
        if self.loop is not None:
            self.loop.on_tool_call(REASON_TOOL_NAME)
        self._verifier.remember(verification)
        return verification

    def unanswered(self, exc: BaseException) -> None:
        """The verification call raised (the API's error, not the guard's): the
        caller's call goes on without it."""
        self._bypass(f"the verification call failed ({type(exc).__name__})")

    def apply(self, verification: Verification | None, request: R,
              place: Callable[[R, Question, Verification], R]) -> R:
        """``request`` with ``verification`` placed after the question by ``place``;
        ``request`` itself when there is none, or placing it failed."""
        if verification is None:
            return request
        try:
            return place(request, self.question, verification)
        except Exception as exc:  # noqa: BLE001 - the call goes on unverified
            count_hook_error("integrations.verify", exc)
            return request

    def _bypass(self, why: str) -> None:
        log_rate_limited("integrations.verify_failed",
                         "guardtrace: %s; the model call is made unverified", why)
        if self.loop is not None:
            self.loop.close(VERIFICATION_FAILED)

    def answered(self) -> None:
        """The caller's call was made (with the verification, unless it failed)."""
        if self.loop is not None:
            self.loop.on_model_turn(wants_to_finish=True)

    def broke(self) -> None:
        """The caller's call raised."""
        if self.loop is not None:
            self.loop.close("error")


class Verifier:
    """The forced verification of one instrumented client (or wrapper).

    Thread-safe: a client serves many threads and tasks at once.

    Args:
        agent: The ``agent`` label and attribute of the verification telemetry.
        gate: The criticality gate; the default gate when None.
    """

    def __init__(self, agent: str | None, gate: CriticalityGate | None = None) -> None:
        self.agent = agent
        self.gate = gate or default_gate()
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, Verification] = OrderedDict()

    def start(self, find: Callable[[], Question | None], request_id: str) -> Step | None:
        """What a call needs, given how to ``find`` its question: None when nothing (no
        question, verified already, the gate quiet, or the request unreadable), else a
        :class:`Step` reusing the turn's verification or starting a new one
        (``llm.verification_required`` is emitted then)."""
        try:
            question = find()
        except Exception as exc:  # noqa: BLE001 - the call goes on unverified
            count_hook_error("integrations.verify", exc)
            return None
        if question is None or question.verified:
            return None
        if not question.last:
            reused = self.recalled(question.text)
            if reused is not None:
                return Step(self, question, None, reused)
        decision = self.gate.assess(question.text)
        if not decision.should_reason:
            return None
        loop = VerificationLoop(question.text, request_id=request_id, agent=self.agent,
                                gate=DecidedGate(decision))
        return Step(self, question, loop)

    def remember(self, verification: Verification) -> None:
        with self._lock:
            self._recent[verification.question] = verification
            self._recent.move_to_end(verification.question)
            while len(self._recent) > _RECENT_QUESTIONS:
                self._recent.popitem(last=False)

    def recalled(self, question: str) -> Verification | None:
        with self._lock:
            found = self._recent.get(question)
            if found is not None:
                self._recent.move_to_end(question)
            return found


def verify_sync(step: Step, call: Callable[[], Any],
                read: Callable[[Any], str]) -> Verification | None:
    """The verification of ``step``: reused, or made by ``call()`` and read by ``read``;
    None when the call failed (the caller's call then goes on without it)."""
    if step.reused is not None:
        return step.reused
    try:
        reply = call()
    except Exception as exc:  # noqa: BLE001 - the guards never raise into the agent
        step.unanswered(exc)
        return None
    return step.answer(reply, read)


async def verify_async(step: Step, call: Callable[[], Awaitable[Any]],
                       read: Callable[[Any], str]) -> Verification | None:
    """:func:`verify_sync` for an async client: ``await call()``."""
    if step.reused is not None:
        return step.reused
    try:
        reply = await call()
    except Exception as exc:  # noqa: BLE001 - the guards never raise into the agent
        step.unanswered(exc)
        return None
    return step.answer(reply, read)


@contextlib.contextmanager
def answering(step: Step | None) -> Iterator[None]:
    """Around the caller's call: settle the verification's lifecycle by how it went."""
    if step is None:
        yield
        return
    try:
        yield
    except BaseException:
        step.broke()
        raise
    step.answered()
