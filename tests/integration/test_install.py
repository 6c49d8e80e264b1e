"""The installs, pinned: what `pip install guardtrace` gives an agent, and what the
`server` extra adds.

Each test builds a fresh virtual environment and installs the wheel built from this
checkout (non-editable, from the package index and pip's cache; needs the network on a
cold cache). The venvs are created ``--without-pip`` and filled by this interpreter's
pip (``pip --python``): a venv with its own pip takes ~9 s to create here and this takes
~0.1 s. The size is what the install added to site-packages (file sizes, MB = 10^6
bytes, bytecode pip compiled included) over what the new venv held right after creation
(nothing, without pip; a venv with pip and setuptools starts at ~23 MB).

* core: site-packages grows by at most 60 MB (issue 12; peers: langfuse 65 MB,
  arize-phoenix-otel 60 MB), nothing of the server side is installed, and the hooks,
  run by the fresh venv's python, put their span event and debug payload on a real
  broker (read back here with this venv's kafka-python).
* server: ``guardtrace --help`` works, the server modules import, and ``guardtrace
  migrate`` creates the schema in an embedded store. Installed ``--no-compile`` (its
  size is not measured, and bytecode was most of its install time).

Slow (a wheel build, two installs; the server one moves ~1 GB on a cold cache), so it
lives with the integration tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from guardtrace.schemas import names
from guardtrace.schemas.payload_record import decode
from guardtrace.transport.broker import EmbeddedBroker
from guardtrace.transport.topics import ensure_topics
from tests.support.wheel import guardtrace_wheel_fixture  # noqa: F401 - the guardtrace_wheel fixture

ROOT = Path(__file__).resolve().parents[2]
MAX_CORE_INSTALL_MB = 60
# Import names of what only the server side needs (grpc: only the otlp-grpc extra).
SERVER_ONLY = ("streamlit", "chdb", "clickhouse_connect", "pandas", "pyarrow", "grpc")
SERVER_MODULES = ("guardtrace.cli.up", "guardtrace.store.queries", "guardtrace.dashboard.data",
                  "guardtrace.consumers.consumer")
INSTALL_TIMEOUT_S = 600

# Run by the fresh venv's python: a bare import loads no Kafka client; configured against
# the broker, a guard that fires emits a span event and a debug payload, flushed.
HOOKS_SCRIPT = """
import json, sys
import guardtrace.collectors as collectors

settings, request_id = json.loads(sys.argv[1]), sys.argv[2]
kafka_on_import = any(name.split(".")[0] == "kafka" for name in sys.modules)
collectors.configure(set_global=False, service_name="install-test", **settings)
verdict = collectors.FabricationGuard().check(
    "I'm deploying the fix to production now.", [], request_id=request_id,
    agent="install-test")
flushed = collectors.force_flush(30)
collectors.shutdown(10)
print(json.dumps({"kafka_on_import": kafka_on_import, "flagged": verdict.flagged,
                  "flushed": flushed}))
"""


@dataclass
class Venv:
    root: Path
    baseline_bytes: int

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def site_packages(self) -> Path:
        return next((self.root / "lib").glob("python3*/site-packages"))

    def install(self, requirement: str, compile_bytecode: bool = True) -> None:
        options = [] if compile_bytecode else ["--no-compile"]
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(self.python), "install", "--quiet",
             *options, requirement], capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        assert done.returncode == 0, done.stderr[-4000:]

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=120,
                              env=env, cwd=self.root)
        assert done.returncode == 0, f"{args}: {done.stdout[-2000:]} {done.stderr[-4000:]}"
        return done.stdout

    def installed(self, modules: tuple[str, ...]) -> list[str]:
        found = self.run(str(self.python), "-c",
                         "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] "
                         "if importlib.util.find_spec(m)))", *modules)
        return found.split()


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _new_venv(path: Path) -> Venv:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=120)
    venv = Venv(path, 0)
    venv.baseline_bytes = _tree_bytes(venv.site_packages())
    return venv


@pytest.fixture(scope="module")
def wheel(guardtrace_wheel: Path) -> Path:
    return guardtrace_wheel  # built once per session, shared with tests/unit/test_packaging.py


@pytest.fixture
def topics(broker: EmbeddedBroker) -> Iterator[dict[str, str]]:
    suffix = uuid.uuid4().hex[:10]
    settings = {"spans_topic": f"install-spans-{suffix}",
                "metrics_topic": f"install-metrics-{suffix}",
                "payloads_topic": f"install-payloads-{suffix}"}
    ensure_topics(broker.bootstrap, list(settings.values()), partitions=1)
    yield settings


def _read_topic(bootstrap: str, topic: str,
                enough: Callable[[list[bytes]], bool]) -> list[bytes]:
    """The topic's messages from the start, until ``enough`` of them came (or none came
    for 15 s)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=15_000)
    values: list[bytes] = []
    try:
        for message in consumer:
            values.append(message.value)
            if enough(values):
                break
        return values
    finally:
        consumer.close()


