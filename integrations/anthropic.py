"""Guard an agent built on the Anthropic Python SDK: ``instrument(client)``.

    from anthropic import Anthropic
    from guardtrace.integrations.anthropic import instrument

    client = instrument(Anthropic(), agent="support-bot")
    client.messages.create(model=..., max_tokens=..., messages=..., tools=...)  # checked

Every reply of ``messages.create`` (streamed or not), ``messages.parse`` and the
``messages.stream()`` helper, on ``Anthropic``, ``AsyncAnthropic`` and the Bedrock,
Vertex and Foundry clients, is checked against the ``tools`` sent and the conversation
(``system``, the ``messages`` sent and the reply), as the OpenAI adapter does
(:mod:`guardtrace.integrations.openai`: hallucinated tools, fabrication and loops, the
exchange recorded as an ``llm_exchange`` payload; observing by default, ``act=True`` to
retry a hallucinated tool with feedback first in ``system`` and to append the
disclaimer to the reply's last text block). A stream is checked once read to its end.

``verify=True`` forces verification as the OpenAI adapter does (the reason tool's prompt
on the same model first, then the caller's call with a ``reason`` tool_use and its
tool_result after the question), on ``create`` and ``parse``, streamed or not; the
``messages.stream()`` helper is not verified (its request is made on entering it), and
neither is a request with extended thinking (see :mod:`._anthropic_messages`).

Not covered: ``client.beta.messages`` and message batches.
"""

from __future__ import annotations

from typing import Any

from ..collectors.replies.fabrication import FabricationGuard
from ._sdk import import_sdk

_anthropic = import_sdk("anthropic", "anthropic")

from ._anthropic_messages import MessagesDialect  # noqa: E402 - after the SDK check
from ._instrument import Endpoint, guard_client, remove  # noqa: E402

__all__ = ["ENDPOINTS", "instrument", "uninstrument"]

_MESSAGES = MessagesDialect()
#: The methods guarded, from the client: ``client.messages.create`` ...
ENDPOINTS = (
    Endpoint(("messages",), "create", _MESSAGES),
    Endpoint(("messages",), "parse", _MESSAGES),
    Endpoint(("messages",), "stream", _MESSAGES, stream_helper=True),
)
# The clients with a Messages API, by whether their methods are coroutines.
_SYNC_CLIENTS = tuple(getattr(_anthropic, name) for name in (
    "Anthropic", "AnthropicBedrock", "AnthropicVertex") if hasattr(_anthropic, name))
_ASYNC_CLIENTS = tuple(getattr(_anthropic, name) for name in (
    "AsyncAnthropic", "AsyncAnthropicBedrock", "AsyncAnthropicVertex")
    if hasattr(_anthropic, name))


def _client_kind(client: Any, caller: str) -> bool:
    """True for an async client; TypeError naming what was expected for anything else."""
    if isinstance(client, _ASYNC_CLIENTS):
        return True
    if isinstance(client, _SYNC_CLIENTS):
        return False
    hint = (" (pass a client, not the class: Anthropic())"
            if any(client is kind for kind in _SYNC_CLIENTS + _ASYNC_CLIENTS) else "")
    raise TypeError(f"guardtrace.integrations.anthropic.{caller} expects an "
                    f"anthropic.Anthropic or anthropic.AsyncAnthropic client (or Bedrock, "
                    f"Vertex, Foundry), got "
                    f"{type(client).__module__}.{type(client).__qualname__}{hint}")


def instrument(client: Any, *, agent: str | None = None, act: bool = False,
               tool_retries: int = 1, guard: FabricationGuard | None = None,
               tool_kinds: Any = None, record_exchanges: bool = True,
               verify: bool = False) -> Any:
    """Check every reply ``client`` gets (see the module docstring).

    Args:
        client: An Anthropic client, sync or async.
        agent: The ``agent`` label and attribute of the telemetry.
        act: Act on findings of complete replies (retry a hallucinated tool, append the
            fabrication disclaimer) instead of only reporting them.
        tool_retries: When acting, how many times a hallucinated tool is asked for again.
        guard: The fabrication guard to use (tiers, tool kinds, disclaimers).
        tool_kinds: Shorthand for a guard with these tool kinds (see
            ``FabricationDetector``), e.g. ``guardtrace.integrations.mcp.tool_kinds``.
        record_exchanges: Record each exchange as an ``llm_exchange`` debug payload.
        verify: Forced verification: a question the criticality gate flags is verified
            by a call of the reason tool's prompt on the same model first, and the
            call is made with that verification in its conversation (see the module
            docstring).

    Returns:
        ``client`` itself, instrumented.

    Raises:
        TypeError: ``client`` is not an Anthropic client; ``guard`` is not a guard,
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
        TypeError: ``client`` is not an Anthropic client.
    """
    _client_kind(client, "uninstrument")
    remove(client)
    return client
