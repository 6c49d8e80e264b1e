"""A stand-in for a ClickHouse server, for tests and benchmarks only: ClickHouse's HTTP
interface served by another process, backed by the embedded engine (chDB).

These machines have no ClickHouse server binary and no Docker, and chDB has no server
mode. With ``chdb://`` the engine lives inside the consumer's process (some 280 MB of
its RSS); with this stand-in the consumer holds only clickhouse-connect's HTTP client, as
it does against a real server, and the engine's memory is this process's.

    python -m tests.support.clickhouse_http_standin --store DIR [--port 0]

prints ``listening on 127.0.0.1:PORT`` once it accepts requests, then serves until
SIGTERM. :func:`running_standin` starts one as a child process and yields its URL.

What it serves, and how (the subset clickhouse-connect's HTTP client uses):

* ``GET /ping``; ``GET`` or ``POST /`` with the SQL in the ``query`` parameter, the body
  or both (the parameter first, then a newline, then the body, as ClickHouse reads them).
* Bodies sent with ``Content-Length`` or chunked (a generator body, as inserts are),
  compressed or not (``Content-Encoding`` lz4, zstd, gzip or deflate).
* Inserts with data (``INSERT INTO t (cols) FORMAT Native`` then the rows, or any other
  format): the rows go to a temporary file and the engine reads them ``FROM INFILE``
  (chDB cannot take binary rows inline in the query text).
* ``database``, ``default_format`` and ``param_*`` query parameters; every other
  parameter that is not transport-only is a setting, applied with ``SET`` for that
  request (an unknown one fails as a server fails it).
* Errors as a server reports them: status 500, ``X-ClickHouse-Exception-Code`` and the
  engine's message as the body. A request the stand-in cannot read is a 400 that says why.
* ``X-ClickHouse-Summary`` (rows read or written), ``-Query-Id``, ``-Timezone``, and
  ``-Format`` for statements that return rows.

Not served: users and passwords (any are accepted), sessions (one engine session for
every client: settings are re-applied per request, temporary tables are shared),
compressed responses (always plain; the client accepts that), ``readonly``, external
data, the native TCP protocol, TLS.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.support.clickhouse_http_standin"
LISTENING = "listening on "

# A body larger than this is refused: the stand-in holds a request in memory.
MAX_BODY_BYTES = 1 << 30
# An INSERT statement (the line before its rows) longer than this is not looked for.
MAX_STATEMENT_BYTES = 1 << 20
# Longest line of a chunked body's framing (a hex size and extensions).
MAX_CHUNK_LINE = 1024

# Query parameters that ClickHouse's HTTP handler reads itself; the rest are settings.
TRANSPORT_PARAMETERS = frozenset({
    "query", "database", "default_format", "user", "password", "quota_key", "query_id",
    "session_id", "session_timeout", "session_check", "compress", "decompress",
    "buffer_size", "wait_end_of_query", "client_protocol_version", "stacktrace",
})
# Settings the stand-in refuses: in its one shared engine session they would stick.
REFUSED_SETTINGS = frozenset({"readonly"})
QUERY_PARAMETER_PREFIX = "param_"
DEFAULT_FORMAT = "TabSeparated"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ERROR_CODE = re.compile(r"Code: (\d+)")


class RequestError(ValueError):
    """The stand-in cannot read this request (the client gets a 400 saying why)."""


# -- reading a request ---------------------------------------------------------------
def read_chunked(read: Callable[[int], bytes], readline: Callable[[int], bytes],
                 limit: int = MAX_BODY_BYTES) -> bytes:
    """The body of a ``Transfer-Encoding: chunked`` request, at most ``limit`` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        line = readline(MAX_CHUNK_LINE + 1)
        if len(line) > MAX_CHUNK_LINE or not line.endswith(b"\n"):
            raise RequestError("a chunk size line is too long or cut short")
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise RequestError(f"bad chunk size {size_text[:20]!r}") from None
        if size == 0:
            break
        total += size
        if total > limit:
            raise RequestError(f"body over {limit} bytes")
        chunk = read(size)
        if len(chunk) != size or read(2) != b"\r\n":
            raise RequestError("a chunk is cut short")
        parts.append(chunk)
    while True:  # trailers, up to the blank line
        line = readline(MAX_CHUNK_LINE + 1)
        if line in (b"\r\n", b"\n", b""):
            return b"".join(parts)
        if len(line) > MAX_CHUNK_LINE:
            raise RequestError("a trailer line is too long")


