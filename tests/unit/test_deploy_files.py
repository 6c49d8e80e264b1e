"""deploy/: every file parses, sets only variables guardtrace reads, and pins its images.

No Docker engine or Kubernetes cluster runs here, so nothing in deploy/ is started by
these tests. What they do check is everything a reader of the files could get wrong
without running them: syntax (YAML, XML, env files), variables that guardtrace does not
read (a typo silently does nothing), floating image tags, missing health checks and
probes, topics and ports that disagree between files, the dashboard's read-only
ClickHouse user, and that nothing is published unauthenticated beyond the host.

Long because it checks every deploy file against the one list of variables and
images in one place.
"""

from __future__ import annotations

import re
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from guardtrace.schemas import dashboard_access as access
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.store.cluster_migrations import check_cluster_name
from guardtrace.transport.topics import TopicSet

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
KNOWN_VARIABLES = {var.name for var in env.ALL}
GUARDTRACE_TOPICS = {names.SPANS_TOPIC, names.METRICS_TOPIC, names.LOGS_TOPIC,
                     names.PAYLOADS_TOPIC, names.DEAD_LETTER_TOPIC}
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

YAML_FILES = sorted([*DEPLOY.rglob("*.yml"), *DEPLOY.rglob("*.yaml")])
XML_FILES = sorted(DEPLOY.rglob("*.xml"))
ENV_FILES = sorted([*DEPLOY.rglob("*.env"), *DEPLOY.rglob(".env.example")])
DOCKERFILES = sorted(p for p in DEPLOY.rglob("Dockerfile*") if not p.name.endswith("ignore"))
ALL_FILES = sorted(p for p in DEPLOY.rglob("*") if p.is_file())


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def load_yaml(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def parse_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines, as docker compose reads them; blank lines and # comments skipped."""
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        assert sep, f"{rel(path)}:{number}: not KEY=VALUE: {line!r}"
        assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", key), f"{rel(path)}:{number}: bad key {key!r}"
        assert key not in values, f"{rel(path)}:{number}: {key} set twice"
        values[key] = value
    return values


def compose() -> dict[str, Any]:
    (doc,) = load_yaml(DEPLOY / "docker-compose.yml")
    return doc


def compose_environment(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(item.split("=", 1) for item in raw)
    return {key: str(value) for key, value in raw.items()}


def k8s_docs(folder: Path = K8S) -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in sorted(folder.rglob("*.yaml")) for doc in load_yaml(path)]


def k8s_kind(kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [doc for _, doc in k8s_docs() if doc.get("kind") == kind
            and (name is None or doc["metadata"]["name"] == name)]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return workload["spec"]["template"]["spec"]["containers"]


def guardtrace_containers() -> list[dict[str, Any]]:
    return [c for kind in ("Deployment", "Job") for w in k8s_kind(kind)
            for c in containers(w) if c["image"].split(":")[0] == "guardtrace"]


def container_env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in container.get("env", [])}


def configmap() -> dict[str, str]:
    (cm,) = k8s_kind("ConfigMap", "guardtrace-config")
    return cm["data"]


def walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair in a parsed YAML tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


# -- every file parses ---------------------------------------------------------------------
def test_deploy_has_the_files_the_issue_names() -> None:
    for name in ("docker-compose.yml", "otel-collector.yaml", "Dockerfile", "README.md",
                 ".env.example", "env/pipeline.env", "clickhouse/users.d/guardtrace.xml",
                 "k8s/kustomization.yaml"):
        assert (DEPLOY / name).is_file(), name


@pytest.mark.parametrize("path", YAML_FILES, ids=rel)
def test_every_yaml_file_parses(path: Path) -> None:
    docs = load_yaml(path)
    assert docs, "empty"
    assert all(isinstance(doc, dict) for doc in docs)


@pytest.mark.parametrize("path", XML_FILES, ids=rel)
def test_every_xml_file_parses(path: Path) -> None:
    assert ET.parse(path).getroot().tag == "clickhouse"


@pytest.mark.parametrize("path", ENV_FILES, ids=rel)
def test_every_env_file_parses(path: Path) -> None:
    assert parse_env_file(path)


def test_the_file_lists_are_not_empty() -> None:
    # Guard against a glob that silently matches nothing.
    assert len(YAML_FILES) >= 8 and XML_FILES and len(ENV_FILES) >= 2 and len(DOCKERFILES) >= 2


# -- only variables guardtrace reads -------------------------------------------------------
def variables_set_in_deploy() -> dict[str, set[str]]:
    """GUARDTRACE_* name -> files that set it (env files, compose, k8s env and ConfigMaps)."""
    found: dict[str, set[str]] = {}

    def add(name: str, where: str) -> None:
        if name.startswith("GUARDTRACE_"):
            found.setdefault(name, set()).add(where)

    for path in ENV_FILES:
        for key in parse_env_file(path):
            add(key, rel(path))
    for name, service in compose()["services"].items():
        for key in compose_environment(service):
            add(key, f"docker-compose.yml:{name}")
    for path, doc in k8s_docs():
        if doc.get("kind") == "ConfigMap":
            for key in doc["data"]:
                add(key, rel(path))
        for key, value in walk(doc):
            if key == "env" and isinstance(value, list):
                for item in value:
                    add(item["name"], rel(path))
    return found


def test_every_guardtrace_variable_set_in_deploy_is_one_guardtrace_reads() -> None:
    found = variables_set_in_deploy()
    assert len(found) >= 8, found  # the collector above really looked
    unknown = {name: sorted(where) for name, where in found.items() if name not in KNOWN_VARIABLES}
    assert not unknown, f"not defined in guardtrace/environment_variables.py: {unknown}"


@pytest.mark.parametrize("path", ALL_FILES, ids=rel)
def test_every_guardtrace_variable_named_anywhere_in_deploy_exists(path: Path) -> None:
    # Wider than the structured check: comments, README and commands count too.
    text = path.read_text(errors="replace")
    named = set(re.findall(r"\bGUARDTRACE_[A-Z0-9_]*[A-Z0-9]\b", text))
    assert named <= KNOWN_VARIABLES, sorted(named - KNOWN_VARIABLES)


def test_env_files_and_the_configmap_agree() -> None:
    # The same non-secret settings for compose and Kubernetes, except the bootstrap
    # address, which names each platform's own Kafka.
    pipeline = parse_env_file(DEPLOY / "env" / "pipeline.env")
    data = configmap()
    assert set(pipeline) == set(data)
    differing = {k for k in pipeline if pipeline[k] != data[k]}
    assert differing == {env.KAFKA_BOOTSTRAP.name}, differing


# -- pinned images -------------------------------------------------------------------------
_PINNED_TAG = re.compile(r"^\d+\.\d+\.\d+")


def is_pinned(reference: str) -> bool:
    """A digest, or a tag that starts with a full x.y.z version (not `latest`, not `25.8`)."""
    if "@sha256:" in reference:
        return True
    last = reference.rsplit("/", 1)[-1]  # a registry port is not a tag
    if ":" not in last:
        return False
    tag = last.split(":", 1)[1]
    return tag != "latest" and bool(_PINNED_TAG.match(tag))


@pytest.mark.parametrize("reference", [
    "apache/kafka:4.0.0", "python:3.11.13-slim-bookworm", "busybox:1.36.1-musl",
    "registry.example.com:5000/guardtrace:0.1.0", "x/y@sha256:" + "0" * 64])
def test_pinned_references(reference: str) -> None:
    assert is_pinned(reference)


@pytest.mark.parametrize("reference", [
    "apache/kafka", "apache/kafka:latest", "clickhouse/clickhouse-server:25.8",
    "registry.example.com:5000/guardtrace", "python:3.11-slim"])
def test_floating_references(reference: str) -> None:
    assert not is_pinned(reference)


def images_in_deploy() -> dict[str, str]:
    """Image reference -> where it is used, over every YAML file and Dockerfile."""
    images: dict[str, str] = {}
    for path in YAML_FILES:
        for doc in load_yaml(path):
            for key, value in walk(doc):
                if key == "image" and isinstance(value, str):
                    images[value] = rel(path)
    for path in DOCKERFILES:
        stages: set[str] = set()
        for line in path.read_text().splitlines():
            match = re.match(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line.strip(), re.IGNORECASE)
            if match:
                if match[1] not in stages:  # FROM <earlier stage> is not an image
                    images[match[1]] = rel(path)
                if match[2]:
                    stages.add(match[2])
    return images


def test_every_image_is_pinned() -> None:
    images = images_in_deploy()
    assert len(images) >= 7, images
    floating = {ref: where for ref, where in images.items() if not is_pinned(ref)}
    assert not floating, floating


def test_kustomize_image_override_is_pinned_too() -> None:
    (kustomization,) = load_yaml(K8S / "kustomization.yaml")
    for image in kustomization.get("images", []):
        assert _PINNED_TAG.match(str(image["newTag"])), image


def test_the_guardtrace_image_tag_is_the_package_version() -> None:
    ours = {ref for ref in images_in_deploy() if ref.split(":")[0] == "guardtrace"}
    assert ours == {f"guardtrace:{VERSION}"}
    (kustomization,) = load_yaml(K8S / "kustomization.yaml")
    assert {str(i["newTag"]) for i in kustomization["images"] if i["name"] == "guardtrace"} \
        == {VERSION}


# -- the Dockerfile ------------------------------------------------------------------------
def test_the_image_installs_every_folder_the_package_maps() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["package-dir"] == {"guardtrace": "."}
    # The root is the package: its __init__.py and the top folder of every subpackage.
    folders = {name.split(".")[1] for name in pyproject["tool"]["setuptools"]["packages"]
               if name != "guardtrace"}
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert re.search(r"^COPY pyproject.toml README.md __init__.py ./$", dockerfile, re.MULTILINE)
    assert "!__init__.py" in ignore
    for folder in folders:
        assert re.search(rf"^COPY {folder}/ {folder}/$", dockerfile, re.MULTILINE), folder
        assert f"!{folder}/" in ignore, folder
    assert "RUN pip install '.[server]'" in dockerfile
    assert re.search(r"^USER 10001", dockerfile, re.MULTILINE)  # k8s runAsUser matches


# -- docker-compose.yml --------------------------------------------------------------------
def test_compose_has_the_services_the_issue_names_with_health_checks() -> None:
    services = compose()["services"]
    for name in ("kafka", "clickhouse", "consumer", "dashboard", "otel-collector"):
        assert name in services, name
        test = services[name].get("healthcheck", {}).get("test")
        assert test and test != ["NONE"], f"{name} has no health check"
    assert services["consumer"]["deploy"]["replicas"] == 2
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "container_name" not in services["consumer"]  # two replicas cannot share one


def test_compose_one_shots_run_before_the_services_that_need_them() -> None:
    services = compose()["services"]
    for one_shot in ("migrate", "kafka-init"):
        assert services[one_shot]["restart"] == "no"
    assert services["migrate"]["command"] == ["guardtrace", "migrate"]
    done = {"condition": "service_completed_successfully"}
    assert services["consumer"]["depends_on"]["migrate"] == done
    assert services["consumer"]["depends_on"]["kafka-init"] == done
    assert services["dashboard"]["depends_on"]["migrate"] == done
    assert services["migrate"]["depends_on"]["clickhouse"] == {"condition": "service_healthy"}


def test_compose_commands_are_guardtrace_commands_with_container_addresses() -> None:
    services = compose()["services"]
    assert services["consumer"]["command"] == ["guardtrace", "consume"]
    dashboard = services["dashboard"]["command"]
    assert dashboard[:2] == ["guardtrace", "dashboard"]
    # The command listens on 127.0.0.1 by default: unreachable through a published port.
    assert dashboard[dashboard.index("--address") + 1] == "0.0.0.0"


def test_compose_health_checks_probe_the_configured_ports() -> None:
    services = compose()["services"]
    pipeline = parse_env_file(DEPLOY / "env" / "pipeline.env")
    consumer_check = " ".join(services["consumer"]["healthcheck"]["test"])
    assert f"127.0.0.1:{pipeline[env.HEALTH_PORT.name]}/healthz" in consumer_check
    dashboard_check = " ".join(services["dashboard"]["healthcheck"]["test"])
    assert f"127.0.0.1:{pipeline[env.DASHBOARD_PORT.name]}/_stcore/health" in dashboard_check
    assert f"{pipeline[env.DASHBOARD_PORT.name]}:" in services["dashboard"]["ports"][0]


def test_compose_interpolates_only_variables_the_env_example_defines() -> None:
    text = (DEPLOY / "docker-compose.yml").read_text()
    used = set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    assert used, "expected the passwords to come from deploy/.env"
    assert used <= set(parse_env_file(DEPLOY / ".env.example"))


def test_compose_refers_only_to_files_that_exist() -> None:
    doc = compose()
    for name, service in doc["services"].items():
        for env_file in service.get("env_file", []):
            assert (DEPLOY / env_file).is_file(), (name, env_file)
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), (name, source)
        build = service.get("build")
        if build:
            context = DEPLOY / build["context"]
            assert (context / build.get("dockerfile", "Dockerfile")).is_file(), name


