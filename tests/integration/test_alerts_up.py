"""The issue's "done": `guardtrace up --demo` with a rules file and a local webhook receiver
delivers a firing and a resolved notification for a rule the simulated traffic crosses,
and the Alerts page (headless Chromium, as in test_browser.py) shows both.

Kept short by the test's own settings: rules evaluated every second, a rule the demo's
fabrications cross within seconds (a low ceiling, a small minimum volume, a ``for`` of a
second; ``clear_for`` and flapping are the unit tests'), and a resolve brought about by editing the rules file while
``up`` runs (a minimum volume the traffic cannot reach), which the evaluator picks up.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardtrace.schemas import environment_variables as env
from guardtrace.transport.broker import free_port
from tests.unit.test_alert_delivery import Received, WebhookReceiver

from .conftest import wait_for
from .test_browser import CHROMIUM, CHROMIUM_ARGS
from .test_up import UpProcess

pytestmark = [pytest.mark.timeout(240)]

RULE = "demo-fabrications"
RULES = """
[[webhook]]
name = "chat"
url = "{slack}"
format = "slack"

[[webhook]]
name = "pager"
url = "{generic}"
format = "json"

[[rule]]
name = "demo-fabrications"
description = "The demo fleet fabricates."
metric = "fabrication_rate"
above = 0.01
window = "1m"
min_volume = {min_volume}
for = "1s"
clear_for = "0s"
notify = ["chat", "pager"]
"""


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver()
    yield server
    server.close()


def texts(received: list[Received]) -> list[str]:
    return [r.body["text"] for r in received]


def fire_and_resolve(rules: Path, hooks: dict[str, str], receiver: WebhookReceiver) -> None:
    """Wait for the firing notifications, then clear the rule and wait for the resolved."""
    wait_for(lambda: receiver.at("/slack") and receiver.at("/generic"), 90, interval_s=0.2,
             message="the firing notifications")
    [fired] = texts(receiver.at("/slack"))
    assert fired.startswith(f"[FIRING] {RULE}: fabrication_rate is ")
    assert "rule: fabrication_rate over 1m above 0.01 (min volume 3 requests seen)" in fired
    [generic] = receiver.at("/generic")
    assert (generic.body["status"], generic.body["rule"]) == ("firing", RULE)
    assert generic.body["value"] > 0.01 and generic.body["volume"] >= 3

    # The demo keeps fabricating; a minimum volume it cannot reach clears the rule.
    rules.write_text(RULES.format(min_volume=1_000_000, **hooks))
    wait_for(lambda: len(receiver.at("/slack")) >= 2 and len(receiver.at("/generic")) >= 2,
             90, interval_s=0.2, message="the resolved notifications")
    assert [t.split("]")[0] for t in texts(receiver.at("/slack"))] == ["[FIRING", "[RESOLVED"]
    assert "below the min volume of 1000000" in texts(receiver.at("/slack"))[1]
    assert [r.body["status"] for r in receiver.at("/generic")] == ["firing", "resolved"]


def test_up_demo_fires_and_resolves_an_alert_to_webhooks_and_the_page_shows_both(
        tmp_path: Path, receiver: WebhookReceiver) -> None:
    assert Path(CHROMIUM).exists(), "Debian's chromium is required (.ci/run installs it)"
    from playwright.sync_api import sync_playwright

    rules = tmp_path / "alerts.toml"
    hooks = {"slack": receiver.url("/slack"), "generic": receiver.url("/generic")}
    rules.write_text(RULES.format(min_volume=3, **hooks))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GUARDTRACE_")}
    environ[env.CLICKHOUSE_URL.name] = f"chdb://{tmp_path / 'store'}"
    environ[env.ALERT_INTERVAL_SECONDS.name] = "1"
    port = free_port()
    # No HTTP API (--api-port 0): this test needs none, and its port would be one more to find.
    up = UpProcess(["--demo", "--demo-rate", "10", "--alert-rules", str(rules), "--port",
                    str(port), "--broker-port", str(free_port()), "--api-port", "0"], tmp_path,
                   environ)
    try:
        up.wait_until_up()
        assert f"alerts      1 rule(s) from {rules}, every 1 s" in up.output
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                # Opened while the demo's traffic builds up: the page's first run is paid
                # for meanwhile, and it is reloaded once the alert has resolved.
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/alerts", wait_until="domcontentloaded")
                fire_and_resolve(rules, hooks, receiver)
                page.reload(wait_until="domcontentloaded")
                page.get_by_test_id("stCode").filter(has_text="firing -> resolved").first \
                    .wait_for(timeout=60_000)
                body = page.inner_text("body")
                shot = tmp_path / "alerts-page.png"
                page.screenshot(path=str(shot), full_page=True)
            finally:
                browser.close()
        history = body[body.index("History"):]
        assert f"{RULE}  pending -> firing" in history
        assert f"{RULE}  firing -> resolved" in history
        assert "No alert is firing or pending." in body
        assert RULE in body[body.index("Rules"):]
        if os.environ.get("GUARDTRACE_SCREENSHOT_DIR"):
            shutil.copy(shot, Path(os.environ["GUARDTRACE_SCREENSHOT_DIR"]) / shot.name)
    finally:
        code = up.stop()
    assert code == 0, up.output
    # Both webhooks answered: nothing was left in the dead-letter log.
    assert not (tmp_path / ".guardtrace" / "alert_dead_letters.jsonl").exists()
    assert len(receiver.at("/slack")) == 2 and len(receiver.at("/generic")) == 2
