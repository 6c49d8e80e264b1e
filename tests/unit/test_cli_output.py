"""Console output of the serving commands outlives the reader of its pipe."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardtrace.cli.support import keep_serving_without_a_reader


@pytest.fixture
def orphaned_pipe() -> Iterator[io.TextIOWrapper]:
    """A text stream on a pipe whose reading end is already closed (tee died on Ctrl-C)."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    stream = io.TextIOWrapper(io.FileIO(write_fd, "w"), line_buffering=True)
    yield stream
    stream.close()


def as_console(monkeypatch: pytest.MonkeyPatch, stdout: io.TextIOWrapper) -> None:
    # Set in the test body, not a fixture: pytest's capture resets sys.stdout when the
    # test starts. monkeypatch puts both streams back, wrapped or not.
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", io.StringIO())


def test_a_closed_reader_makes_plain_writes_fail(
        orphaned_pipe: io.TextIOWrapper, monkeypatch: pytest.MonkeyPatch) -> None:
    # The premise: without the wrapper, a serving command's print raises.
    as_console(monkeypatch, orphaned_pipe)
    with pytest.raises(BrokenPipeError):
        print("Stopping...", flush=True)


def test_writes_after_the_reader_left_go_nowhere_without_raising(
        orphaned_pipe: io.TextIOWrapper, monkeypatch: pytest.MonkeyPatch) -> None:
    as_console(monkeypatch, orphaned_pipe)
    keep_serving_without_a_reader()
    print("Stopping...", flush=True)
    print("stopped.", flush=True)
    sys.stdout.flush()
    # The descriptor now points at /dev/null, so even direct writes to it succeed.
    assert os.write(orphaned_pipe.fileno(), b"x") == 1
    assert os.path.samestat(os.fstat(orphaned_pipe.fileno()), os.stat(os.devnull))


def test_the_wrapper_is_installed_once_and_keeps_the_stream_interface(
        orphaned_pipe: io.TextIOWrapper, monkeypatch: pytest.MonkeyPatch) -> None:
    as_console(monkeypatch, orphaned_pipe)
    keep_serving_without_a_reader()
    wrapped = sys.stdout
    keep_serving_without_a_reader()
    assert sys.stdout is wrapped
    assert sys.stdout.fileno() == orphaned_pipe.fileno()
    assert sys.stdout.encoding == orphaned_pipe.encoding


def test_a_query_piped_into_head_ends_quietly_with_the_sigpipe_status(tmp_path: Path) -> None:
    # `guardtrace payload ID | head` (found by hand: a BrokenPipeError traceback).
    import subprocess

    archive = tmp_path / "questions.jsonl"
    archive.write_text("".join(f'{{"id": {i}, "question": "How many r in strawberry?"}}\n'
                               for i in range(50_000)))
    process = subprocess.Popen(
        [sys.executable, "-m", "guardtrace.cli", "scan", "questions", str(archive)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith(b'{"id": 0')
    process.stdout.close()  # what head does once it has its lines
    assert process.wait(60) == 141
    assert b"Traceback" not in process.stderr.read()
