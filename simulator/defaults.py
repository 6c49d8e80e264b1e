"""The simulator's defaults, in a module light enough for ``guardtrace --help`` to import."""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_AGENTS", "DEFAULT_MODULES", "DEFAULT_RATE", "DEFAULT_REQUESTS",
           "DEFAULT_SEED"]

DEFAULT_REQUESTS: Final = 1000
# Modest on purpose: a demo left running should not fill an in-memory broker quickly.
# `--rate unlimited` is for tests and load.
DEFAULT_RATE: Final = 20.0
# Fixed, so two plain runs send the same traffic.
DEFAULT_SEED: Final = 7
DEFAULT_AGENTS: Final = 50
DEFAULT_MODULES: Final = 5
