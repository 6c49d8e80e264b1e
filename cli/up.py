"""``guardtrace up`` (everything on one machine) and ``guardtrace dashboard`` (the UI alone).

``up`` starts, in one supervised process: the embedded broker (unless
``GUARDTRACE_KAFKA_BOOTSTRAP`` names one), the schema migration, a consumer, the
dashboard, the HTTP query API and, with ``--demo``, the traffic simulator (a child
process, as an agent would be). The embedded broker serves its port through a proxy, so
that a broker grown past ``GUARDTRACE_EMBEDDED_BROKER_MAX_RSS_MB`` can be replaced by a
fresh one (transport/broker_rotation.py); the consumer reads the broker behind the proxy
directly. The consumer, the dashboard and the API share this process because the
embedded ClickHouse store (chDB) can be opened by one process only; up records where its
API listens beside the store, so the CLI's query commands read through it while up runs.
Ctrl-C stops everything.

Both serve the dashboard on loopback unless ``--address`` says otherwise, and refuse any
other address (exit status 2, before anything starts) unless sign-in is configured.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..schemas import dashboard_access as access
from ..schemas import environment_variables as env
from .alerts import load_up_rules, start_alerts
from .support import (
    DASHBOARD_MODULES,
    CommandError,
    keep_serving_without_a_reader,
    positive_float,
    positive_int,
)

__all__ = ["register"]

logger = logging.getLogger("guardtrace.cli.up")

# The demo fleet's pace: enough for every panel to move, little enough for a laptop.
DEMO_RATE = 4.0
# A cap low enough that the demo's long tail of invented names reaches it in minutes.
DEMO_AGENT_LABEL_CAP = "100"
_SUPERVISE_EVERY_S = 1.0
# How long one attempt waits for the consumer to drain a replaced broker; a broker not
# drained by then is kept and waited for again at the next check.
_BROKER_DRAIN_TIMEOUT_S = 30.0
# After a replacement broker failed to start, the old one serves on: try again this late.
_ROTATION_RETRY_S = 60.0
# A limit below a fresh broker's own size must not replace the broker every second.
_ROTATION_MIN_INTERVAL_S = 10.0
_MB = 1024 * 1024
# Streamlit's handling of an uncaught exception: "none" shows visitors a generic message
# and keeps the traceback in the log (the legacy `false` still sends the traceback). The
# dashboard's pages set the same value (dashboard/safe_render.py), which the CLI, not
# importing the dashboard, cannot read.
SHOW_ERROR_DETAILS = "none"
# The dashboard's default listen address: this machine only. Any other needs sign-in
# (schemas/dashboard_access.py).
LOOPBACK = "127.0.0.1"
_ADDRESS_RULE = (f"any other than loopback needs {env.DASHBOARD_TOKEN.name} or OIDC sign-in "
                 f"with {env.DASHBOARD_ALLOWED_EMAILS.name} / {env.DASHBOARD_ALLOWED_DOMAINS.name}")


def _dashboard_app() -> Path:
    """Where the Streamlit app is, found without importing the dashboard's modules.

    The CLI launches the dashboard; it does not read through it. Installed this is
    guardtrace/dashboard/app.py; in an editable install, the repository's dashboard/.
    """
    spec = importlib.util.find_spec("guardtrace.dashboard")
    if spec is None or not spec.submodule_search_locations:
        raise CommandError("the dashboard is not installed with this guardtrace")
    return Path(list(spec.submodule_search_locations)[0]).resolve() / "app.py"


def _check_port_free(port: int, what: str, flag: str) -> None:
    from ..transport.broker import port_in_use

    if port_in_use(port):
        raise CommandError(f"port {port} ({what}) is already in use, perhaps by another "
                           f"`guardtrace up`. Stop that process, or choose another port "
                           f"with {flag}.")


def streamlit_flags(port: int, address: str) -> dict[str, Any]:
    """The Streamlit options the dashboard is served with (``streamlit run``'s flags)."""
    return {"server_port": port, "server_address": address, "server_headless": True,
            "browser_gatherUsageStats": False, "server_fileWatcherType": "none",
            "server_runOnSave": False, "global_developmentMode": False,
            "client_toolbarMode": "viewer", "client_showErrorDetails": SHOW_ERROR_DETAILS,
            "logger_level": "warning"}


def _load_streamlit_config(port: int, address: str) -> str:
    """Load Streamlit's options as `streamlit run` would; returns the app's path."""
    from streamlit import config as st_config
    from streamlit.web import bootstrap

    app = str(_dashboard_app())
    st_config._main_script_path = app  # noqa: SLF001 - what `streamlit run` does first
    bootstrap.load_config_options(flag_options=streamlit_flags(port, address))
    return app


class ServingRefused(Exception):
    """The dashboard may not serve as asked (a usage error: exit status 2, nothing started)."""


def _streamlit_auth_problems(providers: tuple[str, ...]) -> list[str]:
    """Streamlit's own check of each provider's [auth] settings, which st.login makes only
    when a visitor signs in: better told now than by the first visitor."""
    from streamlit.auth_util import validate_auth_credentials
    from streamlit.errors import StreamlitAuthError

    problems = []
    for provider in providers:
        try:
            validate_auth_credentials(provider)
        except StreamlitAuthError as exc:
            problems.append(" ".join(str(exc).split()))
    return problems


def dashboard_sign_in(port: int, address: str) -> access.SignIn:
    """The sign-in the dashboard will offer on ``address``, checked before anything starts.

    Raises:
        ServingRefused: the sign-in settings are unusable, or there is no sign-in and
            ``address`` is beyond loopback (the message names the settings).
    """
    import streamlit as st

    # Streamlit finds its secrets (OIDC's [auth] section) where its options say.
    _load_streamlit_config(port, address)
    settings = access.AccessSettings.resolve()
    auth_section = st.secrets.get("auth") if st.secrets.load_if_toml_exists() else None
    providers = access.oidc_providers(auth_section if isinstance(auth_section, Mapping)
                                      else None)
    problems = access.setup_problems(settings, providers, access.oidc_library_installed())
    sign_in = access.SignIn.of(settings, providers)
    if not problems:
        problems = _streamlit_auth_problems(sign_in.providers)
    if problems:
        raise ServingRefused("; ".join(problems))
    refusal = access.serving_refusal(address, sign_in)
    if refusal:
        raise ServingRefused(refusal)
    return sign_in


def _sign_in_text(sign_in: access.SignIn) -> str:
    ways = ([f"shared token ({env.DASHBOARD_TOKEN.name})"] if sign_in.token else []) + \
        ([f"OIDC ({', '.join(sign_in.providers)})"] if sign_in.providers else [])
    return " or ".join(ways) if ways else "none (serving this machine only)"


def _refuse(command: str, refusal: ServingRefused) -> int:
    print(f"guardtrace {command}: error: {refusal}", file=sys.stderr)
    return 2


def serve_dashboard(port: int, address: str, settings: dict[str, str] | None = None) -> None:
    """Run the Streamlit server in this thread until SIGINT/SIGTERM stops it.

    Args:
        port: TCP port.
        address: Listen address (checked by :func:`dashboard_sign_in` first).
        settings: ``GUARDTRACE_*`` settings the dashboard takes over its environment's
            (``up`` passes the pipeline it runs). They reach the app as its script
            arguments, ``NAME=value`` each: this process's environment stays as it was.
    """
    from streamlit.web import bootstrap

    keep_serving_without_a_reader()

    app = _load_streamlit_config(port, address)
    arguments = [f"{name}={value}" for name, value in sorted((settings or {}).items())]
    bootstrap.run(app, False, arguments, streamlit_flags(port, address))


# -- guardtrace dashboard ------------------------------------------------------------------
def cmd_dashboard(args: argparse.Namespace) -> int:
    port = env.read_int(env.DASHBOARD_PORT, args.port, minimum=1)
    try:
        sign_in = dashboard_sign_in(port, args.address)
    except ServingRefused as refusal:
        return _refuse(args.command, refusal)
    _check_port_free(port, "dashboard", "--port")
    from ..store.connection import masked_url, reader_url

    print(f"guardtrace dashboard on http://{args.address}:{port} reading "
          f"{masked_url(reader_url())} "
          f"(database {env.read_str(env.CLICKHOUSE_DATABASE)}), sign-in: "
          f"{_sign_in_text(sign_in)}. Ctrl-C stops it.", flush=True)
    serve_dashboard(port, args.address)
    return 0


# -- guardtrace up -------------------------------------------------------------------------
@dataclass
class _Stack:
    """What `up` started, so it can be stopped in reverse order."""

    broker: Any = None  # the embedded one (transport/broker_rotation.py), if any
    pipeline: Any = None
    consumer: Any = None
    consumer_thread: threading.Thread | None = None
    rotation_retry_at: float = 0.0
    simulator: subprocess.Popen[bytes] | None = None
    simulator_log: Path | None = None
    alerts: Any = None
    api: Any = None
    # The record of this up beside the embedded store, and where it is.
    api_record: Any = None
    store_dir: Path | None = None
    failure: list[str] = field(default_factory=list)

    def stop(self) -> None:
        if self.api_record is not None and self.store_dir is not None:
            self.api_record.remove(self.store_dir)  # the CLI opens the store itself again
        if self.api is not None:
            self.api.stop()
        if self.simulator is not None and self.simulator.poll() is None:
            self.simulator.terminate()
            try:
                self.simulator.wait(15)
            except subprocess.TimeoutExpired:
                self.simulator.kill()
                self.simulator.wait()
        if self.alerts is not None:
            self.alerts.stop()  # queued notifications are delivered or dead-lettered
        with self.rotation_paused():  # a rotation under way finishes its consumer swap
            if self.consumer is not None:
                self.consumer.stop()
            if self.consumer_thread is not None:
                self.consumer_thread.join(30)
            if self.broker is not None:
                self.broker.stop()

    @contextmanager
    def rotation_paused(self) -> Iterator[None]:
        with self.broker.lock if self.broker is not None else nullcontext():
            yield


def _start_consumer(stack: _Stack, pipeline: Any, bootstrap: str | None = None) -> None:
    """Run a consumer of ``pipeline`` on a thread; ``bootstrap``: read that broker
    directly (the embedded one's own address, not the proxy's)."""
    stack.pipeline = pipeline
    overrides = {"bootstrap": bootstrap} if bootstrap else {}
    stack.consumer = pipeline.consumer(**overrides)

    def run() -> None:
        try:
            stats = stack.consumer.run()
            logger.info("consumer stopped: %s", stats.as_dict())
        except Exception as exc:
            logger.exception("consumer failed")
            stack.failure.append(f"the consumer failed: {exc!r}")

    stack.consumer_thread = threading.Thread(target=run, name="guardtrace-consumer",
                                             daemon=True)
    stack.consumer_thread.start()


def _start_simulator(stack: _Stack, settings: dict[str, str], log_dir: Path,
                     rate: float) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    stack.simulator_log = log_dir / "simulate.log"
    command = [sys.executable, "-m", "guardtrace.cli", "simulate", "--requests", "0",
               "--rate", f"{rate:g}", "--seed", str(int(time.time())), "--bootstrap",
               settings[env.KAFKA_BOOTSTRAP.name]]
    # The pipeline's settings, given explicitly: an agent would be configured the same way.
    child_env = {**os.environ, **settings}
    with open(stack.simulator_log, "ab") as log:
        # Its own session, like the broker's: Ctrl-C reaches up alone, and stack.stop()
        # ends the simulator first, so its last spans still find the broker.
        stack.simulator = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=child_env,
                                           start_new_session=True)


