"""The dashboard treats what it reads as hostile: the URL and the store are shown, never
rendered, and a page that fails shows no traceback.

Streamlit renders Markdown in alerts, captions, headings, metrics and labels. AppTest
gives each element's Markdown source; a crafted value must not be in any of it, except
as the page's one escape (a code span, :func:`guardtrace.dashboard.safe_render.literal`).
The crafted values reach the store the way a user's would: through the hooks' emit path,
Kafka and the consumer, into the embedded ClickHouse.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from guardtrace import collectors
from guardtrace.collectors import GuardTelemetry
from guardtrace.dashboard.safe_render import literal
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.store import queries
from guardtrace.transport.broker import EmbeddedBroker
from tests.support.services import Pipeline, new_pipeline

pytestmark = [pytest.mark.timeout(300)]

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
REQUEST_ID = "hostile-1"
# Each a Markdown link or image to a host of the attacker's, as a model may invent them.
CRAFTED_URL_ID = "[Sign in](https://evil.example/login)"
CRAFTED_AGENT = "[Verify your account](https://evil.example/agent)"
CRAFTED_MODULE = "![pixel](https://evil.example/module.png)"
CRAFTED_EVENT = "llm.[event](https://evil.example/event)"
CRAFTED_KIND = "[kind](https://evil.example/kind)"
CRAFTED = (CRAFTED_URL_ID, CRAFTED_AGENT, CRAFTED_MODULE, CRAFTED_EVENT, CRAFTED_KIND)


@pytest.fixture(scope="module")
def seeded(broker: EmbeddedBroker, ch_client: Any, chdb_dir: Path) -> Iterator[Pipeline]:
    pipeline = new_pipeline(broker, ch_client)
    collectors.shutdown()
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    try:
        # A guard of a module named by the attacker, detecting an agent it invented.
        guard = GuardTelemetry(CRAFTED_MODULE, "hallucination_detection")
        tracer = telemetry.tracer_provider.get_tracer("test")
        with tracer.start_as_current_span("plan", attributes={names.ATTR_REQUEST_ID: REQUEST_ID}):
            guard.event(names.EVENT_HALLUCINATION_DETECTED, REQUEST_ID,
                        {names.ATTR_AGENT: CRAFTED_AGENT})
            guard.event(CRAFTED_EVENT, REQUEST_ID, {names.ATTR_AGENT: CRAFTED_AGENT})
            guard.payload(REQUEST_ID, CRAFTED_KIND, {"prompt": "plan the trip"})
        assert telemetry.force_flush(30)
    finally:
        collectors.shutdown()
    assert pipeline.consume_until_idle().dead_letters == 0
    yield pipeline


@pytest.fixture
def app(seeded: Pipeline, chdb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    config = seeded.consumer_config
    for var, value in {
        env.CLICKHOUSE_URL: f"chdb://{chdb_dir}", env.CLICKHOUSE_DATABASE: seeded.database,
        env.KAFKA_BOOTSTRAP: seeded.bootstrap, env.CONSUMER_GROUP: config.group_id,
        env.SPANS_TOPIC: config.spans_topic, env.METRICS_TOPIC: config.metrics_topic,
        env.PAYLOADS_TOPIC: config.payloads_topic,
        env.DEAD_LETTER_TOPIC: config.dead_letter_topic,
    }.items():
        monkeypatch.setenv(var.name, value)
    monkeypatch.delenv(env.DASHBOARD_CLICKHOUSE_URL.name, raising=False)
    return AppTest.from_file(str(APP), default_timeout=60)


def markdown_sources(at: AppTest) -> list[str]:
    """The Markdown Streamlit renders on the page: element bodies, headings and labels."""
    bodies = [e.value for kind in (at.markdown, at.caption, at.error, at.warning, at.info,
                                   at.success, at.title, at.header, at.subheader)
              for e in kind]
    labels = [e.label for kind in (at.expander, at.selectbox, at.text_input, at.button,
                                   at.toggle, at.get("download_button"))
              for e in kind]
    metrics = [text for m in at.metric for text in (m.label, m.value)]
    return bodies + labels + metrics


def plain_text(at: AppTest) -> str:
    """What the page shows without rendering it (st.text and st.code)."""
    return "\n".join([t.value for t in at.text] + [c.value for c in at.code])


def assert_never_rendered(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    for source in markdown_sources(at):
        # The one escape allowed: a code span, in which Markdown is not parsed.
        for value in CRAFTED:
            source = source.replace(literal(value), "")
        assert "evil.example" not in source, source


def test_a_crafted_request_id_in_the_url_is_an_error_shown_as_text(app: AppTest) -> None:
    app.query_params["request_id"] = CRAFTED_URL_ID
    at = app.switch_page("views/requests.py").run()
    assert_never_rendered(at)
    assert any("not a request id" in e.value for e in at.error)
    # The problem is named, the id quoted as it was given.
    assert f"not a request id: {CRAFTED_URL_ID!r}" in plain_text(at)


def test_stored_names_on_the_request_page_are_text(app: AppTest) -> None:
    app.query_params["request_id"] = REQUEST_ID
    at = app.switch_page("views/requests.py").run()
    assert_never_rendered(at)
    assert at.metric and {m.label: m.value for m in at.metric}["Events"] == "2"
    shown = plain_text(at)
    assert f"agents: {CRAFTED_AGENT}" in shown and f"modules: {CRAFTED_MODULE}" in shown
    # Labels show the stored names exactly, as code.
    labels = [e.label for e in at.expander]
    assert any(label.endswith(literal(CRAFTED_EVENT)) for label in labels), labels
    assert any(label.startswith(literal(CRAFTED_KIND)) for label in labels), labels


def test_a_stored_module_name_on_the_overview_is_text(app: AppTest) -> None:
    at = app.run()
    assert CRAFTED_MODULE in at.selectbox(key="module").options
    at.selectbox(key="module").set_value(CRAFTED_MODULE).run()
    assert_never_rendered(at)
    assert CRAFTED_MODULE in plain_text(at)


def test_a_failing_page_shows_a_short_message_and_logs_the_details(
        app: AppTest, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("internal detail: password=hunter2 at /srv/guardtrace")

    monkeypatch.setattr(queries, "recent_requests", broken)
    with caplog.at_level(logging.ERROR, logger="guardtrace.dashboard"):
        at = app.switch_page("views/requests.py").run()
    assert not at.exception, [e.value for e in at.exception]
    [error] = [e.value for e in at.error]
    assert error.startswith("This page could not be shown (incident ")
    everything = "\n".join([*markdown_sources(at), plain_text(at)])
    assert "hunter2" not in everything and "Traceback" not in everything
    # The operator finds it in the log, by the incident id the visitor saw.
    [record] = [r for r in caplog.records if r.name == "guardtrace.dashboard"]
    incident = error.split("incident ")[1].split(")")[0]
    assert incident in record.getMessage() and "hunter2" in caplog.text
    assert record.exc_info is not None


def test_an_uncaught_exception_is_shown_without_details(app: AppTest) -> None:
    # What Streamlit shows for an exception no page catches (a widget callback's):
    # its generic message, not the traceback.
    app.run()
    assert st_config.get_option("client.showErrorDetails") == "none"
