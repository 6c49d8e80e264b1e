"""One TLS handshake with a Kafka bootstrap server, bounded in time, before a client is built.

kafka-python 3.0.12 gives the TLS handshake no deadline: its transport waits for the
server's answer to the ClientHello for as long as the socket stays open, and neither
``bootstrap_timeout_ms`` nor ``socket_connection_setup_timeout_ms`` ends that wait. A
client configured for ``SSL`` against a listener that never answers (the embedded Tansu
broker reads the ClientHello as the start of a Kafka frame and waits for the rest; a
load balancer's dead port does the same) then never returns from its constructor. One
handshake made here first, within the client's own bootstrap timeout, turns that into an
error that says what is wrong, and names certificate problems plainly where kafka-python
reports only "Unable to bootstrap".

Whether it is still needed: ``tests/integration/test_kafka_security.py`` builds an SSL
admin client against the plaintext embedded broker; without this check it hangs.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any

from .transport_security import TLS_PROTOCOLS, kafka_ssl_context

__all__ = ["KafkaTLSError", "check_tls_handshake"]

# For settings that name no bootstrap_timeout_ms (kafka-python's default is 30 s): a TLS
# handshake takes milliseconds, and a command should not look hung for half a minute.
_DEFAULT_TIMEOUT_S = 10.0


class KafkaTLSError(ConnectionError):
    """No bootstrap server completed a TLS handshake; the message says why, per server."""


def check_tls_handshake(settings: Mapping[str, Any], timeout_s: float | None = None) -> None:
    """Complete one TLS handshake with a bootstrap server, when the settings use TLS.

    Args:
        settings: The kafka-python settings the client is about to be built with.
        timeout_s: Time for all servers together (default: the settings'
            ``bootstrap_timeout_ms``).

    Raises:
        KafkaTLSError: no server completed a handshake in time.
    """
    if settings.get("security_protocol") not in TLS_PROTOCOLS:
        return
    if timeout_s is None:
        timeout_s = settings.get("bootstrap_timeout_ms", _DEFAULT_TIMEOUT_S * 1000) / 1000
    context = kafka_ssl_context(settings)
    deadline = time.monotonic() + timeout_s
    failures = []
    for server in settings["bootstrap_servers"]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            failures.append(f"{server}: not tried, the {timeout_s:g}s were used up")
            continue
        host, _, port = server.rpartition(":")
        host = host.strip("[]")  # an IPv6 address in brackets
        try:
            with socket.create_connection((host, int(port)), timeout=remaining) as sock, \
                    context.wrap_socket(sock, server_hostname=host):
                return
        except ssl.SSLCertVerificationError as exc:
            failures.append(f"{server}: its certificate is not accepted ({exc.verify_message})")
        except TimeoutError:
            failures.append(f"{server}: no TLS answer within {timeout_s:g}s; is it a TLS "
                            "listener?")
        except (OSError, ValueError) as exc:
            failures.append(f"{server}: {exc}")
    raise KafkaTLSError(f"no TLS handshake with Kafka ({settings['security_protocol']}): "
                        + "; ".join(failures))
