"""Serving the API over HTTP: the standard library's ``ThreadingHTTPServer`` on a daemon
thread, as the consumer's health endpoints are served (:mod:`guardtrace.consumers.health`).

Every response is JSON, the server's own errors too (a malformed request line, a method
it does not answer): ``http.server`` would send an HTML page. Requests are logged at
DEBUG level only: a script polling the API must not drown the log of ``guardtrace up``.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .errors import INTERNAL_ERROR, MALFORMED_REQUEST
from .handlers import Answer, QueryApi

__all__ = ["ApiServer"]

logger = logging.getLogger("guardtrace.api")


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class ApiServer:
    """Serve a :class:`QueryApi` on a daemon thread.

    Args:
        api: What answers.
        port: TCP port; 0 binds a free one (see :attr:`port`).
        host: Address to bind; loopback by default (any other needs the shared token:
            :func:`guardtrace.api.access.serving_refusal`, checked by the caller).

    Raises:
        OSError: the address cannot be bound (the port is in use, ...).
    """

    def __init__(self, api: QueryApi, port: int, host: str = "127.0.0.1") -> None:
        server_class = _Server6 if ":" in host else _Server
        self._server = server_class((host.strip("[]"), port), _handler_for(api))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when constructed with port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> ApiServer:
        """Start serving on a daemon thread; return self."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="guardtrace-api", daemon=True)
        self._thread.start()
        logger.info("HTTP query API on port %d", self.port)
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()


def _handler_for(api: QueryApi) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        server_version = "guardtrace-api"

        def version_string(self) -> str:
            return self.server_version  # not Python's version: nobody needs it

        def _answer(self) -> None:
            answer = api.answer(self.command, self.path, dict(self.headers.items()),
                                self.client_address[0])
            self._send(answer)

        def do_GET(self) -> None:  # the name http.server dispatches GET to
            self._answer()

        def __getattr__(self, name: str) -> Any:
            # http.server looks up do_<METHOD> for each request's method, and answers one
            # it does not find with an HTML 501. Every method reaches the API instead,
            # which answers all but GET with a JSON 405.
            if name.startswith("do_"):
                return self._answer
            raise AttributeError(name)

        def _send(self, answer: Answer) -> None:
            payload = json.dumps(answer.body).encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            for name, value in answer.headers.items():
                self.send_header(name, value)
            if self.command == "HEAD":
                # HEAD is answered 405 like every method but GET; it carries no body.
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def send_error(self, code: int, message: str | None = None,
                       explain: str | None = None) -> None:
            # http.server's own refusals (a malformed request line, an over-long URL or
            # header, an unsupported method): JSON like every other answer.
            self.close_connection = True
            text = message or self.responses.get(code, ("error",))[0]
            body = {"status": code,
                    "error": MALFORMED_REQUEST if code < 500 else INTERNAL_ERROR,
                    "message": text}
            payload = json.dumps(body).encode()
            try:
                self.send_response(code, message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD" and code >= 200 and code not in (204, 304):
                    self.wfile.write(payload)
            except OSError:
                pass  # the client has gone; there is no one to tell

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("api: " + format, *args)

    return _Handler