def _reopen_consumer(stack: _Stack, bootstrap: str) -> None:
    """Stop the consumer after its batch and start it again on ``bootstrap``."""
    if stack.consumer is not None:
        stack.consumer.stop()
    if stack.consumer_thread is not None:
        stack.consumer_thread.join(60)
        if stack.consumer_thread.is_alive():
            # Two members would share the store's writes: leave it to the supervisor.
            stack.failure.append("the consumer did not stop to move to the new embedded "
                                 "broker within 60 s")
            return
    _start_consumer(stack, stack.pipeline, bootstrap)


def _rotate_broker_if_due(stack: _Stack, stop: threading.Event) -> None:
    """Replace the embedded broker when it has grown past its limit, or finish draining
    one replaced earlier (transport/broker_rotation.py says how)."""
    from ..transport.broker import BrokerError
    from ..transport.topics import KafkaUnreachable

    broker = stack.broker
    if broker is None or stack.pipeline is None or stack.failure:
        return
    if broker.retiring is None and (time.monotonic() < stack.rotation_retry_at
                                    or not broker.due()):
        return
    consumer_config = stack.pipeline.config.consumer
    try:
        rotated = broker.rotate(consumer_config.group_id, consumer_config.topics,
                                lambda bootstrap: _reopen_consumer(stack, bootstrap),
                                _BROKER_DRAIN_TIMEOUT_S, cancel=stop)
        if rotated is not None:
            stack.rotation_retry_at = time.monotonic() + _ROTATION_MIN_INTERVAL_S
    except (BrokerError, KafkaUnreachable) as exc:
        stack.rotation_retry_at = time.monotonic() + _ROTATION_RETRY_S
        logger.error("could not start a fresh embedded broker (%s); the current one serves "
                     "on, trying again in %.0f s", exc, _ROTATION_RETRY_S)
    except Exception:  # the supervisor must go on watching the stack
        stack.rotation_retry_at = time.monotonic() + _ROTATION_RETRY_S
        logger.exception("replacing the embedded broker failed; trying again in %.0f s",
                         _ROTATION_RETRY_S)


