"""Imports follow the data path: hooks -> Kafka -> consumers -> store <- alerts, dashboard,
API, CLI.

Read from the source (every ``import`` and ``from ... import``, relative ones resolved,
lazy ones inside functions included), so a forbidden import fails here even when no
test happens to execute it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The read side of the store: what only readers (dashboard, API, CLI) may import.
READ_SIDE = ("guardtrace.store.queries", "guardtrace.store.request_queries",
             "guardtrace.store.overview_queries", "guardtrace.store.pipeline_queries",
             "guardtrace.store.alert_queries", "guardtrace.store.query_sql",
             "guardtrace.alerts", "guardtrace.dashboard", "guardtrace.api", "guardtrace.cli")

# folder -> module prefixes nothing in it may import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "collectors": ("guardtrace.store", "guardtrace.transport", "guardtrace.consumers",
                   "guardtrace.dashboard", "guardtrace.api", "guardtrace.cli",
                   "guardtrace.simulator", "guardtrace.integrations"),
    # Adapters run in the agent's process, on top of the hooks: nothing of the server side.
    "integrations": ("guardtrace.store", "guardtrace.transport", "guardtrace.consumers",
                     "guardtrace.dashboard", "guardtrace.api", "guardtrace.cli",
                     "guardtrace.simulator"),
    "transport": READ_SIDE + ("guardtrace.consumers", "guardtrace.store"),
    "consumers": READ_SIDE,
    # The store is below the consumers: they import it, never the reverse.
    "store": ("guardtrace.consumers", "guardtrace.dashboard", "guardtrace.cli",
              "guardtrace.alerts", "guardtrace.api"),
    # Alerts read the store (its read queries, and write their own alert_events), consumer
    # lag from the transport, and nothing of the write path, the hooks or the UIs.
    "alerts": ("guardtrace.collectors", "guardtrace.consumers", "guardtrace.dashboard",
               "guardtrace.cli", "guardtrace.simulator", "guardtrace.integrations",
               "guardtrace.store.writer"),
    # Readers read through the store; the dashboard never touches the write side.
    "dashboard": ("guardtrace.consumers", "guardtrace.cli", "guardtrace.store.writer"),
    # The HTTP query API reads through the store like the dashboard, and apart from it
    # (the shared-token rule both apply is in schemas/): the store's read side and the
    # schemas only.
    "api": ("guardtrace.consumers", "guardtrace.collectors", "guardtrace.transport",
            "guardtrace.dashboard", "guardtrace.cli", "guardtrace.simulator",
            "guardtrace.integrations", "guardtrace.store.writer"),
    # The CLI launches the dashboard (a path lookup), it does not import it.
    "cli": ("guardtrace.dashboard",),
}
# The write side's own modules inside store/: they must not import the read side either.
WRITE_SIDE_STORE = ("writer.py", "rows.py", "tables.py", "connection.py", "migrate.py",
                    "cluster_migrations.py", "access.py", "alert_events.py",
                    "pandas_free_insert.py")


def _module_name(path: Path) -> str:
    parts = ["guardtrace", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (``from x import y``: x and x.y)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _violations(folder: str, files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {name}"
            for path in files for name in sorted(imports_of(path))
            if any(name == f or name.startswith(f + ".") for f in forbidden)]


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_import_runs_against_the_data_flow(folder: str) -> None:
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, folder
    assert _violations(folder, files, FORBIDDEN[folder]) == []


def test_the_stores_write_side_imports_none_of_its_read_side() -> None:
    files = [ROOT / "store" / name for name in WRITE_SIDE_STORE]
    assert _violations("store", files, READ_SIDE) == []


def test_the_checker_sees_relative_and_lazy_imports() -> None:
    # The check is only as good as its reading of imports: a relative import inside a
    # function must come out as the absolute module it names.
    sample = ROOT / "cli" / "pipeline.py"
    assert "guardtrace.consumers.pipeline" in imports_of(sample)
    assert "guardtrace.store.connection.StoreConfig" in imports_of(sample)
