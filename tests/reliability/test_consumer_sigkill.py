"""Consumers killed with SIGKILL at random moments lose and duplicate nothing.

Telemetry flows from the real collectors (``configure()``, spans with guard events,
counters, debug payloads) into Kafka while ``guardtrace consume`` runs in a process of
its own, with a store of its own. At seeded random moments after it has joined its group
the consumer is killed with SIGKILL (no handler runs: a batch may be half decoded,
written but not committed, or mid-insert) and started again, at least five times and
for as long as events are still being emitted. After each kill, while nothing holds the
store, the committed offsets must not pass what is stored (at least once). A last
consumer runs ``--until-idle``. Then, read back from the store by a separate process
(chDB allows one process per directory): every emitted event id exactly once, every
request id present, every payload exactly once.

Sizes: 30,000 events in CI; 200,000 with ``GUARDTRACE_RELIABILITY_FULL=1``. The seed is
in the test id (``[seed=N]``); ``GUARDTRACE_RELIABILITY_SEED=N`` replays a run's kill
schedule (the timing of everything else still varies).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient

from guardtrace import collectors
from guardtrace.collectors.emit.telemetry import GuardTelemetry, internal_totals
from guardtrace.schemas import names
from guardtrace.transport.broker import EmbeddedBroker
from guardtrace.transport.topics import TopicSet, ensure_topics
from tests.support.consumer_process import ConsumerProcess, run_guardtrace, store_env
from tests.support.store_query import query_store

from .scale import FULL, seconds, size

EVENTS = size(ci=30_000, full=200_000)
MIN_KILLS = 5
PAYLOAD_EVERY = 10
# Emission is paced over about as long as the kills take (each restart costs ~5 s: the
# killed member's 2 s session must expire before the group admits the next one), so
# every kill lands while telemetry is flowing. The full run emits as fast as it can and
# keeps killing until emission is done.
EMIT_SECONDS = seconds(ci=25.0, full=0.0)
KILL_AFTER_S = (0.0, 2.0)
SEED = int(os.environ.get("GUARDTRACE_RELIABILITY_SEED") or random.SystemRandom().randrange(2**31))

pytestmark = [pytest.mark.usefixtures("collectors_reset")]


class Emitter(threading.Thread):
    """Emits ``count`` guard events through the real collector path, paced.

    Each request is one span with a guard event and a counter increment (one
    spans-topic message per request: each is its own trace); every tenth request also
    records a debug payload.

    Args:
        settings: Keyword arguments for ``collectors.configure``.
        count: Requests to emit.
        duration_s: Spread the emission over about this long (0: as fast as possible).
    """

    def __init__(self, settings: dict[str, Any], count: int, duration_s: float) -> None:
        super().__init__(name="reliability-emitter", daemon=True)
        self.settings, self.count, self.duration_s = settings, count, duration_s
        self.payloads = 0
        self.flushed = True
        self.error: BaseException | None = None
        self.request_ids = [f"kill-{i}" for i in range(count)]

    def run(self) -> None:
        try:
            telemetry = collectors.configure(set_global=False, **self.settings)
            guard = GuardTelemetry(names.MODULE_REPLIES, "fabrication_detection")
            tracer = telemetry.tracer_provider.get_tracer("reliability")
            started = time.monotonic()
            for i, request_id in enumerate(self.request_ids):
                with tracer.start_as_current_span(
                        "reply.check", attributes={names.ATTR_REQUEST_ID: request_id}):
                    guard.event(names.EVENT_FABRICATION_DETECTED, request_id, {
                        names.ATTR_TIER: names.TIER_ACTION, names.ATTR_AGENT: f"a-{i % 7}"})
                    guard.count(names.METRIC_FABRICATIONS, agent=f"a-{i % 7}",
                                labels={names.ATTR_TIER: names.TIER_ACTION})
                    if i % PAYLOAD_EVERY == 0:
                        self.payloads += guard.payload(
                            request_id, names.PAYLOAD_KIND_FABRICATION,
                            {"reply": f"I'm deploying build {i} now.", "tools_fired": []})
                # The span queue drops when full (never blocking an agent); a test that
                # must not drop flushes as it goes, as `guardtrace emit-test` does.
                if (i + 1) % 500 == 0:
                    self.flushed = telemetry.force_flush(30) and self.flushed
                    ahead = started + self.duration_s * (i + 1) / self.count - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
            self.flushed = telemetry.force_flush(30) and self.flushed
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def committed_offsets(admin: KafkaAdminClient, group: str, topic: str) -> int:
    """Sum of the group's committed offsets over ``topic``'s partitions."""
    offsets = admin.list_group_offsets(group).get(group, {})
    return sum(meta.offset for tp, meta in offsets.items() if tp.topic == topic)


@pytest.mark.timeout(1800 if FULL else 300)
@pytest.mark.parametrize("seed", [SEED], ids=lambda seed: f"seed={seed}")
def test_consumer_killed_at_random_moments_loses_and_duplicates_nothing(
        broker: EmbeddedBroker, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    suffix = uuid.uuid4().hex[:10]
    store = tmp_path / "store"
    env = store_env(broker.bootstrap, store, suffix, GUARDTRACE_BATCH_MAX_SECONDS="0.3",
                    GUARDTRACE_BATCH_MAX_ROWS="5000")
    spans_topic, group = env["GUARDTRACE_SPANS_TOPIC"], env["GUARDTRACE_CONSUMER_GROUP"]
    payloads_topic, store_url = env["GUARDTRACE_PAYLOADS_TOPIC"], f"chdb://{store}"
    ensure_topics(broker.bootstrap, TopicSet.resolve(environ=env), partitions=2)
    migrated = run_guardtrace(["migrate"], env)
    assert migrated.returncode == 0, migrated.stderr

    drops_before = sum(internal_totals(names.METRIC_EXPORT_DROPPED).values()) + sum(
        internal_totals(names.METRIC_PAYLOADS_DROPPED).values())
    emitter = Emitter({"kafka_bootstrap": broker.bootstrap, "exporter": "kafka",
                       "spans_topic": spans_topic,
                       "metrics_topic": env["GUARDTRACE_METRICS_TOPIC"],
                       "payloads_topic": env["GUARDTRACE_PAYLOADS_TOPIC"],
                       "metric_export_interval_ms": 1000}, EVENTS, EMIT_SECONDS)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    kills: list[dict[str, Any]] = []
    emitter.start()
    try:
        # ...and until a killed consumer had committed something: a schedule whose kills
        # all came within ~1 s of joining (seed=1181620289: five of six under 0.5 s) killed
        # every consumer before its first commit, and the check below failed.
        while len(kills) < MIN_KILLS or emitter.is_alive() or not kills[-1]["committed"]:
            consumer = ConsumerProcess(env, tmp_path / f"consumer-{len(kills)}.log")
            joined_s = consumer.wait_assigned()
            delay_s = rng.uniform(*KILL_AFTER_S)
            time.sleep(delay_s)
            consumer.kill()
            # Nothing holds the store between a kill and the next start: check it now.
            # At-least-once means offsets never pass what is stored (one event per spans
            # record, one payload row per payloads record).
            committed = committed_offsets(admin, group, spans_topic)
            committed_payloads = committed_offsets(admin, group, payloads_topic)
            (stored,), (stored_payloads,) = (rows[0] for rows in query_store(
                store_url, "guardtrace", "SELECT count() FROM {db}.span_events FINAL",
                "SELECT count() FROM {db}.payloads FINAL"))
            kills.append({"joined_s": round(joined_s, 2), "killed_after_s": round(delay_s, 2),
                          "committed": committed, "stored": stored})
            assert committed <= stored and committed_payloads <= stored_payloads, kills
    finally:
        emitter.join(timeout=300)
    assert emitter.error is None, f"emission failed: {emitter.error!r}"
    assert emitter.flushed
    drops_after = sum(internal_totals(names.METRIC_EXPORT_DROPPED).values()) + sum(
        internal_totals(names.METRIC_PAYLOADS_DROPPED).values())
    assert drops_after == drops_before, "the collectors dropped telemetry: emitted is unknown"
    collectors.shutdown()  # the last counter export, then nothing more is sent

    final = ConsumerProcess(env, tmp_path / "consumer-final.log", ["--until-idle", "3"])
    summary = final.wait(timeout_s=600 if FULL else 180)
    admin.close()
    print(f"seed={seed} events={EVENTS} kills={kills} final={summary}")

    events, distinct, requests, missing, payloads, payload_rows, dead = query_store(
        store_url, "guardtrace",
        "SELECT count() FROM {db}.span_events FINAL",
        "SELECT uniqExact(event_id) FROM {db}.span_events FINAL",
        "SELECT uniqExact(request_id) FROM {db}.span_events FINAL",
        # Request ids emitted but not stored: the emitted ids are kill-0 .. kill-(N-1).
        f"SELECT count() FROM numbers({EVENTS}) WHERE concat('kill-', toString(number)) "
        "NOT IN (SELECT request_id FROM {db}.span_events FINAL)",
        "SELECT uniqExact(payload_id) FROM {db}.payloads FINAL",
        "SELECT count() FROM {db}.payloads FINAL",
        "SELECT count() FROM {db}.dead_letters FINAL")
    context = f"seed={seed} kills={kills}"
    assert len(kills) >= MIN_KILLS
    # The killed consumers did real work before dying: offsets were committed.
    assert kills[-1]["committed"] > 0, context
    assert events[0][0] == distinct[0][0] == EVENTS, context
    assert requests[0][0] == EVENTS and missing[0][0] == 0, context
    assert payloads[0][0] == payload_rows[0][0] == emitter.payloads == EVENTS // PAYLOAD_EVERY
    assert dead[0][0] == 0 and summary["dead_letters"] == 0, context
    # Events a killed consumer had stored without committing them: the next run wrote
    # them again, and the reads above still saw each once.
    print(f"kills that left stored, uncommitted events (replayed later): "
          f"{sum(k['stored'] > k['committed'] for k in kills)} of {len(kills)}")
