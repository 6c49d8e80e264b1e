"""Real services for integration tests: a Tansu broker and the embedded ClickHouse engine.

The fixtures live in :mod:`tests.support.services`, shared with the reliability suite;
importing them here registers them for this directory (pytest collects fixture
functions from a conftest's namespace). ``Pipeline`` and ``wait_for`` are re-exported
for the tests that import them from this module.
"""

from __future__ import annotations

from tests.support.services import (  # noqa: F401 - fixtures are found by name
    Pipeline,
    broker,
    ch_client,
    chdb_dir,
    collectors_reset,
    pipeline,
    wait_for,
)

__all__ = ["Pipeline", "wait_for"]
