"""The embedded broker's rotation decisions: its memory as /proc reports it, when to
replace it, and how up's supervisor drives a rotation (transport/broker_rotation.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from guardtrace.cli import up
from guardtrace.transport.broker import BrokerError
from guardtrace.transport.broker_rotation import (
    Rotation,
    parse_vm_rss,
    read_rss_bytes,
    should_rotate,
)

MB = 1024 * 1024


def test_vm_rss_is_read_in_bytes_from_the_status_text() -> None:
    status = "Name:\ttansu\nVmPeak:\t  900 kB\nVmRSS:\t   20680 kB\nThreads:\t9\n"
    assert parse_vm_rss(status) == 20680 * 1024


@pytest.mark.parametrize("status", ["Name:\tkworker\nThreads:\t1\n",
                                    "VmRSS:\t12 MB\n", "VmRSS:\t\n"])
def test_a_status_without_a_usable_vm_rss_is_an_error_not_zero(status: str) -> None:
    with pytest.raises(ValueError, match="VmRSS"):
        parse_vm_rss(status)


def test_the_memory_of_a_running_process_and_of_one_that_exited() -> None:
    own = read_rss_bytes(os.getpid())
    assert own is not None and own > 10 * MB  # this interpreter, with pytest loaded
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert read_rss_bytes(child.pid) is None


def test_rotate_only_past_the_limit_with_none_under_way_and_never_with_limit_zero() -> None:
    assert should_rotate(300 * MB, 256 * MB, draining=False)
    assert not should_rotate(256 * MB, 256 * MB, draining=False)
    assert not should_rotate(300 * MB, 256 * MB, draining=True)
    assert not should_rotate(300 * MB, 0, draining=False)
    assert not should_rotate(None, 256 * MB, draining=False)  # the broker is gone


def test_a_rotation_is_logged_on_one_line_with_ports_memory_and_records() -> None:
    text = Rotation(40001, 40002, 300 * MB, 123456, 2.04).describe()
    assert "\n" not in text
    assert "40001 -> 40002" in text and "300 MB" in text and "123,456 records" in text


class FakeBroker:
    """Stands in for RotatingBroker: records what the supervisor asks of it."""

    def __init__(self, due: bool, outcome: Rotation | None | Exception) -> None:
        self._due = due
        self.outcome = outcome
        self.retiring: object | None = None
        self.lock = threading.RLock()
        self.calls: list[tuple[str, Sequence[str]]] = []

    def due(self) -> bool:
        return self._due

    def rotate(self, group: str, topics: Sequence[str], reopen: Callable[[str], None],
               drain_timeout_s: float, cancel: threading.Event) -> Rotation | None:
        self.calls.append((group, topics))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        if self.outcome is not None:
            reopen("127.0.0.1:40002")
        return self.outcome

    def stop(self) -> None:
        self.stopped = True


class FakeConsumer:
    def __init__(self, bootstrap: str | None) -> None:
        self.bootstrap = bootstrap
        self.stopped = threading.Event()
        self.stats = SimpleNamespace(as_dict=dict)

    def run(self) -> Any:
        self.stopped.wait(10)
        return self.stats

    def stop(self) -> None:
        self.stopped.set()


class FakePipeline:
    config = SimpleNamespace(consumer=SimpleNamespace(group_id="g", topics=("a", "b")))

    def consumer(self, bootstrap: str | None = None) -> FakeConsumer:
        return FakeConsumer(bootstrap)


def _stack(broker: FakeBroker) -> Any:
    stack = up._Stack(broker=broker)
    up._start_consumer(stack, FakePipeline(), "127.0.0.1:40001")
    return stack


def test_the_supervisor_leaves_a_broker_under_its_limit_alone() -> None:
    broker = FakeBroker(due=False, outcome=None)
    stack = _stack(broker)
    up._rotate_broker_if_due(stack, threading.Event())
    assert broker.calls == [] and stack.consumer.bootstrap == "127.0.0.1:40001"
    stack.stop()


def test_a_rotation_reopens_the_consumer_on_the_new_broker_and_waits_before_the_next() -> None:
    broker = FakeBroker(due=True, outcome=Rotation(40001, 40002, 300 * MB, 10, 1.0))
    stack = _stack(broker)
    first = stack.consumer
    up._rotate_broker_if_due(stack, threading.Event())
    assert broker.calls == [("g", ("a", "b"))]
    assert first.stopped.is_set() and stack.consumer is not first
    assert stack.consumer.bootstrap == "127.0.0.1:40002"
    assert stack.consumer_thread is not None and stack.consumer_thread.is_alive()
    up._rotate_broker_if_due(stack, threading.Event())  # still "due": too soon again
    assert len(broker.calls) == 1
    stack.stop()


def test_an_undrained_old_broker_is_drained_again_at_the_next_check() -> None:
    broker = FakeBroker(due=False, outcome=None)
    broker.retiring = object()  # a rotation whose drain timed out
    stack = _stack(broker)
    first = stack.consumer
    up._rotate_broker_if_due(stack, threading.Event())
    up._rotate_broker_if_due(stack, threading.Event())
    assert len(broker.calls) == 2 and stack.consumer is first and not stack.failure
    stack.stop()


def test_a_fresh_broker_that_does_not_start_is_tried_again_later_not_at_once() -> None:
    broker = FakeBroker(due=True, outcome=BrokerError("no port"))
    stack = _stack(broker)
    up._rotate_broker_if_due(stack, threading.Event())
    up._rotate_broker_if_due(stack, threading.Event())
    assert len(broker.calls) == 1 and not stack.failure
    stack.stop()
