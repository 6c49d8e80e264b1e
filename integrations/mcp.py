"""MCP tool lists for the guards: every page of ``tools/list``, and the kinds it declares.

The guards already read an MCP tool list in any form (``mcp.types.Tool`` objects, a
``ListToolsResult``, the ``tools/list`` JSON or its JSON-RPC response; see
:func:`guardtrace.collectors.read_tool_specs`), with the annotations' kinds:
``readOnlyHint`` true is a read tool, ``destructiveHint`` true or ``readOnlyHint``
false a write tool. Two things were missing for an agent that talks to MCP servers:

* :func:`list_all_tools`: a server may split its tools over pages; the guards need the
  whole list the model was shown, so every page is read.
* :func:`tool_kinds`: an agent hands MCP tools to its model as OpenAI or Anthropic
  function definitions, which carry no annotations; the kinds read here go to the
  adapters' ``instrument(client, tool_kinds=...)`` so the fabrication guard still knows
  which tools write::

    tools = await list_all_tools(session)
    client = instrument(OpenAI(), tool_kinds=tool_kinds(tools))
"""

from __future__ import annotations

import inspect
from typing import Any

from ..collectors.tool_catalog import read_tool_specs
from ._sdk import import_sdk

_mcp_types = import_sdk("mcp.types", "mcp")

__all__ = ["MAX_PAGES", "list_all_tools", "tool_kinds"]

#: Pages read at most: a server that keeps handing out cursors must not hang the agent.
MAX_PAGES = 100


async def list_all_tools(session: Any) -> list[Any]:
    """Every tool a server lists, over all the pages of ``tools/list``.

    Args:
        session: An ``mcp.ClientSession`` (``list_tools(params=...)``) or an
            ``mcp.Client`` (``list_tools(cursor=...)``), connected.

    Returns:
        The ``mcp.types.Tool`` objects, in the server's order, the first of each name.

    Raises:
        TypeError: ``session`` has no ``list_tools``.
        RuntimeError: The server hands out more than :data:`MAX_PAGES` pages, or the
            same cursor twice.
    """
    list_tools = getattr(session, "list_tools", None)
    if not callable(list_tools):
        raise TypeError(f"guardtrace.integrations.mcp.list_all_tools expects a connected "
                        f"mcp.ClientSession or mcp.Client, got {type(session).__qualname__}")
    takes_cursor = "cursor" in inspect.signature(list_tools).parameters
    tools: dict[str, Any] = {}
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        if cursor is None:
            page = await list_tools()
        elif takes_cursor:
            page = await list_tools(cursor=cursor)
        else:
            page = await list_tools(params=_mcp_types.PaginatedRequestParams(cursor=cursor))
        for tool in page.tools:
            tools.setdefault(tool.name, tool)
        cursor = page.next_cursor
        if cursor is None:
            return list(tools.values())
        if cursor in seen:
            raise RuntimeError(f"the MCP server listed cursor {cursor!r} twice in tools/list")
        seen.add(cursor)
    raise RuntimeError(f"the MCP server's tools/list has more than {MAX_PAGES} pages")


def tool_kinds(tools: Any) -> dict[str, str]:
    """The kinds an MCP tool list declares, by tool name (``"read"`` / ``"write"``).

    Args:
        tools: ``mcp.types.Tool`` objects, a ``ListToolsResult``, or the ``tools/list``
            JSON (any form :func:`read_tool_specs` reads).

    Returns:
        The tools that declare a kind (annotations, or ``x-guardtrace-kind``); a tool
        without one is left to the guard, which judges it by its name.

    Raises:
        GuardInputError: ``tools`` cannot be read as a tool list.
    """
    return {spec.name: spec.declared_kind for spec in read_tool_specs(tools)
            if spec.declared_kind is not None}
