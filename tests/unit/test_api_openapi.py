"""The HTTP query API on a live socket, against its own OpenAPI document.

schemathesis reads the document the server serves at /openapi.json and generates
requests from it (valid ones and, for the negative checks, invalid ones) for every
operation; each answer must be no server error and must be what the document says
(status, content type, body schema), with the shared token enforced where the document
declares it. Then what http.server would answer itself (a malformed request line, a
method it has no handler for) is checked to be JSON too.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from schemathesis.generation.modes import GenerationMode

from guardtrace.api import openapi, paths
from guardtrace.api.access import ApiAccess
from guardtrace.api.server import ApiServer
from guardtrace.schemas.access_tokens import FailedAttempts
from tests.support.services import ch_client, chdb_dir  # noqa: F401 - fixtures, by name

from .test_api_handlers import RECOVERED, TOKEN, SeededStore, seeded  # noqa: F401

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _serve(store: SeededStore, access: ApiAccess) -> Iterator[str]:
    server = ApiServer(store.api(access), 0).start()
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


@pytest.fixture(scope="module")
def live(seeded: SeededStore) -> Iterator[str]:  # noqa: F811
    """The API behind the shared token."""
    # The probes of schemathesis's auth check send a wrong token once per operation: with
    # the default limit they would be answered 429 after five, and each slowed by a second.
    yield from _serve(seeded, ApiAccess(TOKEN, FailedAttempts(limit=10_000),
                                        failed_attempt_delay_s=0))


@pytest.fixture(scope="module")
def live_open(seeded: SeededStore) -> Iterator[str]:  # noqa: F811
    """The API without a token (this machine only): its document declares no security."""
    yield from _serve(seeded, ApiAccess(""))


# Requests generated at random per operation, beyond the boundary cases of the coverage
# phase: enough to vary every parameter, few enough for a few seconds.
EXAMPLES = 5

# The API's own document, as each server serves it (checked below). Without a token:
# the coverage phase (each parameter's boundaries, invalid values, a parameter given
# twice, undeclared methods) and random requests, valid and invalid. Behind the token:
# random valid requests, to check the token is enforced as declared (an invalid request
# would be invalid merely for lacking the token, which every call sends).
OPEN = schemathesis.openapi.from_dict(openapi.document(token_required=False))
OPEN.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                              max_examples=EXAMPLES)
OPEN.config.phases.coverage.generate_duplicate_query_parameters = True
BEHIND_THE_TOKEN = schemathesis.openapi.from_dict(openapi.document(token_required=True))
BEHIND_THE_TOKEN.config.generation.update(modes=[GenerationMode.POSITIVE],
                                          max_examples=EXAMPLES)
BEHIND_THE_TOKEN.config.phases.update(phases=["examples", "fuzzing"])


# Every check schemathesis has runs on each answer: no server error; status, content
# type, headers and body as documented; the token enforced where it is declared (its
# probes send none, then a wrong one); valid data accepted, invalid data rejected.
@BEHIND_THE_TOKEN.parametrize()
def test_behind_the_token_every_answer_is_what_the_document_says(case: Any, live: str) -> None:
    case.call_and_validate(base_url=live, headers=AUTH)


@OPEN.parametrize()
def test_without_a_token_every_answer_is_what_the_document_says(case: Any,
                                                                live_open: str) -> None:
    case.call_and_validate(base_url=live_open)


def test_each_server_serves_the_document_the_tests_were_generated_from(
        live: str, live_open: str) -> None:
    served = requests.get(f"{live}{paths.OPENAPI}", headers=AUTH, timeout=10).json()
    assert served == json.loads(json.dumps(BEHIND_THE_TOKEN.raw_schema))
    served = requests.get(f"{live_open}{paths.OPENAPI}", timeout=10).json()
    assert served == json.loads(json.dumps(OPEN.raw_schema))


def test_the_document_describes_every_path_the_server_routes(live: str) -> None:
    document = requests.get(f"{live}{paths.OPENAPI}", headers=AUTH, timeout=10).json()
    assert set(document["paths"]) == {paths.REQUESTS, paths.REQUEST, paths.REQUEST_PAYLOADS,
                                      paths.RATES, paths.AGENTS, paths.STATS}
    assert document["security"] == [{"sharedToken": []}]
    trace = requests.get(live + paths.request_path(paths.REQUEST, RECOVERED), headers=AUTH,
                         timeout=10)
    assert trace.status_code == 200 and trace.headers["Content-Type"] == "application/json"


def _raw(live: str, request: bytes) -> tuple[bytes, dict[str, Any]]:
    """Send ``request`` as it is; the answer's head and its body read as JSON."""
    host, port = live.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    if not answer.startswith(b"HTTP/"):
        return b"", json.loads(answer)  # an HTTP/0.9 answer: a body alone
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"Content-Type: application/json" in head, head
    return head, json.loads(body) if body else {}  # HEAD: no body


def test_what_http_server_refuses_itself_is_json_too(live: str) -> None:
    # A request line that is not HTTP/1.x is answered as HTTP/0.9 was: a body alone.
    _, body = _raw(live, b"NONSENSE\r\n\r\n")
    assert (body["status"], body["error"]) == (400, "malformed_request")
    _, body = _raw(live, b"GET /" + b"a" * 70_000 + b" HTTP/1.0\r\n\r\n")
    assert (body["status"], body["error"]) == (414, "malformed_request")
    head, body = _raw(live, b"GET /v1/stats HTTP/1.0\r\nX-Long: " + b"a" * 70_000
                      + b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 431") and body["error"] == "malformed_request"
    for method in (b"DELETE", b"HEAD", b"BREW"):  # any method but GET, even one HTTP has not
        head, body = _raw(live, method + b" /v1/stats HTTP/1.0\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 405") and b"Allow: GET" in head
        if method != b"HEAD":
            assert body["error"] == "method_not_allowed"
