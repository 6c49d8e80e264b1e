"""Transport security, read and checked in one place: Kafka (TLS, SASL) and ClickHouse (TLS).

Every Kafka client guardtrace builds (the hooks' producer, the consumer and its
dead-letter producer, the admin client that creates topics, the dashboard's lag reader)
takes its servers and security from :func:`kafka_connection_settings`; every connection
to a ClickHouse server takes its TLS settings from :class:`ClickHouseTLS`. Both read the
``GUARDTRACE_KAFKA_*`` and ``GUARDTRACE_CLICKHOUSE_*`` variables declared in
:mod:`.environment_variables` and are checked when built, so a bad setting stops the
process at start with a :class:`~.environment_variables.ConfigError` naming it: an
unknown protocol or mechanism, SASL without a user name or password, a certificate file
that is missing or does not load, or a setting the chosen protocol would silently ignore.

It lives in ``schemas`` because both sides need it and the hooks may import only
``schemas`` and ``collectors``. It imports no Kafka or ClickHouse client. Passwords are
held as :class:`Secret`, which prints as ``***`` wherever it is shown.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from . import environment_variables as env

__all__ = ["SASL_MECHANISMS", "SECURITY_PROTOCOLS", "TLS_PROTOCOLS", "ClickHouseTLS",
           "KafkaSecurity", "Secret", "bootstrap_servers", "kafka_connection_settings",
           "kafka_ssl_context"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# What kafka-python authenticates with a user name and password (GSSAPI and OAUTHBEARER
# need more than these settings).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MASK = "***"


class Secret(str):
    """A password: the value itself where it is used, ``***`` wherever it is shown.

    kafka-python logs each client's whole configuration at DEBUG, and a dataclass repr,
    an f-string or a ``%s`` would print a plain string too. As a ``str`` the value still
    works where it is used (kafka-python's ``.encode()`` and ``join``, ``ssl``'s
    ``load_cert_chain``), while ``repr``, ``str`` and ``format`` show ``***``.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(MASK)

    def __str__(self) -> str:
        return MASK

    def __format__(self, format_spec: str) -> str:
        return MASK

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickling goes through str(self) otherwise, which would store the mask.
        return (Secret, (str.__str__(self),))


def bootstrap_servers(bootstrap: str) -> list[str]:
    """``host:port`` entries of a comma-separated bootstrap list, blanks dropped."""
    return [server.strip() for server in bootstrap.split(",") if server.strip()]


