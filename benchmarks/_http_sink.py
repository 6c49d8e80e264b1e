"""An OTLP/HTTP traces endpoint that accepts and discards: the far end of the emit
baseline of ``pipeline_throughput.py``.

Runs in its own process, so its CPU is not counted as the agent's. Prints its port on
the first line of stdout, then answers every ``POST /v1/traces`` with 200 and an empty
``ExportTraceServiceResponse``. It counts the spans and span events it was sent
(parsing is its own CPU, not the agent's), and ``GET /count`` returns them as JSON, so
the benchmark can check the baseline delivered every event. Stops when stdin closes.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_counts = {"requests": 0, "spans": 0, "events": 0, "bytes": 0}
_lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the exporter reuses its connection

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest.FromString(body)
        spans = [span for resource in request.resource_spans
                 for scope in resource.scope_spans for span in scope.spans]
        with _lock:
            _counts["requests"] += 1
            _counts["spans"] += len(spans)
            _counts["events"] += sum(len(span.events) for span in spans)
            _counts["bytes"] += len(body)
        self._reply(b"", "application/x-protobuf")

    def do_GET(self) -> None:
        with _lock:
            body = json.dumps(_counts).encode()
        self._reply(body, "application/json")

    def _reply(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None  # one line per request would cost more than the request


def main() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # the parent closes stdin (or dies) to stop the sink
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