def _supervise(stack: _Stack, stop: threading.Event) -> None:
    """Stop the whole stack (by SIGINT to ourselves) when a part of it dies; replace the
    embedded broker when it has grown too large."""
    while not stop.wait(_SUPERVISE_EVERY_S):
        _rotate_broker_if_due(stack, stop)
        problem = None
        if stack.failure:
            problem = stack.failure[0]
        elif stack.broker is not None and not stack.broker.alive():
            problem = "the embedded broker exited"
        elif stack.consumer_thread is not None and not stack.consumer_thread.is_alive():
            problem = "the consumer stopped"
        elif stack.alerts is not None and not stack.alerts.alive():
            problem = "the alert evaluator stopped"
        elif stack.simulator is not None and stack.simulator.poll() is not None:
            problem = (f"the demo simulator exited with status {stack.simulator.returncode} "
                       f"(see {stack.simulator_log})")
        if problem:
            stack.failure.append(problem)
            logger.error("%s; stopping guardtrace up", problem)
            os.kill(os.getpid(), signal.SIGINT)
            return


def _announce_when_serving(port: int, banner: str, stop: threading.Event) -> None:
    """Print the banner once the dashboard accepts connections (not before: a URL printed
    early would be refused)."""
    from ..transport.broker import port_in_use

    deadline = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < deadline:
        if port_in_use(port):
            print(banner, flush=True)
            return
        stop.wait(0.1)