def test_compose_guardtrace_services_share_the_image_and_settings() -> None:
    services = compose()["services"]
    for name in ("migrate", "consumer", "dashboard"):
        assert services[name]["image"] == f"guardtrace:{VERSION}", name
        assert services[name]["env_file"] == ["env/pipeline.env"], name
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile", name


def test_the_deploy_topics_are_the_pipelines_topics() -> None:
    assert set(TopicSet.resolve(environ={}).all()) == GUARDTRACE_TOPICS


def test_kafka_init_creates_exactly_guardtraces_topics() -> None:
    script = compose()["services"]["kafka-init"]["command"][0]
    match = re.search(r"for topic in ([^;]+);", script)
    assert match is not None
    assert set(match[1].split()) == GUARDTRACE_TOPICS


def test_compose_kafka_is_where_the_pipeline_looks() -> None:
    kafka = compose()["services"]["kafka"]["environment"]
    bootstrap = parse_env_file(DEPLOY / "env" / "pipeline.env")[env.KAFKA_BOOTSTRAP.name]
    assert f"PLAINTEXT://{bootstrap}" in kafka["KAFKA_ADVERTISED_LISTENERS"]


# -- OpenTelemetry Collector ---------------------------------------------------------------
def collector() -> dict[str, Any]:
    (doc,) = load_yaml(DEPLOY / "otel-collector.yaml")
    return doc


