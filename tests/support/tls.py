"""TLS for the transport-security tests: throwaway certificates and a TLS proxy.

:func:`make_certificates` makes a CA, a server certificate for 127.0.0.1 and localhost,
a client certificate (its key also encrypted with a password) and a second, untrusted
CA, with the ``openssl`` command.

:class:`TLSProxy` terminates TLS in front of a plaintext TCP service. Tansu 0.6.0 cannot
serve TLS itself (its ``--cert`` and ``--key`` options exclude each other), so the Kafka
TLS tests run kafka-python's real TLS stack against this proxy, with the broker
advertising the proxy's port: every connection a client opens, bootstrap and metadata
alike, goes through TLS. The proxy can require a client certificate and records the
common name of each one it accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Certificates", "TLSProxy", "make_certificates"]

KEY_PASSWORD = "key-pass-4e1f"
CLIENT_NAME = "guardtrace-test-client"
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_key_encrypted: Path  # the same key, encrypted with KEY_PASSWORD
    other_ca: Path  # signs nothing here: trusting it alone must fail
    key_password: str = KEY_PASSWORD


def _openssl(*arguments: str, cwd: Path) -> None:
    subprocess.run(["openssl", *arguments], cwd=cwd, check=True, capture_output=True)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)


def _signed(directory: Path, name: str, common_name: str, extensions: str) -> None:
    (directory / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n" + extensions)
    _openssl("req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={common_name}", cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2",
             "-extfile", f"{name}.ext", cwd=directory)


def make_certificates(directory: Path) -> Certificates:
    """A CA, server and client certificates signed by it, and an unrelated CA."""
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _signed(directory, "server", "localhost",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _signed(directory, "client", CLIENT_NAME, "extendedKeyUsage=clientAuth\n")
    _openssl("pkey", "-in", "client.key", "-out", "client-encrypted.key", "-aes256",
             "-passout", f"pass:{KEY_PASSWORD}", cwd=directory)
    return Certificates(ca=directory / "ca.pem", server_cert=directory / "server.pem",
                        server_key=directory / "server.key",
                        client_cert=directory / "client.pem", client_key=directory / "client.key",
                        client_key_encrypted=directory / "client-encrypted.key",
                        other_ca=directory / "other-ca.pem")


@dataclass
class TLSProxy:
    """TLS on ``host:port`` in front of the plaintext service on 127.0.0.1:``target_port``.

    Args:
        port: Where the proxy listens.
        target_port: The plaintext service.
        certificates: The server certificate, and the CA that client certificates need.
        require_client_certificate: Refuse clients without a certificate from that CA.
        host: Listen address ("" for every address, to reach it as 127.0.0.2 too).
    """

    port: int
    target_port: int
    certificates: Certificates
    require_client_certificate: bool = True
    host: str = "127.0.0.1"
    client_names: list[str] = field(default_factory=list)  # CN of each accepted client cert
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.AbstractServer | None = None

    def _context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificates.server_cert, self.certificates.server_key)
        if self.require_client_certificate:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.certificates.ca)
        return context

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        certificate = writer.get_extra_info("peercert") or {}
        for entry in certificate.get("subject", ()):
            self.client_names.extend(value for key, value in entry if key == "commonName")
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    def start(self) -> TLSProxy:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="test-tls-proxy")
        self._thread.start()
        start = asyncio.start_server(self._serve, self.host, self.port, ssl=self._context())
        self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result(10)
        return self

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        async def shut() -> None:
            server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        loop.close()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream or an error, then close the writing side."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
            writer.close()