def _api_port(flag: int | None, dashboard_port: int) -> int:
    """--api-port, else GUARDTRACE_API_PORT, else one above the dashboard's port; 0: none."""
    if flag is None and not env.read_str(env.API_PORT):
        port = dashboard_port + 1
    else:
        port = env.read_int(env.API_PORT, flag, minimum=0)
    if port > 65535:
        raise CommandError(f"{env.API_PORT.name} / --api-port must be a TCP port (0 for no "
                           f"API), got {port}")
    return port


def _connect_host(address: str) -> str:
    """Where a client on this machine reaches a server listening on ``address`` (every
    interface: through loopback)."""
    bare = address.strip("[]")
    if bare in ("", "0.0.0.0", "localhost"):
        return "127.0.0.1"
    if bare == "::":
        return "[::1]"
    return f"[{bare}]" if ":" in bare else bare


def _start_api(stack: _Stack, store_config: Any, port: int, address: str, token: str) -> str:
    """Serve the HTTP query API (a store client of its own) and record where; its URL."""
    from ..api.access import ApiAccess
    from ..api.handlers import QueryApi
    from ..api.running import RunningUp
    from ..api.server import ApiServer
    from ..api.store_link import StoreLink

    url = ""
    if port:
        api = QueryApi(StoreLink(store_config), ApiAccess(token))
        try:
            stack.api = ApiServer(api, port, address).start()
        except OSError as exc:
            raise CommandError(f"cannot serve the HTTP API on {address} port {port}: "
                               f"{exc.strerror or exc}; choose another with --api-port") from None
        url = f"http://{_connect_host(address)}:{stack.api.port}"
    stack.store_dir = store_config.embedded_path
    if stack.store_dir is not None:
        # Recorded even without an API: the CLI can then say why it cannot read.
        stack.api_record = RunningUp(os.getpid(), url, store_config.database)
        stack.api_record.write(stack.store_dir)
    return url


