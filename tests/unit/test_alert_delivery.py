"""Webhook delivery against a real HTTP receiver on 127.0.0.1: the bodies, the retries, and
the dead-letter log that keeps whatever could not be delivered."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from guardtrace.alerts import (
    FIRING,
    RESOLVED,
    DeadLetterLog,
    Notification,
    RetryPolicy,
    Webhook,
    WebhookDelivery,
)
from guardtrace.transport.broker import free_port

FAST = RetryPolicy(attempts=4, backoff_s=0.01, max_backoff_s=0.05, timeout_s=5)
SINCE = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers as told.

    ``answers[path]`` is a list of statuses (or ``(status, headers)``) given in turn, then
    200 for ever; ``hold`` makes a path wait for the event before it answers.
    """

    answers: dict[str, list[Any]] = field(default_factory=dict)
    hold: dict[str, threading.Event] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                receiver.received.append(Received(self.path, dict(self.headers), body))
                if self.path in receiver.hold:
                    receiver.hold[self.path].wait(30)
                queue = receiver.answers.get(self.path, [])
                answer = queue.pop(0) if queue else 200
                status, headers = answer if isinstance(answer, tuple) else (answer, {})
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the sender gave up waiting (a held path): nothing to answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    def close(self) -> None:
        for event in self.hold.values():
            event.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver()
    yield server
    server.close()


def notification(status: str = FIRING, rule: str = "fab") -> Notification:
    return Notification(status=status, rule=rule, metric="fabrication_rate",
                        labels={"module": "replies"}, condition="fabrication_rate over 5m "
                        "above 0.1", value=0.4, threshold=0.1, volume=50,
                        detail="20 fabrications / 50 requests", description="Replies <lie>",
                        since=SINCE, at=SINCE + timedelta(minutes=3))


def delivery(tmp_path: Path, policy: RetryPolicy = FAST, **kwargs: Any) -> WebhookDelivery:
    return WebhookDelivery(DeadLetterLog(tmp_path / "state" / "dead.jsonl"), policy, **kwargs)


def test_slack_and_json_bodies_reach_their_webhooks(receiver: WebhookReceiver,
                                                    tmp_path: Path) -> None:
    sender = delivery(tmp_path)
    slack = Webhook("chat", receiver.url("/slack"), "slack")
    generic = Webhook("pager", receiver.url("/json"), "json",
                      (("Authorization", "Bearer t0ken"),))
    sender.submit(slack, notification())
    sender.submit(generic, notification(RESOLVED))
    assert sender.flush(30)
    [posted] = receiver.at("/slack")
    assert posted.body == {"text": (
        "[FIRING] fab module=replies: fabrication_rate is 0.4 (20 fabrications / 50 requests); "
        "rule: fabrication_rate over 5m above 0.1; holding since 2026-03-02 12:00:00 UTC. "
        "Replies &lt;lie&gt;")}
    assert posted.headers["Content-Type"] == "application/json"
    [posted] = receiver.at("/json")
    assert posted.headers["Authorization"] == "Bearer t0ken"
    assert {k: posted.body[k] for k in ("source", "status", "rule", "metric", "labels",
                                        "value", "threshold", "volume", "since", "at")} == {
        "source": "guardtrace", "status": "resolved", "rule": "fab",
        "metric": "fabrication_rate", "labels": {"module": "replies"}, "value": 0.4,
        "threshold": 0.1, "volume": 50, "since": "2026-03-02T12:00:00+00:00",
        "at": "2026-03-02T12:03:00+00:00"}
    assert posted.body["text"].startswith("[RESOLVED] fab module=replies")
    assert "it held from 2026-03-02 12:00:00 UTC for 3m" in posted.body["text"]
    sender.close()
    assert (sender.delivered, sender.dead_lettered) == (2, 0)
    assert not (tmp_path / "state" / "dead.jsonl").exists()


def test_server_errors_are_retried_until_delivered(receiver: WebhookReceiver,
                                                   tmp_path: Path) -> None:
    receiver.answers["/flaky"] = [503, (429, {"Retry-After": "0"}), 500]
    sender = delivery(tmp_path)
    sender.submit(Webhook("flaky", receiver.url("/flaky")), notification())
    assert sender.flush(30)
    sender.close()
    assert len(receiver.at("/flaky")) == 4  # three failures, then 200
    assert (sender.delivered, sender.dead_lettered) == (1, 0)


