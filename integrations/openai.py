"""Guard an agent built on the OpenAI Python SDK: ``instrument(client)``.

    from openai import OpenAI
    from guardtrace.integrations.openai import instrument

    client = instrument(OpenAI(), agent="support-bot")
    client.chat.completions.create(model=..., messages=..., tools=...)  # checked

Every reply of ``chat.completions.create`` / ``parse`` and ``responses.create`` /
``parse`` (and so of the ``stream()`` helpers, which call ``create``), streamed or not,
on ``OpenAI``, ``AsyncOpenAI`` and their subclasses (Azure), is checked against the
``tools`` sent and the conversation (the ``messages`` / ``input`` sent plus the reply):

* a tool call naming a tool that was not sent: the plan guard's hallucination detection;
* fabrication and loops: the fabrication guard's tiers, on the reply within its
  conversation;
* the exchange itself, recorded as an ``llm_exchange`` debug payload (redacted).

By default the adapter only observes: the caller gets every reply and every chunk as the
SDK gives them, and a failing check is counted (``guardtrace.hook_errors``), never
raised. With ``act=True`` it acts on complete replies: a hallucinated tool is asked for
again with the plan retry's feedback (first in the prompt, ``tool_retries`` times at
most, the retry lifecycle emitted as the plan retry loop emits it), and a fabricated
claim gets the guard's inline disclaimer appended. A streamed reply is checked when it
has been read to its end, and only reported: its chunks have reached the caller already.

With ``verify=True`` a question the criticality gate flags ("How many r's are in
strawberry?") is verified before the model answers it: the adapter first calls the same
model with the reason tool's prompt (``reason_messages``, not streamed), then makes the
caller's call with that verification in the conversation, as an assistant call of
``reason`` and its tool result right after the question, and returns that call's reply
(streamed if asked). ``llm.verification_required`` and ``..._completed`` are emitted
under the call's request id. Later calls of the same turn (after tool results) carry
the same verification again without a new call. A question the gate does not flag costs
the gate only. Chat Completions and Responses, sync and async.

Not covered: the Assistants and Realtime APIs, the legacy ``completions``, and methods
reached through ``with_raw_response`` / ``with_streaming_response`` (they return raw
HTTP responses, passed on unchecked).
"""

from __future__ import annotations

from typing import Any

from ..collectors.replies.fabrication import FabricationGuard
from ._sdk import import_sdk

_openai = import_sdk("openai", "openai")

from ._instrument import Endpoint, guard_client, remove  # noqa: E402 - after the SDK check
from ._openai_chat import ChatDialect  # noqa: E402
from ._openai_responses import ResponsesDialect  # noqa: E402

__all__ = ["ENDPOINTS", "instrument", "uninstrument"]

_CHAT = ChatDialect()
_RESPONSES = ResponsesDialect()
#: The methods guarded, from the client: ``client.chat.completions.create`` ...
ENDPOINTS = (
    Endpoint(("chat", "completions"), "create", _CHAT),
    Endpoint(("chat", "completions"), "parse", _CHAT),
    Endpoint(("responses",), "create", _RESPONSES),
    Endpoint(("responses",), "parse", _RESPONSES),
)


def _client_kind(client: Any, caller: str) -> bool:
    """True for an async client; TypeError naming what was expected for anything else."""
    if isinstance(client, _openai.AsyncOpenAI):
        return True
    if isinstance(client, _openai.OpenAI):
        return False
    hint = (" (pass a client, not the class: OpenAI())"
            if client is _openai.OpenAI or client is _openai.AsyncOpenAI else "")
    raise TypeError(f"guardtrace.integrations.openai.{caller} expects an openai.OpenAI or "
                    f"openai.AsyncOpenAI client (or a subclass, such as AzureOpenAI), got "
                    f"{type(client).__module__}.{type(client).__qualname__}{hint}")


def instrument(client: Any, *, agent: str | None = None, act: bool = False,
               tool_retries: int = 1, guard: FabricationGuard | None = None,
               tool_kinds: Any = None, record_exchanges: bool = True,
               verify: bool = False) -> Any:
    """Check every reply ``client`` gets (see the module docstring).

    Instrumenting a client again replaces its settings; ``client.copy()`` and
    ``client.with_options()`` return clients guarded alike.

    Args:
        client: An ``OpenAI`` or ``AsyncOpenAI`` client (or a subclass).
        agent: The ``agent`` label and attribute of the telemetry.
        act: Act on findings of complete replies (retry a hallucinated tool, append the
            fabrication disclaimer) instead of only reporting them.
        tool_retries: When acting, how many times a hallucinated tool is asked for again.
        guard: The fabrication guard to use (tiers, tool kinds, disclaimers).
        tool_kinds: Shorthand for a guard with these tool kinds (``{"delete_file":
            "write"}``; see ``FabricationDetector``), e.g. from MCP annotations
            (``guardtrace.integrations.mcp.tool_kinds``).
        record_exchanges: Record each exchange as an ``llm_exchange`` debug payload.
        verify: Forced verification: a question the criticality gate flags is verified
            by a call of the reason tool's prompt on the same model first, and the
            call is made with that verification in its conversation (see the module
            docstring).

    Returns:
        ``client`` itself, instrumented.

    Raises:
        TypeError: ``client`` is not an OpenAI client; ``guard`` is not a guard,
            ``tool_kinds`` not a mapping, ``act``, ``record_exchanges`` or ``verify``
            not a bool.
        ValueError: ``tool_retries`` is not an integer >= 0, or both ``guard`` and
            ``tool_kinds``.
    """
    return guard_client(client, ENDPOINTS, is_async=_client_kind(client, "instrument"),
                        agent=agent, act=act, tool_retries=tool_retries, guard=guard,
                        tool_kinds=tool_kinds, record_exchanges=record_exchanges,
                        verify=verify)


def uninstrument(client: Any) -> Any:
    """Put ``client``'s methods back (nothing to do when it is not instrumented).

    Returns:
        ``client`` itself.

    Raises:
        TypeError: ``client`` is not an OpenAI client.
    """
    _client_kind(client, "uninstrument")
    remove(client)
    return client