def test_collector_writes_otlp_proto_to_guardtraces_topics() -> None:
    kafka = collector()["exporters"]["kafka"]
    assert kafka["traces"] == {"topic": names.SPANS_TOPIC, "encoding": "otlp_proto"}
    assert kafka["metrics"] == {"topic": names.METRICS_TOPIC, "encoding": "otlp_proto"}
    assert kafka["logs"] == {"topic": names.LOGS_TOPIC, "encoding": "otlp_proto"}
    assert kafka["partition_traces_by_id"] is True
    assert kafka["producer"]["max_message_bytes"] == int(env.MAX_MESSAGE_BYTES.default)
    bootstrap = parse_env_file(DEPLOY / "env" / "pipeline.env")[env.KAFKA_BOOTSTRAP.name]
    assert kafka["brokers"] == [bootstrap]
    # Deprecated since collector 0.124 in favour of the per-signal blocks above.
    assert "topic" not in kafka and "encoding" not in kafka


def test_collector_accepts_otlp_over_grpc_and_http_and_wires_every_pipeline() -> None:
    doc = collector()
    protocols = doc["receivers"]["otlp"]["protocols"]
    assert set(protocols) == {"grpc", "http"}
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")
    pipelines = doc["service"]["pipelines"]
    assert set(pipelines) == {"traces", "metrics", "logs"}
    for pipeline in pipelines.values():
        assert set(pipeline["receivers"]) <= set(doc["receivers"])
        assert set(pipeline["processors"]) <= set(doc["processors"])
        assert pipeline["exporters"] == ["kafka"]
    assert set(doc["service"]["extensions"]) <= set(doc["extensions"])


