"""Where a running ``guardtrace up`` serves the API, recorded beside the store it holds.

The embedded store (chDB) is one process's: while ``up`` runs, no other process can
open it. ``up`` therefore writes ``guardtrace-up.json`` into the store's directory (its
process id, the API's URL and the database it serves) once the API listens, and removes
it when it stops; the CLI's query commands read it and go through the API instead of
opening the store. A record whose process has gone (``up`` was killed) is ignored.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["RECORD_NAME", "RunningUp"]

logger = logging.getLogger("guardtrace.api")

RECORD_NAME = "guardtrace-up.json"


@dataclass(frozen=True)
class RunningUp:
    """A ``guardtrace up`` holding an embedded store.

    Attributes:
        pid: Its process id.
        api_url: ``http://host:port`` of its API; empty when it serves none.
        database: The database its API serves.
    """

    pid: int
    api_url: str
    database: str

    @staticmethod
    def record_path(store_dir: Path) -> Path:
        return store_dir / RECORD_NAME

    def write(self, store_dir: Path) -> None:
        """Record this instance in ``store_dir`` (replacing the file whole, never half)."""
        path = self.record_path(store_dir)
        partial = path.with_name(f".{RECORD_NAME}.{self.pid}")
        partial.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(partial, path)

    def remove(self, store_dir: Path) -> None:
        """Remove the record, if it is still this instance's."""
        if RunningUp.read(store_dir, require_alive=False) == self:
            try:
                self.record_path(store_dir).unlink()
            except FileNotFoundError:
                pass

    @property
    def alive(self) -> bool:
        """Whether the process still exists (it may not be ``up`` if the id was reused:
        the caller finds out when the API does not answer)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # someone else's process: it exists
        return True

    @classmethod
    def read(cls, store_dir: Path, require_alive: bool = True) -> RunningUp | None:
        """The instance recorded in ``store_dir``; None when there is no record, it is not
        one this version wrote, or (with ``require_alive``) its process has gone."""
        try:
            data = json.loads(cls.record_path(store_dir).read_text(encoding="utf-8"))
            found = cls(pid=int(data["pid"]), api_url=str(data["api_url"]),
                        database=str(data["database"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError) as exc:
            logger.warning("ignoring %s: %s", cls.record_path(store_dir), exc)
            return None
        if require_alive and not found.alive:
            return None
        return found