def _span_events(messages: list[bytes]) -> list[tuple[str, dict[str, str]]]:
    events = []
    for message in messages:
        request = ExportTraceServiceRequest.FromString(message)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    events += [(event.name, {a.key: a.value.string_value
                                             for a in event.attributes})
                               for event in span.events]
    return events


def test_core_install_is_small_has_no_server_side_and_its_hooks_reach_a_broker(
        wheel: Path, broker: EmbeddedBroker, topics: dict[str, str],
        tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    venv = _new_venv(tmp_path / "agent-venv")
    venv.install(str(wheel))

    installed_mb = (_tree_bytes(venv.site_packages()) - venv.baseline_bytes) / 1e6
    record_property("core_install_mb", round(installed_mb, 1))
    print(f"core install: {installed_mb:.1f} MB of site-packages")  # shown with -s
    assert installed_mb <= MAX_CORE_INSTALL_MB, f"core install is {installed_mb:.1f} MB"
    assert venv.installed(SERVER_ONLY) == []
    assert venv.installed(("guardtrace.collectors", "kafka", "zstandard")) == [
        "guardtrace.collectors", "kafka", "zstandard"]

    request_id = f"install-{uuid.uuid4().hex[:12]}"
    settings = {"kafka_bootstrap": broker.bootstrap, "exporter": "kafka", **topics}
    result = json.loads(venv.run(str(venv.python), "-c", HOOKS_SCRIPT, json.dumps(settings),
                                 request_id).strip().splitlines()[-1])
    assert result == {"kafka_on_import": False, "flagged": True, "flushed": True}

    def fired(messages: list[bytes]) -> list[str]:
        return [attrs[names.ATTR_REQUEST_ID] for name, attrs in _span_events(messages)
                if name == names.EVENT_FABRICATION_DETECTED]

    assert fired(_read_topic(broker.bootstrap, topics["spans_topic"], fired)) == [request_id]
    payloads = [decode(v) for v in _read_topic(broker.bootstrap, topics["payloads_topic"],
                                               bool)]
    assert [p.request_id for p in payloads] == [request_id]
    assert "deploying the fix" in payloads[0].body


def test_server_extra_gives_what_guardtrace_up_needs(wheel: Path, tmp_path: Path) -> None:
    venv = _new_venv(tmp_path / "server-venv")
    # Without bytecode: compiling the ~1 GB the extra brings took over half of this test
    # (~40 s of ~75 s here), and nothing below depends on it (imports compile what they
    # load). The core test keeps pip's default: its size limit counts the bytecode.
    venv.install(f"{wheel}[server]", compile_bytecode=False)
    bin_dir = venv.root / "bin"

    assert "migrate" in venv.run(str(bin_dir / "guardtrace"), "--help")
    venv.run(str(venv.python), "-c", "; ".join(f"import {m}" for m in SERVER_MODULES))
    assert venv.installed(("streamlit", "chdb", "clickhouse_connect")) == [
        "streamlit", "chdb", "clickhouse_connect"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDTRACE_")}
    migrated = json.loads(venv.run(
        str(bin_dir / "guardtrace"), "migrate", "--json",
        "--clickhouse-url", f"chdb://{tmp_path / 'store'}", env=env))
    shipped = sorted(sql.name.removesuffix(".up.sql")
                     for sql in (ROOT / "schemas" / "migrations").glob("*.up.sql"))
    assert migrated["applied"] == shipped
