"""Writers for fault injection at the consumer's ``BatchWriter`` seam."""

from __future__ import annotations

from guardtrace.store.rows import DecodedRows
from guardtrace.store.writer import ClickHouseWriter


class Stalled(BaseException):
    """Ends a consumer run that would otherwise retry the same batch forever.

    A BaseException, so the consumer's retry loop (which catches Exception) lets it out.
    """


class GiveUpAfter:
    """A ``BatchWriter`` that ends the run after ``failures`` failed writes in a row.

    The consumer retries a failing batch forever; a test of what must never fail uses
    this so that a regression fails the test instead of hanging it.

    Args:
        inner: The real writer.
        failures: Failed writes in a row to allow (each costs a backoff: 0.5 s, 1 s, ...).
    """

    def __init__(self, inner: ClickHouseWriter, failures: int) -> None:
        self.inner, self.failures, self.in_a_row = inner, failures, 0
        self.errors: list[str] = []

    def write(self, rows: DecodedRows) -> dict[str, int]:
        try:
            written = self.inner.write(rows)
        except Exception as exc:
            self.in_a_row += 1
            self.errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            if self.in_a_row > self.failures:
                raise Stalled(self.errors[-1]) from exc
            raise
        self.in_a_row = 0
        return written
