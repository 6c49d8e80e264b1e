"""Plan validation on real function-calling output: BFCL outputs of the dev models.

The data is third-party and stays in ``shared/realdata`` (``GUARDTRACE_REALDATA``, by
default ``<repo>/../shared/realdata``); these tests read it from there and fail, naming
the path, when it is missing. Each pinned case is a real output, named by its BFCL id
(``<model>|<item>``), and is validated exactly as the benchmark does: its decoded calls
as the plan, its tools as the allowed list.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest

from guardtrace.collectors.plans.validation import PlanErrorType, PlanIssue, validate_plan
from guardtrace.collectors.tool_catalog import read_tool_specs
from tests.support.realdata import data_file

_POSITIONAL = "_positional"  # the converter's key for positional (unnamed) arguments


def _bfcl_lines() -> Iterator[dict[str, Any]]:
    with gzip.open(data_file("bfcl.jsonl.gz"), "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


@dataclass
class _Survey:
    """What one streaming pass over the 54,253 outputs gathers (the file is not kept in
    memory: parsed whole it takes over half a gigabyte)."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # the pinned ones
    python_only: list[dict[str, Any]] = field(default_factory=list)
    valid_outputs: int = 0
    flagged_valid: list[str] = field(default_factory=list)
    flagged_ok_calls: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    misread_tool_lists: list[str] = field(default_factory=list)


@cache
def _survey() -> _Survey:
    survey = _Survey()
    for rec in _bfcl_lines():
        if rec["id"] in PINNED:
            survey.records[rec["id"]] = rec
        if rec["category"] == "relevance" and [c["name"] for c in rec["calls"]] == ["python"]:
            survey.python_only.append(rec)
        names = [s.name for s in read_tool_specs(rec["tools"])]
        if names != list(dict.fromkeys(t["function"]["name"] for t in rec["tools"])):
            survey.misread_tool_lists.append(rec["id"])
        result = validate_plan(plan_of(rec), rec["tools"], emit=False)
        kinds = [t["kind"] for t in rec["truth"]["calls"]]
        if all(k == "ok" for k in kinds):
            survey.valid_outputs += 1
            if not result.valid:
                survey.flagged_valid.append(rec["id"])
            continue
        by_step = {e.step: e for e in result.errors}
        for index, kind in enumerate(kinds):
            issue = by_step.get(f"#{index + 1}")
            if kind == "ok":
                if issue is not None:
                    survey.flagged_ok_calls.append(f"{rec['id']} call {index + 1}")
            elif issue is None or (kind == "sentinel") != issue.is_abstention:
                survey.missed.append(f"{rec['id']} call {index + 1} ({kind}): {issue}")
    return survey


def record(output_id: str) -> dict[str, Any]:
    found = _survey().records.get(output_id)
    assert found is not None, f"{output_id} is not in bfcl.jsonl.gz"
    return found


def plan_of(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": call["name"],
             "arguments": {k: v for k, v in call["arguments"].items() if k != _POSITIONAL}
             if isinstance(call["arguments"], dict) else None}
            for call in rec["calls"]]


def issue_for(output_id: str, name: str) -> PlanIssue:
    rec = record(output_id)
    result = validate_plan(plan_of(rec), rec["tools"], emit=False)
    issues = [e for e in result.errors if e.tool == name]
    assert issues, f"{output_id}: {name} was not flagged"
    return issues[0]


# --- suggestions that must be right (the synonyms a closest name gets wrong) -------------

SUGGESTION_CASES = [
    # Pattern 7 of the README: by name "perimeter" points at the rectangle; the call's
    # diameter argument says circle.
    ("Nexusflow-Raven-v2|parallel_multiple_function_2", "circle.calculate_perimeter",
     "circle.calculate_circumference"),
    ("Salesforce_xLAM-7b-fc-r|parallel_multiple_function_2", "circle.calculate_perimeter",
     "circle.calculate_circumference"),
    # The verb of another tool, the object of this one, and its a, b, c arguments.
    ("meta-llama_Meta-Llama-3-8B-Instruct|parallel_multiple_function_79",
     "perform.quadratic_equation", "solve.quadratic_equation"),
    # Namespace drift: a "tools." prefix the chat template leaked.
    ("meta-llama_Meta-Llama-3-8B-Instruct|parallel_multiple_function_10",
     "tools.train_ticket.buy", "train_ticket.buy"),
    ("meta-llama_Meta-Llama-3-8B-Instruct|parallel_multiple_function_10",
     "tools.musical_ticket.buy", "musical_ticket.buy"),
    ("mistral-large-2407|multiple_function_83", "tools.player_stats.get_all_time_goals",
     "player_stats.get_all_time_goals"),
    ("meta-llama_Meta-Llama-3-8B-Instruct|multiple_function_41",
     "tools.magnetic_field.calculate", "magnetic_field.calculate"),
    # Misspellings.
    ("mistral-small-2402-FC-Any|parallel_multiple_function_148", "celebrate_net_worth_get",
     "celebrity_net_worth_get"),
    ("meta-llama_Meta-Llama-3-8B-Instruct|parallel_multiple_function_160", "lawsues_search",
     "lawsuits_search"),
    # Mangled: a shown name apart from separators.
    ("gpt-4o-2024-05-13|parallel_multiple_function_71", "sculpture_availability_check",
     "sculpture_availability.check"),
    ("gpt-4o-2024-05-13|parallel_multiple_function_71", "sculptor_info_get",
     "sculptor_info.get"),
    ("meta-llama_Meta-Llama-3-8B-Instruct|parallel_multiple_function_67", "math_roots.cubic",
     "math.roots.cubic"),
    # One tool shown: a plural form of it, and a tool named after its own parameter.
    ("meetkai_functionary-small-v3.2-FC|executable_parallel_function_18",
     "get_coordinates_for_multiple_cities", "get_coordinates_from_city"),
    ("google_gemma-7b-it|parallel_function_195", "movie_details.extra_info",
     "movie_details.brief"),
]


