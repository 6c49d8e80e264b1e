"""ClickHouse over TLS: clickhouse-connect's real HTTPS stack, with our settings.

No ClickHouse server runs here, and chDB (the embedded engine) has no network side, so
the peer is a small HTTPS server that requires a client certificate and answers every
request with HTTP 500. What that shows for real: which handshakes succeed (the request
then reaches the server, which answers 500, and has seen the client certificate) and
which fail, for the CA, client-certificate and verification settings. A ClickHouse
query over TLS is not run.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from guardtrace.schemas.transport_security import ClickHouseTLS
from guardtrace.store.connection import StoreConfig, StoreError, open_client
from tests.support.tls import CLIENT_NAME, Certificates, make_certificates

PASSWORD = "ch-pw-3d8e"


class _NotClickHouse(BaseHTTPRequestHandler):
    """Records the client certificate of each request and answers 500."""

    clients: list[str] = []

    def _answer(self) -> None:
        certificate = self.connection.getpeercert() or {}  # type: ignore[attr-defined]
        type(self).clients.extend(value for entry in certificate.get("subject", ())
                                  for key, value in entry if key == "commonName")
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # the name http.server calls
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https_server(certificates: Certificates) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotClickHouse)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates.server_cert, certificates.server_key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(certificates.ca)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://writer:{PASSWORD}@127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def connect(url: str, tls: ClickHouseTLS) -> str:
    """Open a client; return the StoreError's message (the peer is never ClickHouse)."""
    _NotClickHouse.clients.clear()
    with pytest.raises(StoreError) as caught:
        open_client(StoreConfig.resolve(url=url, tls=tls))
    message = str(caught.value)
    assert PASSWORD not in message
    return message


def test_the_ca_and_the_client_certificate_reach_the_tls_handshake(
        https_server: str, certificates: Certificates) -> None:
    tls = ClickHouseTLS(ca_file=str(certificates.ca), cert_file=str(certificates.client_cert),
                        key_file=str(certificates.client_key))
    message = connect(https_server, tls)
    assert "HTTP status 500" in message, message  # past TLS: the request was answered
    assert _NotClickHouse.clients and set(_NotClickHouse.clients) == {CLIENT_NAME}


def test_a_server_certificate_from_another_ca_is_refused(
        https_server: str, certificates: Certificates) -> None:
    tls = ClickHouseTLS(ca_file=str(certificates.other_ca),
                        cert_file=str(certificates.client_cert),
                        key_file=str(certificates.client_key))
    message = connect(https_server, tls)
    assert "CERTIFICATE_VERIFY_FAILED" in message, message
    assert _NotClickHouse.clients == []

    unverified = ClickHouseTLS(verify=False, cert_file=str(certificates.client_cert),
                               key_file=str(certificates.client_key))
    with pytest.warns(Warning, match="Unverified HTTPS request"):  # urllib3's, as it should
        assert "HTTP status 500" in connect(https_server, unverified)


def test_without_the_client_certificate_the_server_refuses(
        https_server: str, certificates: Certificates) -> None:
    message = connect(https_server, ClickHouseTLS(ca_file=str(certificates.ca)))
    assert "SSLError" in message and "HTTP status" not in message, message
    assert _NotClickHouse.clients == []
