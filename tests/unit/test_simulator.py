"""The traffic generator: deterministic traffic, real hook telemetry, pacing and the CLI.

Telemetry is captured in memory with real SDK objects (``collectors.testing.capture``);
pacing runs on an injected clock, never on wall time.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from guardtrace import cli
from guardtrace.collectors.testing import CapturedEvent, CapturedPayload, capture
from guardtrace.schemas import names
from guardtrace.simulator import (
    Fleet,
    Scenario,
    SimulationConfig,
    SimulationSummary,
    run_simulation,
)
from guardtrace.simulator.agent import EXCHANGE_PAYLOAD_KIND, SPAN_REQUEST, SimulatedAgent
from guardtrace.simulator.fleet import PlanScript, ReplyScript
from guardtrace.simulator.runner import Pacer

KIB = 1024
RAW_SECRET = re.compile(r"sk-live-[A-Za-z0-9]{16,}|Bearer\s+[A-Za-z0-9]{10,}")


class FakeClock:
    """Monotonic time that moves only when slept on, plus a tick per reading so that a
    run without pacing still sees time pass."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 0.0
        self.tick = tick
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class Run:
    """A simulation's summary and what the capture saw, read before the capture closed."""

    summary: SimulationSummary
    events: list[CapturedEvent]
    payloads: list[CapturedPayload]
    root_spans: list[Any]
    hallucination_points: list[tuple[dict[str, Any], float]]
    fabrication_points: list[tuple[dict[str, Any], float]]


def simulate(config: SimulationConfig, *, cap_size: int = 1000, **kwargs: Any) -> Run:
    with capture(agent_label_cap=cap_size) as cap:
        summary = run_simulation(config, **kwargs)
        return Run(summary, cap.events(), cap.payloads,
                   [s for s in cap.spans() if s.name == SPAN_REQUEST],
                   cap.metric_points(names.METRIC_HALLUCINATIONS),
                   cap.metric_points(names.METRIC_FABRICATIONS))


@pytest.fixture(scope="module")
def run() -> Run:
    # Two modules and a cap of 10, so the long tail of invented names overflows quickly.
    return simulate(SimulationConfig(requests=400, rate=None, seed=7, agents=12, modules=2,
                                     run_id="unit"), cap_size=10)


def fingerprint(fleet: Fleet, n: int) -> list[tuple[Any, ...]]:
    out = []
    for _ in range(n):
        script = fleet.next_request()
        out.append((script.scenario, script.agent, script.step, script.prompt,
                    script.response, script.has_secret))
    return out


# -- determinism ----------------------------------------------------------------------
def test_same_seed_gives_the_same_scenarios_names_and_sizes() -> None:
    assert fingerprint(Fleet(7), 500) == fingerprint(Fleet(7), 500)


def test_different_seeds_give_different_traffic() -> None:
    first, second = fingerprint(Fleet(7), 200), fingerprint(Fleet(8), 200)
    assert [f[0] for f in first] != [s[0] for s in second]
    assert [len(f[3]) for f in first] != [len(s[3]) for s in second]


def test_same_seed_gives_the_same_summary_counts() -> None:
    config = SimulationConfig(requests=250, rate=None, seed=3)
    first, second = simulate(config).summary, simulate(config).summary
    for field in ("requests", "events", "payloads", "payload_bytes", "outcomes", "seed"):
        assert getattr(first, field) == getattr(second, field), field
    # ... but request ids never repeat across runs.
    assert first.request_id_prefix != second.request_id_prefix
    other = simulate(SimulationConfig(requests=250, rate=None, seed=4)).summary
    assert (other.events, other.payload_bytes) != (first.events, first.payload_bytes)


def test_every_scenario_gets_the_outcome_the_script_intends() -> None:
    # The scripts are built for what the guards must decide; the hooks decide it.
    fleet = Fleet(11, agents=20, modules=4)
    seen: Counter[str] = Counter()
    with capture() as cap:
        agent = SimulatedAgent(cap.tracer_provider.get_tracer("test"))
        for i in range(500):
            script = fleet.next_request()
            outcome = agent.run(script, f"r{i}")
            assert outcome == script.scenario, (script.scenario, outcome, script.step)
            seen[outcome] += 1
    assert set(seen) == set(Scenario)


def test_fleet_shape_and_invalid_sizes() -> None:
    fleet = Fleet(1, agents=12, modules=3)
    assert [a.name for a in fleet.agents][:3] == ["agent-01", "agent-02", "agent-03"]
    assert {a.module for a in fleet.agents} == set(fleet.modules) and len(fleet.modules) == 3
    assert len(Fleet(1, agents=12, modules=10).modules) == 10  # numbered beyond the named
    for agents, modules in ((0, 1), (3, 4), (3, 0)):
        with pytest.raises(ValueError):
            Fleet(1, agents=agents, modules=modules)
    for bad in ({"requests": -1}, {"rate": 0}, {"rate": -2.0}, {"duration_s": 0},
                {"agents": 0}, {"agents": 2, "modules": 3}):
        with pytest.raises(ValueError):
            SimulationConfig(**bad)  # type: ignore[arg-type]


