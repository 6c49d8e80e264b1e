"""The `guardtrace` command: one module per command group, `main` dispatches."""

from .main import main

__all__ = ["main"]