def _interrupt_self(_signum: int, _frame: Any) -> None:
    os.kill(os.getpid(), signal.SIGINT)


def cmd_up(args: argparse.Namespace) -> int:
    from ..consumers.pipeline import PipelineConfig, open_pipeline
    from ..store.connection import open_client
    from ..transport.broker_rotation import RotatingBroker
    from ..transport.topics import KafkaUnreachable

    port = env.read_int(env.DASHBOARD_PORT, args.port, minimum=1)
    try:
        sign_in = dashboard_sign_in(port, args.address)
    except ServingRefused as refusal:
        return _refuse(args.command, refusal)
    _check_port_free(port, "dashboard", "--port")
    api_port = _api_port(args.api_port, port)
    api_token = access.AccessSettings.resolve().token  # the dashboard's shared token
    if api_port:
        from ..api.access import serving_refusal

        api_refusal = serving_refusal(args.api_address, api_token)
        if api_refusal:
            return _refuse(args.command, ServingRefused(api_refusal))
        if api_port in (port, args.broker_port):
            raise CommandError(f"the HTTP API needs a port of its own, not {api_port}: choose "
                               "another with --api-port")
        _check_port_free(api_port, "HTTP API", "--api-port")
    # Before anything starts: the shutdown below prints, and must reach stack.stop().
    keep_serving_without_a_reader()
    external_kafka = os.environ.get(env.KAFKA_BOOTSTRAP.name, "").strip()
    if not external_kafka:
        _check_port_free(args.broker_port, "embedded Kafka broker", "--broker-port")
    config = PipelineConfig.resolve()  # every setting, once; passed on from here
    broker_limit_mb = env.read_int(env.EMBEDDED_BROKER_MAX_RSS_MB, minimum=0)
    alert_rules = load_up_rules(args.alert_rules)  # an invalid file: nothing starts
    protocol = config.consumer.security.protocol
    if not external_kafka and protocol != "PLAINTEXT":
        # The embedded broker serves plaintext only: a secured client would fail on it.
        raise CommandError(
            f"{env.KAFKA_SECURITY_PROTOCOL.name}={protocol} needs a broker that serves it: "
            f"set {env.KAFKA_BOOTSTRAP.name} to one, or unset "
            f"{env.KAFKA_SECURITY_PROTOCOL.name} to use the embedded broker (plaintext, "
            "this machine only).")
    store_config = config.store
    client = open_client(store_config)  # a locked store fails here, naming the holder
    # What the dashboard and the demo fleet are given explicitly: this pipeline, and with
    # --demo a label cap low enough that the fleet's long tail of names reaches it (the
    # Labels page then shows the cap the fleet runs with).
    extra_settings = ({env.AGENT_LABEL_CAP.name: DEMO_AGENT_LABEL_CAP}
                      if args.demo and not os.environ.get(env.AGENT_LABEL_CAP.name) else {})
    if alert_rules is not None:  # the dashboard's Alerts page shows them
        extra_settings[env.ALERT_RULES.name] = alert_rules.source

    stack = _Stack()
    stop_supervisor = threading.Event()
    # The broker and the simulator run in their own sessions, so a closed terminal's
    # SIGHUP reaches only this process: make it stop everything, as Ctrl-C does (through
    # whichever SIGINT handler is in place, Streamlit's once it serves).
    signal.signal(signal.SIGHUP, _interrupt_self)
    try:
        if not external_kafka:
            log_dir = Path(".guardtrace")
            log_dir.mkdir(exist_ok=True)
            stack.broker = RotatingBroker(
                args.broker_port, config.topics, broker_limit_mb * _MB,
                log_path=log_dir / "broker.log", security=config.consumer.security).start()
            config = config.with_bootstrap(stack.broker.bootstrap)
        bootstrap = config.bootstrap
        try:
            pipeline = open_pipeline(config, client=client)
        except KafkaUnreachable as exc:
            hint = (f" Unset {env.KAFKA_BOOTSTRAP.name} to use the embedded broker."
                    if external_kafka else "")
            raise CommandError(f"{exc}.{hint}") from None
        applied = pipeline.applied
        settings = {**config.environment(), **extra_settings}
        _start_consumer(stack, pipeline,
                        stack.broker.internal_bootstrap if stack.broker is not None else None)
        api_url = _start_api(stack, store_config, api_port, args.api_address, api_token)
        if alert_rules is not None:
            stack.alerts = start_alerts(alert_rules, store_config, bootstrap,
                                        config.consumer.group_id, config.topics.consumed,
                                        config.consumer.security)
        if args.demo:
            _start_simulator(stack, settings, Path(".guardtrace"), args.demo_rate)
        threading.Thread(target=_supervise, args=(stack, stop_supervisor),
                         name="guardtrace-supervisor", daemon=True).start()

        kafka_text = f"{bootstrap} ({'yours' if external_kafka else 'embedded Tansu'}" + (
            f", replaced by a fresh broker past {broker_limit_mb} MB)"
            if not external_kafka and broker_limit_mb else ")")
        banner = (f"guardtrace is up\n"
                  f"  dashboard   http://127.0.0.1:{port} (sign-in: {_sign_in_text(sign_in)})\n"
                  + (f"  api         {api_url} (OpenAPI: {api_url}/openapi.json; token: "
                     f"{'required' if api_token else 'none, this machine only'})\n"
                     if api_url else "  api         none (--api-port 0)\n")
                  + f"  kafka       {kafka_text}\n"
                  f"  clickhouse  {store_config.display_url} (database {store_config.database}"
                  f"{', migrated now' if applied else ''})\n"
                  + (f"  demo        simulating {args.demo_rate:g} requests/s "
                     f"(log: {stack.simulator_log})\n" if args.demo else "")
                  + (f"  alerts      {len(alert_rules.rules)} rule(s) from {alert_rules.source}, "
                     f"every {stack.alerts.settings.interval_s:g} s\n"
                     if alert_rules is not None and stack.alerts else "")
                  + "Ctrl-C stops everything.")
        threading.Thread(target=_announce_when_serving, args=(port, banner, stop_supervisor),
                         name="guardtrace-announce", daemon=True).start()
        try:
            serve_dashboard(port, args.address, settings)
        except KeyboardInterrupt:
            # Ctrl-C before Streamlit has installed its own handler (the banner goes out
            # as soon as the port accepts): the same normal stop as after it.
            pass
    finally:
        stop_supervisor.set()
        # A second Ctrl-C must not interrupt the shutdown halfway (orphaning the broker).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("stopping: API, simulator, consumer (finishing its batch), broker...",
              flush=True)
        stack.stop()
        if stack.broker is not None and stack.broker.rotations:
            logger.info("the embedded broker was replaced %d time(s)",
                        len(stack.broker.rotations))
    if stack.failure:
        raise CommandError(stack.failure[0])
    print(f"stopped. The data stays in {store_config.display_url}: try "
          f"`guardtrace requests --since 1h` or `guardtrace payload REQUEST_ID`.")
    return 0


