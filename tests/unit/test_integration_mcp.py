"""MCP tool lists: real ``mcp.types`` objects read by the guards, and every page of
``tools/list`` read from a real in-process MCP server (``mcp.Client(server)``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp.types as mcp_types
import openai
import pytest
from mcp import Client
from mcp.server.lowlevel import Server

from guardtrace.collectors import FabricationGuard, read_tool_specs, validate_plan
from guardtrace.collectors.testing import capture
from guardtrace.integrations import openai as gt_openai
from guardtrace.integrations.mcp import list_all_tools, tool_kinds
from guardtrace.schemas import names
from tests.support.llm_wire import ScriptedAPI, chat_completion

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def tool(name: str, **hints: Any) -> Any:
    annotations = mcp_types.ToolAnnotations(**hints) if hints else None
    return mcp_types.Tool(name=name, description=f"{name} on the workspace",
                          input_schema=SCHEMA, annotations=annotations)


TOOLS = [tool("read_file", read_only_hint=True), tool("delete_file", destructive_hint=True),
         tool("fetch_records", read_only_hint=False), tool("stat_file")]
KINDS = {"read_file": "read", "delete_file": "write", "fetch_records": "write",
         "stat_file": None}


@pytest.mark.parametrize("form", ["tools", "result", "wire", "json-rpc", "json-text"])
def test_mcp_tool_lists_are_read_with_their_annotated_kinds(form: str) -> None:
    result = mcp_types.ListToolsResult(tools=TOOLS, next_cursor="page-2")
    wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["tools"][0]["annotations"] == {"readOnlyHint": True}  # the wire names
    given = {"tools": TOOLS, "result": result, "wire": wire,
             "json-rpc": {"jsonrpc": "2.0", "id": 7, "result": wire},
             "json-text": json.dumps(wire)}[form]
    specs = read_tool_specs(given)
    assert {spec.name: spec.declared_kind for spec in specs} == KINDS
    assert specs[0].parameters == SCHEMA and specs[0].description == "read_file on the workspace"
    assert tool_kinds(given) == {name: kind for name, kind in KINDS.items() if kind}


def test_annotations_tell_the_fabrication_guard_what_a_tool_does() -> None:
    # By its name fetch_records reads; the server declares it destructive.
    turn = [{"role": "user", "content": "Clean up the stale records"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "fetch_records", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "I've deleted the stale records."}]
    guard = FabricationGuard()
    writes = mcp_types.ListToolsResult(tools=[tool("fetch_records", destructive_hint=True)])
    reads = mcp_types.ListToolsResult(tools=[tool("fetch_records", read_only_hint=True)])
    assert guard.check_conversation(turn, writes).tiers == ()
    assert guard.check_conversation(turn, reads).tiers == (names.TIER_ACTION,)


def test_an_invented_tool_is_found_against_an_mcp_list() -> None:
    calls = [{"name": "remove_file", "arguments": {"path": "a.txt"}}]
    result = validate_plan(calls, mcp_types.ListToolsResult(tools=TOOLS), emit=False)
    [issue] = result.hallucinations
    assert issue.tool == "remove_file"
    assert "delete_file" in issue.suggested_tools


def test_tool_kinds_reach_an_instrumented_client_as_function_definitions() -> None:
    # The agent shows its MCP tools to the model as OpenAI functions: no annotations.
    functions = [{"type": "function", "function": {"name": t.name, "parameters": SCHEMA}}
                 for t in TOOLS]
    turn = [{"role": "user", "content": "Clean up the stale records"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "fetch_records", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    with capture() as cap:
        for kinds in (None, tool_kinds(TOOLS)):
            client = gt_openai.instrument(openai.OpenAI(
                api_key="sk-test", max_retries=0, http_client=ScriptedAPI(chat_completion(
                    "I've deleted the stale records.")).http_client()), tool_kinds=kinds)
            client.chat.completions.create(model="gpt-4.1", messages=turn, tools=functions)
    # Only the client without the kinds judged fetch_records a read.
    assert len(cap.events(names.EVENT_FABRICATION_DETECTED)) == 1


def paged_server(pages: dict[str | None, tuple[list[Any], str | None]]) -> Server[Any]:
    async def on_list_tools(ctx: Any, params: Any) -> Any:
        tools, next_cursor = pages[params.cursor if params else None]
        return mcp_types.ListToolsResult(tools=tools, next_cursor=next_cursor)

    return Server("workspace", on_list_tools=on_list_tools)


def test_every_page_of_tools_list_is_read() -> None:
    server = paged_server({None: (TOOLS[:2], "p2"), "p2": (TOOLS[2:3], "p3"),
                           "p3": ([TOOLS[3], tool("read_file")], None)})

    async def run() -> tuple[list[str], list[str], dict[str, str]]:
        async with Client(server) as client:
            by_client = await list_all_tools(client)  # mcp.Client: list_tools(cursor=)
            by_session = await list_all_tools(client.session)  # ClientSession: params=
        return ([t.name for t in by_client], [t.name for t in by_session],
                tool_kinds(by_client))

    by_client, by_session, kinds = asyncio.run(run())
    assert by_client == by_session == ["read_file", "delete_file", "fetch_records", "stat_file"]
    assert kinds["read_file"] == "read"  # the first definition of a name is kept


def test_a_server_that_repeats_a_cursor_does_not_hang_the_agent() -> None:
    server = paged_server({None: (TOOLS[:1], "again"), "again": (TOOLS[1:2], "again")})

    async def run() -> str:
        # Caught inside the session: leaving it with an error wraps it in a group.
        async with Client(server) as client:
            try:
                await list_all_tools(client.session)
            except RuntimeError as exc:
                return str(exc)
        return "no error"

    assert asyncio.run(run()) == "the MCP server listed cursor 'again' twice in tools/list"


def test_list_all_tools_refuses_what_is_not_a_session() -> None:
    with pytest.raises(TypeError, match="expects a connected mcp.ClientSession or mcp.Client"):
        asyncio.run(list_all_tools(TOOLS))
