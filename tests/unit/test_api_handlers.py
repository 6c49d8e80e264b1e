"""The HTTP query API's answers, over the real embedded store (chDB) with rows written
through the store's own writer: what each path returns, and every error a client can
cause (a 400 naming the parameter, a 404, a 401/403/429) or the store can (a 503).

The answers are taken from :class:`QueryApi` directly (no socket): HTTP itself is
tested in test_api_openapi.py.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from guardtrace.api import documents, paths
from guardtrace.api.access import ApiAccess, serving_refusal
from guardtrace.api.handlers import Answer, QueryApi
from guardtrace.api.reads import StoreReads
from guardtrace.api.store_link import StoreLink
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.schemas.access_tokens import FailedAttempts
from guardtrace.store.connection import StoreConfig
from guardtrace.store.migrate import migrate
from guardtrace.store.queries import headline_rates, table_counts
from guardtrace.store.rows import DecodedRows
from guardtrace.store.writer import ClickHouseWriter
from tests.support.services import ch_client, chdb_dir  # noqa: F401 - fixtures, by name

RECOVERED = "api-recovered-1"
FABRICATED = "api-fabricated-1"
INCOMPLETE = "api-incomplete-1"
# The request-id rule allows '/', which a path must carry percent-encoded.
SLASHED = "tenant-7/run:42@eu"
TOKEN = "api-test-token-0123456789abcdef"
BODY = json.dumps({"messages": [{"role": "user", "content": "time in CST?"}],
                   "reply": "x" * 300})


@dataclass(frozen=True)
class SeededStore:
    """A migrated database holding the requests above, and a link to it."""

    config: StoreConfig
    client: Any

    def api(self, access: ApiAccess | None = None) -> QueryApi:
        return QueryApi(StoreLink(self.config, self.client), access)

    @property
    def reads(self) -> StoreReads:
        return StoreReads(self.client, self.config.database)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def seed_rows(now: datetime) -> DecodedRows:
    """Spans, guard events and payload chunks of four requests, as the consumers write them."""
    rows = DecodedRows()
    ago = [now - timedelta(seconds=s) for s in range(60, 0, -1)]

    def span(trace: str, span_id: str, request_id: str, at: datetime, name: str) -> None:
        rows.spans.append([trace, span_id, "", name, "internal", "planner", "guardtrace", at,
                           at + timedelta(milliseconds=12), 12_000_000, "OK", "", request_id,
                           {names.ATTR_REQUEST_ID: request_id}, {"service.name": "planner"}])

    def event(request_id: str, trace: str, span_id: str, at: datetime, name: str, module: str,
              agent: str, tier: str = "") -> None:
        rows.span_events.append([f"{request_id}-{name}", at, name, trace, span_id, request_id,
                                 module, agent, tier, "planner",
                                 {names.ATTR_REQUEST_ID: request_id, names.ATTR_MODULE: module}])

    def payload(request_id: str, payload_id: str, kind: str, at: datetime, chunks: list[str],
                count: int, body: str) -> None:
        for index, chunk in enumerate(chunks):
            rows.payloads.append([payload_id, index, count, request_id, kind, at, "", "", chunk,
                                  body[:100], len(body.encode()), _sha(body), 0, 0,
                                  {"model": "m"}])

    span("t-rec", "s-rec", RECOVERED, ago[0], "plan")
    event(RECOVERED, "t-rec", "s-rec", ago[1], names.EVENT_HALLUCINATION_DETECTED,
          names.MODULE_PLANNING, "time-tool-v1")
    event(RECOVERED, "t-rec", "s-rec", ago[2], names.EVENT_HALLUCINATION_RECOVERED,
          names.MODULE_PLANNING, "time-tool-v1")
    payload(RECOVERED, "p-rec", names.PAYLOAD_KIND_HALLUCINATION, ago[3],
            [BODY[:150], BODY[150:]], 2, BODY)

    reply = "I've written the file to disk."
    span("t-fab", "s-fab", FABRICATED, ago[4], "reply")
    event(FABRICATED, "t-fab", "s-fab", ago[5], names.EVENT_FABRICATION_DETECTED,
          names.MODULE_REPLIES, "writer", names.TIER_ACTION)
    # Every chunk stored, but not the body the agent sent: a checksum mismatch.
    payload(FABRICATED, "p-fab", names.PAYLOAD_KIND_FABRICATION, ago[6], [reply + " (edited)"],
            1, reply)

    event(INCOMPLETE, "t-inc", "s-inc", ago[7], names.EVENT_HALLUCINATION_DETECTED,
          names.MODULE_PLANNING, "calc-agent")
    event(INCOMPLETE, "t-inc", "s-inc", ago[8], names.EVENT_HALLUCINATION_UNRECOVERABLE,
          names.MODULE_PLANNING, "calc-agent")
    payload(INCOMPLETE, "p-inc", names.PAYLOAD_KIND_HALLUCINATION, ago[9], [BODY[:150]], 2, BODY)

    event(SLASHED, "t-sl", "s-sl", ago[10], names.EVENT_VERIFICATION_BYPASSED,
          names.MODULE_VERIFICATION, "speller")
    return rows


# One seeded database per test process, shared by the API's test modules (each imports
# the fixture): seeding is the slow part, and no test writes to it.
_SEEDED: dict[str, SeededStore] = {}


@pytest.fixture(scope="module")
def seeded(ch_client: Any, chdb_dir: Any) -> SeededStore:  # noqa: F811
    key = str(chdb_dir)
    if key not in _SEEDED:
        config = StoreConfig.resolve(url=f"chdb://{chdb_dir}",
                                     database=f"gt_api_{uuid.uuid4().hex[:8]}")
        migrate(ch_client, config)
        ClickHouseWriter(ch_client, config.database).write(seed_rows(datetime.now(UTC)))
        _SEEDED[key] = SeededStore(config, ch_client)
    return _SEEDED[key]


def get(api: QueryApi, target: str, headers: dict[str, str] | None = None,
        peer: str | None = "127.0.0.1") -> Answer:
    return api.answer("GET", target, headers or {}, peer)


def error_of(answer: Answer, status: int, error: str) -> dict[str, Any]:
    assert (answer.status, answer.body["error"]) == (status, error), answer
    assert answer.body["status"] == status and answer.body["message"]
    body: dict[str, Any] = answer.body
    return body


# -- one request ------------------------------------------------------------------------------
def test_a_request_is_its_lookup_row_spans_and_events_as_the_store_has_them(
        seeded: SeededStore) -> None:
    answer = get(seeded.api(), paths.request_path(paths.REQUEST, RECOVERED))
    assert answer.status == 200
    body = answer.body
    assert body["request"]["request_id"] == RECOVERED
    assert [e["name"] for e in body["events"]] == [names.EVENT_HALLUCINATION_DETECTED,
                                                   names.EVENT_HALLUCINATION_RECOVERED]
    assert [s["span_id"] for s in body["spans"]] == ["s-rec"]
    assert body["request"]["payload_kinds"] == [names.PAYLOAD_KIND_HALLUCINATION]
    # What the CLI reads back is exactly what it would have read from the store.
    assert documents.trace_from(json.loads(json.dumps(body))) == seeded.reads.trace(RECOVERED)


def test_an_id_with_a_slash_is_found_percent_encoded(seeded: SeededStore) -> None:
    target = paths.request_path(paths.REQUEST, SLASHED)
    assert "%2F" in target
    answer = get(seeded.api(), target)
    assert answer.status == 200 and answer.body["request"]["request_id"] == SLASHED


def test_payloads_come_reassembled_with_their_integrity_check(seeded: SeededStore) -> None:
    def payloads(request_id: str, query: str = "") -> list[dict[str, Any]]:
        answer = get(seeded.api(), paths.request_path(paths.REQUEST_PAYLOADS, request_id) + query)
        assert answer.status == 200, answer
        found: list[dict[str, Any]] = answer.body["payloads"]
        return found

    [whole] = payloads(RECOVERED)
    assert whole["body"] == BODY and whole["chunks_present"] == whole["chunk_count"] == 2
    assert (whole["integrity"], whole["complete"], whole["problem"]) == ("verified", True, None)

    [corrupt] = payloads(FABRICATED)
    assert corrupt["integrity"] == "checksum mismatch" and corrupt["complete"]
    assert corrupt["problem"].startswith("checksum mismatch")

    [partial] = payloads(INCOMPLETE)
    assert (partial["integrity"], partial["complete"]) == ("incomplete", False)
    assert "1 of 2 chunks" in partial["problem"]

    assert payloads(RECOVERED, f"?kind={names.PAYLOAD_KIND_FABRICATION}") == []
    answer = get(seeded.api(), paths.request_path(paths.REQUEST_PAYLOADS, RECOVERED))
    request, read_back = documents.payloads_from(json.loads(json.dumps(answer.body)))
    assert (request, read_back) == seeded.reads.payloads(RECOVERED)


def test_an_unknown_id_is_404_and_a_malformed_one_400_before_the_store_is_read(
        seeded: SeededStore) -> None:
    for template in (paths.REQUEST, paths.REQUEST_PAYLOADS):
        body = error_of(get(seeded.api(), paths.request_path(template, "no-such-request")),
                        404, "request_not_found")
        assert "no request 'no-such-request'" in body["message"]
        assert body["parameter"] == "request_id"
    for malformed in ("x' OR '1'='1", "a; DROP TABLE span_events", "id\nwith newline",
                      "-starts-with-a-dash", "a" * 201, ""):
        body = error_of(get(seeded.api(), paths.request_path(paths.REQUEST, malformed)), 400,
                        "bad_request_id")
        assert body["parameter"] == "request_id" and "request id" in body["message"]
    # Percent-encoding that is not UTF-8: still a 400, not a failure to decode.
    error_of(get(seeded.api(), "/v1/requests/%FF%FE"), 400, "bad_request_id")


# -- lists, rates, agents, stats ------------------------------------------------------------------
def test_recent_requests_by_outcome_module_and_limit(seeded: SeededStore) -> None:
    def listed(query: str) -> list[str]:
        answer = get(seeded.api(), f"{paths.REQUESTS}?{query}")
        assert answer.status == 200, answer
        return [r["request_id"] for r in answer.body["requests"]]

    assert listed("outcome=recovered") == [RECOVERED]
    assert listed("outcome=unrecoverable&since=2h") == [INCOMPLETE]
    assert set(listed("")) == {RECOVERED, FABRICATED, INCOMPLETE, SLASHED}  # problems
    assert set(listed(f"outcome=all&module={names.MODULE_PLANNING}")) == {RECOVERED, INCOMPLETE}
    assert len(listed("outcome=all&limit=2")) == 2
    # Newest first: the slashed id's event is the latest.
    assert listed("outcome=all")[0] == SLASHED
    assert listed("outcome=all&since=1s") == []


def test_rates_per_module_are_the_overviews_headline_rates(seeded: SeededStore) -> None:
    answer = get(seeded.api(), f"{paths.RATES}?since=1h")
    assert answer.status == 200
    start = datetime.fromisoformat(answer.body["start"])
    end = datetime.fromisoformat(answer.body["end"])
    by_module = {row["module"]: row for row in answer.body["modules"]}
    assert set(by_module) == {names.MODULE_PLANNING, names.MODULE_REPLIES,
                              names.MODULE_VERIFICATION}
    planning = by_module[names.MODULE_PLANNING]
    expected = headline_rates(seeded.client, seeded.config.database, start, end,
                              names.MODULE_PLANNING)
    assert (planning["recovered"], planning["unrecoverable"], planning["detected"]) == (1, 1, 2)
    assert planning["recovery_rate"] == expected.recovery_rate == 0.5
    assert planning["requests"] == expected.requests == 2
    assert by_module[names.MODULE_REPLIES]["events"] == {names.EVENT_FABRICATION_DETECTED: 1}
    assert by_module[names.MODULE_REPLIES]["recovery_rate"] is None
    total = answer.body["total"]
    assert total["module"] is None and total["requests"] == 4 and total["detected"] == 2

    one = get(seeded.api(), f"{paths.RATES}?module={names.MODULE_REPLIES}").body
    assert [row["module"] for row in one["modules"]] == [names.MODULE_REPLIES]
    assert one["total"]["module"] == names.MODULE_REPLIES


def test_top_agents_by_event(seeded: SeededStore) -> None:
    body = get(seeded.api(), f"{paths.AGENTS}?top=1").body
    assert body["event"] == names.EVENT_HALLUCINATION_DETECTED
    assert len(body["top"]) == 1 and body["top"][0]["count"] == 1
    assert body["total_agents"] == 2 and body["other"] == {"agents": 1, "count": 1}
    body = get(seeded.api(), f"{paths.AGENTS}?event={names.EVENT_FABRICATION_DETECTED}").body
    assert body["top"] == [{"agent": "writer", "count": 1}]


def test_stats_are_the_stores_counts(seeded: SeededStore) -> None:
    body = get(seeded.api(), paths.STATS).body
    assert body["tables"] == table_counts(seeded.client, seeded.config.database)
    assert body["tables"]["payloads"] == 3 and body["tables"]["requests"] == 4
    assert body["events"][names.EVENT_HALLUCINATION_DETECTED] == 2


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("target", "parameter"), [
    (f"{paths.REQUESTS}?since=0", "since"),
    (f"{paths.REQUESTS}?since=-1h", "since"),
    (f"{paths.REQUESTS}?since=1y", "since"),
    (f"{paths.REQUESTS}?since=", "since"),
    (f"{paths.REQUESTS}?outcome=everything", "outcome"),
    (f"{paths.REQUESTS}?limit=0", "limit"),
    (f"{paths.REQUESTS}?limit=10001", "limit"),
    (f"{paths.REQUESTS}?limit=%2B5", "limit"),
    (f"{paths.REQUESTS}?module=a%00b", "module"),
    (f"{paths.REQUESTS}?module={'m' * 201}", "module"),
    (f"{paths.REQUESTS}?outcome=all&outcome=recovered", "outcome"),
    (f"{paths.REQUESTS}?outcom=all", "outcom"),
    (f"{paths.RATES}?limit=5", "limit"),
    (f"{paths.AGENTS}?event=llm.invented", "event"),
    (f"{paths.AGENTS}?top=101", "top"),
    (f"{paths.request_path(paths.REQUEST_PAYLOADS, RECOVERED)}?kind=", "kind"),
    (f"{paths.STATS}?since=1h", "since"),
])
def test_a_bad_parameter_is_400_naming_it(seeded: SeededStore, target: str,
                                          parameter: str) -> None:
    body = error_of(get(seeded.api(), target), 400, "bad_parameter")
    assert body["parameter"] == parameter and parameter in body["message"]


def test_a_window_beyond_the_epoch_starts_at_it(seeded: SeededStore) -> None:
    answer = get(seeded.api(), f"{paths.REQUESTS}?since=999999999w&outcome=recovered")
    assert answer.status == 200 and answer.body["since"].startswith("1970-01-01T00:00:00")
    assert [r["request_id"] for r in answer.body["requests"]] == [RECOVERED]


def test_unknown_paths_and_methods_are_json_errors(seeded: SeededStore) -> None:
    error_of(get(seeded.api(), "/v1/nothing"), 404, "not_found")
    error_of(get(seeded.api(), "/v1/requests/a/b/c"), 404, "not_found")
    answer = seeded.api().answer("POST", paths.STATS, {}, "127.0.0.1")
    error_of(answer, 405, "method_not_allowed")
    assert answer.headers["Allow"] == "GET"


# -- the store ------------------------------------------------------------------------------------
def test_a_store_that_cannot_be_reached_is_503_with_the_password_masked() -> None:
    config = StoreConfig.resolve(url="http://reader:s3cret-pw@127.0.0.1:1",
                                 database="guardtrace")
    answer = get(QueryApi(StoreLink(config)), paths.STATS)
    body = error_of(answer, 503, "store_unavailable")
    assert "s3cret-pw" not in json.dumps(body)
    assert "Retry-After" in answer.headers
    # Input is still checked first: a bad id is the client's fault whatever the store does.
    error_of(get(QueryApi(StoreLink(config)), "/v1/requests/a%20b"), 400, "bad_request_id")


def test_a_store_that_is_not_migrated_is_503_saying_so(ch_client: Any,  # noqa: F811
                                                        chdb_dir: Any) -> None:  # noqa: F811
    config = StoreConfig.resolve(url=f"chdb://{chdb_dir}", database="gt_api_never_migrated")
    body = error_of(get(QueryApi(StoreLink(config, ch_client)), paths.REQUESTS), 503,
                    "store_unavailable")
    assert "not migrated" in body["message"] and "guardtrace migrate" in body["message"]


# -- who may read ---------------------------------------------------------------------------------
class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_with_a_token_every_request_needs_it(seeded: SeededStore) -> None:
    sleeps = Sleeps()
    api = seeded.api(ApiAccess(TOKEN, sleep=sleeps))
    answer = get(api, paths.STATS)
    error_of(answer, 401, "unauthorized")
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert env.DASHBOARD_TOKEN.name in answer.body["message"]
    assert sleeps.calls == []  # no token given: nothing compared, nothing to slow down
    error_of(get(api, paths.STATS, {"Authorization": "Bearer not-the-token"}), 401,
             "unauthorized")
    assert sleeps.calls == [1.0]  # a wrong token is slowed, as at the dashboard's sign-in
    assert get(api, paths.STATS, {"authorization": f"bearer {TOKEN}"}).status == 200
    assert get(api, paths.OPENAPI, {"Authorization": f"Bearer {TOKEN}"}).status == 200
    error_of(get(api, paths.OPENAPI), 401, "unauthorized")


def test_failed_attempts_are_limited_per_client_address(seeded: SeededStore) -> None:
    api = seeded.api(ApiAccess(TOKEN, FailedAttempts(limit=3), sleep=Sleeps()))
    wrong = {"Authorization": "Bearer wrong-token-wrong-token"}
    for _ in range(3):
        error_of(get(api, paths.STATS, wrong, peer="203.0.113.9"), 401, "unauthorized")
    answer = get(api, paths.STATS, {"Authorization": f"Bearer {TOKEN}"}, peer="203.0.113.9")
    error_of(answer, 429, "too_many_attempts")  # even the right token waits its turn
    assert int(answer.headers["Retry-After"]) >= 1
    # Another address is not held up by the first one's failures.
    assert get(api, paths.STATS, {"Authorization": f"Bearer {TOKEN}"},
               peer="198.51.100.4").status == 200


def test_without_a_token_only_this_machine_is_answered(seeded: SeededStore) -> None:
    api = seeded.api()
    assert get(api, paths.STATS, peer="127.0.0.1").status == 200
    assert get(api, paths.STATS, peer="::1").status == 200
    body = error_of(get(api, paths.STATS, peer="192.0.2.10"), 403, "forbidden")
    assert env.DASHBOARD_TOKEN.name in body["message"]


def test_serving_beyond_loopback_needs_a_long_enough_token() -> None:
    assert serving_refusal("127.0.0.1", "") is None
    assert serving_refusal("0.0.0.0", TOKEN) is None
    for address in ("0.0.0.0", "::", "192.0.2.10", ""):
        refusal = serving_refusal(address, "")
        assert refusal is not None and env.DASHBOARD_TOKEN.name in refusal
    short = serving_refusal("127.0.0.1", "too-short")
    assert short is not None and "shorter than 16" in short
