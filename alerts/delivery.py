"""Notifications to webhooks, on a worker thread, retried with backoff, never lost quietly.

The evaluator hands a notification over and moves on: posting, waiting for a slow
receiver and retrying happen on a daemon worker. A failure that may pass (no connection,
a timeout, HTTP 408, 429 or 5xx) is retried with exponential backoff (a 429's
``Retry-After`` is honoured up to the cap); one that will not (another 4xx, a redirect)
is not. What still fails, whatever is queued when the worker is stopped, and what
arrives when the queue is full, is appended to the dead-letter log: one JSON line per
notification, with the webhook's name and host (never its URL, whose path is often its
secret), the error and the body that was to be sent.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from .. import __version__
from .notifications import Notification
from .rules import Webhook

__all__ = ["DeadLetterLog", "RetryPolicy", "WebhookDelivery"]

logger = logging.getLogger("guardtrace.alerts")

_RETRIABLE_STATUS: Final = frozenset({408, 425, 429})
_STOP: Final = object()


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a notification is tried.

    Attributes:
        attempts: Tries in all (the first and the retries).
        backoff_s: Wait before the second try; each later wait doubles, up to
            ``max_backoff_s``. The defaults try for about a minute in all.
        timeout_s: Per request, connecting and reading.
    """

    attempts: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    timeout_s: float = 10.0

    def wait(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        wait = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_backoff_s))
        return wait


class DeadLetterLog:
    """An append-only JSON-lines file of notifications that could not be delivered.

    Args:
        path: The file (its folder is created on the first append).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line, flushed to disk before this returns."""
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as log:
                log.write(line)
                log.flush()
                os.fsync(log.fileno())

    def records(self) -> list[dict[str, Any]]:
        """Every record appended so far (none if the file does not exist)."""
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


class _Failed(Exception):
    def __init__(self, message: str, retriable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.retry_after = retry_after


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # urllib would turn a redirected POST into a GET without the body, which the receiver
    # answers 200: a notification lost while reported delivered. A redirect is a failure.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class _Job:
    webhook: Webhook
    notification: Notification


class WebhookDelivery:
    """Posts notifications to webhooks on a daemon worker (started on the first submit).

    Args:
        dead_letters: Where undeliverable notifications are appended.
        policy: Tries, backoff and timeout.
        max_queued: Notifications waiting at most; beyond, they go to the dead-letter log.
    """

    def __init__(self, dead_letters: DeadLetterLog, policy: RetryPolicy | None = None,
                 max_queued: int = 1000) -> None:
        self.dead_letters = dead_letters
        self.policy = policy or RetryPolicy()
        self.delivered = 0
        self.dead_lettered = 0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queued)
        self._abort = threading.Event()
        self._closed = False
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._opener = urllib.request.build_opener(_NoRedirect)

    def submit(self, webhook: Webhook, notification: Notification) -> None:
        """Queue ``notification`` for ``webhook``; never blocks, never raises."""
        job = _Job(webhook, notification)
        with self._lock:
            if self._closed:
                self._dead_letter(job, 0, "submitted after the delivery was stopped")
                return
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, daemon=True,
                                                name="guardtrace-alert-delivery")
                self._worker.start()
            try:
                self._queue.put_nowait(job)
            except queue.Full:
                self._dead_letter(job, 0, f"the delivery queue was full "
                                  f"({self._queue.maxsize} notifications waiting)")

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued notification is delivered or dead-lettered.

        Returns:
            False if some were still in hand after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Deliver what is queued within ``timeout_s``; dead-letter what is left."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            worker = self._worker
        if worker is not None:
            self._queue.put(_STOP)
            worker.join(timeout_s)
            if worker.is_alive():
                self._abort.set()  # ends backoff waits; the job in hand is dead-lettered
                worker.join(self.policy.timeout_s + 5)
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(job, _Job):
                self._dead_letter(job, 0, "not sent: the alert evaluator stopped first")
            self._queue.task_done()

    # -- the worker -------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is _STOP:
                    return
                self._deliver(job)
            except Exception as exc:  # the worker must outlive any one job
                logger.exception("alert notification to %s failed", job.webhook.display)
                self._dead_letter(job, 0, f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    def _deliver(self, job: _Job) -> None:
        body = json.dumps(job.notification.body(job.webhook.format)).encode()
        error, tries = "not sent: the alert evaluator stopped first", 0
        while tries < self.policy.attempts and not self._abort.is_set():
            tries += 1
            try:
                self._post(job.webhook, body)
            except _Failed as failure:
                error = str(failure)
                if not failure.retriable or tries == self.policy.attempts:
                    break
                wait = self.policy.wait(tries, failure.retry_after)
                logger.info("alert notification to %s failed (%s); try %d of %d in %.1f s",
                            job.webhook.display, error, tries + 1, self.policy.attempts, wait)
                if self._abort.wait(wait):
                    error += "; the evaluator stopped before the next try"
            else:
                self.delivered += 1
                return
        self._dead_letter(job, tries, error)

    def _post(self, webhook: Webhook, body: bytes) -> None:
        headers = {"Content-Type": "application/json",
                   "User-Agent": f"guardtrace/{__version__}", **dict(webhook.headers)}
        request = urllib.request.Request(webhook.url, data=body, headers=headers,
                                         method="POST")
        try:
            with self._opener.open(request, timeout=self.policy.timeout_s) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            status = exc.code
            retry_after = _seconds(exc.headers.get("Retry-After") if exc.headers else None)
            exc.close()
            if 300 <= status < 400:
                raise _Failed(f"HTTP {status}: redirected; give the webhook's final URL",
                              retriable=False) from None
            raise _Failed(f"HTTP {status} {exc.reason}",
                          retriable=status >= 500 or status in _RETRIABLE_STATUS,
                          retry_after=retry_after) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise _Failed(f"{type(exc).__name__}: {reason}", retriable=True) from None

    def _dead_letter(self, job: _Job, attempts: int, error: str) -> None:
        self.dead_lettered += 1
        logger.error("alert notification for rule %s to %s not delivered after %d tries: %s "
                     "(kept in %s)", job.notification.rule, job.webhook.display, attempts,
                     error, self.dead_letters.path)
        try:
            self.dead_letters.append({
                "time": datetime.now(UTC).isoformat(), "webhook": job.webhook.name,
                "webhook_host": job.webhook.display, "format": job.webhook.format,
                "attempts": attempts, "error": error, "rule": job.notification.rule,
                "status": job.notification.status,
                "body": job.notification.body(job.webhook.format)})
        except OSError:
            # Nowhere left to keep it: the log line above is its last trace, say so.
            logger.exception("the alert dead-letter log %s cannot be written; the "
                             "notification above is lost", self.dead_letters.path)


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` of delay-seconds (an HTTP date is treated as absent)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
