"""The tool catalog reader: every real tool-list shape read into the same specs, and
input that cannot be a tool list refused with its position and problem.

SDK objects are stood in for by dataclasses with the same attribute names as the SDK
types (``mcp.types.Tool``, ``ListToolsResult``, ``ToolAnnotations``, OpenAI's pydantic
tool models): the reader only uses attribute access, which is what those types offer.
The ``mcp`` package itself is not a test dependency.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.plans.allowed_tools import AllowedTools
from guardtrace.collectors.tool_catalog import (
    ToolSpec,
    looks_like_tool_definition,
    read_tool_definition,
    read_tool_specs,
    tool_list_in,
)
from tests.support.timing import cpu_seconds

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"]}


# --- stand-ins for SDK objects (same attribute names as the real types) -----------------

@dataclass
class ToolAnnotations:  # mcp.types.ToolAnnotations
    title: str | None = None
    readOnlyHint: bool | None = None  # noqa: N815 - the MCP field name
    destructiveHint: bool | None = None  # noqa: N815
    idempotentHint: bool | None = None  # noqa: N815
    openWorldHint: bool | None = None  # noqa: N815


@dataclass
class McpTool:  # mcp.types.Tool
    name: str
    inputSchema: dict[str, Any]  # noqa: N815 - the MCP field name
    description: str | None = None
    title: str | None = None
    outputSchema: dict[str, Any] | None = None  # noqa: N815
    annotations: ToolAnnotations | None = None


@dataclass
class ToolAnnotationsV2:  # mcp 2.x mcp.types.ToolAnnotations: snake_case attributes
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None


@dataclass
class McpToolV2:  # mcp 2.x mcp.types.Tool: snake_case attributes, camelCase on the wire
    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    annotations: ToolAnnotationsV2 | None = None


@dataclass
class ListToolsResult:  # mcp.types.ListToolsResult
    tools: list[McpTool]
    nextCursor: str | None = None  # noqa: N815


@dataclass
class FunctionDefinition:  # openai.types.shared.FunctionDefinition
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


@dataclass
class ChatCompletionFunctionTool:  # openai.types.chat.ChatCompletionFunctionTool
    function: FunctionDefinition
    type: str = "function"


@dataclass
class ResponsesFunctionTool:  # openai.types.responses.FunctionTool
    name: str
    parameters: dict[str, Any] | None
    description: str | None = None
    strict: bool | None = True
    type: str = "function"


@dataclass
class LangChainLikeTool:
    """A tool object carrying a pydantic-style schema class, as LangChain tools do."""

    name: str
    description: str
    args_schema: Any = None


class WeatherArgs:
    """Stands in for a pydantic model class: has ``model_json_schema()``."""

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return WEATHER_SCHEMA


class BrokenArgs:
    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        raise TypeError("cannot build a schema")


# --- every shape ---------------------------------------------------------------------

def test_openai_chat_function_and_custom_tools():
    specs = read_tool_specs([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                          "parameters": WEATHER_SCHEMA, "strict": True}},
        {"type": "custom", "custom": {"name": "apply_patch", "description": "Apply a diff.",
                                      "format": {"type": "text"}}},
    ])
    assert specs == (
        ToolSpec("get_weather", "Weather.", parameters=WEATHER_SCHEMA),
        ToolSpec("apply_patch", "Apply a diff."),
    )


def test_dev_data_kind_field_is_the_declared_kind():
    specs = read_tool_specs([
        {"type": "function", "function": {"name": "update_reservation_flights"},
         "x-guardtrace-kind": "write"},
        {"type": "function", "function": {"name": "get_user_details",
                                          "x-guardtrace-kind": "READ"}},
        {"type": "function", "function": {"name": "calculate"}, "x-guardtrace-kind": "generic"},
    ])
    assert [s.declared_kind for s in specs] == ["write", "read", None]


def test_responses_function_custom_and_builtin_tools():
    specs = read_tool_specs([
        {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA,
         "strict": True},
        {"type": "custom", "name": "run_sql", "description": "Run SQL."},
        {"type": "web_search"},
        {"type": "web_search_preview", "search_context_size": "low"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "computer_use_preview", "display_width": 1024, "display_height": 768,
         "environment": "browser"},
        {"type": "image_generation"},
        {"type": "local_shell"},
    ])
    assert [(s.name, s.builtin) for s in specs] == [
        ("get_weather", False), ("run_sql", False), ("web_search", True),
        ("web_search_preview", True), ("file_search", True), ("code_interpreter", True),
        ("computer_use_preview", True), ("image_generation", True), ("local_shell", True)]
    assert specs[0].parameters == WEATHER_SCHEMA


def test_responses_mcp_server_gives_its_allowed_tools_or_itself():
    specs = read_tool_specs([
        {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.example/sse",
         "allowed_tools": ["ask_question", "read_wiki_structure"]},
        {"type": "mcp", "server_label": "github",
         "allowed_tools": {"tool_names": ["list_issues"], "read_only": True}},
        {"type": "mcp", "server_label": "stripe", "require_approval": "never"},
    ])
    assert [(s.name, s.builtin, s.declared_kind) for s in specs] == [
        ("ask_question", True, None), ("read_wiki_structure", True, None),
        ("list_issues", True, "read"), ("stripe", True, None)]
    assert "deepwiki" in specs[0].description


def test_anthropic_client_and_server_tools():
    specs = read_tool_specs([
        {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER_SCHEMA},
        {"type": "custom", "name": "lookup", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250429", "name": "str_replace_based_edit_tool"},
        {"type": "code_execution_20250522"},  # no name: the type without its date
    ])
    assert [(s.name, s.builtin) for s in specs] == [
        ("get_weather", False), ("lookup", False), ("web_search", True), ("bash", True),
        ("str_replace_based_edit_tool", True), ("code_execution", True)]
    assert specs[0].parameters == WEATHER_SCHEMA


def test_mcp_tools_list_result_and_json_rpc_response():
    tools = [{"name": "create_issue", "description": "Open an issue.",
              "inputSchema": {"type": "object", "properties": {"title": {}}},
              "annotations": {"readOnlyHint": False, "destructiveHint": False}},
             {"name": "get_issue", "inputSchema": {"type": "object"},
              "annotations": {"readOnlyHint": True}},
             {"name": "delete_repo", "inputSchema": {"type": "object"},
              "annotations": {"destructiveHint": True}},
             {"name": "search", "inputSchema": {"type": "object"}}]
    expected = [("create_issue", "write"), ("get_issue", "read"), ("delete_repo", "write"),
                ("search", None)]
    for shape in ({"tools": tools}, {"tools": tools, "nextCursor": "abc"},
                  {"jsonrpc": "2.0", "id": 7, "result": {"tools": tools}},
                  json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"tools": tools}})):
        specs = read_tool_specs(shape)
        assert [(s.name, s.declared_kind) for s in specs] == expected
    assert read_tool_specs({"tools": []}) == ()


def test_mcp_sdk_tool_objects_and_list_result():
    result = ListToolsResult([
        McpTool("get_issue", {"type": "object", "properties": {"number": {}}},
                description="Read an issue.", annotations=ToolAnnotations(readOnlyHint=True)),
        McpTool("close_issue", {"type": "object"},
                annotations=ToolAnnotations(destructiveHint=True)),
        McpTool("ping", {"type": "object"}),
    ])
    specs = read_tool_specs(result)
    assert [(s.name, s.description, s.declared_kind) for s in specs] == [
        ("get_issue", "Read an issue.", "read"), ("close_issue", "", "write"),
        ("ping", "", None)]
    assert specs[0].parameters == {"type": "object", "properties": {"number": {}}}
    assert read_tool_specs(result.tools) == specs
    assert read_tool_specs(result.tools[0]) == specs[:1]  # one tool on its own


def test_mcp_2_sdk_objects_with_snake_case_attributes():
    specs = read_tool_specs([
        McpToolV2("get_issue", WEATHER_SCHEMA, "Read.", ToolAnnotationsV2(read_only_hint=True)),
        McpToolV2("close_issue", {"type": "object"},
                  annotations=ToolAnnotationsV2(destructive_hint=True)),
    ])
    assert [(s.name, s.declared_kind, s.parameters) for s in specs] == [
        ("get_issue", "read", WEATHER_SCHEMA), ("close_issue", "write", {"type": "object"})]


def test_newer_tools_list_results_with_more_fields_are_still_results():
    # mcp 2.x serialises ttlMs, cacheScope and resultType beside the list.
    result = {"ttlMs": 0, "cacheScope": "private", "resultType": "complete",
              "_meta": {"k": "v"}, "tools": [{"name": "a", "inputSchema": {},
                                              "annotations": {"readOnlyHint": True}}]}
    assert read_tool_specs(result) == (ToolSpec("a", declared_kind="read", parameters={}),)


def test_explicit_kind_wins_over_mcp_annotations():
    (spec,) = read_tool_specs([{"name": "sync", "inputSchema": {},
                                "annotations": {"readOnlyHint": True},
                                "x-guardtrace-kind": "write"}])
    assert spec.declared_kind == "write"


def test_openai_sdk_objects():
    specs = read_tool_specs([
        ChatCompletionFunctionTool(FunctionDefinition("get_weather", "W.", WEATHER_SCHEMA)),
        ResponsesFunctionTool("get_time", {"type": "object", "properties": {}}),
    ])
    assert [(s.name, s.description, s.parameters) for s in specs] == [
        ("get_weather", "W.", WEATHER_SCHEMA),
        ("get_time", "", {"type": "object", "properties": {}})]


def test_gemini_function_declarations():
    specs = read_tool_specs([{"function_declarations": [
        {"name": "get_weather", "parameters": WEATHER_SCHEMA}, {"name": "get_time"}]}])
    assert [s.name for s in specs] == ["get_weather", "get_time"]


def test_any_object_with_a_name_and_a_schema():
    specs = read_tool_specs([
        LangChainLikeTool("get_weather", "Weather.", WeatherArgs),
        LangChainLikeTool("broken", "Schema fails.", BrokenArgs),
        {"name": "json_schema_tool", "json_schema": WEATHER_SCHEMA},
    ])
    assert [(s.name, s.parameters) for s in specs] == [
        ("get_weather", WEATHER_SCHEMA), ("broken", None),
        ("json_schema_tool", WEATHER_SCHEMA)]


def test_plain_names_mixed_shapes_and_repeats():
    specs = read_tool_specs(["get_weather", {"name": "get_time", "input_schema": {}},
                             {"type": "function", "function": {"name": "get_weather",
                                                               "description": "second"}}])
    assert [s.name for s in specs] == ["get_weather", "get_time"]
    assert specs[0].description == ""  # the first definition of a name is kept


# --- one parser -------------------------------------------------------------------------

def test_allowed_tools_parse_through_the_catalog():
    allowed = AllowedTools.parse(ListToolsResult([McpTool("get_issue", WEATHER_SCHEMA)]))
    assert allowed.names == ("get_issue",)
    assert allowed.spec("get_issue") == ToolSpec("get_issue", parameters=WEATHER_SCHEMA)
    rpc = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "inputSchema": {}}]}}
    assert AllowedTools.parse(rpc).names == ("a",)
    assert AllowedTools.parse([{"type": "web_search"}, "b"]).names == ("web_search", "b")
    assert AllowedTools.parse(McpTool("solo", {})).names == ("solo",)


def test_an_agent_named_in_a_map_is_not_taken_for_an_mcp_result():
    # {"tools": ["a", "b"]} is an agent called "tools" with two capabilities, as before.
    allowed = AllowedTools.parse({"tools": ["a", "b"]})
    assert allowed.names == ("tools",) and allowed.capabilities("tools") == ("a", "b")


def test_envelope_and_definition_helpers():
    assert tool_list_in({"tools": [{"name": "a"}], "nextCursor": None}) == [{"name": "a"}]
    assert tool_list_in({"tools": [{"name": "a"}], "other": ["x"]}) is None  # an agent map
    assert tool_list_in([{"name": "a"}]) is None
    assert looks_like_tool_definition({"name": "a", "inputSchema": {}})
    assert not looks_like_tool_definition({"name": "a"})
    assert read_tool_definition({"function_declarations": [{"name": "x"}, {"name": "y"}]},
                                "tools[0]") == (ToolSpec("x"), ToolSpec("y"))


# --- not a tool list ------------------------------------------------------------------

@pytest.mark.parametrize("tools, message", [
    (42, "tools: expected a list of tool definitions or names"),
    (None, "got NoneType"),
    ("get_weather", "tools: expected a list of tool definitions or names, got text"),
    ('[{"name": ', "tools: looks like JSON but is not valid JSON"),
    ({"weather": ["x"]}, "tools: expected a list"),
    ([{"name": "ok"}, 3], "tools[1]: expected a tool name or a tool definition object, got int"),
    ([""], "tools[0]: empty tool name"),
    ([{"description": "no name"}], "tools[0]: unknown tool form"),
    ([{"type": "function", "function": {"description": "x"}}],
     "tools[0].function: a function tool without a 'name'"),
    ([{"type": "mcp", "server_url": "https://x"}], "tools[0]: an 'mcp' tool needs"),
    ([{"type": "mcp", "server_label": "s", "allowed_tools": ["ok", 5]}],
     "tools[0].allowed_tools[1]: expected a tool name"),
    ([{"type": "web search!"}], "tools[0]: tool type 'web search!' is not a tool name"),
    ([{"type": ["function"]}], "tools[0]: unknown tool form"),
    ({"type": []}, "tools: expected a list"),
    ({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}, [1]]}},
     "tools.result.tools[1]: expected a tool name or a tool definition object, got list"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no such method"}},
     "tools: a JSON-RPC error response, not a tool list: 'no such method'"),
])
def test_input_that_cannot_be_a_tool_list_names_position_and_problem(tools, message):
    with pytest.raises(GuardInputError) as info:
        read_tool_specs(tools)
    assert message in str(info.value)


def test_reading_is_linear_in_the_list():
    """Reading time grows with the list, not faster (by size growth, not a timed bound)."""
    def timed(n: int) -> float:
        tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 50,
                                                   "parameters": WEATHER_SCHEMA}}
                 for i in range(n)]
        return cpu_seconds(lambda: read_tool_specs(tools))

    timed(1000)
    small = min(timed(2_000) for _ in range(3))
    large = min(timed(20_000) for _ in range(3))
    assert large < small * 30  # 10x the input: well under quadratic growth (100x)


def test_spec_with_a_schema_still_hashes_and_compares():
    spec = ToolSpec("a", parameters={"type": "object"})
    assert hash(spec) == hash(ToolSpec("a", parameters={"type": "object", "x": 1}))
    assert spec == ToolSpec("a", parameters={"type": "object"})
    assert spec != ToolSpec("a", parameters={"type": "array"})
