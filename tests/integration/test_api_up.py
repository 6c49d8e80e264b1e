"""While `guardtrace up` runs, `guardtrace trace`, `payload` and `requests` answer through
its HTTP API: the embedded store is up's alone, so a reply at all is a reply from the API.

As a user runs it: up in a process of its own with the dashboard's shared token set,
telemetry through its broker, the query commands in processes of their own.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from guardtrace import collectors
from guardtrace.api import paths
from guardtrace.api.running import RunningUp
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.transport.broker import free_port

from .conftest import wait_for
from .test_up import UpProcess, guardtrace

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

TOKEN = "up-api-token-0123456789abcdef"
REQUEST_ID = "api-up-req-1"


def _status(url: str, token: str = TOKEN) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.timeout(240)
def test_the_query_commands_answer_through_the_api_while_up_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GUARDTRACE_")}
    environ.update({env.CLICKHOUSE_URL.name: f"chdb://{store}", env.DASHBOARD_TOKEN.name: TOKEN})
    port, api_port, broker_port = free_port(), free_port(), free_port()
    up = UpProcess(["--port", str(port), "--api-port", str(api_port), "--broker-port",
                    str(broker_port)], tmp_path, environ)
    try:
        up.wait_until_up()
        api_url = f"http://127.0.0.1:{api_port}"
        assert f"api         {api_url} (OpenAPI: {api_url}/openapi.json; token: required)" \
            in up.output
        assert RunningUp.read(store) == RunningUp(up.process.pid, api_url, "guardtrace")

        collectors.configure(set_global=False, kafka_bootstrap=f"127.0.0.1:{broker_port}",
                             metric_export_interval_ms=60_000)
        collectors.FabricationGuard().check("I've deployed the fix to production.", [],
                                            request_id=REQUEST_ID, agent="deployer")
        collectors.shutdown()
        request_url = api_url + paths.request_path(paths.REQUEST_PAYLOADS, REQUEST_ID)
        wait_for(lambda: _status(request_url) == 200, 60, interval_s=0.3,
                 message="up's consumer to store the request")
        assert _status(request_url, token="not-the-token-at-all") == 401

        trace = guardtrace(["trace", REQUEST_ID, "--json"], tmp_path, environ)
        assert trace.returncode == 0, trace.stderr
        timeline = json.loads(trace.stdout)["timeline"]
        assert names.EVENT_FABRICATION_DETECTED in [item["name"] for item in timeline]

        payload = guardtrace(["payload", REQUEST_ID], tmp_path, environ)
        assert payload.returncode == 0, payload.stderr
        assert names.PAYLOAD_KIND_FABRICATION in payload.stdout
        assert "deployed the fix" in payload.stdout

        listed = guardtrace(["requests", "--outcome", "fabrication", "--json"], tmp_path,
                            environ)
        assert listed.returncode == 0, listed.stderr
        assert [row["request_id"] for row in json.loads(listed.stdout)] == [REQUEST_ID]

        # Without the token up runs with, the API refuses, and the command says which
        # setting it needs.
        tokenless = {k: v for k, v in environ.items() if k != env.DASHBOARD_TOKEN.name}
        refused = guardtrace(["requests"], tmp_path, tokenless)
        assert refused.returncode == 1 and env.DASHBOARD_TOKEN.name in refused.stderr

        # up runs, but its API does not answer where the record says: told so, with up's
        # process id, not a bare "store in use".
        record = RunningUp.read(store)
        assert record is not None
        RunningUp(record.pid, f"http://127.0.0.1:{free_port()}", record.database).write(store)
        try:
            stuck = guardtrace(["trace", REQUEST_ID], tmp_path, environ)
        finally:
            record.write(store)
        assert stuck.returncode == 1
        assert f"guardtrace up (PID {up.process.pid}) holds the store" in stuck.stderr
        assert "HTTP API does not answer" in stuck.stderr and "Traceback" not in stuck.stderr

        assert up.stop() == 0, up.output
    finally:
        if up.process.poll() is None:
            up.process.kill()
            up.process.wait(10)
    assert RunningUp.read(store, require_alive=False) is None  # up removed its record


def test_up_refuses_an_api_beyond_loopback_without_the_token(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GUARDTRACE_")}
    environ[env.CLICKHOUSE_URL.name] = f"chdb://{tmp_path / 'store'}"
    api_port = free_port()
    result = guardtrace(["up", "--port", str(free_port()), "--api-port", str(api_port),
                         "--api-address", "0.0.0.0", "--broker-port", str(free_port())],
                        tmp_path, environ)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "HTTP API" in result.stderr and env.DASHBOARD_TOKEN.name in result.stderr
    assert not (tmp_path / "store").exists()  # refused before anything started