def test_collector_health_check_matches_the_compose_probe_and_ports() -> None:
    endpoint = collector()["extensions"]["health_check"]["endpoint"]
    service = compose()["services"]["otel-collector"]
    assert f"127.0.0.1:{endpoint.rsplit(':', 1)[1]}/" in " ".join(service["healthcheck"]["test"])
    assert service["healthcheck"]["test"][1] == "/usr/local/bin/busybox"
    assert "COPY --from=busybox /bin/busybox /usr/local/bin/busybox" in \
        (DEPLOY / "otel-collector" / "Dockerfile").read_text()
    assert {"127.0.0.1:4317:4317", "127.0.0.1:4318:4318"} <= set(service["ports"])
    assert "./otel-collector.yaml:/etc/otelcol-contrib/config.yaml:ro" in service["volumes"]


# -- ClickHouse users ----------------------------------------------------------------------
def clickhouse_users() -> ET.Element:
    return ET.parse(DEPLOY / "clickhouse" / "users.d" / "guardtrace.xml").getroot()


def test_clickhouse_users_take_passwords_from_the_environment() -> None:
    root = clickhouse_users()
    server_env = compose_environment(compose()["services"]["clickhouse"])
    for user in ("guardtrace_writer", "guardtrace_dashboard"):
        password = root.find(f"users/{user}/password")
        assert password is not None, user
        assert not (password.text or "").strip(), f"{user}: a literal password in the file"
        assert password.get("from_env") in server_env, user


