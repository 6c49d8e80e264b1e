"""`guardtrace trace | payload | requests` over telemetry that went through the real pipeline.

The commands run in-process (``cli.main``): the session's chDB directory is held by this
process, and chDB allows one process per directory; the subprocess CLI tests live in
test_cli_pipeline.py with stores of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guardtrace import cli, collectors
from guardtrace.collectors.emit.internal import internal_totals
from guardtrace.schemas import names
from guardtrace.transport.broker import EmbeddedBroker
from tests.support.services import new_pipeline

from .conftest import Pipeline

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

ALLOWED = "Agent: weather-tool-v2 (ID: weather-tool-v2)\n  - Capability: get_current_weather\n"
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


@pytest.fixture(scope="module")
def seeded(broker: EmbeddedBroker, ch_client: Any, chdb_dir: Path) -> dict[str, Any]:
    """One recovered plan, one unrecoverable plan, one fabricated reply with a secret.

    Seeded once for the module (it was ~5 s per test): the tests that use it only read.
    """
    pipeline = new_pipeline(broker, ch_client)
    hook_errors = internal_totals(names.METRIC_HOOK_ERRORS)
    collectors.shutdown()
    collectors.configure(set_global=False, **pipeline.collector_settings())
    plans = iter([[{"id": "s1", "tool": "time-tool-v1"}],
                  [{"id": "s1", "tool": "weather-tool-v2"}]])
    collectors.generate_validated_plan("time in CST?", lambda attempt: next(plans), ALLOWED,
                                       request_id="cli-recovered-1")
    with pytest.raises(collectors.PlanHallucinationError):
        collectors.generate_validated_plan(
            "book a flight", lambda attempt: [{"id": "s1", "tool": "flight-booker"}],
            ALLOWED, request_id="cli-unrecoverable-1")
    collectors.FabricationGuard().check(f"I'm deploying the fix now with key {SECRET}.", [],
                                        channel="c1", request_id="cli-fabricated-1",
                                        agent="stratam")
    collectors.shutdown()
    # Outside any test, so the per-test check in tests/conftest.py would not see these.
    assert internal_totals(names.METRIC_HOOK_ERRORS) == hook_errors
    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0
    return {"pipeline": pipeline,
            "store": ["--clickhouse-url", f"chdb://{chdb_dir}", "--database",
                      pipeline.database]}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_trace_prints_spans_and_events_in_time_order(
        seeded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    pipeline: Pipeline = seeded["pipeline"]
    code, out, _ = run(capsys, "trace", "cli-recovered-1", "--json", *seeded["store"])
    assert code == 0
    trace = json.loads(out)
    timeline = trace["timeline"]
    assert [item["time"] for item in timeline] == sorted(item["time"] for item in timeline)
    events = [item["name"] for item in timeline if item["type"] == "event"]
    stored = [row[0] for row in pipeline.rows(
        "SELECT name FROM {db}.span_events FINAL WHERE request_id = {r:String} "
        "ORDER BY timestamp", r="cli-recovered-1")]
    # The rejected plan's detection and fail, the retried plan's pass, then the retry.
    assert events == stored == [names.EVENT_HALLUCINATION_DETECTED,
                                names.EVENT_EVALUATION_RESULT,
                                names.EVENT_EVALUATION_RESULT,
                                names.EVENT_HALLUCINATION_REGENERATION_COMPLETE,
                                names.EVENT_HALLUCINATION_RECOVERED]
    spans = [item for item in timeline if item["type"] == "span"]
    assert spans and all(item["span_id"] in {s["span_id"] for s in spans}
                         for item in timeline if item["type"] == "event")
    assert trace["agents"] == ["time-tool-v1"]
    assert trace["payload_kinds"] == [names.PAYLOAD_KIND_HALLUCINATION]

    code, out, _ = run(capsys, "trace", "cli-recovered-1", *seeded["store"])
    assert code == 0
    assert out.index(names.EVENT_HALLUCINATION_DETECTED) < \
        out.index(names.EVENT_HALLUCINATION_RECOVERED)
    assert "hallucinated_agent=time-tool-v1" in out


def test_payload_is_reassembled_with_its_redaction_marks(
        seeded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "payload", "cli-fabricated-1", "--json", *seeded["store"])
    assert code == 0
    [payload] = json.loads(out)
    assert payload["kind"] == names.PAYLOAD_KIND_FABRICATION
    assert payload["complete"] and not payload["truncated"]
    assert SECRET not in payload["body"] and "[REDACTED:" in payload["body"]
    assert payload["redactions"] >= 1
    assert "deploying the fix" in payload["body"]

    code, out, _ = run(capsys, "payload", "cli-fabricated-1", *seeded["store"])
    assert code == 0 and "secret(s) redacted" in out and SECRET not in out

    code, _, err = run(capsys, "payload", "cli-fabricated-1", "--kind",
                       names.PAYLOAD_KIND_HALLUCINATION, *seeded["store"])
    assert code == 1
    assert f"kinds stored for it: {names.PAYLOAD_KIND_FABRICATION}" in err


def test_requests_lists_by_outcome(seeded: dict[str, Any],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    def listed(outcome: str) -> set[str]:
        code, out, _ = run(capsys, "requests", "--outcome", outcome, "--json",
                           *seeded["store"])
        assert code == 0
        return {row["request_id"] for row in json.loads(out)}

    assert listed("recovered") == {"cli-recovered-1"}
    assert listed("unrecoverable") == {"cli-unrecoverable-1"}
    assert listed("fabrication") == {"cli-fabricated-1"}
    assert listed("problems") == {"cli-recovered-1", "cli-unrecoverable-1", "cli-fabricated-1"}
    code, out, _ = run(capsys, "requests", "--outcome", "unrecoverable", *seeded["store"])
    assert code == 0 and "cli-unrecoverable-1" in out and "hallucination_unrecoverable" in out


def test_unknown_ids_exit_1_and_malicious_ones_2_with_a_clear_message(
        seeded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    pipeline: Pipeline = seeded["pipeline"]
    for command in ("trace", "payload"):
        code, out, err = run(capsys, command, "no-such-request", *seeded["store"])
        assert (code, out) == (1, "")
        assert "no request 'no-such-request'" in err and "guardtrace requests" in err

    before = pipeline.scalar("SELECT count() FROM {db}.span_events")
    for malicious in ("x' OR '1'='1", "a; DROP TABLE span_events", "id\nwith newline", ""):
        # Not an id at all: a usage error (2), refused before the store is read.
        with pytest.raises(SystemExit) as exited:
            cli.main(["trace", malicious, *seeded["store"]])
        out, err = capsys.readouterr()
        assert (exited.value.code, out) == (2, "")
        assert "request id" in err
    assert pipeline.scalar("SELECT count() FROM {db}.span_events") == before


def test_queries_on_an_unmigrated_database_say_so(
        chdb_dir: Path, capsys: pytest.CaptureFixture[str], ch_client: Any) -> None:
    code, _, err = run(capsys, "requests", "--clickhouse-url", f"chdb://{chdb_dir}",
                       "--database", "gt_never_migrated")
    assert code == 1 and "not migrated" in err and "guardtrace migrate" in err


# What a model may write, and an agent pass on: terminal escapes (clear the screen, set
# the window title), a carriage return that hides the start of a line, a bidi override.
HOSTILE_REPLY = "I'm deploying the fix now.\x1b[2J\x1b]0;owned\x07\rall good \u202eok"
HOSTILE_AGENT = "\x1b[31mred-agent\x1b[0m"


@pytest.fixture
def hostile(pipeline: Pipeline, chdb_dir: Path) -> list[str]:
    """A fabricated reply, and the reply as a text payload, with terminal control
    sequences in its text and its agent's name."""
    collectors.configure(set_global=False, **pipeline.collector_settings())
    collectors.FabricationGuard().check(HOSTILE_REPLY, [], request_id="cli-hostile-1",
                                        agent=HOSTILE_AGENT)
    # A body recorded as text is stored as it is (a JSON body has its escapes already).
    assert collectors.record_payload("cli-hostile-1", "model_reply", HOSTILE_REPLY)
    collectors.shutdown()
    assert pipeline.consume_until_idle().dead_letters == 0
    return ["--clickhouse-url", f"chdb://{chdb_dir}", "--database", pipeline.database]


def test_stored_control_characters_are_printed_as_escapes_and_json_stays_exact(
        hostile: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("trace", "payload", "requests"):
        code, out, _ = run(capsys, command, *(["cli-hostile-1"] if command != "requests"
                                              else ["--outcome", "all"]), *hostile)
        assert code == 0
        assert not {"\x1b", "\x07", "\r", "\u202e"} & set(out), (command, out)
    code, out, _ = run(capsys, "trace", "cli-hostile-1", *hostile)
    assert "agent=\\x1b[31mred-agent\\x1b[0m" in out
    code, out, _ = run(capsys, "payload", "cli-hostile-1", *hostile)
    assert "\\x1b[2J\\x1b]0;owned\\x07\\rall good \\u202eok" in out

    code, out, _ = run(capsys, "payload", "cli-hostile-1", "--json", *hostile)
    assert HOSTILE_REPLY in [payload["body"] for payload in json.loads(out)]
    code, out, _ = run(capsys, "trace", "cli-hostile-1", "--json", *hostile)
    assert json.loads(out)["agents"] == [HOSTILE_AGENT]