@pytest.mark.parametrize("output_id, name, right", SUGGESTION_CASES)
def test_invented_names_get_the_intended_tool_first(output_id, name, right):
    issue = issue_for(output_id, name)
    assert issue.error_type is PlanErrorType.HALLUCINATED_TOOL
    assert issue.suggested_tools[0] == right


# --- abstentions and placeholders ---------------------------------------------------------

SENTINEL_CASES = [
    ("Nexusflow-Raven-v2|multiple_function_135", "out_of_domain"),
    ("ibm-granite_granite-20b-functioncalling|multiple_function_28", "no_function"),
    ("ibm-granite_granite-20b-functioncalling|executable_multiple_function_7", "no_function"),
    ("gpt-4o-2024-05-13|relevance_120", "None"),
]


@pytest.mark.parametrize("output_id, name", SENTINEL_CASES)
def test_sentinels_are_abstentions_not_invented_tools(output_id, name):
    rec = record(output_id)
    result = validate_plan(plan_of(rec), rec["tools"], emit=False)
    assert [e.error_type for e in result.errors] == [PlanErrorType.ABSTENTION]
    assert result.hallucinations == () and result.abstained
    assert result.errors[0].tool == name and result.errors[0].suggested_tools == ()


PLACEHOLDER_CASES = [
    ("command-r-plus|parallel_multiple_function_74", ["func1", "func2", "func3"]),
    ("meta-llama_Meta-Llama-3-8B-Instruct|parallel_multiple_function_135", ["tools.call"]),
    ("mistral-large-2407|multiple_function_116", ["tools_call"]),
    ("mistral-large-2407|multiple_function_18", ["func1"]),
]


@pytest.mark.parametrize("output_id, names", PLACEHOLDER_CASES)
def test_placeholders_are_caught_without_a_suggestion(output_id, names):
    rec = record(output_id)
    result = validate_plan(plan_of(rec), rec["tools"], emit=False)
    assert result.errors and all(e.placeholder and e.suggested_tools == ()
                                 for e in result.errors)
    assert sorted(set(result.hallucinated_names)) == names


def test_python_leaked_by_the_api_is_a_placeholder():
    python = _survey().python_only
    assert len(python) >= 10
    for rec in python:
        (issue,) = validate_plan(plan_of(rec), rec["tools"], emit=False).errors
        assert issue.placeholder and issue.suggested_tools == ()


# --- suggestions that must not be made ------------------------------------------------------

NO_SUGGESTION_CASES = [
    # No tool shown fits (relevance items); the closest name is a different tool.
    ("command-r-plus|relevance_234", "convert_length", "convert_currency"),
    ("claude-3-haiku-20240307|relevance_21", "calculate_magnetic_field",
     "calculate_wave_amplitude"),
    ("claude-3-haiku-20240307|relevance_28", "calculate_sides_of_polygon",
     "calculate_boiling_point"),
    ("NousResearch_Hermes-2-Theta-Llama-3-8B|relevance_84", "get_sports_data",
     "get_stock_data"),
]


@pytest.mark.parametrize("output_id, name, wrong", NO_SUGGESTION_CASES)
def test_no_suggestion_of_an_unrelated_tool(output_id, name, wrong):
    issue = issue_for(output_id, name)
    assert wrong not in issue.suggested_tools


VALID_CASES = [
    "NousResearch_Hermes-2-Theta-Llama-3-8B|parallel_multiple_function_2",
    "claude-3-5-sonnet-20240620|parallel_multiple_function_2",
    "gpt-4o-2024-05-13-FC|parallel_multiple_function_71",
    "command-r-plus-FC|parallel_multiple_function_74",
]
PINNED = frozenset([c[0] for c in (*SUGGESTION_CASES, *SENTINEL_CASES, *PLACEHOLDER_CASES,
                                   *NO_SUGGESTION_CASES)] + VALID_CASES)


def test_valid_plans_of_the_same_items_stay_quiet():
    for output_id in VALID_CASES:
        rec = record(output_id)
        assert all(t["kind"] == "ok" for t in rec["truth"]["calls"]), output_id
        assert validate_plan(plan_of(rec), rec["tools"], emit=False).valid, output_id


# --- the whole dev set ----------------------------------------------------------------------

def test_every_valid_plan_passes_and_every_bad_name_is_caught():
    """0 false alarms on the outputs whose calls are all in the list shown; every
    invented, mangled and sentinel name flagged (sentinels as abstentions)."""
    survey = _survey()
    assert survey.valid_outputs > 50_000
    assert survey.flagged_valid == []
    assert survey.flagged_ok_calls == []
    assert survey.missed == []


def test_dev_conversation_tool_lists_read_whole():
    """Every tool list of the dev conversations reads, one spec per definition, with the
    declared kinds the data carries."""
    kinds = {"read": 0, "write": 0}
    with data_file("conversations.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            conv = json.loads(line)
            for key in ("tools", "user_tools"):
                if key not in conv:
                    continue
                specs = read_tool_specs(conv[key])
                assert [s.name for s in specs] == [t["function"]["name"] for t in conv[key]]
                for spec, tool in zip(specs, conv[key], strict=True):
                    assert spec.declared_kind == tool.get("x-guardtrace-kind")
                    assert spec.parameters == tool["function"].get("parameters")
                    if spec.declared_kind:
                        kinds[spec.declared_kind] += 1
    assert kinds["read"] > 0 and kinds["write"] > 0


def test_every_bfcl_tool_list_reads_whole():
    assert _survey().misread_tool_lists == []