def test_the_dashboard_user_is_read_only() -> None:
    root = clickhouse_users()
    profile = root.findtext("users/guardtrace_dashboard/profile")
    assert root.findtext(f"profiles/{profile}/readonly") in ("1", "2")
    grants = [q.text for q in root.findall("users/guardtrace_dashboard/grants/query")]
    assert grants == [f"GRANT SELECT ON {configmap()[env.CLICKHOUSE_DATABASE.name]}.*"]


def test_the_writer_profile_waits_for_distributed_inserts() -> None:
    root = clickhouse_users()
    profile = root.findtext("users/guardtrace_writer/profile")
    assert root.findtext(f"profiles/{profile}/distributed_foreground_insert") == "1"


def url_user(url: str) -> str:
    return urlparse(re.sub(r"\$[({][^)}]*[)}]", "secret", url)).username or ""


def test_compose_dashboard_reads_as_the_read_only_user() -> None:
    services = compose()["services"]
    dashboard = compose_environment(services["dashboard"])
    assert url_user(dashboard[env.DASHBOARD_CLICKHOUSE_URL.name]) == "guardtrace_dashboard"
    # No writer URL to fall back on: not per service, not in the shared file.
    assert env.CLICKHOUSE_URL.name not in dashboard
    pipeline = parse_env_file(DEPLOY / "env" / "pipeline.env")
    assert env.CLICKHOUSE_URL.name not in pipeline
    assert env.DASHBOARD_CLICKHOUSE_URL.name not in pipeline
    for writer in ("migrate", "consumer"):
        url = compose_environment(services[writer])[env.CLICKHOUSE_URL.name]
        assert url_user(url) == "guardtrace_writer", writer


