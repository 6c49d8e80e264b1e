"""The collector's core: redaction, the agent-label cap, guard telemetry, configure().

Telemetry is observed through guardtrace.collectors.testing.capture(), i.e. real SDK
providers with in-memory exporters; configure() runs against a Kafka address nothing
listens on.

Long because it holds the emit path's pieces side by side; a split by piece is due.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import guardtrace.collectors as collectors
from guardtrace.collectors.emit import state as _state
from guardtrace.collectors.emit.cardinality import AgentLabelLimiter
from guardtrace.collectors.emit.redaction import DEFAULT_RULES, Redactor
from guardtrace.collectors.emit.telemetry import (
    GuardTelemetry,
    guarded,
    internal_totals,
    new_request_id,
    record_payload,
)
from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.collectors.export.payload_sink import KafkaPayloadSink
from guardtrace.collectors.testing import capture
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.transport.broker import free_port

# -- redaction ---------------------------------------------------------------------------
OPENAI_KEY = "sk-proj-" + "Xy9" * 16
ANTHROPIC_KEY = "sk-ant-api03-" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7" * 3
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\n"
       "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
       "aFDrBz9vFqU4yGhJfLkBnSTJf3YEUB1b2E9jJmGm1E0c8wRj3Ww2YkA7Yc0Z\n"
       "-----END RSA PRIVATE KEY-----")


@pytest.mark.parametrize(("text", "secret", "kind", "kept"), [
    (f"my key is {OPENAI_KEY}, please debug", OPENAI_KEY, "api_key", "my key is "),
    (f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}", ANTHROPIC_KEY, "api_key", "ANTHROPIC_API_KEY="),
    (f"aws_access_key_id = {AWS_KEY}", AWS_KEY, "api_key", "aws_access_key_id"),
    (f"git clone with {GITHUB_TOKEN}", GITHUB_TOKEN, "api_key", "git clone with "),
    (f"Authorization: Bearer {JWT}", JWT, "jwt", "Authorization: Bearer "),
    (f"curl -H 'authorization: bearer {JWT}'", JWT, "jwt", "authorization: bearer "),
    ("Authorization: Bearer tok3n_value_abcdef", "tok3n_value_abcdef", "auth_header",
     "Authorization: Bearer "),
    ("retry with bearer abcd1234efgh5678 now", "abcd1234efgh5678", "bearer_token",
     "retry with bearer "),
    ("https://deploy:Tr0ub4dor3@git.example.com/repo.git", "Tr0ub4dor3", "url_password",
     "https://deploy:"),
    ("postgres://admin:s3cr3t-pw@db.internal:5432/app", "s3cr3t-pw", "url_password",
     "@db.internal:5432/app"),
    ("config: password=hunter2!! retries=3", "hunter2!!", "secret_assignment",
     "config: password="),
    ("api_key: abcd1234efgh5678", "abcd1234efgh5678", "secret_assignment", "api_key: "),
    ('export SECRET="abcd1234efgh5678"', "abcd1234efgh5678", "secret_assignment",
     "export SECRET="),
    ("send the report to jane.doe+ops@example.co.uk today", "jane.doe+ops@example.co.uk",
     "email", "send the report to "),
    (f"key file:\n{PEM}\nend", "MIIEpAIBAAKCAQEA0Z3VS5JJ", "private_key", "key file:\n"),
])
def test_default_rules_redact_realistic_secrets(text: str, secret: str, kind: str,
                                                kept: str) -> None:
    redacted, count = Redactor().redact_counted(text)
    assert secret not in redacted
    assert f"[REDACTED:{kind}]" in redacted
    assert kept in redacted, "the text around a secret stays readable"
    assert count >= 1


@pytest.mark.parametrize("text", [
    '{"api_key": "abcd1234efgh5678"}',
    '{"password": "hunter2hunter2", "user": "bob"}',
    "{'token': 'abcd1234efgh5678'}",
])
def test_secret_assignment_in_json(text: str) -> None:
    redacted, count = Redactor().redact_counted(text)
    assert "[REDACTED:secret_assignment]" in redacted and count == 1


def test_pem_block_is_replaced_whole() -> None:
    redacted = Redactor().redact(f"before\n{PEM}\nafter")
    assert redacted == "before\n[REDACTED:private_key]\nafter"


def test_every_secret_is_counted() -> None:
    text = f"{OPENAI_KEY} and {AWS_KEY} mailed to a@example.com and b@example.org"
    redacted, count = Redactor().redact_counted(text)
    assert count == 4
    assert redacted.count("[REDACTED:api_key]") == 2
    assert redacted.count("[REDACTED:email]") == 2


@pytest.mark.parametrize("prose", [
    "Please keep the token budget under 4000 tokens per request.",
    "Users who forgot it can use the password reset page at https://example.com/reset.",
    "The task-management skill was asked for the secret ingredient of the recipe.",
    "Set max_tokens to 512 and temperature to 0.2; the API key rotation is weekly.",
    "I booked flight LH 454 for 09:30; confirmation code ABC123 follows by mail.",
    "Which month of the year is spelled with an X? None of them.",
    "Visit https://docs.example.com/guide?page=2#intro for details.",
    "Passwords: never reuse them. Tokens expire after an hour.",
    "The ratio was 3:2 and the sk- prefix marks keys.",
])
def test_default_rules_leave_ordinary_prose_alone(prose: str) -> None:
    assert Redactor().redact_counted(prose) == (prose, 0)


@pytest.mark.parametrize("prose", [
    "Use Bearer authentication for the booking API.",
    "Bearer instruments are unregistered securities.",
    "Here's the secret: consistency.",
])
def test_default_rules_leave_prose_about_credentials_alone(prose: str) -> None:
    assert Redactor().redact_counted(prose) == (prose, 0)


def test_extra_rules_extend_the_defaults() -> None:
    redactor = Redactor(extra_rules={
        "ticket": r"\bTICKET-\d{4,}\b",
        "session": r"session=(?P<secret>[0-9a-f]{8,})",
    })
    text = f"TICKET-99812 session=deadbeef42 key {OPENAI_KEY}"
    redacted, count = redactor.redact_counted(text)
    assert redacted == ("[REDACTED:ticket] session=[REDACTED:session] key "
                        "[REDACTED:api_key]")
    assert count == 3
    assert Redactor().redact("TICKET-99812") == "TICKET-99812"


def test_rules_can_replace_the_defaults() -> None:
    redactor = Redactor(rules={"digits": r"\d+"})
    key = "sk-proj-" + "abcdefgh" * 3  # a default-rule secret without digits
    assert redactor.redact_counted(f"call 555 or mail a@example.com, key {key}") == (
        f"call [REDACTED:digits] or mail a@example.com, key {key}", 1)


def test_disabled_redactor_is_identity() -> None:
    text = f"{OPENAI_KEY} Bearer {JWT} a@example.com"
    assert Redactor(enabled=False).redact_counted(text) == (text, 0)
    assert Redactor(enabled=False, extra_rules={"x": "x"}).redact(text) == text


def test_empty_text() -> None:
    assert Redactor().redact_counted("") == ("", 0)


def test_default_rule_names_are_the_marker_kinds() -> None:
    kinds = {"private_key", "api_key", "bearer_token", "url_password", "secret_assignment",
             "email", "jwt", "auth_header", "cookie", "high_entropy"}
    # Two rules find a kind of their own by a second pattern (PuTTY keys, prefix-less
    # vendor shapes); every other rule's name is the kind of its markers.
    assert set(DEFAULT_RULES) == kinds | {"putty_key", "api_key_shape"}


# -- agent label cap ---------------------------------------------------------------------
def test_limiter_caps_agents_per_metric_and_module() -> None:
    limiter = AgentLabelLimiter(cap=3)
    admitted = [limiter.admit("m", "planning", a) for a in ("a", "b", "c")]
    assert admitted == [("a", False), ("b", False), ("c", False)]
    assert limiter.admit("m", "planning", "d") == (names.OVERFLOW_LABEL, True)
    assert limiter.admit("m", "planning", "e") == (names.OVERFLOW_LABEL, True)
    assert limiter.admit("m", "planning", "d") == (names.OVERFLOW_LABEL, True)
    assert limiter.admit("m", "planning", "a") == ("a", False)  # admitted stays admitted
    assert limiter.distinct("m", "planning") == 3
    assert limiter.overflowed("m", "planning") == 3  # uses folded, not distinct values
    # Another module and another metric have caps of their own.
    assert limiter.admit("m", "replies", "d") == ("d", False)
    assert limiter.admit("other", "planning", "d") == ("d", False)
    assert limiter.overflowed("m", "replies") == 0
    assert limiter.distinct("never", "seen") == 0


@pytest.mark.parametrize("cap", [0, -1])
def test_limiter_rejects_cap_below_one(cap: int) -> None:
    with pytest.raises(ValueError, match=f"at least 1, got {cap}"):
        AgentLabelLimiter(cap)


def test_limiter_is_thread_safe() -> None:
    limiter = AgentLabelLimiter(cap=100)
    threads_n, per_thread = 8, 300
    own: list[list[tuple[str, bool]]] = [[] for _ in range(threads_n)]
    shared: list[list[tuple[str, str, bool]]] = [[] for _ in range(threads_n)]
    start = threading.Barrier(threads_n)

    def work(index: int) -> None:
        start.wait()
        for i in range(per_thread):
            own[index].append(limiter.admit("m", "planning", f"t{index}-a{i}"))
            # 150 names shared by every thread hammer the same set concurrently.
            name = f"shared-{i % 150}"
            shared[index].append((name, *limiter.admit("m", "replies", name)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    planning = [r for rs in own for r in rs]
    assert sum(1 for _, over in planning if not over) == 100
    assert limiter.distinct("m", "planning") == 100
    assert limiter.overflowed("m", "planning") == threads_n * per_thread - 100
    outcomes: dict[str, set[tuple[str, bool]]] = {}
    for name, label, over in (r for rs in shared for r in rs):
        assert label == (names.OVERFLOW_LABEL if over else name)
        outcomes.setdefault(name, set()).add((label, over))
    # A shared name is either always admitted or always folded, never both.
    assert all(len(seen) == 1 for seen in outcomes.values())
    admitted = {name for name, seen in outcomes.items() if not next(iter(seen))[1]}
    assert len(admitted) == 100 == limiter.distinct("m", "replies")
    folded_uses = sum(1 for rs in shared for _, _, over in rs if over)
    assert folded_uses == limiter.overflowed("m", "replies") == 50 * 2 * threads_n


# -- guard telemetry (through capture) ---------------------------------------------------
def test_event_goes_on_the_current_recording_span() -> None:
    with capture() as cap:
        tracer = cap.tracer_provider.get_tracer("agent")
        with tracer.start_as_current_span("agent.turn") as outer:
            GuardTelemetry(names.MODULE_PLANNING, "validate_plan").event(
                names.EVENT_HALLUCINATION_DETECTED, "req-1",
                {names.ATTR_HALLUCINATED_AGENT: "time-tool-v1"})
        (event,) = cap.events(names.EVENT_HALLUCINATION_DETECTED)
        assert event.span_name == "agent.turn"
        assert event.trace_id == outer.get_span_context().trace_id
        assert [s.name for s in cap.spans()] == ["agent.turn"]


def test_event_without_a_span_gets_a_span_of_its_own() -> None:
    with capture() as cap:
        GuardTelemetry(names.MODULE_REPLIES, "check_reply").event(
            names.EVENT_FABRICATION_DETECTED, "req-2", {names.ATTR_TIER: names.TIER_ACTION})
        (span,) = cap.spans()
        assert span.name == "guardtrace.check_reply"
        assert dict(span.attributes) == {names.ATTR_REQUEST_ID: "req-2",
                                         names.ATTR_MODULE: names.MODULE_REPLIES}
        assert [e.name for e in span.events] == [names.EVENT_FABRICATION_DETECTED]


def test_event_attributes_order_redaction_and_none() -> None:
    with capture() as cap:
        GuardTelemetry(names.MODULE_PLANNING, "validate_plan").event(
            names.EVENT_HALLUCINATION_DETECTED, "req-3", {
                "zeta": "first given",
                "prompt": f"use key {OPENAI_KEY}",
                "suggested_tools": ["search", "mail ops@example.com"],
                "hall_retry": 2,
                "similarity": 0.93,
                "skipped": None,
            })
        (event,) = cap.events()
        keys = list(event.attributes)
        assert keys[:2] == [names.ATTR_REQUEST_ID, names.ATTR_MODULE]
        assert event.attributes[names.ATTR_REQUEST_ID] == "req-3"
        assert event.attributes[names.ATTR_MODULE] == names.MODULE_PLANNING
        assert "skipped" not in event.attributes
        assert event.attributes["prompt"] == "use key [REDACTED:api_key]"
        assert tuple(event.attributes["suggested_tools"]) == ("search", "mail [REDACTED:email]")
        assert event.attributes["hall_retry"] == 2
        assert event.attributes["similarity"] == 0.93


def test_count_caps_agent_label_and_counts_overflow() -> None:
    metric = names.METRIC_HALLUCINATIONS
    with capture(agent_label_cap=2) as cap:
        telemetry = GuardTelemetry(names.MODULE_PLANNING, "validate_plan")
        for agent in ("a1", "a2", "a3", "a4", "a1", "a3"):
            telemetry.count(metric, agent=agent)
        telemetry.count(metric, value=5, labels={names.ATTR_TIER: names.TIER_READ})
        assert cap.counter_total(metric, agent="a1") == 2
        assert cap.counter_total(metric, agent="a2") == 1
        assert cap.counter_total(metric, agent="a3") == 0
        assert cap.counter_total(metric, agent=names.OVERFLOW_LABEL) == 3
        assert cap.counter_total(metric, tier=names.TIER_READ) == 5
        assert cap.counter_total(metric, module=names.MODULE_PLANNING) == 11
        overflow = cap.metric_points(names.METRIC_LABEL_OVERFLOW)
        assert overflow == [({names.ATTR_METRIC: metric,
                              names.ATTR_MODULE: names.MODULE_PLANNING}, 3)]
        points = cap.metric_points(metric)
        assert all(attrs[names.ATTR_MODULE] == names.MODULE_PLANNING for attrs, _ in points)


def test_counter_total_can_filter_on_the_metric_label() -> None:
    with capture(agent_label_cap=1) as cap:
        telemetry = GuardTelemetry(names.MODULE_PLANNING, "validate_plan")
        telemetry.count(names.METRIC_HALLUCINATIONS, agent="a")
        telemetry.count(names.METRIC_HALLUCINATIONS, agent="b")
        assert cap.counter_total(names.METRIC_LABEL_OVERFLOW,
                                 metric=names.METRIC_HALLUCINATIONS) == 1


@pytest.mark.expect_hook_errors
def test_guarded_returns_fallback_and_counts_the_error() -> None:
    calls: list[tuple[Any, ...]] = []

    def fallback(plan: str, retries: int = 0) -> str:
        calls.append((plan, retries))
        return "fallback"

    @guarded(fallback)
    def broken_hook(plan: str, retries: int = 0) -> str:
        """Docstring kept."""
        raise RuntimeError("internal bug")

    @guarded(fallback)
    def working_hook(plan: str, retries: int = 0) -> str:
        return f"ok:{plan}"

    with capture() as cap:
        assert broken_hook("p1", retries=2) == "fallback"
        assert calls == [("p1", 2)]
        assert working_hook("p2") == "ok:p2"
        assert calls == [("p1", 2)]
        assert cap.counter_total(names.METRIC_HOOK_ERRORS,
                                 operation=broken_hook.__qualname__) == 1
        assert cap.counter_total(names.METRIC_HOOK_ERRORS) == 1
    assert broken_hook.__name__ == "broken_hook"
    assert broken_hook.__doc__ == "Docstring kept."


def test_record_payload_of_a_dict_is_stored_as_json() -> None:
    body = {"plan": [{"tool": "time-tool-v1"}], "note": "ünïcode", "key": OPENAI_KEY}
    with capture() as cap:
        assert record_payload("req-4", names.PAYLOAD_KIND_HALLUCINATION, body,
                              model="gpt-x", retry=2, absent=None)
        assert GuardTelemetry("planning", "op").payload("req-5", "text", "plain body")
        first, second = cap.payloads
        assert first.request_id == "req-4" and first.kind == names.PAYLOAD_KIND_HALLUCINATION
        stored = json.loads(first.body)
        assert stored["plan"] == body["plan"] and stored["note"] == "ünïcode"
        assert stored["key"] == "[REDACTED:api_key]"
        assert first.attributes == {"model": "gpt-x", "retry": "2"}
        assert (second.request_id, second.body) == ("req-5", "plain body")


def test_record_payload_reports_a_drop() -> None:
    with capture(payload_capacity=1) as cap:
        assert record_payload("r", "k", "one") is True
        assert record_payload("r", "k", "two") is False
        assert cap.payload_sink.dropped == 1


def test_log_is_structured_and_redacted(caplog: pytest.LogCaptureFixture) -> None:
    with capture(), caplog.at_level(logging.INFO, logger="guardtrace.planning"):
        GuardTelemetry(names.MODULE_PLANNING, "validate_plan").log(
            logging.WARNING, "plan rejected", request_id="req-6", status="retry",
            error=f"bad key {OPENAI_KEY}", duration_ms=12.34567, step=3)
    (record,) = [r for r in caplog.records if r.name == "guardtrace.planning"]
    fields = record.guardtrace  # type: ignore[attr-defined]
    assert fields == {"operation": "validate_plan", "request_id": "req-6",
                      "error": "bad key [REDACTED:api_key]", "duration_ms": 12.346,
                      "status": "retry", "step": 3}
    assert OPENAI_KEY not in record.getMessage()


def test_capture_restores_the_previous_state() -> None:
    before = _state.current()
    with capture() as cap:
        assert _state.current().payload_sink is cap.payload_sink
    after = _state.current()
    assert after.payload_sink is before.payload_sink
    assert after.tracer_provider is before.tracer_provider
    GuardTelemetry("planning", "op").event("late.event", "r")
    assert cap.events("late.event") == []


def test_new_request_id_uses_the_current_trace() -> None:
    with (capture() as cap,
          cap.tracer_provider.get_tracer("t").start_as_current_span("s") as span):
        assert new_request_id() == f"{span.get_span_context().trace_id:032x}"
    a, b = new_request_id(), new_request_id()
    assert a != b and len(a) == 32


# -- configure / shutdown ----------------------------------------------------------------
@pytest.fixture
def clean_setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in env.ALL:
        monkeypatch.delenv(var.name, raising=False)
    collectors.shutdown(timeout_s=2.0)
    try:
        yield
    finally:
        collectors.shutdown(timeout_s=2.0)


def _down() -> str:
    return f"127.0.0.1:{free_port()}"


def test_configure_none_exporter(clean_setup: None) -> None:
    handle = collectors.configure(exporter="none", set_global=False, kafka_bootstrap=_down())
    assert handle.config.exporter == "none"
    assert handle.tracer_provider is None and handle.meter_provider is None
    assert isinstance(handle.payload_sink, KafkaPayloadSink)  # payload capture is separate
    assert _state.current().payload_sink is handle.payload_sink
    assert collectors.force_flush(timeout_s=2.0)


def test_configure_twice_warns_and_returns_the_first_handle(clean_setup: None) -> None:
    first = collectors.configure(exporter="none", set_global=False, capture_payloads=False,
                                 kafka_bootstrap=_down())
    with pytest.warns(RuntimeWarning, match="already called"):
        second = collectors.configure(exporter="kafka", set_global=False,
                                      kafka_bootstrap=_down())
    assert second is first
    assert second.config.exporter == "none"


def test_shutdown_allows_configure_again(clean_setup: None) -> None:
    first = collectors.configure(exporter="none", set_global=False, capture_payloads=False,
                                 kafka_bootstrap=_down())
    collectors.shutdown(timeout_s=2.0)
    assert isinstance(_state.current().payload_sink, _state.NullPayloadSink)
    collectors.shutdown(timeout_s=2.0)  # a second shutdown is a no-op
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = collectors.configure(exporter="none", set_global=False,
                                      capture_payloads=False, kafka_bootstrap=_down())
    assert second is not first


def test_configure_with_kafka_down_returns_immediately(clean_setup: None) -> None:
    started = time.monotonic()
    handle = collectors.configure(kafka_bootstrap=_down(), set_global=False)
    elapsed = time.monotonic() - started
    # Default producer settings: a broker probe would take seconds, not milliseconds.
    assert elapsed < 0.5, f"configure took {elapsed:.2f}s"
    assert handle.config.exporter == "kafka"
    assert handle.tracer_provider is not None and handle.producer is not None


def test_configure_with_kafka_down_drops_and_counts(clean_setup: None) -> None:
    exported_before = internal_totals(names.METRIC_EXPORT_DROPPED)
    payloads_before = internal_totals(names.METRIC_PAYLOADS_DROPPED)
    handle = collectors.configure(kafka_bootstrap=_down(), set_global=False,
                                  producer_overrides={"bootstrap_timeout_ms": 100})
    telemetry = GuardTelemetry(names.MODULE_PLANNING, "validate_plan")
    telemetry.event(names.EVENT_HALLUCINATION_DETECTED, "req-7")
    telemetry.count(names.METRIC_HALLUCINATIONS, agent="x")
    assert telemetry.payload("req-7", "k", "body") is True
    handle.force_flush(timeout_s=5.0)
    exported = internal_totals(names.METRIC_EXPORT_DROPPED)
    payloads = internal_totals(names.METRIC_PAYLOADS_DROPPED)
    export_key = names.METRIC_EXPORT_DROPPED + "{kafka_unavailable}"
    # At least the span and the counter's points (other instruments may add more).
    assert exported.get(export_key, 0) - exported_before.get(export_key, 0) >= 2
    payload_key = names.METRIC_PAYLOADS_DROPPED + "{kafka_unavailable}"
    assert payloads.get(payload_key, 0) - payloads_before.get(payload_key, 0) == 1


def test_lazy_producer_gives_up_promptly_when_kafka_is_down() -> None:
    producer = LazyProducer(_down(), 1_000_000)  # the settings configure() uses
    done = threading.Event()

    def attempt() -> None:
        producer.get()
        done.set()

    threading.Thread(target=attempt, daemon=True).start()
    assert done.wait(1.0), "LazyProducer.get() still connecting after 1 s"


# -- import hygiene ----------------------------------------------------------------------
def test_agent_import_does_not_load_pipeline_dependencies() -> None:
    program = (
        "import json, sys\n"
        "import guardtrace.collectors as c\n"
        "from guardtrace.transport.broker import free_port\n"
        "c.configure(kafka_bootstrap=f'127.0.0.1:{free_port()}', set_global=False)\n"
        "c.shutdown(timeout_s=1)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert "guardtrace.collectors" in loaded and "kafka" in loaded
    roots = {name.split(".")[0] for name in loaded}
    forbidden = {"clickhouse_connect", "chdb", "streamlit", "grpc"}
    assert roots & forbidden == set()


def test_a_bare_import_of_the_hooks_loads_no_kafka_client_and_no_sdk() -> None:
    program = (
        "import json, sys\n"
        "import guardtrace.collectors as c\n"
        "loaded = sorted(sys.modules)\n"
        "c.KafkaSpanExporter  # the export classes load on first access\n"
        "print(json.dumps([loaded, sorted(sys.modules)]))\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    loaded, after_access = json.loads(result.stdout.strip().splitlines()[-1])
    roots = {name.split(".")[0] for name in loaded}
    assert "guardtrace.collectors" in loaded and "kafka" not in roots
    assert "opentelemetry.sdk" not in loaded and "guardtrace.collectors.export" not in loaded
    assert "kafka" in after_access
    assert set(collectors.__all__) <= set(dir(collectors))
    # Names are listed three times in collectors/__init__ (__all__, the lazy map, the
    # type-checking imports): each must resolve to a real object, not only be listed.
    assert all(getattr(collectors, name) is not None for name in collectors.__all__)


def test_lazy_producer_for_compressed_values_gives_up_promptly_too() -> None:
    producer = LazyProducer(_down(), 1_000_000)
    done = threading.Event()

    def attempt() -> None:
        assert producer.get(compressed_values=True) is None
        done.set()

    threading.Thread(target=attempt, daemon=True).start()
    assert done.wait(1.0), "LazyProducer.get(compressed_values=True) still connecting"
    producer.close(0.1)
    assert producer.get(compressed_values=True) is None and producer.get() is None