def _zstd_decompress(data: bytes) -> bytes:
    # The zstd module clickhouse-connect compresses with (the standard library's from
    # 3.14); its decompress reads every frame (each insert block is one).
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    return bytes(zstd.decompress(data))


def _lz4_decompress(data: bytes) -> bytes:
    # clickhouse-connect compresses each block of an insert as a frame of its own, and
    # lz4.frame.decompress stops after the first: read frame after frame.
    import lz4.frame

    parts = []
    rest = data
    while rest:
        frame = lz4.frame.LZ4FrameDecompressor()
        parts.append(frame.decompress(rest))
        if not frame.eof:
            raise RequestError("the lz4 body ends inside a frame")
        rest = frame.unused_data
    return b"".join(parts)


DECOMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "lz4": _lz4_decompress,
    "zstd": _zstd_decompress,
    "gzip": gzip.decompress,
    "deflate": zlib.decompress,
}


def decompress(body: bytes, encoding: str | None) -> bytes:
    """``body`` decoded from its ``Content-Encoding``."""
    if not encoding or encoding == "identity":
        return body
    decoder = DECOMPRESSORS.get(encoding.strip().lower())
    if decoder is None:
        raise RequestError(f"Content-Encoding {encoding!r} is not supported by the stand-in "
                           f"(only {', '.join(sorted(DECOMPRESSORS))})")
    try:
        return decoder(body)
    except RequestError:
        raise
    except Exception as exc:  # noqa: BLE001 - each codec raises its own error type
        raise RequestError(f"the {encoding} body does not decompress: {exc}") from None


@dataclass(frozen=True)
class Statement:
    """What one request asks for: SQL text, or an INSERT with its rows."""

    sql: str
    database: str | None
    default_format: str
    settings: dict[str, str]
    parameters: dict[str, str]
    query_id: str
    # An INSERT with rows: sql is the statement up to its FORMAT clause.
    insert_format: str | None = None
    insert_rows: bytes | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str], body: bytes) -> Statement:
        """The statement of a request: its query parameters and its decompressed body."""
        text = params.get("query", "").encode()
        full = text + b"\n" + body if text and body else text or body
        if not full.strip():
            raise RequestError("no query: neither a query parameter nor a body")
        settings = {}
        parameters = {}
        for name, value in params.items():
            if name.startswith(QUERY_PARAMETER_PREFIX):
                parameters[name[len(QUERY_PARAMETER_PREFIX):]] = value
            elif name not in TRANSPORT_PARAMETERS:
                settings[checked_setting(name)] = value
        sql, insert_format, rows = split_insert(full)
        return cls(sql=sql, database=params.get("database") or None,
                   default_format=params.get("default_format") or DEFAULT_FORMAT,
                   settings=settings, parameters=parameters,
                   query_id=params.get("query_id", ""), insert_format=insert_format,
                   insert_rows=rows)


def checked_setting(name: str) -> str:
    """``name`` if the stand-in can ``SET`` it, else a :class:`RequestError`."""
    if not _IDENTIFIER.fullmatch(name):
        raise RequestError(f"{name[:80]!r} is not a setting name")
    if name in REFUSED_SETTINGS:
        raise RequestError(f"the stand-in does not take the setting {name!r}")
    return name


def split_insert(full: bytes) -> tuple[str, str | None, bytes | None]:
    """``(INSERT statement without its FORMAT clause, format name, rows)`` when ``full``
    is an INSERT whose first line ends in ``FORMAT name``, else ``(full, None, None)``."""
    start = len(full) - len(full.lstrip())
    if full[start:start + 6].upper() == b"INSERT":
        newline = full.find(b"\n", start, start + MAX_STATEMENT_BYTES)
        if newline >= 0:
            try:
                line = full[start:newline].decode("utf-8").rstrip()
            except UnicodeDecodeError:
                raise RequestError("the INSERT statement is not UTF-8 text") from None
            words = line.split()
            if len(words) >= 3 and words[-2].upper() == "FORMAT":
                if not _IDENTIFIER.fullmatch(words[-1]):
                    raise RequestError(f"{words[-1][:80]!r} is not a format name")
                head = line[:line.upper().rindex("FORMAT")].rstrip()
                return head, words[-1], full[newline + 1:]
    try:
        return full.decode("utf-8"), None, None
    except UnicodeDecodeError:
        raise RequestError("the query is not UTF-8 text") from None