# -- nothing published unauthenticated -----------------------------------------------------
def published(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(host address, host port) of each port a compose service publishes; "" for every
    interface (what compose does when a mapping names no address)."""
    found = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            found.append((str(port.get("host_ip", "")), str(port.get("published", ""))))
            continue
        parts = str(port).rsplit(":", 2)
        host_ip = parts[0] if len(parts) == 3 else ""
        found.append((host_ip.strip("[]"), parts[-2] if len(parts) >= 2 else ""))
    return found


def listen_address(command: list[str]) -> str:
    return command[command.index("--address") + 1] if "--address" in command else "127.0.0.1"


def test_compose_publishes_beyond_the_host_only_the_dashboard() -> None:
    services = compose()["services"]
    wide = {name for name, service in services.items()
            for host_ip, _ in published(service) if not access.is_loopback(host_ip)}
    assert wide == {"dashboard"}
    # The ones for this host's operator and agents, which take no credentials here.
    assert published(services["kafka"]) == [("127.0.0.1", "9094")]
    assert sorted(published(services["otel-collector"])) == [("127.0.0.1", "4317"),
                                                             ("127.0.0.1", "4318")]
    assert published(services["clickhouse"]) == [("127.0.0.1", "8123")]


def test_compose_dashboard_does_not_start_without_its_token() -> None:
    dashboard = compose()["services"]["dashboard"]
    assert not access.is_loopback(listen_address(dashboard["command"]))
    token = compose_environment(dashboard)[env.DASHBOARD_TOKEN.name]
    # ${NAME:?message}: compose refuses to start while the variable is unset or empty.
    assert re.fullmatch(r"\$\{" + env.DASHBOARD_TOKEN.name + r":\?[^}]+\}", token), token
    # Nothing in the example passes for a token: the operator sets one.
    assert parse_env_file(DEPLOY / ".env.example")[env.DASHBOARD_TOKEN.name] == ""
    assert env.DASHBOARD_TOKEN.name not in parse_env_file(DEPLOY / "env" / "pipeline.env")


# -- Kubernetes ----------------------------------------------------------------------------
def test_every_deployment_has_requests_and_both_probes() -> None:
    deployments = k8s_kind("Deployment")
    assert {d["metadata"]["name"] for d in deployments} >= {"guardtrace-consumer",
                                                            "guardtrace-dashboard"}
    for deployment in deployments:
        for container in containers(deployment):
            where = f"{deployment['metadata']['name']}/{container['name']}"
            requests = container.get("resources", {}).get("requests", {})
            assert {"cpu", "memory"} <= set(requests), where
            assert "livenessProbe" in container and "readinessProbe" in container, where


def probe_port(container: dict[str, Any], probe: str) -> int:
    port = container[probe]["httpGet"]["port"]
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


def test_consumer_deployment_probes_the_health_port() -> None:
    (deployment,) = k8s_kind("Deployment", "guardtrace-consumer")
    assert deployment["spec"]["replicas"] >= 2
    (container,) = containers(deployment)
    assert container["command"] == ["guardtrace", "consume"]
    health_port = int(configmap()[env.HEALTH_PORT.name])
    assert probe_port(container, "livenessProbe") == health_port
    assert probe_port(container, "readinessProbe") == health_port
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 30


def test_dashboard_deployment_and_service_use_the_dashboard_port() -> None:
    (deployment,) = k8s_kind("Deployment", "guardtrace-dashboard")
    (container,) = containers(deployment)
    port = int(configmap()[env.DASHBOARD_PORT.name])
    assert container["command"][:2] == ["guardtrace", "dashboard"]
    assert container["command"][container["command"].index("--address") + 1] == "0.0.0.0"
    assert probe_port(container, "readinessProbe") == port
    assert container["readinessProbe"]["httpGet"]["path"] == "/_stcore/health"
    (service,) = k8s_kind("Service", "guardtrace-dashboard")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["port"] == port


def test_k8s_dashboard_reads_as_the_read_only_user() -> None:
    (deployment,) = k8s_kind("Deployment", "guardtrace-dashboard")
    variables = container_env(containers(deployment)[0])
    url = variables[env.DASHBOARD_CLICKHOUSE_URL.name]["value"]
    assert url_user(url) == "guardtrace_dashboard"
    assert env.CLICKHOUSE_URL.name not in variables
    secret_key = variables["CLICKHOUSE_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"]
    assert secret_key == "dashboard-password"
    assert env.CLICKHOUSE_URL.name not in configmap()


def test_k8s_writers_use_the_writer_user() -> None:
    writers = [c for c in guardtrace_containers() if "dashboard" not in c["command"]]
    assert len(writers) == 2  # consumer and migrate
    for container in writers:
        variables = container_env(container)
        assert url_user(variables[env.CLICKHOUSE_URL.name]["value"]) == "guardtrace_writer"
        secret_key = variables["CLICKHOUSE_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"]
        assert secret_key == "writer-password"


def test_k8s_extra_variables_only_feed_guardtrace_variables() -> None:
    # A non-GUARDTRACE variable in a guardtrace container must exist only to be spliced
    # into a guardtrace one with $(NAME); anything else would be read by nobody.
    for container in guardtrace_containers():
        variables = container_env(container)
        spliced = {ref for item in variables.values()
                   for ref in re.findall(r"\$\(([A-Z0-9_]+)\)", item.get("value", ""))}
        for name in variables:
            assert name in KNOWN_VARIABLES or name in spliced, (container["name"], name)
        assert spliced <= set(variables), container["name"]  # defined before use
        names_in_order = list(variables)
        for name, item in variables.items():
            for ref in re.findall(r"\$\(([A-Z0-9_]+)\)", item.get("value", "")):
                assert names_in_order.index(ref) < names_in_order.index(name), (name, ref)


def example_secrets() -> dict[str, dict[str, str]]:
    """Secret name -> its keys and placeholder values, from secret.example.yaml."""
    return {doc["metadata"]["name"]: doc["stringData"]
            for doc in load_yaml(K8S / "secret.example.yaml") if doc.get("kind") == "Secret"}


def test_k8s_secret_keys_referenced_exist_in_the_example_secret() -> None:
    secrets = example_secrets()
    assert set(secrets) == {"guardtrace-clickhouse", "guardtrace-dashboard"}
    for container in guardtrace_containers():
        for item in container_env(container).values():
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["name"] in secrets, ref
                assert ref["key"] in secrets[ref["name"]], ref
        for source in container.get("envFrom", []):
            assert source["configMapRef"]["name"] == "guardtrace-config"


def test_k8s_exposes_nothing_outside_the_cluster() -> None:
    for path, doc in k8s_docs():
        where = f"{rel(path)}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        if doc.get("kind") == "Service":
            assert doc["spec"].get("type", "ClusterIP") == "ClusterIP", where
            assert all("nodePort" not in port for port in doc["spec"]["ports"]), where
        for key, _ in walk(doc):
            assert key not in ("hostPort", "hostNetwork"), where


def test_k8s_dashboard_takes_its_token_from_a_secret() -> None:
    (deployment,) = k8s_kind("Deployment", "guardtrace-dashboard")
    (container,) = containers(deployment)
    assert not access.is_loopback(listen_address(container["command"]))
    token = container_env(container)[env.DASHBOARD_TOKEN.name]
    assert "value" not in token
    ref = token["valueFrom"]["secretKeyRef"]
    assert ref["name"] == "guardtrace-dashboard" and not ref.get("optional", False)
    assert env.DASHBOARD_TOKEN.name not in configmap()
    # The example's placeholder is one the dashboard refuses, should it be applied as is.
    placeholder = access.AccessSettings(token=example_secrets()[ref["name"]][ref["key"]])
    assert access.setup_problems(placeholder, (), oidc_library=False)


def test_kustomization_lists_existing_files_but_not_the_example_secret() -> None:
    (kustomization,) = load_yaml(K8S / "kustomization.yaml")
    resources = kustomization["resources"]
    for resource in resources:
        assert (K8S / resource).is_file(), resource
    assert "secret.example.yaml" not in resources
    assert not any(r.startswith("operators") for r in resources)
    listed = set(resources) | {"kustomization.yaml", "secret.example.yaml"}
    assert {p.name for p in K8S.glob("*.yaml")} == listed, "a manifest kustomize ignores"
    for _, doc in k8s_docs():
        if doc.get("kind") not in ("Namespace", None) and "metadata" in doc:
            assert doc["metadata"].get("namespace") == "guardtrace", doc["metadata"]["name"]


def test_the_migrate_job_targets_the_operator_cluster() -> None:
    (job,) = k8s_kind("Job", "guardtrace-migrate")
    command = containers(job)[0]["command"]
    assert command[:2] == ["guardtrace", "migrate"]
    cluster = check_cluster_name(command[command.index("--cluster") + 1])
    (chi,) = k8s_kind("ClickHouseInstallation")
    assert cluster in [c["name"] for c in chi["spec"]["configuration"]["clusters"]]
    # Altinity's Service for a whole installation is clickhouse-<name>.
    for container in guardtrace_containers():
        for item in container_env(container).values():
            if "value" in item and item["value"].startswith("http"):
                assert urlparse(item["value"].replace("$(CLICKHOUSE_PASSWORD)", "x")) \
                    .hostname == f"clickhouse-{chi['metadata']['name']}"


def test_altinity_users_mirror_the_compose_users() -> None:
    (chi,) = k8s_kind("ClickHouseInstallation")
    users = chi["spec"]["configuration"]["users"]
    profiles = chi["spec"]["configuration"]["profiles"]
    root = clickhouse_users()
    for user in ("guardtrace_writer", "guardtrace_dashboard"):
        profile = users[f"{user}/profile"]
        assert profile == root.findtext(f"users/{user}/profile"), user
        secret_ref = users[f"{user}/k8s_secret_password"].split("/")
        assert secret_ref[:2] == ["guardtrace", "guardtrace-clickhouse"], user
    assert str(profiles["guardtrace_readonly/readonly"]) == \
        root.findtext("profiles/guardtrace_readonly/readonly")
    assert str(profiles["guardtrace_writer/distributed_foreground_insert"]) == "1"
    assert users["guardtrace_dashboard/grants/query"] == [
        q.text for q in root.findall("users/guardtrace_dashboard/grants/query")]
    assert "GRANT CLUSTER ON *.*" in users["guardtrace_writer/grants/query"]


def test_strimzi_topics_and_bootstrap_match_guardtrace() -> None:
    topics = k8s_kind("KafkaTopic")
    assert {t["spec"]["topicName"] for t in topics} == GUARDTRACE_TOPICS
    (kafka,) = k8s_kind("Kafka")
    assert configmap()[env.KAFKA_BOOTSTRAP.name] == \
        f"{kafka['metadata']['name']}-kafka-bootstrap:9092"
    for topic in topics:
        assert topic["metadata"]["labels"]["strimzi.io/cluster"] == kafka["metadata"]["name"]
        # Room for the largest message the collector produces.
        assert int(topic["spec"]["config"]["max.message.bytes"]) >= \
            int(env.MAX_MESSAGE_BYTES.default)
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(kafka["spec"]["kafka"]["version"]))


# -- README --------------------------------------------------------------------------------
def test_readme_says_what_was_and_was_not_exercised_and_sizes_from_the_benchmarks() -> None:
    readme = (DEPLOY / "README.md").read_text()
    assert "## What was exercised here" in readme
    assert "No Docker engine" in readme
    assert "make bench" in readme
    # The sizing guide's figures are filled in from benchmark runs: no placeholder left.
    assert "TODO" not in readme
