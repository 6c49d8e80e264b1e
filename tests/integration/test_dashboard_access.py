"""Who can read the dashboard, as a user meets it: the commands that serve it, and a real
browser (Debian's Chromium through Playwright, as in test_browser.py) on a running one.

* ``guardtrace dashboard`` / ``up`` refuse, exit status 2, to serve beyond loopback
  without sign-in, naming the settings, before anything starts; with a token, or with
  OIDC configured, they serve.
* With a token set and stored data present, a visitor without it sees the sign-in and
  none of the data (neither on the page nor in what the server sent the browser); with
  it, in the form or in an ``Authorization: Bearer`` header, the data is shown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardtrace import collectors
from guardtrace.schemas import environment_variables as env
from guardtrace.transport.broker import free_port, port_in_use
from guardtrace.transport.lag import read_consumer_lag
from guardtrace.transport.topics import TopicSet

from .conftest import wait_for
from .test_browser import CHROMIUM, CHROMIUM_ARGS
from .test_up import UpProcess, guardtrace

pytestmark = [pytest.mark.usefixtures("collectors_reset"), pytest.mark.timeout(300)]

TOKEN = "team-token-" + "7f3c9a1e5b2d4c6f8a0b"
SIGN_IN_SETTINGS = (env.DASHBOARD_TOKEN.name, env.DASHBOARD_ALLOWED_EMAILS.name,
                    env.DASHBOARD_ALLOWED_DOMAINS.name)
# Complete OIDC settings as Streamlit reads them (nothing is contacted until a visitor
# presses the sign-in button).
AUTH_SECRETS = """\
[auth]
redirect_uri = "http://localhost:8501/oauth2callback"
cookie_secret = "a-cookie-secret-for-this-test-only"
client_id = "guardtrace-test"
client_secret = "not-a-real-secret"
server_metadata_url = "https://accounts.example.com/.well-known/openid-configuration"
"""


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GUARDTRACE_")}
    environ[env.CLICKHOUSE_URL.name] = f"chdb://{tmp_path / 'store'}"
    return environ


class Served:
    """A running `guardtrace dashboard`, stopped by the test's end at the latest."""

    def __init__(self, args: list[str], cwd: Path, environ: dict[str, str]) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "guardtrace.cli", "dashboard", "--port", str(self.port),
             *args], cwd=cwd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)

    def healthy(self) -> bool:
        wait_for(lambda: port_in_use(self.port) or self.process.poll() is not None, 60,
                 message="the dashboard to listen")
        if self.process.poll() is not None:
            return False
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_stcore/health",
                                    timeout=10) as response:
            return response.read() == b"ok"

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        code = self.process.wait(30)
        assert self.process.stdout is not None
        return code, self.process.stdout.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def served() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for dashboard in started:
        dashboard.kill()


# -- the commands --------------------------------------------------------------------------
@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.0.2.10"])
def test_dashboard_beyond_loopback_without_sign_in_exits_2_naming_the_settings(
        address: str, tmp_path: Path, environ: dict[str, str]) -> None:
    port = free_port()
    result = guardtrace(["dashboard", "--address", address, "--port", str(port)], tmp_path,
                        environ)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("guardtrace dashboard: error: ")
    for name in SIGN_IN_SETTINGS:
        assert name in result.stderr
    assert "guardtrace dashboard on" not in result.stdout  # never started
    assert not port_in_use(port)


def test_up_beyond_loopback_without_sign_in_starts_nothing(tmp_path: Path,
                                                           environ: dict[str, str]) -> None:
    port, broker_port = free_port(), free_port()
    result = guardtrace(["up", "--address", "0.0.0.0", "--port", str(port), "--broker-port",
                         str(broker_port)], tmp_path, environ)
    assert result.returncode == 2, result.stdout + result.stderr
    assert env.DASHBOARD_TOKEN.name in result.stderr
    assert not port_in_use(port) and not port_in_use(broker_port)
    assert not (tmp_path / "store").exists() and not (tmp_path / ".guardtrace").exists()


def test_a_token_too_short_is_refused_without_being_echoed(tmp_path: Path,
                                                           environ: dict[str, str]) -> None:
    result = guardtrace(["dashboard", "--address", "0.0.0.0", "--port", str(free_port())],
                        tmp_path, {**environ, env.DASHBOARD_TOKEN.name: "hunter2hunter"})
    assert result.returncode == 2
    assert "shorter than 16" in result.stderr
    assert "hunter2hunter" not in result.stdout + result.stderr


def test_with_a_token_the_dashboard_serves_beyond_loopback(
        tmp_path: Path, environ: dict[str, str], served: list[Served]) -> None:
    dashboard = Served(["--address", "0.0.0.0"], tmp_path,
                       {**environ, env.DASHBOARD_TOKEN.name: TOKEN})
    served.append(dashboard)
    assert dashboard.healthy()
    code, output = dashboard.stop()
    assert code == 0, output
    assert "sign-in: shared token" in output
    assert TOKEN not in output


def fake_authlib(folder: Path) -> Path:
    """A stand-in for Authlib, which st.login needs and this environment lacks: the start
    only checks that it can be found."""
    package = folder / "fake-packages" / "authlib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "1.3.2"\n')
    return package.parent


def oidc_environ(tmp_path: Path, environ: dict[str, str], secrets: str) -> dict[str, str]:
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text(secrets)
    path = os.pathsep.join(filter(None, [str(fake_authlib(tmp_path)), environ.get("PYTHONPATH")]))
    return {**environ, "PYTHONPATH": path,
            env.DASHBOARD_ALLOWED_DOMAINS.name: "example.com"}