def kafka_ssl_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context kafka-python builds from these client settings.

    The same steps as kafka-python's ``KafkaSSLTransport._build_ssl_context`` (3.0.12),
    except that an encrypted key without a password fails instead of asking for one on
    the terminal (OpenSSL's default, which would block a service with no terminal).

    Raises:
        ssl.SSLError, OSError: a file does not load.
    """
    given: ssl.SSLContext | None = settings.get("ssl_context")
    if given is not None:
        return given
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = bool(settings.get("ssl_check_hostname", True))
    if settings.get("ssl_cafile"):
        context.load_verify_locations(settings["ssl_cafile"])
    else:
        context.load_default_certs()
    if settings.get("ssl_certfile"):
        context.load_cert_chain(settings["ssl_certfile"], settings.get("ssl_keyfile"),
                                password=settings.get("ssl_password") or _no_password)
    return context


def _no_password() -> str:
    return ""


def _optional(value: str) -> str | None:
    return value or None


def _require_file(var: env.EnvVar, path: str | None) -> None:
    """A named file must be a readable file: say which setting names what, if not."""
    if path is None:
        return
    if not Path(path).is_file():
        raise env.ConfigError(f"{var.name} names {path}, which is not a file")
    if not os.access(path, os.R_OK):
        raise env.ConfigError(f"{var.name} names {path}, which this process cannot read")


def _refuse_set(settings: Sequence[tuple[env.EnvVar, object]], reason: str) -> None:
    """A setting the protocol would ignore is an error: say which and why."""
    for var, value in settings:
        if value:
            raise env.ConfigError(f"{var.name} is set, but {reason}")


@dataclass(frozen=True)
class KafkaSecurity:
    """How guardtrace's Kafka clients connect; checked when built (see the module doc).

    Attributes:
        protocol: One of :data:`SECURITY_PROTOCOLS`.
        sasl_mechanism: One of :data:`SASL_MECHANISMS` (SASL protocols only).
        username, password: SASL credentials (SASL protocols only).
        ca_file: PEM CAs for the brokers' certificates; None: the system's CAs.
        cert_file, key_file, key_password: Client certificate for mutual TLS.
        check_hostname: Check that a broker's certificate names its host.
    """

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: Secret | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: Secret | None = None
    check_hostname: bool = True

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        """Read the ``GUARDTRACE_KAFKA_*`` security variables (default: this process's).

        Raises:
            ConfigError: a setting is unusable; the message names it (never a password).
        """
        def text(var: env.EnvVar) -> str | None:
            return _optional(env.read_str(var, None, environ))

        password, key_password = text(env.KAFKA_SASL_PASSWORD), text(env.KAFKA_SSL_KEY_PASSWORD)
        return cls(
            protocol=env.read_str(env.KAFKA_SECURITY_PROTOCOL, None, environ).upper(),
            sasl_mechanism=(text(env.KAFKA_SASL_MECHANISM) or "").upper() or None,
            username=text(env.KAFKA_SASL_USERNAME),
            password=Secret(password) if password else None,
            ca_file=text(env.KAFKA_SSL_CA_FILE),
            cert_file=text(env.KAFKA_SSL_CERT_FILE),
            key_file=text(env.KAFKA_SSL_KEY_FILE),
            key_password=Secret(key_password) if key_password else None,
            check_hostname=env.read_bool(env.KAFKA_SSL_CHECK_HOSTNAME, None, environ),
        )

    def __post_init__(self) -> None:
        # Passwords given as plain strings (tests, callers) are masked all the same.
        for name in ("password", "key_password"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Secret):
                object.__setattr__(self, name, Secret(value))
        if self.protocol not in SECURITY_PROTOCOLS:
            raise env.ConfigError(f"{env.KAFKA_SECURITY_PROTOCOL.name} must be one of "
                                  f"{', '.join(SECURITY_PROTOCOLS)}, got {self.protocol!r}")
        self._check_sasl()
        self._check_tls()

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    def _check_sasl(self) -> None:
        sasl = [(env.KAFKA_SASL_MECHANISM, self.sasl_mechanism),
                (env.KAFKA_SASL_USERNAME, self.username), (env.KAFKA_SASL_PASSWORD, self.password)]
        if not self.uses_sasl:
            _refuse_set(sasl, f"{env.KAFKA_SECURITY_PROTOCOL.name} is {self.protocol}: SASL "
                              "settings apply only with SASL_PLAINTEXT or SASL_SSL")
            return
        if self.sasl_mechanism not in SASL_MECHANISMS:
            got = "nothing" if self.sasl_mechanism is None else repr(self.sasl_mechanism)
            raise env.ConfigError(
                f"{env.KAFKA_SASL_MECHANISM.name} must be one of {', '.join(SASL_MECHANISMS)} "
                f"with {env.KAFKA_SECURITY_PROTOCOL.name}={self.protocol}, got {got}")
        for var, value in sasl[1:]:
            if not value:
                raise env.ConfigError(f"{var.name} must be set with "
                                      f"{env.KAFKA_SECURITY_PROTOCOL.name}={self.protocol}")

    def _check_tls(self) -> None:
        tls = [(env.KAFKA_SSL_CA_FILE, self.ca_file), (env.KAFKA_SSL_CERT_FILE, self.cert_file),
               (env.KAFKA_SSL_KEY_FILE, self.key_file),
               (env.KAFKA_SSL_KEY_PASSWORD, self.key_password),
               (env.KAFKA_SSL_CHECK_HOSTNAME, not self.check_hostname)]
        if not self.uses_tls:
            _refuse_set(tls, f"{env.KAFKA_SECURITY_PROTOCOL.name} is {self.protocol}: TLS "
                             "settings apply only with SSL or SASL_SSL")
            return
        if self.cert_file is None:
            _refuse_set(tls[2:4], f"{env.KAFKA_SSL_CERT_FILE.name} is not: a client key "
                                  "goes with a client certificate")
        _require_file(env.KAFKA_SSL_CA_FILE, self.ca_file)
        _require_file(env.KAFKA_SSL_CERT_FILE, self.cert_file)
        _require_file(env.KAFKA_SSL_KEY_FILE, self.key_file)
        try:
            kafka_ssl_context(self.client_settings())
        except (ssl.SSLError, OSError) as exc:
            raise env.ConfigError(self._tls_load_failure(exc)) from None

    def _tls_load_failure(self, exc: BaseException) -> str:
        """Which files did not load, naming the settings (the error never holds a password)."""
        try:
            kafka_ssl_context({"ssl_cafile": self.ca_file})
        except (ssl.SSLError, OSError) as ca_exc:
            return f"{env.KAFKA_SSL_CA_FILE.name}: {self.ca_file} holds no usable CA ({ca_exc})"
        names = [env.KAFKA_SSL_CERT_FILE.name, env.KAFKA_SSL_KEY_FILE.name]
        return (f"{' / '.join(names)}: the client certificate and key do not load ({exc}); an "
                f"encrypted key needs {env.KAFKA_SSL_KEY_PASSWORD.name}, and the right one")

    def client_settings(self) -> dict[str, Any]:
        """The kafka-python settings for this security (only those that apply)."""
        settings: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_sasl:
            settings.update(sasl_mechanism=self.sasl_mechanism,
                            sasl_plain_username=self.username, sasl_plain_password=self.password)
        if self.uses_tls:
            settings["ssl_check_hostname"] = self.check_hostname
            optional = {"ssl_cafile": self.ca_file, "ssl_certfile": self.cert_file,
                        "ssl_keyfile": self.key_file, "ssl_password": self.key_password}
            settings.update({key: value for key, value in optional.items() if value is not None})
        return settings

    def describe(self) -> str:
        """The protocol, and the SASL mechanism and user: for errors (no password)."""
        if not self.uses_sasl:
            return self.protocol
        return f"{self.protocol}, {self.sasl_mechanism} as {self.username!r}"


def kafka_connection_settings(bootstrap: str,
                              security: KafkaSecurity | None = None) -> dict[str, Any]:
    """Servers and security every kafka-python client of guardtrace is built with.

    Args:
        bootstrap: Comma-separated bootstrap servers.
        security: Default: :meth:`KafkaSecurity.resolve` from this process's environment.
    """
    security = KafkaSecurity.resolve() if security is None else security
    return {"bootstrap_servers": bootstrap_servers(bootstrap), **security.client_settings()}


@dataclass(frozen=True)
class ClickHouseTLS:
    """TLS of connections to an ``https://`` ClickHouse server; checked when built.

    Attributes:
        verify: Verify the server's certificate.
        ca_file: PEM CAs for the server's certificate; None: the system's CAs.
        cert_file, key_file: Client certificate and its (unencrypted) key, for mutual TLS.
    """

    verify: bool = True
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None) -> ClickHouseTLS:
        """Read the ``GUARDTRACE_CLICKHOUSE_*`` TLS variables (default: this process's).

        Raises:
            ConfigError: a setting is unusable; the message names it.
        """
        return cls(
            verify=env.read_bool(env.CLICKHOUSE_TLS_VERIFY, None, environ),
            ca_file=_optional(env.read_str(env.CLICKHOUSE_CA_FILE, None, environ)),
            cert_file=_optional(env.read_str(env.CLICKHOUSE_CLIENT_CERT_FILE, None, environ)),
            key_file=_optional(env.read_str(env.CLICKHOUSE_CLIENT_KEY_FILE, None, environ)),
        )

    def __post_init__(self) -> None:
        if not self.verify:
            _refuse_set([(env.CLICKHOUSE_CA_FILE, self.ca_file)],
                        f"{env.CLICKHOUSE_TLS_VERIFY.name} is false: the CA would be ignored")
        if self.cert_file is None:
            _refuse_set([(env.CLICKHOUSE_CLIENT_KEY_FILE, self.key_file)],
                        f"{env.CLICKHOUSE_CLIENT_CERT_FILE.name} is not: a client key goes "
                        "with a client certificate")
        for var, path in ((env.CLICKHOUSE_CA_FILE, self.ca_file),
                          (env.CLICKHOUSE_CLIENT_CERT_FILE, self.cert_file),
                          (env.CLICKHOUSE_CLIENT_KEY_FILE, self.key_file)):
            _require_file(var, path)
        self._check_files_load()

    def _check_files_load(self) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.ca_file is not None:
            try:
                context.load_verify_locations(self.ca_file)
            except (ssl.SSLError, OSError) as exc:
                raise env.ConfigError(f"{env.CLICKHOUSE_CA_FILE.name}: {self.ca_file} holds "
                                      f"no usable CA ({exc})") from None
        if self.cert_file is not None:
            try:
                # clickhouse-connect takes no key password: an encrypted key cannot be used.
                context.load_cert_chain(self.cert_file, self.key_file, password=_no_password)
            except (ssl.SSLError, OSError) as exc:
                raise env.ConfigError(
                    f"{env.CLICKHOUSE_CLIENT_CERT_FILE.name} / "
                    f"{env.CLICKHOUSE_CLIENT_KEY_FILE.name}: the client certificate and key do "
                    f"not load ({exc}); the key must not be encrypted") from None

    @property
    def configured(self) -> bool:
        """True when any setting differs from its default."""
        return self != ClickHouseTLS()

    def setting_names(self) -> list[str]:
        """The variables whose values differ from their defaults (for errors)."""
        variables = {"verify": env.CLICKHOUSE_TLS_VERIFY, "ca_file": env.CLICKHOUSE_CA_FILE,
                     "cert_file": env.CLICKHOUSE_CLIENT_CERT_FILE,
                     "key_file": env.CLICKHOUSE_CLIENT_KEY_FILE}
        default = ClickHouseTLS()
        return [variables[f.name].name for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)]

    def client_settings(self) -> dict[str, Any]:
        """The ``clickhouse_connect.get_client`` arguments for this TLS (those that apply)."""
        optional = {"ca_cert": self.ca_file, "client_cert": self.cert_file,
                    "client_cert_key": self.key_file}
        return {"verify": self.verify,
                **{key: value for key, value in optional.items() if value is not None}}
