"""Every dashboard page, run by Streamlit's AppTest over a store seeded through the real path.

The seed is what a user's demo produces: ``guardtrace simulate`` traffic through the real
hooks -> Kafka (Tansu) -> the consumer -> embedded ClickHouse, plus a few poison records.
Each page's numbers are checked against the store itself, queried independently here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from streamlit.testing.v1 import AppTest

from guardtrace import collectors
from guardtrace.dashboard.safe_render import literal
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.simulator import SimulationConfig, SimulationSummary, run_simulation
from guardtrace.store import queries
from guardtrace.store.connection import StoreConfig
from guardtrace.store.migrate import migrate
from guardtrace.transport.broker import EmbeddedBroker
from tests.support.services import Pipeline, new_pipeline

pytestmark = [pytest.mark.timeout(300)]

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
LABEL_CAP = 15
TOP_AGENTS = 5
POISON = [b"\x00\xffnot protobuf", b"garbage", b"\x0a\x05trunc"]


@dataclass
class Seeded:
    pipeline: Pipeline
    summary: SimulationSummary
    chdb_dir: Path

    def rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        return self.pipeline.rows(sql, **params)

    def scalar(self, sql: str, **params: Any) -> Any:
        return self.pipeline.scalar(sql, **params)


@pytest.fixture(scope="module")
def seeded(broker: EmbeddedBroker, ch_client: Any, chdb_dir: Path) -> Iterator[Seeded]:
    pipeline = new_pipeline(broker, ch_client)
    collectors.shutdown()
    collectors.configure(set_global=False, agent_label_cap=LABEL_CAP,
                         **pipeline.collector_settings())
    try:
        summary = run_simulation(SimulationConfig(requests=150, rate=None, seed=11))
    finally:
        collectors.shutdown()
    assert summary.ok, summary
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for value in POISON:
        producer.send(pipeline.consumer_config.spans_topic, key=b"poison", value=value)
    producer.flush()
    producer.close()
    stats = pipeline.consume_until_idle()
    assert stats.dead_letters == len(POISON)
    yield Seeded(pipeline, summary, chdb_dir)


@pytest.fixture
def app(seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    config = seeded.pipeline.consumer_config
    for var, value in {
        env.CLICKHOUSE_URL: f"chdb://{seeded.chdb_dir}",
        env.CLICKHOUSE_DATABASE: seeded.pipeline.database,
        env.KAFKA_BOOTSTRAP: seeded.pipeline.bootstrap,
        env.CONSUMER_GROUP: config.group_id,
        env.SPANS_TOPIC: config.spans_topic, env.METRICS_TOPIC: config.metrics_topic,
        env.PAYLOADS_TOPIC: config.payloads_topic,
        env.DEAD_LETTER_TOPIC: config.dead_letter_topic,
        env.AGENT_LABEL_CAP: str(LABEL_CAP), env.DASHBOARD_TOP_AGENTS: str(TOP_AGENTS),
    }.items():
        monkeypatch.setenv(var.name, value)
    monkeypatch.delenv(env.DASHBOARD_CLICKHOUSE_URL.name, raising=False)
    return AppTest.from_file(str(APP), default_timeout=60)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# AppTest does not expose a dataframe's key; each table is told apart by its columns.
TABLE_COLUMNS = {
    "totals": {"event", "count"}, "top_agents": {"agent", "hallucinations"},
    "recent": {"request id", "last seen"}, "events": {"event", "tier", "attributes"},
    "labels": {"metric", "distinct agents"}, "rows_written": {"table", "rows"},
    "dead_letters": {"reason_kind", "latest_reason"},
}


def frame(at: AppTest, key: str) -> Any:
    [found] = [df.value for df in at.dataframe
               if TABLE_COLUMNS[key] <= set(df.value.columns)]
    return found


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


# -- overview ------------------------------------------------------------------------------
def test_overview_numbers_match_the_store(app: AppTest, seeded: Seeded) -> None:
    at = no_exception(app.run())
    stored = dict(seeded.rows("SELECT name, count() FROM {db}.span_events FINAL GROUP BY name"))
    # The simulator's own account, the store and the page agree event for event.
    assert {k: v for k, v in seeded.summary.events.items() if k in names.GUARD_EVENTS} == \
        {k: v for k, v in stored.items() if k in names.GUARD_EVENTS}
    totals = frame(at, "totals")
    assert dict(zip(totals["event"], totals["count"], strict=True)) == {
        name: stored.get(name, 0) for name in names.GUARD_EVENTS}

    shown = metrics(at)
    detected = stored.get(names.EVENT_HALLUCINATION_DETECTED, 0)
    recovered = stored.get(names.EVENT_HALLUCINATION_RECOVERED, 0)
    unrecoverable = stored.get(names.EVENT_HALLUCINATION_UNRECOVERABLE, 0)
    requests = seeded.scalar("SELECT uniqExact(request_id) FROM {db}.requests")
    assert detected and recovered and unrecoverable, "the seed must exercise family 1"
    assert shown["Hallucinations detected"] == f"{detected:,}"
    assert shown["Requests seen"] == f"{requests:,}"
    assert shown["Recovery rate"] == f"{recovered / (recovered + unrecoverable):.1%}"
    assert shown["Unrecoverable rate"] == f"{unrecoverable / requests:.1%}"

    agents = frame(at, "top_agents")
    by_agent = dict(seeded.rows(
        "SELECT agent, count() FROM {db}.span_events FINAL WHERE name = {n:String} "
        "AND agent != '' GROUP BY agent", n=names.EVENT_HALLUCINATION_DETECTED))
    assert len(by_agent) > TOP_AGENTS, "the long tail must exceed the cap"
    assert list(agents["agent"])[-1] == names.OVERFLOW_LABEL
    assert len(agents) == TOP_AGENTS + 1
    assert int(agents["hallucinations"].sum()) == sum(by_agent.values())
    top = sorted(by_agent.values(), reverse=True)[:TOP_AGENTS]
    assert list(agents["hallucinations"])[:TOP_AGENTS] == top
    assert any(f"{len(by_agent) - TOP_AGENTS:,} beyond the cap of {TOP_AGENTS}" in c.value
               for c in at.caption)


def test_overview_module_filter_narrows_every_number(app: AppTest, seeded: Seeded) -> None:
    at = no_exception(app.run())
    modules = [str(m) for (m,) in seeded.rows(
        "SELECT DISTINCT module FROM {db}.span_events FINAL WHERE name IN {n:Array(String)}",
        n=list(names.GUARD_EVENTS))]
    assert len(modules) > 1
    module = sorted(modules)[0]
    at.selectbox(key="module").set_value(module).run()
    no_exception(at)
    stored = dict(seeded.rows("SELECT name, count() FROM {db}.span_events FINAL "
                              "WHERE module = {m:String} GROUP BY name", m=module))
    totals = frame(at, "totals")
    assert dict(zip(totals["event"], totals["count"], strict=True)) == {
        name: stored.get(name, 0) for name in names.GUARD_EVENTS}


# -- requests ------------------------------------------------------------------------------
def test_requests_page_lists_problem_requests(app: AppTest, seeded: Seeded) -> None:
    at = no_exception(app.switch_page("views/requests.py").run())
    listed = set(frame(at, "recent")["request id"])
    problems = {str(r) for (r,) in seeded.rows(
        "SELECT DISTINCT request_id FROM {db}.span_events FINAL "
        "WHERE name IN {n:Array(String)}", n=list(queries.OUTCOMES["problems"]))}
    assert listed == problems

    at.selectbox(key="outcome").set_value("unrecoverable").run()
    unrecoverable = {str(r) for (r,) in seeded.rows(
        "SELECT DISTINCT request_id FROM {db}.span_events FINAL WHERE name = {n:String}",
        n=names.EVENT_HALLUCINATION_UNRECOVERABLE)}
    assert set(frame(no_exception(at), "recent")["request id"]) == unrecoverable


def test_request_page_shows_trace_events_and_payloads(app: AppTest, seeded: Seeded) -> None:
    # A request whose payload had a secret redacted in the agent process.
    request_id = seeded.scalar(
        "SELECT request_id FROM {db}.payloads FINAL WHERE redactions > 0 "
        "AND chunk_index = 0 AND position(body, '[REDACTED:') BETWEEN 1 AND 20000 "
        "ORDER BY request_id LIMIT 1")
    app.query_params["request_id"] = request_id
    at = no_exception(app.switch_page("views/requests.py").run())
    spans = seeded.scalar("SELECT count() FROM {db}.spans FINAL WHERE trace_id IN "
                          "(SELECT arrayJoin(trace_ids) FROM {db}.requests "
                          "WHERE request_id = {r:String})", r=request_id)
    events = seeded.scalar("SELECT count() FROM {db}.span_events FINAL "
                           "WHERE request_id = {r:String}", r=request_id)
    payloads = seeded.scalar("SELECT uniqExact(payload_id) FROM {db}.payloads FINAL "
                             "WHERE request_id = {r:String}", r=request_id)
    shown = metrics(at)
    assert (shown["Spans"], shown["Events"], shown["Payloads"]) == \
        (str(spans), str(events), str(payloads))
    assert len(frame(at, "events")) == events
    assert len(at.get("download_button")) == payloads
    assert any("secret(s) were redacted" in c.value for c in at.caption)
    bodies = "".join(code.value for code in at.code)
    assert "[REDACTED:" in bodies and "sk-live-" not in bodies
    assert at.text_input(key="request_id_input").value == request_id


def stored_payload(seeded: Seeded, request_id: str, kind: str) -> queries.Payload:
    """The request's first payload of ``kind``, reassembled by the store's own read."""
    return next(p for p in queries.request_payloads(seeded.pipeline.client,
                                                    seeded.pipeline.database, request_id)
                if p.kind == kind)


def test_a_recovered_hallucination_tells_its_story(app: AppTest, seeded: Seeded) -> None:
    # A loop that recovered, whose first rejected plan called a tool with a listed look-alike.
    request_id, invented, suggested = seeded.rows(
        "SELECT request_id, attributes['hallucinated_agent'], attributes['suggested_tools'] "
        "FROM {db}.span_events FINAL WHERE name = {d:String} "
        "AND attributes['hall_retry'] = '0' AND attributes['suggested_tools'] != '[]' "
        "AND request_id IN (SELECT request_id FROM {db}.span_events FINAL WHERE name = {r:String}) "
        "ORDER BY request_id LIMIT 1",
        d=names.EVENT_HALLUCINATION_DETECTED, r=names.EVENT_HALLUCINATION_RECOVERED)[0]
    retries = seeded.scalar("SELECT any(attributes['retries_used']) FROM {db}.span_events FINAL "
                            "WHERE request_id = {q:String} AND name = {r:String}",
                            q=request_id, r=names.EVENT_HALLUCINATION_RECOVERED)
    closest = json.loads(suggested)[0]
    rejected = json.loads(stored_payload(seeded, request_id,
                                         names.PAYLOAD_KIND_HALLUCINATION).body)
    # The simulated agent records its exchange as text: the prompt, then the plan it kept.
    kept = stored_payload(seeded, request_id, names.PAYLOAD_KIND_LLM_EXCHANGE).body
    final_plan = json.loads(kept.rsplit("\nresponse:\n", 1)[1])["steps"]
    app.query_params["request_id"] = request_id
    at = no_exception(app.switch_page("views/requests.py").run())

    assert any(h.value.endswith(f"recovered after {retries} "
                                f"{'retry' if retries == '1' else 'retries'}")
               for h in at.subheader)
    tables = [df.value for df in at.dataframe]
    # The invented tool against the list the model was shown, its look-alike marked.
    shown = next(t for t in tables if set(t.columns) == {"tool", "shown"})
    listed = dict(zip(shown["tool"], shown["shown"], strict=True))
    assert {listed[name] for name in rejected["hallucinated_agents"]} == {"no: invented"}
    assert set(listed) - set(rejected["hallucinated_agents"]) == set(rejected["allowed"])
    assert listed[closest].startswith("yes, closest to ") and invented in listed[closest]
    # The rejected plan, its invented step with the suggestion beside it.
    plans = [t for t in tables if {"step", "tool", "verdict"} <= set(t.columns)]
    first = plans[0]
    assert list(first["tool"]) == [step["tool"] for step in rejected["response"]]
    verdict = dict(zip(first["tool"], first["verdict"], strict=True))[invented]
    assert verdict.startswith("not in the list; closest: ") and closest in verdict
    # Side by side: the last rejected plan and the plan given back, every tool listed.
    recovered = plans[-1]
    assert list(recovered["tool"]) == [step["tool"] for step in final_plan]
    assert set(recovered["verdict"]) == {"listed"}
    # What the guard told the model: its feedback where a later retry's prompt holds it,
    # else the problems it named.
    told = "\n".join(c.value for c in at.code)
    if retries == "2":
        assert "YOUR PREVIOUS PLAN WAS REJECTED" in told and f"'{invented}'" in told
    else:
        assert any("before the accepted retry is not stored" in c.value for c in at.caption)
        assert rejected["errors"][0]["message"] in told
    # The exchange as a conversation: the prompt, then the reply; the raw body a tab away.
    assert [m.name for m in at.chat_message][-2:] == ["prompt", "assistant"]
    payloads = seeded.scalar("SELECT uniqExact(payload_id) FROM {db}.payloads FINAL "
                             "WHERE request_id = {r:String}", r=request_id)
    assert [t.label for t in at.tabs][::2] == ["Story", f"Debug payloads ({payloads})"]


def test_a_fabrication_marks_its_sentence_with_tier_and_evidence(app: AppTest,
                                                                 seeded: Seeded) -> None:
    request_id, tier, phrase = seeded.rows(
        "SELECT request_id, tier, attributes['matched_phrase'] FROM {db}.span_events FINAL "
        "WHERE name = {n:String} AND tier IN ('action', 'read') ORDER BY request_id LIMIT 1",
        n=names.EVENT_FABRICATION_DETECTED)[0]
    reply = json.loads(stored_payload(seeded, request_id,
                                      names.PAYLOAD_KIND_FABRICATION).body)["reply"]
    app.query_params["request_id"] = request_id
    at = no_exception(app.switch_page("views/requests.py").run())

    [bubble] = [m for m in at.chat_message if any(e.value for e in m.error)]
    assert bubble.name == "assistant"
    # The sentence holding the matched phrase is marked, shown exactly (as code).
    [marked] = [e.value for e in bubble.error]
    sentence = marked.strip("`")[1:-1]
    assert literal(sentence) == marked
    assert phrase in sentence and sentence in reply and sentence[-1] in ".!?"
    # The rest of the reply, in order, as text around it.
    before, _, after = reply.partition(sentence)
    assert [t.value for t in bubble.text] == [p.strip() for p in (before, after) if p.strip()]
    [evidence] = [c.value for c in bubble.caption]
    assert evidence.startswith(f"**{tier}**: ") and evidence.endswith(literal(phrase))
    assert any(h.value.endswith(tier) for h in at.subheader)
    verdicts = [t for t in (df.value for df in at.dataframe) if "evaluation" in t.columns]
    assert list(verdicts[0]["label"]) == [names.EVALUATION_FAIL]


def test_request_search_rejects_bad_ids_and_reports_unknown_ones(app: AppTest) -> None:
    at = no_exception(app.switch_page("views/requests.py").run())
    at.text_input(key="request_id_input").set_value("x' OR 1=1 --")
    at.button[0].click().run()
    assert any("not a request id" in e.value for e in no_exception(at).error)

    at.text_input(key="request_id_input").set_value("no-such-request-" + uuid.uuid4().hex)
    at.button[0].click().run()
    assert any("No request" in w.value for w in no_exception(at).warning)


# -- labels --------------------------------------------------------------------------------
def test_labels_page_shows_distinct_agents_against_the_cap(app: AppTest, seeded: Seeded) -> None:
    at = no_exception(app.switch_page("views/labels.py").run())
    table = frame(at, "labels")
    stored = {(str(m), str(mod)): (int(d), bool(o)) for m, mod, d, o in seeded.rows(
        "SELECT metric_name, module, uniqExactIf(agent, agent != {o:String}), "
        "countIf(agent = {o:String}) > 0 FROM {db}.metric_points FINAL "
        "WHERE metric_name IN {m:Array(String)} AND agent != '' GROUP BY metric_name, module",
        o=names.OVERFLOW_LABEL, m=list(queries.AGENT_LABELLED_METRICS))}
    shown = {(m, mod): (int(d), o == "yes") for m, mod, d, o in zip(
        table["metric"], table["module"], table["distinct agents"],
        table[f"{names.OVERFLOW_LABEL} in use"], strict=True)}
    assert shown == stored
    assert set(table["cap"]) == {LABEL_CAP}
    assert all(d <= LABEL_CAP for d, _ in shown.values())
    # The long tail of invented tool names overflowed the cap on the hallucination counter.
    assert any(o for (m, _), (_, o) in shown.items() if m == names.METRIC_HALLUCINATIONS)
    assert int(metrics(at)["Folded label uses"].replace(",", "")) > 0


# -- pipeline health -------------------------------------------------------------------------
def test_health_page_counts_dead_letters_lag_rows_and_drops(app: AppTest, seeded: Seeded) -> None:
    at = no_exception(app.switch_page("views/health.py").run())
    shown = metrics(at)
    assert shown["Dead letters (all time)"] == str(len(POISON))
    letters = frame(at, "dead_letters")
    assert int(letters["count"].sum()) == len(POISON)
    assert set(letters["topic"]) == {seeded.pipeline.consumer_config.spans_topic}
    assert shown["Records behind"] == "0"
    assert shown["Consumer group"] == seeded.pipeline.consumer_config.group_id
    assert (shown["export_dropped"], shown["payloads_dropped"], shown["hook_errors"]) == \
        ("0", "0", "0")
    written = frame(at, "rows_written")
    by_table = dict(zip(written["table"], written["rows"], strict=True))
    assert by_table["span_events"] == seeded.scalar("SELECT count() FROM {db}.span_events")
    assert by_table["dead_letters"] == len(POISON)


# -- empty and broken stores ---------------------------------------------------------------
def test_every_page_says_what_to_do_on_an_empty_store(
        app: AppTest, ch_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = f"gt_empty_{uuid.uuid4().hex[:8]}"
    migrate(ch_client, StoreConfig.resolve(url="chdb://unused", database=empty))
    monkeypatch.setenv(env.CLICKHOUSE_DATABASE.name, empty)
    at = no_exception(app.run())
    assert any("guardtrace simulate" in i.value for i in at.info)
    at = no_exception(at.switch_page("views/requests.py").run())
    assert any("guardtrace simulate" in i.value for i in at.info)
    at = no_exception(at.switch_page("views/labels.py").run())
    assert any("guardtrace simulate" in i.value for i in at.info)
    at = no_exception(at.switch_page("views/health.py").run())
    assert any("No dead letters" in s.value for s in at.success)


def test_an_unmigrated_database_is_reported_with_the_fix(
        app: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.CLICKHOUSE_DATABASE.name, f"gt_missing_{uuid.uuid4().hex[:8]}")
    at = no_exception(app.run())
    assert any("guardtrace migrate" in w.value for w in at.warning)


# -- read-only ------------------------------------------------------------------------------
class ReadOnlyClient:
    """Runs every query with ``readonly=2`` (what the dashboard's server user has)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def query(self, sql: str, parameters: Any = None, settings: Any = None) -> Any:
        return self._client.query(sql, parameters=parameters,
                                  settings={**(settings or {}), "readonly": 2})

    def command(self, *_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the read side must not run commands")

    def insert(self, *_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the read side must not insert")


def test_every_dashboard_query_runs_as_a_read_only_user(seeded: Seeded) -> None:
    from datetime import UTC, datetime, timedelta

    from guardtrace.store.migrate import missing_versions

    client, db = ReadOnlyClient(seeded.pipeline.client), seeded.pipeline.database
    now = datetime.now(UTC)
    start = now - timedelta(hours=1)
    assert missing_versions(client, db) == set()
    request_id = seeded.scalar(
        "SELECT any(request_id) FROM {db}.payloads WHERE request_id IN "
        "(SELECT request_id FROM {db}.span_events)")
    request = queries.find_request(client, db, request_id)
    assert request is not None
    assert queries.request_trace(client, db, request).events
    assert queries.request_payloads(client, db, request_id)
    assert queries.recent_requests(client, db, since=start)
    assert queries.event_rates(client, db, start, now)
    assert queries.headline_rates(client, db, start, now).requests
    assert queries.top_agents(client, db, start, now).total_agents
    assert queries.modules(client, db, start)
    assert queries.label_usage(client, db, start)
    assert queries.rows_written_per_minute(client, db, start)
    assert queries.dead_letter_summary(client, db)
    assert queries.recent_dead_letters(client, db)
    assert set(queries.collector_drops(client, db)) == set(queries.DROP_METRICS)
    assert queries.table_counts(client, db)["span_events"] > 0
    assert queries.event_counts(client, db)


def test_custom_time_range_bounds_the_overview(app: AppTest, seeded: Seeded) -> None:
    from datetime import UTC, datetime, timedelta

    at = no_exception(app.run())
    at.selectbox(key="time_range").set_value("Custom").run()
    now = datetime.now(UTC)
    # A custom range ending before the seed was written shows nothing of it.
    at.date_input(key="from_day").set_value((now - timedelta(days=3)).date())
    at.date_input(key="to_day").set_value((now - timedelta(days=2)).date()).run()
    assert any("guardtrace simulate" in i.value for i in no_exception(at).info)
    # An end before the start is an error that names the problem.
    at.date_input(key="to_day").set_value((now - timedelta(days=4)).date()).run()
    assert any("must be after its start" in e.value for e in no_exception(at).error)
    # A range around now shows the seed again, and the totals match the store.
    at.date_input(key="from_day").set_value((now - timedelta(days=1)).date())
    at.date_input(key="to_day").set_value((now + timedelta(days=1)).date()).run()
    stored = dict(seeded.rows("SELECT name, count() FROM {db}.span_events FINAL GROUP BY name"))
    totals = frame(no_exception(at), "totals")
    assert dict(zip(totals["event"], totals["count"], strict=True)) == {
        name: stored.get(name, 0) for name in names.GUARD_EVENTS}