def test_with_oidc_and_an_allow_list_the_dashboard_serves_beyond_loopback(
        tmp_path: Path, environ: dict[str, str], served: list[Served]) -> None:
    dashboard = Served(["--address", "0.0.0.0"], tmp_path,
                       oidc_environ(tmp_path, environ, AUTH_SECRETS))
    served.append(dashboard)
    assert dashboard.healthy()
    code, output = dashboard.stop()
    assert code == 0, output
    assert "sign-in: OIDC (default)" in output


def test_incomplete_oidc_settings_are_refused_in_streamlits_words(
        tmp_path: Path, environ: dict[str, str]) -> None:
    secrets = AUTH_SECRETS.replace('client_secret = "not-a-real-secret"\n', "")
    result = guardtrace(["dashboard", "--address", "0.0.0.0", "--port", str(free_port())],
                        tmp_path, oidc_environ(tmp_path, environ, secrets))
    assert result.returncode == 2
    assert "client_secret" in result.stderr


# -- a browser on a dashboard with a token and stored data ---------------------------------
def store_one_request(bootstrap: str, request_id: str, agent: str) -> None:
    """A fabricated reply from ``agent``, through up's broker into its store."""
    collectors.configure(set_global=False, kafka_bootstrap=bootstrap,
                         metric_export_interval_ms=60_000)
    collectors.FabricationGuard().check("I've written the report to disk.", [],
                                        request_id=request_id, agent=agent)
    collectors.shutdown()
    topics = TopicSet.resolve(environ={}).consumed  # the defaults, as up runs them
    wait_for(lambda: (lag := read_consumer_lag(bootstrap, env.CONSUMER_GROUP.default, topics))
             .error is None and lag.total == 0 and any(r["committed"] for r in lag.partitions),
             60, interval_s=0.5, message="the consumer inside up to store the request")


def frame_bytes(frame: Any) -> bytes:
    return frame if isinstance(frame, bytes) else str(frame).encode()


def test_stored_data_is_shown_only_to_a_visitor_with_the_token(
        tmp_path: Path, environ: dict[str, str]) -> None:
    assert Path(CHROMIUM).exists(), "Debian's chromium is required (.ci/run installs it)"
    from playwright.sync_api import sync_playwright

    request_id = f"access-req-{uuid.uuid4().hex[:12]}"
    agent = f"agent-{uuid.uuid4().hex[:12]}"
    port, broker_port = free_port(), free_port()
    up = UpProcess(["--port", str(port), "--broker-port", str(broker_port)], tmp_path,
                   {**environ, env.DASHBOARD_TOKEN.name: TOKEN})
    try:
        up.wait_until_up()
        store_one_request(f"127.0.0.1:{broker_port}", request_id, agent)
        page_url = f"http://127.0.0.1:{port}/requests?request_id={request_id}"

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                # Without the token: the sign-in, and nothing stored reaches the browser.
                page = browser.new_page()
                received: list[bytes] = []
                page.on("websocket", lambda ws: ws.on(
                    "framereceived", lambda frame: received.append(frame_bytes(frame))))
                page.goto(page_url, wait_until="networkidle")
                token_field = page.get_by_label("Access token")
                token_field.wait_for(timeout=60_000)
                signed_out = page.inner_text("body")
                signed_out_html = page.content()

                token_field.fill("a-wrong-token-of-some-length")
                page.get_by_role("button", name="Sign in").click()
                page.get_by_text("That token is not right.").wait_for(timeout=60_000)
                after_wrong = page.inner_text("body")
                sent_before_sign_in = b"".join(received)

                # With it: the request and its agent.
                page.get_by_label("Access token").fill(TOKEN)
                page.get_by_role("button", name="Sign in").click()
                page.get_by_text("Trace timeline").wait_for(timeout=60_000)
                page.get_by_text(agent).first.wait_for(timeout=30_000)
                # The page arrives in pieces: the id's code block can be drawn after the
                # timeline's heading, so wait for it before reading the body.
                page.get_by_test_id("stCode").filter(has_text=request_id).first.wait_for(
                    timeout=30_000)
                signed_in = page.inner_text("body")

                # A bearer header (a proxy in front, a script) signs in without the form.
                context = browser.new_context(
                    extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
                with_header = context.new_page()
                with_header.goto(page_url, wait_until="networkidle")
                with_header.get_by_text("Trace timeline").wait_for(timeout=60_000)
                header_body = with_header.inner_text("body")
            finally:
                browser.close()
    finally:
        up.stop()

    assert "Sign in to see them" in signed_out
    for shown in (signed_out, signed_out_html, after_wrong):
        assert agent not in shown
        assert "Trace timeline" not in shown
        assert TOKEN not in shown
    assert request_id not in signed_out and request_id not in after_wrong
    assert received, "the page talked to the server"
    assert agent.encode() not in sent_before_sign_in
    assert request_id.encode() not in sent_before_sign_in
    assert request_id in signed_in and agent in signed_in
    assert "Signed in with the shared token" in signed_in
    assert agent in header_body and "Access token" not in header_body


def test_up_with_kafka_security_and_no_broker_of_its_own_starts_nothing(
        tmp_path: Path, environ: dict[str, str]) -> None:
    # The embedded broker serves plaintext only: up says which broker the setting needs
    # instead of starting one its own clients then fail on.
    port, broker_port = free_port(), free_port()
    result = guardtrace(["up", "--port", str(port), "--broker-port", str(broker_port)],
                        tmp_path, {**environ, env.KAFKA_SECURITY_PROTOCOL.name: "SSL"})
    assert result.returncode != 0, result.stdout + result.stderr
    assert f"{env.KAFKA_SECURITY_PROTOCOL.name}=SSL needs a broker" in result.stderr
    assert env.KAFKA_BOOTSTRAP.name in result.stderr
    assert not port_in_use(port) and not port_in_use(broker_port)
    assert not (tmp_path / ".guardtrace").exists()