# -- what was emitted ------------------------------------------------------------------
def test_summary_events_equal_the_span_events_captured(run: Run) -> None:
    summary = run.summary
    assert summary.requests == 400 and summary.stopped_by == "requests" and summary.ok
    assert summary.events == dict(Counter(e.name for e in run.events))
    # Every guard event, and the evaluation result each verdict is also emitted as.
    assert set(summary.events) == {*names.GUARD_EVENTS, names.EVENT_EVALUATION_RESULT}
    assert summary.payloads == len(run.payloads)
    assert sum(summary.outcomes.values()) == 400
    assert summary.outcomes[Scenario.PLAN_UNRECOVERABLE] \
        == summary.events[names.EVENT_HALLUCINATION_UNRECOVERABLE]
    assert summary.outcomes[Scenario.PLAN_RECOVERED] \
        == summary.events[names.EVENT_HALLUCINATION_RECOVERED]
    json.dumps(summary.to_dict())  # the CLI prints it


def test_each_request_is_one_trace_with_its_events(run: Run) -> None:
    roots = {s.attributes[names.ATTR_REQUEST_ID]: s for s in run.root_spans}
    assert len(roots) == 400
    assert all(rid.startswith("sim-unit-") for rid in roots)
    for event in run.events:
        root = roots[event.attributes[names.ATTR_REQUEST_ID]]
        assert event.trace_id == root.context.trace_id
        assert event.attributes[names.ATTR_MODULE] == root.attributes[names.ATTR_MODULE]
        assert event.span_name != SPAN_REQUEST  # on the step's child span


def test_invented_names_overflow_the_agent_label_cap(run: Run) -> None:
    detected = [e for e in run.events if e.name == names.EVENT_HALLUCINATION_DETECTED]
    per_module: dict[str, set[str]] = {}
    for event in detected:
        per_module.setdefault(event.attributes[names.ATTR_MODULE], set()).add(
            event.attributes[names.ATTR_AGENT])
    assert all(len(agents) > 10 for agents in per_module.values())  # a long tail ...
    common = {"web_search", "send_email", "sql_query"}
    assert common & set().union(*per_module.values())  # ... with a common head
    labels = Counter(attrs[names.ATTR_AGENT] for attrs, _ in run.hallucination_points)
    assert labels[names.OVERFLOW_LABEL] == len(per_module)  # one __other__ per module
    assert len(run.hallucination_points) == (10 + 1) * len(per_module)  # cap + __other__
    assert sum(v for _, v in run.hallucination_points) == len(detected)


def test_reply_guards_use_fleet_agents_and_modules(run: Run) -> None:
    assert run.fabrication_points
    for attrs, _ in run.fabrication_points:
        assert re.fullmatch(r"agent-\d\d", attrs[names.ATTR_AGENT])
        assert attrs[names.ATTR_MODULE] in ("travel", "support")
        assert attrs[names.ATTR_TIER] in (names.TIER_ACTION, names.TIER_READ,
                                          names.TIER_TEXT_TOOL_CALL, names.TIER_REPETITION)


