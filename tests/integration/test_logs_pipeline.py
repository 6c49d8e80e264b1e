"""A log record emitted through the OpenTelemetry logs API travels configure()'s global
logger provider, the Kafka log exporter, the real broker and the consumer into
``log_records``, with the API key it carried redacted.

The agent runs in a fresh interpreter: ``configure(set_global=True)`` installs the global
logger provider, which a process may set only once.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest

from guardtrace.schemas import names

from .conftest import Pipeline

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

ROOT = Path(__file__).resolve().parents[2]
REDACTED_KEY = "[REDACTED:api_key]"

# An instrumentation that sends a call's messages as a GenAI log event (as
# opentelemetry-instrumentation-openai-v2 does), from inside the call's span, through the
# global logs API; and a plain log line outside any span.
AGENT_SCRIPT = """
import json, sys
from opentelemetry import _logs, trace
import guardtrace.collectors as collectors

settings, key, event = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
collectors.configure(set_global=True, **settings)
logger = _logs.get_logger("other.instrumentation")
with trace.get_tracer("other.instrumentation").start_as_current_span("chat gpt-4o") as span:
    logger.emit(_logs.LogRecord(
        event_name=event,
        body={"note": f"sent with {key}"},
        attributes={"request_id": "req-logs-1", "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": [{"role": "user",
                                               "content": f"my key is {key}"}]}))
logger.emit(_logs.LogRecord(body="a plain line", severity_text="WARN",
                            severity_number=_logs.SeverityNumber.WARN))
trace_id = f"{span.get_span_context().trace_id:032x}"
collectors.shutdown(10)  # flushes the log records
print(json.dumps({"trace_id": trace_id}))
"""


def _openai_key() -> str:
    return "sk-proj-" + "".join(random.choice(string.ascii_letters + string.digits)
                                for _ in range(40))


def test_a_genai_log_event_arrives_in_log_records_redacted(pipeline: Pipeline) -> None:
    key = _openai_key()
    settings = {**pipeline.collector_settings(), "capture_payloads": False,
                "service_name": "logs-agent"}
    done = subprocess.run(
        [sys.executable, "-c", AGENT_SCRIPT, json.dumps(settings), key,
         names.EVENT_GENAI_OPERATION_DETAILS],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    trace_id = json.loads(done.stdout.splitlines()[-1])["trace_id"]

    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0
    assert stats.rows_written.get("log_records") == 2

    (event,) = pipeline.rows(
        "SELECT event_name, trace_id, request_id, service, scope_name, body, attributes "
        "FROM {db}.log_records FINAL WHERE span_id != ''")
    event_name, event_trace, request_id, service, scope, body, attributes = event
    assert (event_name, event_trace, request_id) == (
        names.EVENT_GENAI_OPERATION_DETAILS, trace_id, "req-logs-1")
    assert (service, scope) == ("logs-agent", "other.instrumentation")
    assert json.loads(body) == {"note": f"sent with {REDACTED_KEY}"}
    assert json.loads(attributes["gen_ai.input.messages"]) == [
        {"role": "user", "content": f"my key is {REDACTED_KEY}"}]

    (line,) = pipeline.rows("SELECT body, severity_text, severity_number, trace_id "
                            "FROM {db}.log_records FINAL WHERE span_id = ''")
    assert line == ("a plain line", "WARN", 13, "")

    # The key is in no column of any row; the marker is (found the same way).
    rows_with = ("SELECT count() FROM {db}.log_records "
                 "WHERE position(toString(tuple(*)), {text:String}) > 0")
    assert pipeline.scalar(rows_with, text=key) == 0
    assert pipeline.scalar(rows_with, text=REDACTED_KEY) == 1