def register(sub: Any) -> None:
    """Add the up and dashboard subcommands."""
    p = sub.add_parser(
        "up", help="run everything on this machine: broker, store, consumer, dashboard",
        description="Start the embedded Kafka broker (Tansu), migrate the embedded "
        "ClickHouse (chDB), run a consumer and serve the dashboard, supervised by this one "
        f"command. With {env.KAFKA_BOOTSTRAP.name} / {env.CLICKHOUSE_URL.name} set, uses "
        "those instead of the embedded ones. --demo also runs the traffic simulator so "
        "every panel moves. Ctrl-C stops everything; the data stays in the store.")
    p.add_argument("--demo", action="store_true",
                   help="also run `guardtrace simulate` (a traffic generator) in the background")
    p.add_argument("--demo-rate", type=positive_float, default=DEMO_RATE, metavar="R",
                   help=f"simulated requests per second with --demo (default {DEMO_RATE:g})")
    p.add_argument("--port", type=positive_int, default=None,
                   help=f"dashboard port (default ${env.DASHBOARD_PORT.name} or "
                        f"{env.DASHBOARD_PORT.default})")
    p.add_argument("--address", default=LOOPBACK,
                   help=f"dashboard listen address (default {LOOPBACK}; {_ADDRESS_RULE})")
    p.add_argument("--api-port", type=int, default=None, metavar="PORT",
                   help=f"HTTP query API port (default ${env.API_PORT.name}, else one above "
                        "the dashboard's; 0 serves no API)")
    p.add_argument("--api-address", default=LOOPBACK,
                   help=f"HTTP query API listen address (default {LOOPBACK}; any other needs "
                        f"{env.DASHBOARD_TOKEN.name})")
    p.add_argument("--alert-rules", default=None, metavar="FILE",
                   help=f"evaluate these alert rules (TOML) beside the consumer (default "
                        f"${env.ALERT_RULES.name}; none when unset)")
    p.add_argument("--broker-port", type=positive_int, default=9092,
                   help="embedded broker port (default 9092)")
    p.set_defaults(func=cmd_up, needs=DASHBOARD_MODULES)

    p = sub.add_parser(
        "dashboard", help="serve the dashboard alone",
        description="Serve the Streamlit dashboard over the configured ClickHouse "
        f"({env.DASHBOARD_CLICKHOUSE_URL.name}, else {env.CLICKHOUSE_URL.name}), for "
        "deployments where consumers run elsewhere. Give it a read-only user on a server.")
    p.add_argument("--port", type=positive_int, default=None,
                   help=f"port (default ${env.DASHBOARD_PORT.name} or "
                        f"{env.DASHBOARD_PORT.default})")
    p.add_argument("--address", default=LOOPBACK,
                   help=f"listen address (default {LOOPBACK}; 0.0.0.0 in a container; "
                        f"{_ADDRESS_RULE})")
    p.set_defaults(func=cmd_dashboard, needs=DASHBOARD_MODULES)
