"""One real browser: headless Chromium on the dashboard that `guardtrace up` serves.

Debian's /usr/bin/chromium (`.ci/run` installs it when missing), driven by Playwright
without a downloaded browser. A user's path: open the Requests page, type a request id,
press Search, see the trace. The screenshot lands in the test's output folder (and in
GUARDTRACE_SCREENSHOT_DIR when set, which is how the README's screenshots are taken).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guardtrace.schemas import environment_variables as env
from guardtrace.transport.broker import free_port
from guardtrace.transport.lag import read_consumer_lag
from guardtrace.transport.topics import TopicSet

from .conftest import wait_for
from .test_up import UpProcess

pytestmark = [pytest.mark.timeout(300)]

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialing Google's hosts, which
# this machine's closed network refuses.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture
def served(tmp_path: Path) -> tuple[UpProcess, str, str, dict[str, str]]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GUARDTRACE_")}
    environ[env.CLICKHOUSE_URL.name] = f"chdb://{tmp_path / 'store'}"
    port, broker_port = free_port(), free_port()
    up = UpProcess(["--port", str(port), "--broker-port", str(broker_port)], tmp_path, environ)
    yield up, f"http://127.0.0.1:{port}", f"127.0.0.1:{broker_port}", environ
    if up.process.poll() is None:
        up.stop()


def test_search_a_request_id_and_see_its_trace(served: tuple[UpProcess, str, str, dict[str, str]],
                                               tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), "Debian's chromium is required (.ci/run installs it)"
    from playwright.sync_api import sync_playwright

    up, url, bootstrap, environ = served
    up.wait_until_up()
    simulate = subprocess.run(
        [sys.executable, "-m", "guardtrace.cli", "simulate", "--requests", "40", "--rate",
         "unlimited", "--seed", "3", "--bootstrap", bootstrap],
        env=environ, capture_output=True, text=True, timeout=120)
    assert simulate.returncode == 0, simulate.stderr
    request_id = json.loads(simulate.stdout)["request_id_prefix"] + "1"
    topics = TopicSet.resolve(environ={}).consumed  # the defaults, as up runs them
    wait_for(lambda: (lag := read_consumer_lag(bootstrap, env.CONSUMER_GROUP.default, topics))
             .error is None and lag.total == 0 and any(r["committed"] for r in lag.partitions),
             60, interval_s=0.5, message="the consumer inside up to catch up")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/requests", wait_until="networkidle")
            page.get_by_label("Request id").fill(request_id)
            # The form's Search button (dataframe toolbars have a "Search" button too).
            page.get_by_test_id("stForm").get_by_role("button", name="Search").click()
            page.get_by_text("Trace timeline").wait_for(timeout=60_000)
            # The id is shown as text in a code block under the "Request" heading.
            page.get_by_test_id("stCode").filter(has_text=request_id).first.wait_for(
                timeout=30_000)
            page.wait_for_timeout(1500)  # let the charts draw before the picture
            body = page.inner_text("body")
            final_url = page.url
            shot = tmp_path / "request-page.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert "Spans" in body and "Events" in body and "Debug payloads" in body
    assert f"request_id={request_id}" in final_url
    assert shot.stat().st_size > 10_000
    if os.environ.get("GUARDTRACE_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["GUARDTRACE_SCREENSHOT_DIR"]) / shot.name)