def test_what_still_fails_after_every_retry_goes_to_the_dead_letter_log(
        receiver: WebhookReceiver, tmp_path: Path) -> None:
    receiver.answers["/T000/B000/s3cr3t"] = [500] * 10
    sender = delivery(tmp_path)
    sender.submit(Webhook("chat", receiver.url("/T000/B000/s3cr3t"), "slack"), notification())
    assert sender.flush(30)
    sender.close()
    assert len(receiver.at("/T000/B000/s3cr3t")) == FAST.attempts
    [record] = sender.dead_letters.records()
    assert (record["webhook"], record["attempts"], record["rule"], record["status"]) == (
        "chat", FAST.attempts, "fab", FIRING)
    assert record["error"].startswith("HTTP 500")
    assert record["body"]["text"].startswith("[FIRING] fab")
    assert record["webhook_host"] == f"chat (127.0.0.1:{receiver.server.server_address[1]})"
    # The webhook URL's path is its secret: never written to the log.
    assert "s3cr3t" not in sender.dead_letters.path.read_text()


@pytest.mark.parametrize(("answer", "error"), [
    (404, "HTTP 404"), ((302, {"Location": "/elsewhere"}), "HTTP 302: redirected")])
def test_a_refusal_is_not_retried(receiver: WebhookReceiver, tmp_path: Path, answer: Any,
                                  error: str) -> None:
    receiver.answers["/gone"] = [answer]
    sender = delivery(tmp_path)
    sender.submit(Webhook("gone", receiver.url("/gone")), notification())
    assert sender.flush(30)
    sender.close()
    assert len(receiver.at("/gone")) == 1 and receiver.at("/elsewhere") == []
    [record] = sender.dead_letters.records()
    assert record["attempts"] == 1 and record["error"].startswith(error)


def test_an_unreachable_webhook_is_retried_then_dead_lettered(tmp_path: Path) -> None:
    sender = delivery(tmp_path)
    sender.submit(Webhook("nobody", f"http://127.0.0.1:{free_port()}/hook"), notification())
    assert sender.flush(30)
    sender.close()
    [record] = sender.dead_letters.records()
    assert record["attempts"] == FAST.attempts
    assert record["error"].startswith("URLError")


def test_stopping_delivers_or_dead_letters_everything_queued(receiver: WebhookReceiver,
                                                             tmp_path: Path) -> None:
    receiver.hold["/slow"] = threading.Event()  # never answers until the test ends
    sender = delivery(tmp_path, RetryPolicy(attempts=2, backoff_s=0.01, timeout_s=1))
    for index in range(5):
        sender.submit(Webhook("slow", receiver.url("/slow")), notification(rule=f"r{index}"))
    sender.close(timeout_s=0.5)
    records = sender.dead_letters.records()
    assert sender.delivered == 0 and len(records) == 5
    assert sorted(r["rule"] for r in records) == [f"r{i}" for i in range(5)]
    assert any(r["error"] == "not sent: the alert evaluator stopped first" for r in records)
    # After close, a late notification is kept too.
    sender.submit(Webhook("slow", receiver.url("/slow")), notification(rule="late"))
    assert sender.dead_letters.records()[-1]["rule"] == "late"


def test_a_full_queue_dead_letters_instead_of_blocking(receiver: WebhookReceiver,
                                                       tmp_path: Path) -> None:
    receiver.hold["/slow"] = threading.Event()
    sender = delivery(tmp_path, max_queued=2)
    for index in range(6):
        sender.submit(Webhook("slow", receiver.url("/slow")), notification(rule=f"r{index}"))
    full = [r for r in sender.dead_letters.records()
            if r["error"].startswith("the delivery queue was full")]
    assert len(full) >= 3  # one in hand, two queued, the rest kept in the log
    receiver.hold["/slow"].set()
    assert sender.flush(30)
    sender.close()
    assert sender.delivered + sender.dead_lettered == 6


def test_backoff_doubles_up_to_its_cap_and_honours_retry_after() -> None:
    policy = RetryPolicy(attempts=6, backoff_s=1, max_backoff_s=10)
    assert [policy.wait(n) for n in range(1, 6)] == [1, 2, 4, 8, 10]
    assert policy.wait(1, retry_after=5) == 5
    assert policy.wait(1, retry_after=3600) == 10
