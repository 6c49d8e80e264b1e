"""A traffic generator for demos and tests: a simulated agent fleet on the real hooks.

Nothing in the guard hooks uses this package. It plays a deterministic fleet of agents
(:class:`Fleet`, seeded) through :func:`~guardtrace.collectors.generate_validated_plan`,
:class:`~guardtrace.collectors.FabricationGuard` and
:class:`~guardtrace.collectors.VerificationLoop`, so everything it emits is what those
hooks emit, through whatever telemetry is configured::

    from guardtrace import collectors
    from guardtrace.simulator import SimulationConfig, run_simulation

    collectors.configure(kafka_bootstrap="127.0.0.1:9092")
    summary = run_simulation(SimulationConfig(requests=500, rate=None, seed=7))
    collectors.shutdown()
    print(summary.events)

The command line is ``guardtrace simulate`` (:mod:`guardtrace.cli.simulate`).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Fleet",
    "FleetAgent",
    "RequestScript",
    "Scenario",
    "SimulationConfig",
    "SimulationSummary",
    "run_simulation",
]

# Resolved on first use: `guardtrace --help` imports the command module of this package
# and must not pay for OpenTelemetry and the hooks.
_LAZY = {
    "Fleet": "guardtrace.simulator.fleet",
    "FleetAgent": "guardtrace.simulator.fleet",
    "RequestScript": "guardtrace.simulator.fleet",
    "Scenario": "guardtrace.simulator.fleet",
    "SimulationConfig": "guardtrace.simulator.runner",
    "SimulationSummary": "guardtrace.simulator.runner",
    "run_simulation": "guardtrace.simulator.runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'guardtrace.simulator' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
