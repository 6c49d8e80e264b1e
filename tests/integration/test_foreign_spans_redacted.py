"""Another instrumentation's span and counter, through configure()'s global providers and
Kafka, land in ClickHouse with the API key they carried redacted.

The agent runs in a fresh interpreter: ``configure(set_global=True)`` installs the OTel
global providers, which a process may set only once, and the test process's own
instrumentation must not depend on which test set them first.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Pipeline

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

ROOT = Path(__file__).resolve().parents[2]
REDACTED_KEY = "[REDACTED:api_key]"

# An agent whose LLM client is instrumented by someone else: the client's tracer and
# meter come from the global API, the error it raises quotes the key it was given.
AGENT_SCRIPT = """
import json, sys
from opentelemetry import metrics, trace
import guardtrace.collectors as collectors

settings, key = json.loads(sys.argv[1]), sys.argv[2]
collectors.configure(set_global=True, **settings)
tracer = trace.get_tracer("other.instrumentation")
try:
    with tracer.start_as_current_span("chat gpt-4o") as span:
        span.set_attribute("gen_ai.prompt", f"Summarise this, my key is {key}")
        span.set_attribute("gen_ai.messages", [f"key={key}", "hello"])
        raise PermissionError(f"Incorrect API key provided: {key}")
except PermissionError:
    pass
metrics.get_meter("other.instrumentation").create_counter("other.requests").add(
    1, {"prompt": f"key {key}"})
trace_id = f"{span.get_span_context().trace_id:032x}"
collectors.shutdown(10)  # flushes the span and the final metric export
print(json.dumps({"trace_id": trace_id}))
"""


def _openai_key() -> str:
    return "sk-proj-" + "".join(random.choice(string.ascii_letters + string.digits)
                                for _ in range(40))


def test_a_foreign_span_and_counter_arrive_in_the_store_redacted(pipeline: Pipeline) -> None:
    key = _openai_key()
    settings = {**pipeline.collector_settings(), "capture_payloads": False}
    done = subprocess.run([sys.executable, "-c", AGENT_SCRIPT, json.dumps(settings), key],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    trace_id = json.loads(done.stdout.splitlines()[-1])["trace_id"]

    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == 0

    (span,) = pipeline.rows(
        "SELECT scope_name, status_code, status_message, attributes FROM {db}.spans FINAL "
        "WHERE trace_id = {t:String}", t=trace_id)
    scope, status, status_message, attributes = span
    assert (scope, status) == ("other.instrumentation", "error")
    assert status_message == f"PermissionError: Incorrect API key provided: {REDACTED_KEY}"
    assert attributes["gen_ai.prompt"] == f"Summarise this, my key is {REDACTED_KEY}"
    assert json.loads(attributes["gen_ai.messages"]) == [f"key={REDACTED_KEY}", "hello"]

    (event,) = pipeline.rows(
        "SELECT name, attributes FROM {db}.span_events FINAL WHERE trace_id = {t:String}",
        t=trace_id)
    assert event[0] == "exception"
    assert event[1]["exception.message"] == f"Incorrect API key provided: {REDACTED_KEY}"
    assert event[1]["exception.stacktrace"].rstrip().endswith(
        f"PermissionError: Incorrect API key provided: {REDACTED_KEY}")

    # The flush and the shutdown each export the cumulative point: one label set.
    (point,) = pipeline.rows("SELECT DISTINCT attributes FROM {db}.metric_points FINAL "
                             "WHERE metric_name = 'other.requests'")
    assert point[0] == {"prompt": f"key {REDACTED_KEY}"}

    # Nowhere in the store: in no column of any row (the marker is found the same way).
    for table in ("spans", "span_events", "metric_points"):
        rows_with = (f"SELECT count() FROM {{db}}.{table} "
                     "WHERE position(toString(tuple(*)), {text:String}) > 0")
        assert pipeline.scalar(rows_with, text=key) == 0, table
        assert pipeline.scalar(rows_with, text=REDACTED_KEY) > 0, table
