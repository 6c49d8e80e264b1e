"""The three guard families, through configure() and Kafka, as rows in ClickHouse."""

from __future__ import annotations

import json

import pytest

from guardtrace import collectors
from guardtrace.schemas import names

from .conftest import Pipeline

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

ALLOWED = "Agent: weather-tool-v2 (ID: weather-tool-v2)\n  - Capability: get_current_weather\n"


def test_every_guard_family_lands_as_events_payloads_and_counters(pipeline: Pipeline) -> None:
    collectors.configure(set_global=False, **pipeline.collector_settings())

    # Family 1: the planner invents time-tool-v1 once, then returns a valid plan.
    plans = iter([
        [{"id": "s1", "tool": "time-tool-v1", "inputs": {"tz": "CST"}}],
        [{"id": "s1", "tool": "weather-tool-v2", "inputs": {"city": "Chicago"}}],
    ])
    result = collectors.generate_validated_plan(
        "what is the time in CST", lambda attempt: next(plans), ALLOWED,
        request_id="plan-req-1")
    assert result.retries_used == 1

    # Family 2: a claimed deployment with no tool fired.
    verdict = collectors.FabricationGuard().check(
        "I'm deploying the fix now.", [], channel="c1", request_id="reply-req-1",
        agent="stratam")
    assert verdict.flagged

    # Family 3: the October question; the model tries to finish, is nudged, calls reason.
    loop = collectors.VerificationLoop("Which month is spelled with an X?",
                                       request_id="verify-req-1", agent="aither")
    assert not loop.on_model_turn(wants_to_finish=True).allow_finish
    loop.on_tool_call("reason")
    assert loop.on_model_turn(wants_to_finish=True).allow_finish
    loop.close()

    collectors.shutdown()  # flushes spans, the final metric export and payloads
    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0

    events = pipeline.rows(
        "SELECT request_id, name, module, agent, tier FROM {db}.span_events FINAL "
        "WHERE name != {e:String} ORDER BY request_id, timestamp",
        e=names.EVENT_EVALUATION_RESULT)
    by_request: dict[str, list[tuple]] = {}
    for request_id, *rest in events:
        by_request.setdefault(request_id, []).append(tuple(rest))
    assert [e[0] for e in by_request["plan-req-1"]] == [
        names.EVENT_HALLUCINATION_DETECTED,
        names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
        names.EVENT_HALLUCINATION_RECOVERED]
    assert by_request["plan-req-1"][0][1:3] == (names.MODULE_PLANNING, "time-tool-v1")
    assert by_request["reply-req-1"] == [
        (names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES, "stratam", names.TIER_ACTION)]
    assert [e[0] for e in by_request["verify-req-1"]] == [
        names.EVENT_VERIFICATION_REQUIRED, names.EVENT_VERIFICATION_NUDGED,
        names.EVENT_VERIFICATION_COMPLETED]

    # Each verdict is also a GenAI evaluation result row: the rejected plan's fail and
    # the retried plan's pass, the claim's fail, the verified answer's pass.
    evaluations = pipeline.rows(
        "SELECT request_id, module, attributes[{n:String}], attributes[{l:String}], "
        "attributes[{f:String}] FROM {db}.span_events FINAL WHERE name = {e:String} "
        "ORDER BY request_id, timestamp",
        e=names.EVENT_EVALUATION_RESULT, n=names.ATTR_EVALUATION_NAME,
        l=names.ATTR_EVALUATION_SCORE_LABEL, f=names.ATTR_FOUND_IN)
    agent = names.FOUND_IN_AGENT
    assert [tuple(row) for row in evaluations] == [
        ("plan-req-1", names.MODULE_PLANNING, names.EVALUATION_PLAN_TOOLS,
         names.EVALUATION_FAIL, agent),
        ("plan-req-1", names.MODULE_PLANNING, names.EVALUATION_PLAN_TOOLS,
         names.EVALUATION_PASS, agent),
        ("reply-req-1", names.MODULE_REPLIES, names.EVALUATION_FABRICATION,
         names.EVALUATION_FAIL, agent),
        ("verify-req-1", names.MODULE_VERIFICATION, names.EVALUATION_VERIFICATION,
         names.EVALUATION_PASS, agent)]

    kinds = dict(pipeline.rows(
        "SELECT request_id, groupArray(toString(kind)) FROM {db}.payloads FINAL "
        "GROUP BY request_id"))
    assert names.PAYLOAD_KIND_HALLUCINATION in kinds["plan-req-1"]
    assert kinds["reply-req-1"] == [names.PAYLOAD_KIND_FABRICATION]
    assert kinds["verify-req-1"] == [names.PAYLOAD_KIND_VERIFICATION]
    body = pipeline.rows("SELECT body FROM {db}.payloads FINAL WHERE request_id = {r:String}",
                         r="plan-req-1")[0][0]
    assert "time-tool-v1" in body

    counters = dict(pipeline.rows(
        "SELECT metric_name, max(value) FROM {db}.metric_points FINAL "
        "WHERE metric_name IN {m:Array(String)} GROUP BY metric_name",
        m=[names.METRIC_HALLUCINATIONS, names.METRIC_HALLUCINATION_RECOVERED,
           names.METRIC_FABRICATIONS, names.METRIC_VERIFICATION_REQUIRED,
           names.METRIC_VERIFICATION_COMPLETED]))
    assert counters == {names.METRIC_HALLUCINATIONS: 1.0,
                        names.METRIC_HALLUCINATION_RECOVERED: 1.0,
                        names.METRIC_FABRICATIONS: 1.0,
                        names.METRIC_VERIFICATION_REQUIRED: 1.0,
                        names.METRIC_VERIFICATION_COMPLETED: 1.0}
    lookup = pipeline.rows("SELECT modules FROM {db}.requests FINAL WHERE request_id = {r:String}",
                           r="reply-req-1")
    assert lookup == [([names.MODULE_REPLIES],)]


def test_secrets_in_payloads_are_redacted_before_they_reach_kafka(pipeline: Pipeline) -> None:
    collectors.configure(set_global=False, **pipeline.collector_settings())
    collectors.record_payload("secret-req", "plan_generation",
                              {"prompt": "use key sk-ant-abcdefghijklmnopqrstuvwx and mail "
                                         "ops@example.com", "url": "https://bob:hunter2@db/x"})
    collectors.shutdown()
    pipeline.consume_until_idle()
    body, redactions = pipeline.rows(
        "SELECT body, redactions FROM {db}.payloads FINAL WHERE request_id = 'secret-req'")[0]
    assert "sk-ant-" not in body and "ops@example.com" not in body and "hunter2" not in body
    assert redactions == 3
    assert json.loads(body)["url"] == "https://bob:[REDACTED:url_password]@db/x"
