"""`guardtrace trace | payload | requests | stats` print the same whether they read the
store themselves or go through the API of the `guardtrace up` that holds it.

Both ways run here, in this process, over the same real embedded store: once with no
record of a running up beside the store (the commands open it), once with a record that
names a live API server on it (the commands must go through that server: it counts
what it answers).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardtrace import cli
from guardtrace.api import parameters
from guardtrace.api.handlers import Answer, QueryApi
from guardtrace.api.running import RunningUp
from guardtrace.api.server import ApiServer
from guardtrace.api.store_link import StoreLink
from guardtrace.cli import query
from guardtrace.schemas import names
from tests.support.services import ch_client, chdb_dir  # noqa: F401 - fixtures, by name

from .test_api_handlers import (  # noqa: F401 - seeded is a fixture
    FABRICATED,
    INCOMPLETE,
    RECOVERED,
    SLASHED,
    SeededStore,
    seeded,
)


class CountingApi(QueryApi):
    """The API, counting the requests it answers."""

    answered = 0

    def answer(self, method: str, target: str, headers: Any, peer: str | None = None) -> Answer:
        CountingApi.answered += 1
        return super().answer(method, target, headers, peer)


@pytest.fixture(scope="module")
def api_url(seeded: SeededStore) -> Iterator[str]:  # noqa: F811
    server = ApiServer(CountingApi(StoreLink(seeded.config, seeded.client)), 0).start()
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


@pytest.fixture
def through_api(api_url: str, seeded: SeededStore, chdb_dir: Path) -> Iterator[None]:  # noqa: F811
    """A record, beside the store, of an up serving ``api_url`` (this process: alive)."""
    record = RunningUp(pid=os.getpid(), api_url=api_url, database=seeded.config.database)
    record.write(chdb_dir)
    yield
    record.remove(chdb_dir)
    assert not RunningUp.record_path(chdb_dir).exists()


COMMANDS = [
    ["trace", RECOVERED], ["trace", RECOVERED, "--json"], ["trace", SLASHED],
    ["payload", RECOVERED], ["payload", FABRICATED, "--json"], ["payload", INCOMPLETE],
    ["payload", RECOVERED, "--kind", names.PAYLOAD_KIND_FABRICATION],
    ["trace", "no-such-request"], ["payload", "no-such-request"],
    ["requests", "--outcome", "all"], ["requests", "--json", "--since", "90m"],
    ["requests", "--outcome", "recovered", "--module", names.MODULE_REPLIES],
    ["stats"], ["stats", "--json"],
]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _store_args(seeded: SeededStore, chdb_dir: Path) -> list[str]:  # noqa: F811
    return ["--clickhouse-url", f"chdb://{chdb_dir}", "--database", seeded.config.database]


def test_each_command_prints_the_same_through_the_api(
        seeded: SeededStore, chdb_dir: Path, api_url: str,  # noqa: F811
        capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:
    store = _store_args(seeded, chdb_dir)
    direct = [run(capsys, [*argv, *store]) for argv in COMMANDS]
    assert CountingApi.answered == 0
    request.getfixturevalue("through_api")
    via_api = [run(capsys, [*argv, *store]) for argv in COMMANDS]
    for argv, straight, through in zip(COMMANDS, direct, via_api, strict=True):
        assert through == straight, argv
    # Each command pinged the API, then read through it.
    assert CountingApi.answered >= 2 * len(COMMANDS)
    outcomes = {tuple(argv): result[0] for argv, result in zip(COMMANDS, direct, strict=True)}
    assert outcomes[("trace", "no-such-request")] == 1
    assert outcomes[("payload", RECOVERED, "--kind", names.PAYLOAD_KIND_FABRICATION)] == 1
    assert all(code == 0 for argv, code in outcomes.items() if "no-such-request" not in argv
               and "--kind" not in argv)


def test_a_record_of_an_up_that_has_gone_is_ignored(
        seeded: SeededStore, chdb_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    # A process id no process has: up was killed, its record stayed.
    gone = RunningUp(pid=2**22 + 12345, api_url="http://127.0.0.1:1",
                     database=seeded.config.database)
    gone.write(chdb_dir)
    try:
        assert RunningUp.read(chdb_dir) is None
        code, out, err = run(capsys, ["trace", RECOVERED, *_store_args(seeded, chdb_dir)])
        assert (code, err) == (0, "") and RECOVERED in out
    finally:
        gone.remove(chdb_dir)


def test_the_cli_lists_as_many_requests_as_the_api_may() -> None:
    assert query.MAX_LIMIT == parameters.MAX_LIMIT