def test_payload_sizes_are_realistic(run: Run) -> None:
    exchanges = [p for p in run.payloads if p.kind == EXCHANGE_PAYLOAD_KIND]
    assert len(exchanges) == 400
    prompts = exchanges + [p for p in run.payloads
                           if p.kind == names.PAYLOAD_KIND_HALLUCINATION]
    sizes = [len(p.body.encode()) for p in prompts]
    assert min(sizes) >= 1 * KIB and max(sizes) <= 200 * KIB
    assert max(len(p.body.encode()) for p in run.payloads) <= 200 * KIB
    assert max(sizes) > 32 * KIB  # a long tail, not one size
    assert sorted(sizes)[len(sizes) // 2] < 16 * KIB


def test_fake_secrets_arrive_redacted(run: Run) -> None:
    bodies = [p.body for p in run.payloads]
    assert not [b for b in bodies if RAW_SECRET.search(b)]
    for event in run.events:
        for value in event.attributes.values():
            assert not RAW_SECRET.search(str(value))
    marks = " ".join(bodies)
    assert "[REDACTED:api_key]" in marks and "[REDACTED:bearer_token]" in marks


def test_secrets_are_in_the_scripts_before_redaction() -> None:
    fleet = Fleet(7)
    scripts = [fleet.next_request() for _ in range(300)]
    with_secret = [s for s in scripts if s.has_secret]
    assert with_secret and all(RAW_SECRET.search(s.prompt) for s in with_secret)
    assert any(isinstance(s.step, ReplyScript) and RAW_SECRET.search(s.step.reply)
               for s in with_secret)
    plans = [s.step for s in scripts if isinstance(s.step, PlanScript)]
    assert any(len(p.plans) == 3 for p in plans)  # two retries before recovery/failure


# -- pacing and stopping ---------------------------------------------------------------
def test_rate_spaces_requests_on_the_clock() -> None:
    clock = FakeClock()
    summary = simulate(SimulationConfig(requests=50, rate=10.0), clock=clock,
                       sleep=clock.sleep).summary
    assert summary.requests == 50
    # The first request goes at once, the 50th 4.9 s later.
    assert sum(clock.sleeps) == pytest.approx(4.9)
    assert summary.duration_s == pytest.approx(4.9)


def test_unlimited_rate_never_sleeps() -> None:
    clock = FakeClock(tick=0.001)
    simulate(SimulationConfig(requests=30, rate=None), clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_pacer_does_not_burst_after_falling_behind() -> None:
    clock = FakeClock()
    pacer = Pacer(2.0, clock, clock.sleep)
    stop = threading.Event()
    pacer.wait(stop)
    clock.now += 10.0  # one request took 10 s
    pacer.wait(stop)
    pacer.wait(stop)
    assert clock.sleeps == [pytest.approx(0.5)]


def test_duration_stops_a_run_without_a_request_limit() -> None:
    clock = FakeClock()
    summary = simulate(SimulationConfig(requests=0, duration_s=2.0, rate=10.0), clock=clock,
                       sleep=clock.sleep).summary
    assert summary.stopped_by == "duration"
    assert summary.requests == 20
    # Unlimited rate: time passes only as the clock is read.
    clock = FakeClock(tick=0.01)
    summary = simulate(SimulationConfig(requests=0, duration_s=1.0, rate=None),
                       clock=clock, sleep=clock.sleep).summary
    assert summary.stopped_by == "duration" and 0 < summary.requests < 100


def test_the_request_limit_wins_when_it_comes_first() -> None:
    clock = FakeClock()
    summary = simulate(SimulationConfig(requests=5, duration_s=60.0, rate=1.0), clock=clock,
                       sleep=clock.sleep).summary
    assert (summary.requests, summary.stopped_by) == (5, "requests")


def test_stop_event_ends_the_run_cleanly() -> None:
    stop = threading.Event()
    clock = FakeClock()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 7:
            stop.set()  # what the SIGTERM handler does, mid-sleep

    progress: list[tuple[int, int | None]] = []
    summary = simulate(SimulationConfig(requests=0, rate=10.0), stop_event=stop,
                       on_progress=lambda done, total: progress.append((done, total)),
                       clock=clock, sleep=sleep).summary
    assert (summary.requests, summary.stopped_by) == (7, "signal")
    assert progress[-1] == (7, None)


def test_flushes_periodically_and_stops_when_telemetry_is_lost() -> None:
    calls: list[int] = []

    def flush() -> bool:
        calls.append(1)
        return True

    summary = simulate(SimulationConfig(requests=45, rate=None, flush_every=10),
                       flush=flush).summary
    assert len(calls) == 4 + 1 and summary.flushed  # every 10 requests, then at the end

    summary = simulate(SimulationConfig(requests=45, rate=None, flush_every=10),
                       flush=lambda: False).summary
    assert (summary.requests, summary.stopped_by) == (10, "telemetry_lost")
    assert not summary.ok


# -- the command line ------------------------------------------------------------------
@pytest.mark.parametrize(("args", "flag"), [
    (["--rate", "-1"], "--rate"),
    (["--rate", "abc"], "--rate"),
    (["--rate", "0"], "--rate"),
    (["--agents", "0"], "--agents"),
    (["--modules", "0"], "--modules"),
    (["--requests", "-1"], "--requests"),
    (["--duration", "0"], "--duration"),
    (["--seed", "x"], "--seed"),
])
def test_bad_arguments_exit_2_naming_the_flag(args: list[str], flag: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["simulate", *args])
    assert exit_info.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err


def test_more_modules_than_agents_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "--agents", "3", "--modules", "4"]) == 2
    assert "argument --modules" in capsys.readouterr().err


def test_help_says_it_is_a_traffic_generator(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["simulate", "--help"])
    out = capsys.readouterr().out
    assert "TRAFFIC GENERATOR" in out and "hooks never use it" in out
    for flag in ("--requests", "--rate", "--seed", "--duration", "--agents", "--modules",
                 "--bootstrap"):
        assert flag in out


def test_without_a_span_exporter_it_says_so(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GUARDTRACE_EXPORTER", "none")
    monkeypatch.setenv("GUARDTRACE_CAPTURE_PAYLOADS", "false")
    assert cli.main(["simulate", "--requests", "3"]) == 1
    assert "GUARDTRACE_EXPORTER to kafka or otlp" in capsys.readouterr().err