def trailing_format(sql: str) -> str | None:
    """The output format a statement names itself (``... FORMAT JSON``), if any."""
    words = sql.rstrip().rstrip(";").split()
    return words[-1] if len(words) >= 2 and words[-2].upper() == "FORMAT" else None


def sql_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- the engine --------------------------------------------------------------------------
@dataclass
class Outcome:
    body: bytes
    summary: dict[str, str]
    result_format: str | None


class Engine:
    """One chDB session, used by one request at a time."""

    def __init__(self, store: Path, spool: Path) -> None:
        import chdb

        store.mkdir(parents=True, exist_ok=True)
        self._conn = chdb.connect(str(store))
        self._spool = spool
        self._lock = threading.Lock()
        self._applied: dict[str, str] = {}  # settings SET by the last request
        self._database = "default"
        self.timezone = self._query("SELECT timezone()", DEFAULT_FORMAT).bytes().decode().strip()

    def _query(self, sql: str, fmt: str, parameters: Mapping[str, str] | None = None) -> Any:
        return self._conn.query(sql, fmt, params=dict(parameters or {}))

    def run(self, statement: Statement) -> Outcome:
        with self._lock:
            self._use_settings(statement.settings)
            self._use_database(statement.database)
            if statement.insert_format is not None and statement.insert_rows is not None:
                return self._insert(statement.sql, statement.insert_format,
                                    statement.insert_rows)
            return self._select(statement)

    def _use_settings(self, wanted: Mapping[str, str]) -> None:
        # One session serves every client: put back what the last request set and this
        # one does not, and SET only what changed (the client sends the same few each time).
        for name in [n for n in self._applied if n not in wanted]:
            self._query(f"SET {name} = DEFAULT", DEFAULT_FORMAT)
            del self._applied[name]
        for name, value in wanted.items():
            if self._applied.get(name) != value:
                self._applied.pop(name, None)
                self._query(f"SET {name} = {sql_literal(value)}", DEFAULT_FORMAT)
                self._applied[name] = value

    def _use_database(self, database: str | None) -> None:
        wanted = database or "default"
        if wanted != self._database:
            self._query(f"USE `{wanted.replace('`', '``')}`", DEFAULT_FORMAT)
            self._database = wanted

    def _insert(self, head: str, fmt: str, rows: bytes) -> Outcome:
        with tempfile.NamedTemporaryFile(dir=self._spool, suffix=".rows", delete=False) as f:
            f.write(rows)
        try:
            result = self._query(f"{head} FROM INFILE {sql_literal(f.name)} FORMAT {fmt}",
                                 DEFAULT_FORMAT)
        finally:
            os.unlink(f.name)
        # An INFILE insert reads exactly the rows it writes.
        return Outcome(b"", {"written_rows": str(result.rows_read()),
                             "written_bytes": str(result.bytes_read()),
                             "elapsed_ns": str(int(result.elapsed() * 1e9))}, None)

    def _select(self, statement: Statement) -> Outcome:
        named = trailing_format(statement.sql)
        if named is not None or statement.default_format != DEFAULT_FORMAT:
            result = self._query(statement.sql, statement.default_format, statement.parameters)
            body = result.bytes() or b""
            fmt: str | None = named or statement.default_format
        else:
            # A server names the format of any statement that returns rows, even none;
            # with names, such a statement always prints at least one line (DDL: none).
            result = self._query(statement.sql, "TabSeparatedWithNames", statement.parameters)
            body = result.bytes() or b""
            fmt = DEFAULT_FORMAT if body else None
            body = body[body.find(b"\n") + 1:] if body else b""
        return Outcome(body, {"read_rows": str(result.rows_read()),
                              "read_bytes": str(result.bytes_read()),
                              "elapsed_ns": str(int(result.elapsed() * 1e9))}, fmt)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# -- HTTP ----------------------------------------------------------------------------------
class StandinServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], engine: Engine) -> None:
        super().__init__(address, StandinHandler)
        self.engine = engine


class StandinHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as urllib3's pool expects
    server: StandinServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would be most of a benchmark's output

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/" and "query" in dict(parse_qsl(url.query)):
            self._serve(b"")
        else:  # /ping, or / alone: what a server answers there
            self._send(200, b"Ok.\n", {"Content-Type": "text/plain; charset=UTF-8"})

    def do_POST(self) -> None:
        try:
            body = self._read_body()
        except RequestError as exc:
            self.close_connection = True  # what is left of the body cannot be skipped
            self._send(400, f"{exc}\n".encode(), {})
            return
        self._serve(body)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = read_chunked(self.rfile.read, self.rfile.readline)
        else:
            length_text = self.headers.get("Content-Length") or "0"
            if not length_text.isdigit():
                raise RequestError(f"bad Content-Length {length_text[:20]!r}")
            length = int(length_text)
            if length > MAX_BODY_BYTES:
                raise RequestError(f"body over {MAX_BODY_BYTES} bytes")
            body = self.rfile.read(length)
        return decompress(body, self.headers.get("Content-Encoding"))

    def _serve(self, body: bytes) -> None:
        params = dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))
        query_id = params.get("query_id", "")
        try:
            statement = Statement.parse(params, body)
            outcome = self.server.engine.run(statement)
        except RequestError as exc:
            self._send(400, f"{exc}\n".encode(), {})
            return
        except Exception as exc:  # noqa: BLE001 - every engine error goes back to the client
            message = str(exc)
            match = _ERROR_CODE.search(message)
            self._send(500, f"{message}\n".encode(), {
                "X-ClickHouse-Exception-Code": match.group(1) if match else "1000",
                "X-ClickHouse-Query-Id": query_id})
            return
        headers = {"X-ClickHouse-Summary": json.dumps(outcome.summary),
                   "X-ClickHouse-Query-Id": statement.query_id,
                   "X-ClickHouse-Timezone": self.server.engine.timezone,
                   "Content-Type": "application/octet-stream"}
        if outcome.result_format:
            headers["X-ClickHouse-Format"] = outcome.result_format
        self._send(200, outcome.body, headers)

    def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(store: Path, port: int = 0, ready: Callable[[int], None] | None = None) -> None:
    """Serve ``store`` on 127.0.0.1:``port`` (0: any free one) until SIGTERM or SIGINT."""
    spool = Path(tempfile.mkdtemp(prefix="standin-rows-"))
    engine = Engine(store, spool)
    server = StandinServer(("127.0.0.1", port), engine)

    def stop(_signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if ready is not None:
        ready(server.server_address[1])
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        engine.close()
        spool.rmdir()


# -- starting one from a test or a benchmark --------------------------------------------------
@dataclass(frozen=True)
class RunningStandin:
    url: str
    process: subprocess.Popen[str]


@contextmanager
def running_standin(store: Path, startup_timeout_s: float = 60.0,
                    log_path: Path | None = None) -> Iterator[RunningStandin]:
    """The stand-in serving ``store`` in a child process; yields its ``http://`` URL.

    Raises:
        RuntimeError: it did not listen within ``startup_timeout_s`` (with its output).
    """
    from guardtrace.transport.broker import stop_process

    with open(log_path or os.devnull, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", MODULE, "--store", str(store)],
                                   stdout=subprocess.PIPE, stderr=log, text=True,
                                   cwd=REPO_ROOT)
        try:
            yield RunningStandin(_wait_listening(process, startup_timeout_s), process)
        finally:
            stop_process(process, 10)  # type: ignore[arg-type]


def _wait_listening(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The URL the stand-in prints once it listens; kills it if that takes too long."""
    stdout = process.stdout
    assert stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    line = lines[0] if lines else ""
    if not line.startswith(LISTENING):
        process.kill()
        raise RuntimeError(f"the ClickHouse HTTP stand-in did not start within {timeout_s:.0f} s "
                           f"(exit status {process.poll()}); it printed {line!r}")
    return f"http://{line[len(LISTENING):].strip()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="the chDB data directory")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    args = parser.parse_args(argv)
    started = time.monotonic()

    def ready(port: int) -> None:
        print(f"{LISTENING}127.0.0.1:{port}", flush=True)
        print(f"stand-in ready in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)

    serve(args.store, args.port, ready)
    return 0


if __name__ == "__main__":
    sys.exit(main())
