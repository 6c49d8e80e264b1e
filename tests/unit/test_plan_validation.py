"""Plan validation (family 1): every rule fires and stays quiet, every allowed form,
tool calls as the plan, suggestions (arguments included), abstentions and placeholders,
telemetry of its own, bad input, and the offline scanner entry point.

SDK objects are stood in for by dataclasses with the SDK types' attribute names: the
validator reads them by attribute, as it reads the real ones.

Long because every rule and every accepted tool-list shape is pinned both ways, on
shared fixtures that a split by rule would scatter.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest

from guardtrace.cli.scan_records import scan_plan_input
from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.plans.suggestions import ABSTENTION, classify_unknown_name
from guardtrace.collectors.plans.validation import (
    AllowedTools,
    PlanErrorType,
    suggest_tools,
    validate_plan,
)
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names
from tests.support.telemetry import ExplodingTelemetry
from tests.support.timing import cpu_seconds

# Seed 003: the capability text the planner was shown.
WEATHER_ONLY_TEXT = """Available Agents and Capabilities:

Agent: weather-tool-v2 (ID: weather-tool-v2)
  Address: http://weather-tool-v2-service.gomind-examples.svc.cluster.local:80
  - Capability: get_current_weather
    Description: Gets current weather conditions for a location...
"""

# Seed 003: the hallucinated step (the LLM gave no step id).
TIME_TOOL_PLAN = {"plan_id": "p-1", "steps": [{
    "agent_name": "time-tool-v1",
    "instruction": "Get the current time in CST",
    "metadata": {"capability": "get_current_time", "parameters": {"timezone": "CST"}},
}]}

# Seed 002: the tool catalog, as Anthropic-style definitions with descriptions.
SEED_002_TOOLS = [
    {"name": "search_documents", "description": "Search indexed documents by a query.",
     "input_schema": {"type": "object"}},
    {"name": "extract_section", "description": "Extract one section of a document.",
     "input_schema": {"type": "object"}},
    {"name": "take_screenshot", "description": "Take a screenshot of a document page.",
     "input_schema": {"type": "object"}},
    {"name": "compose_email", "description": "Compose and send an email.",
     "input_schema": {"type": "object"}},
    {"name": "create_keynote", "description": "Create a Keynote presentation.",
     "input_schema": {"type": "object"}},
    {"name": "create_keynote_with_images",
     "description": "Create a Keynote presentation with images.",
     "input_schema": {"type": "object"}},
    {"name": "create_pages_doc", "description": "Create a Pages document.",
     "input_schema": {"type": "object"}},
    {"name": "organize_files",
     "description": "COMPLETE/STANDALONE: organizes files by category into a target "
                    "folder; creates the folder if needed and moves the matching files.",
     "input_schema": {"type": "object"}},
]
SEED_002_NAMES = [t["name"] for t in SEED_002_TOOLS]


def types(result):
    return [str(e.error_type) for e in result.errors]


def step(sid, tool, *deps):
    return {"id": sid, "tool": tool, "inputs": {}, "depends_on": list(deps)}


# --- plan forms --------------------------------------------------------------------------

def test_valid_step_list_passes():
    plan = [step("step_1", "search_documents"), step("step_2", "compose_email", "step_1")]
    result = validate_plan(plan, SEED_002_NAMES)
    assert result.valid and result.errors == ()
    assert [s.step_id for s in result.steps] == ["step_1", "step_2"]
    assert result.steps[1].depends_on == ("step_1",)


def test_valid_orchestrator_plan_passes_and_keeps_capability_and_instruction():
    plan = {"plan_id": "p", "steps": [{
        "step_id": "s1", "agent_name": "weather-tool-v2", "instruction": "Weather in Tokyo",
        "depends_on": [], "metadata": {"capability": "get_current_weather",
                                       "parameters": {"city": "Tokyo"}}}]}
    result = validate_plan(plan, WEATHER_ONLY_TEXT)
    assert result.valid
    assert result.steps[0].capability == "get_current_weather"
    assert result.steps[0].instruction == "Weather in Tokyo"


@pytest.mark.parametrize("plan", [
    json.dumps([step("step_1", "organize_files")]),
    json.dumps({"plan_id": "p", "steps": [{"step_id": "a", "agent_name": "organize_files"}]}),
])
def test_json_string_plans_are_accepted(plan):
    assert validate_plan(plan, SEED_002_NAMES).valid


@pytest.mark.parametrize("plan", [[], {"plan_id": "no-matching-tool", "steps": []}, "[]",
                                  '{"steps": []}'])
@pytest.mark.parametrize("allowed", [SEED_002_NAMES, [], WEATHER_ONLY_TEXT])
def test_zero_step_plan_is_valid(plan, allowed):
    result = validate_plan(plan, allowed)
    assert result.valid and result.steps == ()


def test_integer_ids_single_string_dependency_and_missing_ids():
    plan = [{"id": 1, "tool": "search_documents"},
            {"id": 2, "tool": "extract_section", "depends_on": 1},
            {"tool": "compose_email", "depends_on": ["2"]}]
    result = validate_plan(plan, SEED_002_NAMES)
    assert result.valid
    assert [s.step_id for s in result.steps] == ["1", "2", "#3"]
    assert result.steps[1].depends_on == ("1",)


# --- hallucinated tools and capabilities -------------------------------------------------

def test_seed_003_time_tool_is_hallucinated_against_weather_only_text():
    result = validate_plan(TIME_TOOL_PLAN, WEATHER_ONLY_TEXT)
    assert not result.valid
    (error,) = result.errors
    assert error.error_type is PlanErrorType.HALLUCINATED_TOOL
    assert error.tool == "time-tool-v1" and error.step == "#1"
    assert "time-tool-v1" in error.message and "weather-tool-v2" in error.message
    # A time tool is not plausibly a weather tool: no suggestion rather than a bad one.
    assert error.suggested_tools == ()
    assert result.hallucinated_names == ("time-tool-v1",)


def test_allowed_agent_passes_against_capability_text():
    plan = [{"step_id": "s1", "agent_name": "weather-tool-v2"}]
    assert validate_plan(plan, WEATHER_ONLY_TEXT).valid


def test_capability_text_accepts_name_and_id_when_they_differ():
    text = "Agent: Weather Service (ID: weather-svc-2)\n  - Capability: forecast\n"
    allowed = AllowedTools.parse(text)
    assert allowed.agent_count == 1
    for name in ("Weather Service", "weather-svc-2"):
        assert validate_plan([{"agent_name": name, "capability": "forecast"}], text).valid


def test_hallucinated_capability_fires_for_existing_agent():
    plan = [{"step_id": "s1", "agent_name": "weather-tool-v2",
             "metadata": {"capability": "get_current_time"}}]
    result = validate_plan(plan, WEATHER_ONLY_TEXT)
    (error,) = result.errors
    assert error.error_type is PlanErrorType.HALLUCINATED_CAPABILITY
    assert error.tool == "weather-tool-v2" and error.capability == "get_current_time"
    assert "get_current_weather" in error.message
    assert error.is_hallucination


def test_capability_quiet_when_listed_or_when_allowed_has_no_capabilities():
    plan = [{"agent_name": "weather-tool-v2", "metadata": {"capability": "get_current_weather"}}]
    assert validate_plan(plan, WEATHER_ONLY_TEXT).valid
    plan = [{"agent_name": "weather-tool-v2", "metadata": {"capability": "anything"}}]
    assert validate_plan(plan, ["weather-tool-v2"]).valid  # not checkable: not flagged


def test_agent_slash_capability_names_from_tiered_selection():
    allowed = ["weather-tool-v2/get_current_weather", "stock-service/quote"]
    assert validate_plan([{"tool": "weather-tool-v2/get_current_weather"}], allowed).valid
    assert validate_plan([{"agent_name": "stock-service", "capability": "quote"}],
                         allowed).valid
    result = validate_plan([{"agent_name": "stock-service", "capability": "history"}], allowed)
    assert types(result) == ["hallucinated_capability"]
    result = validate_plan([{"tool": "weather-tool-v2/get_current_time"}], allowed)
    assert types(result) == ["hallucinated_capability"]


def test_seed_002_create_folder_and_move_files_are_blocked_with_suggestions():
    plan = [step("step_1", "create_folder"), step("step_2", "move_files", "step_1")]
    result = validate_plan(plan, SEED_002_TOOLS)
    assert types(result) == ["hallucinated_tool", "hallucinated_tool"]
    assert [e.suggested_tools[0] for e in result.errors] == ["organize_files"] * 2
    assert result.hallucinated_names == ("create_folder", "move_files")


def test_tool_names_are_exact_case_sensitive():
    result = validate_plan([step("s1", "Organize_Files")], SEED_002_NAMES)
    assert types(result) == ["hallucinated_tool"]
    assert result.errors[0].suggested_tools == ("organize_files",)


# --- dependencies ------------------------------------------------------------------------

def test_missing_dependency_fires_and_backward_dependency_is_quiet():
    result = validate_plan([step("step_1", "search_documents", "step_99")], SEED_002_NAMES)
    assert types(result) == ["missing_dependency"]
    assert "step_99" in result.errors[0].message
    plan = [step("step_1", "search_documents"), step("step_2", "extract_section", "step_1")]
    assert validate_plan(plan, SEED_002_NAMES).valid


def test_forward_dependency_fires():
    plan = [step("step_1", "compose_email", "step_2"), step("step_2", "search_documents")]
    result = validate_plan(plan, SEED_002_NAMES)
    assert types(result) == ["forward_dependency"]
    assert result.errors[0].step == "step_1"
    assert "later" in result.errors[0].message


def test_self_dependency_fires_and_no_dependency_is_quiet():
    result = validate_plan([step("step_1", "search_documents", "step_1")], SEED_002_NAMES)
    assert types(result) == ["self_dependency"]
    assert validate_plan([step("step_1", "search_documents")], SEED_002_NAMES).valid


def test_dependency_cycle_reports_the_path():
    plan = [step("step_1", "search_documents", "step_2"),
            step("step_2", "extract_section", "step_3"),
            step("step_3", "compose_email", "step_1")]
    result = validate_plan(plan, SEED_002_NAMES)
    # The cycle's forward edges are not repeated as forward_dependency findings.
    assert types(result) == ["dependency_cycle"]
    error = result.errors[0]
    assert error.cycle == ("step_1", "step_2", "step_3", "step_1")
    assert "step_1 -> step_2 -> step_3 -> step_1" in error.message
    assert error.to_dict()["cycle"] == ["step_1", "step_2", "step_3", "step_1"]


def test_cycle_starts_at_earliest_step_and_dag_is_quiet():
    plan = [step("a", "search_documents"), step("b", "extract_section", "c"),
            step("c", "compose_email", "b")]
    cycles = [e.cycle for e in validate_plan(plan, SEED_002_NAMES).errors
              if e.error_type is PlanErrorType.DEPENDENCY_CYCLE]
    assert cycles == [("b", "c", "b")]
    diamond = [step("a", "search_documents"), step("b", "extract_section", "a"),
               step("c", "take_screenshot", "a"), step("d", "compose_email", "b", "c")]
    assert validate_plan(diamond, SEED_002_NAMES).valid


def test_long_chain_does_not_hit_recursion_limit():
    plan = [step("s0", "search_documents")] + [
        step(f"s{i}", "search_documents", f"s{i - 1}") for i in range(1, 3000)]
    assert validate_plan(plan, SEED_002_NAMES).valid


def test_duplicate_step_id_fires_and_unique_ids_are_quiet():
    plan = [step("step_1", "search_documents"), step("step_1", "compose_email")]
    result = validate_plan(plan, SEED_002_NAMES)
    assert types(result) == ["duplicate_step_id"]
    assert "steps 1 and 2" in result.errors[0].message


def test_errors_are_json_ready():
    plan = [step("step_1", "list_files", "step_9")]
    result = validate_plan(plan, SEED_002_NAMES)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["valid"] is False
    assert [e["error_type"] for e in data["errors"]] == ["hallucinated_tool",
                                                        "missing_dependency"]
    assert data["errors"][0]["suggested_tools"] == ["organize_files"]
    assert set(data["errors"][0]) >= {"error_type", "step", "tool", "message",
                                      "suggested_tools"}


# --- allowed forms -----------------------------------------------------------------------

ALLOWED_FORMS = {
    "names": ["weather-tool-v2", "stock-service"],
    "names-tuple": ("weather-tool-v2", "stock-service"),
    "agent-map": {"weather-tool-v2": ["get_current_weather"], "stock-service": ["quote"]},
    "agent-map-descriptions": {"weather-tool-v2": "Current weather", "stock-service": None},
    "agent-map-capability-objects": {
        "weather-tool-v2": [{"name": "get_current_weather", "description": "weather"}],
        "stock-service": {"quote": "latest price"}},
    "openai": [{"type": "function", "function": {"name": "weather-tool-v2",
                                                 "parameters": {}}},
               {"type": "function", "function": {"name": "stock-service"}}],
    "anthropic": [{"name": "weather-tool-v2", "description": "d", "input_schema": {}},
                  {"name": "stock-service", "description": "d", "input_schema": {}}],
    "objects-with-capabilities": [{"name": "weather-tool-v2",
                                   "capabilities": ["get_current_weather"]},
                                  {"name": "stock-service", "capabilities": ["quote"]}],
    "capability-text": WEATHER_ONLY_TEXT + "Agent: stock-service (ID: stock-service)\n"
                       "  - Capability: quote\n",
    "json-names": '["weather-tool-v2", "stock-service"]',
    "json-openai": json.dumps([{"type": "function", "function": {"name": "weather-tool-v2"}},
                               {"type": "function", "function": {"name": "stock-service"}}]),
    "json-agent-map": '{"weather-tool-v2": ["get_current_weather"], "stock-service": []}',
}


@pytest.mark.parametrize("form", sorted(ALLOWED_FORMS))
def test_every_allowed_form_accepts_real_and_rejects_invented(form):
    allowed = ALLOWED_FORMS[form]
    assert AllowedTools.parse(allowed).names == ("weather-tool-v2", "stock-service")
    plan = [{"step_id": "s1", "agent_name": "weather-tool-v2"},
            {"step_id": "s2", "agent_name": "stock-service", "depends_on": ["s1"]}]
    assert validate_plan(plan, allowed).valid
    result = validate_plan([{"step_id": "s1", "agent_name": "calculator"}], allowed)
    assert types(result) == ["hallucinated_tool"]


def test_single_definition_and_parsed_object_are_accepted():
    single = {"type": "function", "function": {"name": "organize_files"}}
    assert AllowedTools.parse(single).names == ("organize_files",)
    parsed = AllowedTools.parse(SEED_002_TOOLS)
    assert AllowedTools.parse(parsed) is parsed
    assert validate_plan([step("s", "organize_files")], parsed).valid
    assert parsed.capabilities("organize_files") is None


def test_empty_allowed_makes_every_step_hallucinated():
    result = validate_plan([step("s1", "anything")], [])
    assert types(result) == ["hallucinated_tool"]
    assert result.errors[0].suggested_tools == ()


# --- suggestions -------------------------------------------------------------------------

@pytest.mark.parametrize("invented, allowed, expected", [
    ("getWeather", ["get_weather", "get_stock_price", "send_email"], "get_weather"),
    ("weather-tool-v1", ["weather-tool-v2", "stock-service"], "weather-tool-v2"),
    ("weatherToolV3", ["weather-tool-v2", "stock-service"], "weather-tool-v2"),
    ("search_document", SEED_002_NAMES, "search_documents"),
    ("send_emails", ["send_email", "read_email"], "send_email"),
    ("get_wether", ["get_weather", "get_stock_price"], "get_weather"),
    ("list_files", SEED_002_NAMES, "organize_files"),
    ("list_files", SEED_002_TOOLS, "organize_files"),
    ("create_folder", SEED_002_TOOLS, "organize_files"),
    ("move_files", SEED_002_TOOLS, "organize_files"),
    ("send_email", SEED_002_NAMES, "compose_email"),
])
def test_suggestions_find_the_nearest_real_tool(invented, allowed, expected):
    suggestions = suggest_tools(invented, allowed)
    assert suggestions[0] == expected
    assert len(suggestions) <= 3


def test_suggestions_come_from_similarity_not_a_map():
    # Rename the real tool: the suggestion follows the allowed list, whatever it holds.
    renamed = [dict(t, name="arrange_files") if t["name"] == "organize_files" else t
               for t in SEED_002_TOOLS]
    assert suggest_tools("list_files", renamed)[0] == "arrange_files"
    assert suggest_tools("create_folder", renamed)[0] == "arrange_files"
    without = [t for t in SEED_002_TOOLS if t["name"] != "organize_files"]
    assert "organize_files" not in suggest_tools("create_folder", without)


@pytest.mark.parametrize("invented, allowed", [
    ("time-tool-v1", WEATHER_ONLY_TEXT),
    ("calculation-agent", ["stock-service", "weather-service"]),
    ("xyz", SEED_002_NAMES),
])
def test_no_suggestion_when_nothing_is_plausibly_close(invented, allowed):
    assert suggest_tools(invented, allowed) == []


def test_at_most_three_suggestions_best_first():
    allowed = ["get_weather", "get_weather_v2", "getWeatherNow", "get-weathers", "weather"]
    suggestions = suggest_tools("get_weather_data", allowed)
    assert 1 <= len(suggestions) <= 3


def test_capability_suggestions_come_from_the_agents_capabilities():
    allowed = {"weather-tool-v2": ["get_current_weather", "get_forecast"]}
    plan = [{"agent_name": "weather-tool-v2", "capability": "getCurrentWeather"}]
    (error,) = validate_plan(plan, allowed).errors
    assert error.suggested_tools[0] == "get_current_weather"


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("plan, message", [
    ("{not json", "plan: not valid JSON"),
    ([step("s1", "organize_files"), {"id": "s2", "inputs": {}}],
     "plan step 2: missing 'tool' (or 'agent_name')"),
    ([{"id": "s1", "tool": ""}], "plan step 1: 'tool' must be a non-empty string"),
    ({"plan_id": "p", "steps": "step_1"}, "plan: 'steps' must be a list"),
    ({"plan_id": "p"}, "plan: object has no 'steps' list"),
    (42, "plan: expected a list of steps"),
    (["organize_files"], "plan step 1: expected an object, got str"),
    ([{"id": "s1", "tool": "organize_files", "depends_on": {"a": 1}}],
     "plan step 1: 'depends_on' must be a list"),
    ([{"id": True, "tool": "organize_files"}], "plan step 1: 'id' must be"),
])
def test_bad_plans_raise_with_what_and_where(plan, message):
    with pytest.raises(GuardInputError) as info:
        validate_plan(plan, SEED_002_NAMES)
    assert message in str(info.value)


@pytest.mark.parametrize("allowed, message", [
    (42, "allowed: expected a list of tool names"),
    (["organize_files", {"description": "no name"}], "allowed[1]: unknown tool form"),
    (["organize_files", 3], "allowed[1]: expected a tool name"),
    ('["unterminated', "allowed: looks like JSON but is not valid JSON"),
    ("search_documents, organize_files", "allowed: text has no 'Agent: <name>"),
    ({"weather-tool-v2": 7}, "allowed['weather-tool-v2']: capabilities must be a list"),
])
def test_bad_allowed_raises_with_what_and_where(allowed, message):
    with pytest.raises(GuardInputError) as info:
        validate_plan([], allowed)
    assert message in str(info.value)


def test_guard_input_error_is_a_value_error():
    with pytest.raises(ValueError):
        validate_plan("nope", [])


# --- speed -------------------------------------------------------------------------------

def test_fifty_steps_against_a_hundred_tools_is_valid_and_linear():
    # Its speed is benchmarks/hook_overhead.py's figure; here only how it grows: 4x the
    # steps and tools, well under the 16x of pairwise work.
    def plan_of(steps: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        allowed = [{"type": "function", "function": {"name": f"tool_{i}",
                                                     "description": f"does thing {i}"}}
                   for i in range(2 * steps)]
        return ([step(f"s{i}", f"tool_{2 * i}", *([f"s{i - 1}"] if i else []))
                 for i in range(steps)], allowed)
    small, large = plan_of(50), plan_of(200)
    assert validate_plan(*small).valid and validate_plan(*large).valid
    ratio = _timed(lambda: validate_plan(*large)) / _timed(lambda: validate_plan(*small))
    assert ratio < 12, ratio


# --- offline scanner ---------------------------------------------------------------------

def test_scan_plan_input_valid_and_invalid_records():
    ok = scan_plan_input({"id": "r1", "allowed_tools": SEED_002_NAMES,
                          "plan": [step("s1", "organize_files")]})
    assert ok == {"id": "r1", "valid": True, "errors": []}
    bad = scan_plan_input({"id": 7, "allowed_tools": WEATHER_ONLY_TEXT,
                           "plan": TIME_TOOL_PLAN})
    assert bad["id"] == 7 and bad["valid"] is False
    assert bad["errors"] == [{
        "error_type": "hallucinated_tool", "step": "#1", "tool": "time-tool-v1",
        "suggested_tools": [], "message": bad["errors"][0]["message"]}]
    json.dumps(bad)


def test_scan_plan_input_reports_suggestions():
    out = scan_plan_input({"id": "r2", "allowed_tools": SEED_002_TOOLS,
                           "plan": json.dumps([step("s1", "create_folder")])})
    assert out["errors"][0]["suggested_tools"][0] == "organize_files"


@pytest.mark.parametrize("record, message", [
    ([1, 2], "scan record: expected an object"),
    ({"id": "r1", "plan": []}, "scan record 'r1': missing 'allowed_tools'"),
    ({"allowed_tools": []}, "scan record: missing 'id', 'plan'"),
    ({"id": 1.5, "allowed_tools": [], "plan": []}, "'id' must be a string or an integer"),
    ({"id": "r1", "allowed_tools": None, "plan": []}, "'allowed_tools' is null"),
    ({"id": "r1", "allowed_tools": 5, "plan": []}, "scan record 'r1': allowed_tools:"),
    ({"id": "r1", "allowed_tools": [], "plan": [{"id": "a"}]},
     "scan record 'r1': plan step 1: missing 'tool' (or 'agent_name')"),
])
def test_scan_plan_input_rejects_malformed_records(record, message):
    with pytest.raises(GuardInputError) as info:
        scan_plan_input(record)
    assert message in str(info.value)


# --- tool calls as the plan ----------------------------------------------------------------

WEATHER_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Current time in a timezone.",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}},
]
CHAT_MESSAGE = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "get_wether", "arguments": '{"city": "Paris"}'}},
    {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}


@dataclass
class Function:  # openai.types.chat.chat_completion_message_function_tool_call.Function
    name: str
    arguments: str


@dataclass
class ChatToolCall:  # openai ChatCompletionMessageFunctionToolCall
    id: str
    function: Function
    type: str = "function"


@dataclass
class ChatMessage:  # openai ChatCompletionMessage
    content: str | None
    tool_calls: list[ChatToolCall] | None
    role: str = "assistant"
    function_call: Any = None


@dataclass
class Choice:  # openai Choice
    index: int
    message: ChatMessage
    finish_reason: str = "tool_calls"


@dataclass
class ChatCompletion:  # openai ChatCompletion
    id: str
    choices: list[Choice]


@dataclass
class ToolUseBlock:  # anthropic.types.ToolUseBlock
    id: str
    name: str
    input: dict[str, Any]
    type: str = "tool_use"


@dataclass
class TextBlock:  # anthropic.types.TextBlock
    text: str
    type: str = "text"


@dataclass
class AnthropicMessage:  # anthropic.types.Message
    content: list[Any]
    role: str = "assistant"
    type: str = "message"


@dataclass
class ResponseFunctionToolCall:  # openai.types.responses.ResponseFunctionToolCall
    call_id: str
    name: str
    arguments: str
    id: str = "fc_1"
    type: str = "function_call"


@dataclass
class Response:  # openai.types.responses.Response
    output: list[Any]


def calls(result):
    return [(s.step_id, s.tool, s.arguments) for s in result.steps]


EXPECTED_CHAT = [("call_1", "get_wether", {"city": "Paris"}), ("call_2", "get_time", {})]


@pytest.mark.parametrize("plan", [
    CHAT_MESSAGE,
    CHAT_MESSAGE["tool_calls"],
    {"id": "chatcmpl-1", "choices": [{"index": 0, "message": CHAT_MESSAGE}]},
    {"index": 0, "message": CHAT_MESSAGE},
    json.dumps(CHAT_MESSAGE),
    ChatMessage(None, [ChatToolCall("call_1", Function("get_wether", '{"city": "Paris"}')),
                       ChatToolCall("call_2", Function("get_time", "{}"))]),
    ChatCompletion("chatcmpl-1", [Choice(0, ChatMessage(None, [
        ChatToolCall("call_1", Function("get_wether", '{"city": "Paris"}')),
        ChatToolCall("call_2", Function("get_time", "{}"))]))]),
], ids=["message", "tool_calls", "completion", "choice", "json", "sdk-message",
        "sdk-completion"])
def test_openai_chat_tool_calls_are_a_plan(plan):
    result = validate_plan(plan, WEATHER_TOOLS, emit=False)
    assert calls(result) == EXPECTED_CHAT
    (error,) = result.errors
    assert error.error_type is PlanErrorType.HALLUCINATED_TOOL and error.step == "call_1"
    assert error.suggested_tools[0] == "get_weather"


def test_responses_function_calls_are_a_plan_and_provider_calls_are_not():
    output = [{"type": "reasoning", "id": "rs_1", "summary": []},
              {"type": "web_search_call", "id": "ws_1", "status": "completed"},
              {"type": "function_call", "id": "fc_1", "call_id": "call_a",
               "name": "get_time", "arguments": '{"timezone": "CET"}'},
              {"type": "mcp_call", "id": "mcp_1", "name": "ask_question",
               "server_label": "deepwiki", "arguments": "{}"},
              {"type": "custom_tool_call", "call_id": "call_b", "name": "run_sql",
               "input": "SELECT 1"},
              {"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "Done."}]}]
    for plan in (output, {"id": "resp_1", "output": output}):
        result = validate_plan(plan, WEATHER_TOOLS, emit=False)
        assert calls(result) == [("call_a", "get_time", {"timezone": "CET"}),
                                 ("call_b", "run_sql", None)]  # free text: no arguments
        assert result.hallucinated_names == ("run_sql",)
    sdk = Response([ResponseFunctionToolCall("call_a", "get_time", '{"timezone": "CET"}')])
    assert validate_plan(sdk, WEATHER_TOOLS, emit=False).valid


def test_anthropic_tool_use_blocks_are_a_plan():
    message = {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}]}
    for plan in (message, message["content"], message["content"][1],
                 AnthropicMessage([TextBlock("Let me check."),
                                   ToolUseBlock("toolu_1", "get_weather", {"city": "Oslo"})])):
        result = validate_plan(plan, WEATHER_TOOLS, emit=False)
        assert result.valid
        assert calls(result) == [("toolu_1", "get_weather", {"city": "Oslo"})]


def test_a_turns_messages_and_bare_calls_are_a_plan():
    turn = [{"role": "user", "content": "Weather in Paris?"}, CHAT_MESSAGE,
            {"role": "tool", "tool_call_id": "call_1", "content": "no such tool"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_9", "name": "get_time", "input": {}}]}]
    result = validate_plan(turn, WEATHER_TOOLS, emit=False)
    assert [s.step_id for s in result.steps] == ["call_1", "call_2", "toolu_9"]
    bare = [{"name": "get_weather", "arguments": {"city": "Rome"}},
            {"name": "get_time", "args": {"timezone": "UTC"}, "id": "lc_1", "type": "tool_call"}]
    result = validate_plan(bare, WEATHER_TOOLS, emit=False)
    assert result.valid and [s.step_id for s in result.steps] == ["#1", "lc_1"]
    legacy = {"role": "assistant", "content": None,
              "function_call": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    assert calls(validate_plan(legacy, WEATHER_TOOLS, emit=False)) == [
        ("#1", "get_weather", {"city": "Rome"})]


def test_a_message_without_calls_is_a_zero_step_plan():
    result = validate_plan({"role": "assistant", "content": "No tool needed."}, WEATHER_TOOLS)
    assert result.valid and result.steps == ()


def test_unreadable_call_arguments_still_validate_the_name():
    plan = [{"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Par'}}]
    result = validate_plan(plan, WEATHER_TOOLS, emit=False)
    assert result.valid and result.steps[0].arguments is None


@pytest.mark.parametrize("plan, message", [
    ([{"id": "c1", "type": "function", "function": {"arguments": "{}"}}],
     "plan step 1: a tool call without a name"),
    ({"role": "assistant", "tool_calls": [{"type": "tool_use", "name": 5}]},
     "plan step 1: a tool call without a name, got 5"),
    ({"model": "gpt-4o"}, "plan: object has no 'steps' list"),
    ({"type": ["tool_use"], "name": "get_time"}, "plan: object has no 'steps' list"),
])
def test_malformed_calls_raise_with_what_and_where(plan, message):
    with pytest.raises(GuardInputError) as info:
        validate_plan(plan, WEATHER_TOOLS)
    assert message in str(info.value)


# --- abstentions and placeholders ----------------------------------------------------------

@pytest.mark.parametrize("name", [
    "no_function", "out_of_domain", "None", "null", "NoFunction", "no_tool_call",
    "no_relevant_function", "not_applicable", "out_of_scope", "irrelevant", "N/A",
    "none_of_the_above",
])
def test_abstention_sentinels_are_reported_as_abstentions(name):
    result = validate_plan([{"name": name, "arguments": {}}], WEATHER_TOOLS)
    (issue,) = result.errors
    assert issue.error_type is PlanErrorType.ABSTENTION and issue.is_abstention
    assert not issue.is_hallucination and issue.suggested_tools == ()
    assert result.hallucinations == () and result.abstained and not result.valid
    assert "zero steps" in issue.message
    assert classify_unknown_name(name) == ABSTENTION


@pytest.mark.parametrize("name", [
    "func1", "func2", "function_name", "tools.call", "tools_call", "function_call",
    "new_function", "multi_tool_use.parallel", "python", "python3", "assistant", "f1",
])
def test_placeholders_are_hallucinations_without_suggestions(name):
    result = validate_plan([{"name": name, "arguments": {"city": "Paris"}}], WEATHER_TOOLS)
    (issue,) = result.errors
    assert issue.error_type is PlanErrorType.HALLUCINATED_TOOL and issue.placeholder
    assert issue.suggested_tools == () and "placeholder" in issue.message
    assert issue.to_dict()["placeholder"] is True
    assert suggest_tools(name, WEATHER_TOOLS) == []


@pytest.mark.parametrize("name", [
    "get_wether", "no_show_report", "out_of_stock_alert", "notify_user", "none_such_tool",
    "execute_code", "run_tests", "python_lint", "tools.magnetic_field.calculate", "round",
])
def test_real_attempts_at_a_tool_are_neither(name):
    assert classify_unknown_name(name) is None


@pytest.mark.parametrize("name", ["no_function", "python", "func1"])
def test_a_listed_name_is_a_tool_whatever_it_looks_like(name):
    assert validate_plan([{"tool": name}], [name, "get_weather"]).valid


def test_abstention_beside_real_steps_is_not_a_whole_abstention():
    result = validate_plan([{"name": "get_time", "arguments": {}},
                            {"name": "no_function", "arguments": {}}], WEATHER_TOOLS)
    assert [e.error_type for e in result.errors] == [PlanErrorType.ABSTENTION]
    assert not result.abstained


# --- arguments as evidence -----------------------------------------------------------------

# BFCL parallel_multiple_function_2, as the models saw it.
CIRCLE_TOOLS = [
    {"type": "function", "function": {
        "name": "circle.calculate_circumference",
        "description": "Calculate the circumference of a circle based on the diameter.",
        "parameters": {"type": "object", "properties": {"diameter": {"type": "integer"}},
                       "required": ["diameter"]}}},
    {"type": "function", "function": {
        "name": "circle.calculate_area",
        "description": "Calculate the area of a circle based on the radius.",
        "parameters": {"type": "object", "properties": {"radius": {"type": "integer"}},
                       "required": ["radius"]}}},
    {"type": "function", "function": {
        "name": "rectangle.calculate_perimeter",
        "description": "Calculate the perimeter of a rectangle based on the length and "
                       "breadth.",
        "parameters": {"type": "object", "properties": {"length": {}, "breadth": {}},
                       "required": ["length", "breadth"]}}},
]


def test_arguments_tell_synonyms_apart_where_the_name_cannot():
    # By name alone "perimeter" points at the rectangle; the diameter says circle.
    assert suggest_tools("circle.calculate_perimeter", CIRCLE_TOOLS)[0] == \
        "rectangle.calculate_perimeter"
    result = validate_plan([{"name": "circle.calculate_perimeter",
                             "arguments": {"diameter": 10}}], CIRCLE_TOOLS)
    assert result.errors[0].suggested_tools[0] == "circle.calculate_circumference"
    step = {"tool": "circle.calculate_perimeter", "inputs": {"length": 3, "breadth": 4}}
    assert validate_plan([step], CIRCLE_TOOLS).errors[0].suggested_tools[0] == \
        "rectangle.calculate_perimeter"


def test_the_same_name_apart_from_separators_wins_over_arguments():
    result = validate_plan([{"name": "circle_calculate_area", "arguments": {"diameter": 1}}],
                           CIRCLE_TOOLS)
    assert result.errors[0].suggested_tools[0] == "circle.calculate_area"


def test_argument_names_match_across_case_separators_and_plurals():
    tools = [{"name": "get_coordinates_from_city", "input_schema": {
                 "type": "object", "properties": {"city_name": {}}, "required": ["city_name"]}},
             {"name": "get_route", "input_schema": {
                 "type": "object", "properties": {"fromCity": {}, "toCity": {}}}}]
    assert suggest_tools("get_coordinates_for_cities", tools)[0] == "get_coordinates_from_city"
    result = validate_plan([{"name": "plan_trip", "arguments": {"from_city": "A",
                                                                "to_city": "B"}}], tools)
    assert result.errors[0].suggested_tools == ("get_route",)


def test_arguments_help_nothing_when_tools_declare_no_parameters():
    result = validate_plan([{"name": "get_wether", "arguments": {"anything": 1}}],
                           ["get_weather", "get_time"])
    assert result.errors[0].suggested_tools[0] == "get_weather"


# --- telemetry of validate_plan on its own -------------------------------------------------

def test_validate_plan_emits_its_detection_once_per_invented_name(caplog):
    caplog.set_level(logging.WARNING, logger="guardtrace.planning")
    plan = [{"id": "a", "tool": "get_wether"}, {"id": "b", "tool": "get_wether"},
            {"id": "c", "tool": "func1"}, {"id": "d", "tool": "no_function"}]
    with capture() as cap:
        result = validate_plan(plan, WEATHER_TOOLS, request_id="req-42")
    events = cap.events(names.EVENT_HALLUCINATION_DETECTED)
    assert [e.attributes[names.ATTR_HALLUCINATED_AGENT] for e in events] == [
        "get_wether", "func1"]  # the abstention is not a hallucination
    first = events[0].attributes
    assert list(first)[0] == "request_id" and first["request_id"] == "req-42"
    assert first[names.ATTR_MODULE] == names.MODULE_PLANNING
    assert list(first[names.ATTR_SUGGESTED_TOOLS]) == ["get_weather"]
    assert first[names.ATTR_ALLOWED_AGENT_COUNT] == 2
    assert names.ATTR_HALL_RETRY not in first  # not in a retry loop
    assert cap.counter_total(names.METRIC_HALLUCINATIONS, agent="get_wether") == 1
    assert cap.counter_total(names.METRIC_HALLUCINATIONS, agent="func1") == 1
    (warn,) = [r for r in caplog.records if r.name == "guardtrace.planning"]
    assert warn.guardtrace["status"] == "detected"
    assert warn.guardtrace[names.ATTR_HALLUCINATED_AGENTS] == ["get_wether", "func1"]
    assert result.hallucinated_names == ("get_wether", "func1")


def test_a_huge_invented_name_goes_out_cut_to_a_readable_length(caplog):
    # A megabyte "name" is checked whole but shipped cut: redacting and exporting all of
    # it would hold the agent's thread for a second.
    caplog.set_level(logging.WARNING, logger="guardtrace.planning")
    huge = "I'm_" * 250_000
    with capture() as cap:
        result = validate_plan([{"id": "a", "tool": huge}], WEATHER_TOOLS)
    assert result.hallucinated_names == (huge,)
    (event,) = cap.events(names.EVENT_HALLUCINATION_DETECTED)
    shown = event.attributes[names.ATTR_HALLUCINATED_AGENT]
    assert shown.endswith("…") and huge.startswith(shown[:-1]) and len(shown) <= 121
    (warn,) = [r for r in caplog.records if r.name == "guardtrace.planning"]
    assert warn.guardtrace[names.ATTR_HALLUCINATED_AGENTS] == [shown]


def test_validate_plan_detects_nothing_for_valid_plans_abstentions_or_when_told_not_to():
    with capture() as cap:
        validate_plan([{"tool": "get_time"}], WEATHER_TOOLS)
        validate_plan([{"tool": "no_function"}], WEATHER_TOOLS)
        validate_plan([{"tool": "get_wether"}], WEATHER_TOOLS, emit=False)
    # Only the verdicts of the two plans that emit: both pass (nothing was invented).
    assert [(e.name, e.attributes[names.ATTR_EVALUATION_SCORE_LABEL]) for e in cap.events()] \
        == [(names.EVENT_EVALUATION_RESULT, names.EVALUATION_PASS)] * 2
    assert cap.metric_points(names.METRIC_HALLUCINATIONS) == []


def test_validate_plan_uses_the_current_trace_id_when_given_no_request_id():
    with capture() as cap:
        validate_plan([{"tool": "get_wether"}], WEATHER_TOOLS)
        validate_plan([{"tool": "get_wether"}], WEATHER_TOOLS, request_id=None)
    ids = [e.attributes["request_id"] for e in cap.events()]
    assert len(ids) == 4 and all(len(i) == 32 for i in ids)
    # Each validation's detection and evaluation share one span and one id.
    spans = cap.spans()
    assert len(spans) == 2
    for span in spans:
        assert [e.name for e in span.events] == [names.EVENT_HALLUCINATION_DETECTED,
                                                 names.EVENT_EVALUATION_RESULT]
        assert {e.attributes["request_id"] for e in span.events} == {
            span.attributes["request_id"]}


@pytest.mark.expect_hook_errors
def test_failing_telemetry_never_changes_the_result():
    telemetry = ExplodingTelemetry(names.MODULE_PLANNING, "hallucination_detection")
    result = validate_plan([{"tool": "get_wether"}], WEATHER_TOOLS, telemetry=telemetry)
    assert result.hallucinated_names == ("get_wether",)
    # The pass and the could-not-decide verdicts are emitted through it too.
    assert validate_plan([{"tool": "get_weather"}], WEATHER_TOOLS, telemetry=telemetry).valid
    with pytest.raises(GuardInputError, match="missing 'tool'"):
        validate_plan([{"depends_on": []}], WEATHER_TOOLS, telemetry=telemetry)


# --- linear in the input --------------------------------------------------------------------

def _timed(call: Any) -> float:
    return cpu_seconds(call, repeats=5)


@pytest.mark.parametrize("make", [
    lambda n: "A" * n,                      # one camelCase run
    lambda n: "aB" * (n // 2),              # camelCase boundaries everywhere
    lambda n: "no_" * (n // 3),             # a negation repeated
    lambda n: "func_" * (n // 5),           # a placeholder repeated
    lambda n: "get-weather." * (n // 12),   # separators
], ids=["upper", "camel", "negations", "placeholder", "separators"])
def test_adversarial_names_and_arguments_take_time_linear_in_their_size(make):
    def run(n: int) -> float:
        name = make(n)
        plan = [{"name": name, "arguments": {name[:n // 2]: 1, "city": name}}]
        return _timed(lambda: validate_plan(plan, WEATHER_TOOLS, emit=False))

    run(10_000)
    small, large = run(500_000), run(2_000_000)
    assert large < small * 10  # 4x the input: linear is 4x, quadratic would be 16x


@pytest.mark.parametrize("make", [
    lambda n: "aB" * (n // 2),
    lambda n: "no_" * (n // 3),
    lambda n: "get-weather." * (n // 12),
], ids=["camel", "negations", "separators"])
def test_adversarial_catalogues_take_time_linear_in_their_size(make):
    def run(n: int) -> float:
        text = make(n)
        tools = [{"type": "function", "function": {
            "name": text, "description": text,
            "parameters": {"type": "object", "properties": {text: {}}, "required": [text]}}}]
        plan = [{"name": "get_wether", "arguments": {"city": "Paris"}}]
        return _timed(lambda: validate_plan(plan, tools, emit=False))

    run(10_000)
    small, large = run(500_000), run(2_000_000)
    assert large < small * 10  # 4x the input: linear is 4x, quadratic would be 16x


def test_suggest_tools_takes_the_calls_arguments_too():
    assert suggest_tools("circle.calculate_perimeter", CIRCLE_TOOLS,
                         arguments={"diameter": 10})[0] == "circle.calculate_circumference"
