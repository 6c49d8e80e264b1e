"""Plan validation (family 1): every rule fires and stays quiet, every allowed form,
suggestions, bad input, and the offline scanner entry point."""

from __future__ import annotations

import json
import time

import pytest

from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.plan_validation import (
    AllowedTools,
    PlanErrorType,
    scan_plan_input,
    suggest_tools,
    validate_plan,
)

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

def test_fifty_steps_against_a_hundred_tools_is_fast():
    # A sanity bound with wide headroom (measured ~0.4 ms); benchmarks own the target.
    allowed = [{"type": "function", "function": {"name": f"tool_{i}",
                                                 "description": f"does thing {i}"}}
               for i in range(100)]
    plan = [step(f"s{i}", f"tool_{2 * i}", *([f"s{i - 1}"] if i else [])) for i in range(50)]
    validate_plan(plan, allowed)
    runs = 50
    start = time.perf_counter()
    for _ in range(runs):
        assert validate_plan(plan, allowed).valid
    assert (time.perf_counter() - start) / runs < 0.005


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
