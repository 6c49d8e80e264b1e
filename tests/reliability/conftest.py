"""Fixtures of the fault-injection suite: the same real services as the integration tests.

Tansu and chDB start once per session and are shared with ``tests/integration`` (see
:mod:`tests.support.services`); every test gets its own database, topics and group.
"""

from __future__ import annotations

import pytest

from tests.support.services import (  # noqa: F401 - fixtures are found by name
    Pipeline,
    broker,
    ch_client,
    chdb_dir,
    collectors_reset,
    pipeline,
    wait_for,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reliability: fault-injection test against the real broker and ClickHouse "
                   "(GUARDTRACE_RELIABILITY_FULL=1 runs the full sizes)")
