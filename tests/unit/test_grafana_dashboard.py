"""deploy/grafana and the Prometheus scrape configs agree with guardtrace and with each other.

No Grafana or Prometheus runs here (tests/integration/test_grafana_dashboard_queries.py
runs the dashboard's SQL on a real store). What these check is what a reader of the files
could get wrong without running them: a panel on a data source nobody provisions, a
table, event or metric name guardtrace does not have, a provisioning path the compose
file or the Deployment mounts elsewhere, a variable Grafana's environment lacks, a
Secret that does not exist, two versions of the plugin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardtrace.consumers import metrics
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.store import tables

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
GRAFANA = DEPLOY / "grafana"
CLICKHOUSE_PLUGIN = "grafana-clickhouse-datasource"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def dashboard() -> dict[str, Any]:
    return json.loads((GRAFANA / "dashboards" / "guardtrace.json").read_text())


def targets() -> list[tuple[str, dict[str, Any]]]:
    return [(panel["title"], target) for panel in dashboard()["panels"]
            for target in panel.get("targets", [])]


def datasources() -> dict[str, dict[str, Any]]:
    doc = load(GRAFANA / "provisioning" / "datasources" / "guardtrace.yaml")
    return {source["uid"]: source for source in doc["datasources"]}


def pipeline_env() -> dict[str, str]:
    lines = (DEPLOY / "env" / "pipeline.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def compose() -> dict[str, Any]:
    return load(DEPLOY / "docker-compose.yml")["services"]


def grafana_deployment() -> dict[str, Any]:
    (deployment,) = [d for d in load_all(GRAFANA / "kubernetes.yaml")
                     if d["kind"] == "Deployment"]
    return deployment


def grafana_container() -> dict[str, Any]:
    (container,) = grafana_deployment()["spec"]["template"]["spec"]["containers"]
    return container


def provisioned_variables() -> set[str]:
    """The $VARIABLES Grafana fills from its environment in the data source file."""
    text = (GRAFANA / "provisioning" / "datasources" / "guardtrace.yaml").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", body))


# -- the dashboard -----------------------------------------------------------------------
def test_every_panel_reads_a_provisioned_data_source_of_the_same_type() -> None:
    sources = datasources()
    assert {s["type"] for s in sources.values()} == {CLICKHOUSE_PLUGIN, "prometheus"}
    found = targets()
    assert len(found) >= 10
    for title, target in found:
        source = sources[target["datasource"]["uid"]]
        assert target["datasource"]["type"] == source["type"], title
        if source["type"] == CLICKHOUSE_PLUGIN:
            assert target["editorType"] == "sql" and target["rawSql"].strip(), title
        else:
            assert target["expr"].strip(), title
    panels = [p for p in dashboard()["panels"] if p["type"] != "row"]
    assert all(p["datasource"]["uid"] in sources for p in panels)
    assert len({p["id"] for p in dashboard()["panels"]}) == len(dashboard()["panels"])


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    titles = " | ".join(title.lower() for title, _ in targets())
    for part in ("hallucination", "fabrication", "verification", "top agents", "lag",
                 "dead letters"):
        assert part in titles, part


def test_sql_names_only_tables_the_store_has_and_guard_events_guardtrace_emits() -> None:
    sql = [t["rawSql"] for _, t in targets() if t["datasource"]["type"] == CLICKHOUSE_PLUGIN]
    used_tables = {table for text in sql for table in re.findall(r"\$\{database\}\.(\w+)", text)}
    assert used_tables and used_tables <= set(tables.ALL), used_tables
    # Every FROM goes through the database variable: no table is read from `default`.
    for text in sql:
        assert len(re.findall(r"\bFROM\s+\$\{database\}\.", text)) == \
            len(re.findall(r"\bFROM\b", text)), text
    events = {e for text in sql for e in re.findall(r"'(llm\.[a-z_]+)'", text)}
    assert events and events <= set(names.GUARD_EVENTS), events - set(names.GUARD_EVENTS)


def test_the_database_variable_is_the_pipelines_database() -> None:
    (variable,) = [v for v in dashboard()["templating"]["list"] if v["name"] == "database"]
    database = pipeline_env()[env.CLICKHOUSE_DATABASE.name]
    assert variable["type"] == "constant" and variable["query"] == database
    assert datasources()["guardtrace-clickhouse"]["jsonData"]["defaultDatabase"] == database


def promql_metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(guardtrace_[a-z0-9_]+)", expr))


def test_promql_names_only_metrics_the_consumer_exports() -> None:
    exported = set(metrics.METRIC_NAMES) | {
        metrics.BATCH_WRITE_SECONDS + suffix for suffix in ("_bucket", "_sum", "_count")}
    exprs = [t["expr"] for _, t in targets() if t["datasource"]["type"] == "prometheus"]
    used = set().union(*(promql_metric_names(e) for e in exprs))
    assert used <= exported, used - exported
    assert {metrics.LAG_RECORDS, metrics.ROWS_WRITTEN, metrics.DEAD_LETTERS} <= used
    for expr in exprs:  # the brackets of every expression close, in order
        stack: list[str] = []
        for char in expr:
            if char in "([{":
                stack.append(char)
            elif char in ")]}":
                assert stack and "([{"[")]}".index(char)] == stack.pop(), expr
        assert not stack, expr


# -- the data sources ----------------------------------------------------------------------
def test_clickhouse_is_read_as_the_read_only_dashboard_user() -> None:
    import xml.etree.ElementTree as ET

    source = datasources()["guardtrace-clickhouse"]
    data = source["jsonData"]
    assert data["username"] == "guardtrace_dashboard"
    users = ET.parse(DEPLOY / "clickhouse" / "users.d" / "guardtrace.xml").getroot()
    profile = users.findtext("users/guardtrace_dashboard/profile")
    assert users.findtext(f"profiles/{profile}/readonly") in ("1", "2")
    # The HTTP port, the one compose publishes and the Kubernetes Service serves.
    assert (data["protocol"], data["port"]) == ("http", 8123)
    # The password comes from Grafana's environment, never from the file.
    assert source["secureJsonData"]["password"] == "$CLICKHOUSE_DASHBOARD_PASSWORD"


def test_the_dashboard_provider_reads_where_compose_and_kubernetes_mount_the_json() -> None:
    provider_file = load(GRAFANA / "provisioning" / "dashboards" / "guardtrace.yaml")
    (provider,) = provider_file["providers"]
    path = provider["options"]["path"]
    assert f"./grafana/dashboards:{path}:ro" in compose()["grafana"]["volumes"]
    mounts = {m["mountPath"]: m for m in grafana_container()["volumeMounts"]}
    assert mounts[path]["name"] == "dashboards"


# -- docker compose ------------------------------------------------------------------------
def test_compose_grafana_has_every_variable_its_data_sources_read() -> None:
    grafana = compose()["grafana"]
    environment = grafana["environment"]
    assert provisioned_variables() == {"CLICKHOUSE_HOST", "CLICKHOUSE_DASHBOARD_PASSWORD",
                                       "PROMETHEUS_URL"}
    assert provisioned_variables() <= set(environment)
    assert environment["CLICKHOUSE_HOST"] in compose()
    assert environment["PROMETHEUS_URL"] == "http://prometheus:9090"
    # The password is the ClickHouse server's own for the dashboard user.
    assert environment["CLICKHOUSE_DASHBOARD_PASSWORD"].startswith(
        "${CLICKHOUSE_DASHBOARD_PASSWORD:?")
    # Admin sign-in needs the token; no anonymous access.
    assert environment["GF_SECURITY_ADMIN_PASSWORD"].startswith(
        f"${{{env.DASHBOARD_TOKEN.name}:?")
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    for mount in grafana["volumes"]:
        source = mount.split(":")[0]
        if source.startswith("."):
            assert (DEPLOY / source).exists(), source


def test_compose_prometheus_scrapes_every_consumer_on_the_health_port() -> None:
    services = compose()
    prometheus = services["prometheus"]
    assert "./prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    (job,) = load(DEPLOY / "prometheus.yml")["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (discovery,) = job["dns_sd_configs"]
    assert discovery["names"] == ["consumer"] and discovery["type"] == "A"
    assert "consumer" in services and services["consumer"]["deploy"]["replicas"] >= 2
    assert str(discovery["port"]) == pipeline_env()[env.HEALTH_PORT.name]
    # Grafana's rate() windows assume the scrape interval its data source declares.
    assert load(DEPLOY / "prometheus.yml")["global"]["scrape_interval"] == \
        datasources()["guardtrace-prometheus"]["jsonData"]["timeInterval"]


def test_compose_publishes_grafana_and_prometheus_on_loopback_only() -> None:
    services = compose()
    assert services["grafana"]["ports"] == ["127.0.0.1:3000:3000"]
    assert services["prometheus"]["ports"] == ["127.0.0.1:9090:9090"]
    for name in ("grafana", "prometheus"):
        assert services[name]["healthcheck"]["test"][0] == "CMD", name


# -- Kubernetes ----------------------------------------------------------------------------
def test_kubernetes_grafana_is_the_compose_grafana() -> None:
    container = grafana_container()
    assert container["image"] == compose()["grafana"]["image"]
    variables = {item["name"]: item for item in container["env"]}
    assert variables["GF_PLUGINS_PREINSTALL"]["value"] == \
        compose()["grafana"]["environment"]["GF_PLUGINS_PREINSTALL"]
    assert re.fullmatch(rf"{CLICKHOUSE_PLUGIN}@\d+\.\d+\.\d+",
                        variables["GF_PLUGINS_PREINSTALL"]["value"])


def test_kubernetes_grafana_gets_every_variable_from_a_generated_map_or_a_real_secret() -> None:
    kustomization = load(GRAFANA / "kustomization.yaml")
    generated = {g["name"]: g for g in kustomization["configMapGenerator"]}
    for generator in generated.values():
        for entry in generator.get("files", []):
            assert (GRAFANA / entry.split("=", 1)[-1]).is_file(), entry
    settings = dict(literal.split("=", 1)
                    for literal in generated["guardtrace-grafana-settings"]["literals"])
    container = grafana_container()
    assert [s["configMapRef"]["name"] for s in container["envFrom"]] == \
        ["guardtrace-grafana-settings"]
    secrets = {doc["metadata"]["name"]: doc["stringData"]
               for doc in load_all(DEPLOY / "k8s" / "secret.example.yaml")}
    from_secrets = {}
    for item in container["env"]:
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["key"] in secrets[ref["name"]], ref
            from_secrets[item["name"]] = ref
    assert provisioned_variables() <= set(settings) | set(from_secrets)
    assert from_secrets["CLICKHOUSE_DASHBOARD_PASSWORD"]["key"] == "dashboard-password"
    assert from_secrets["GF_SECURITY_ADMIN_PASSWORD"] == {"name": "guardtrace-dashboard",
                                                          "key": "token"}
    # The Service the Altinity operator makes for the installation guardtrace's pods use.
    (chi,) = [d for d in load_all(DEPLOY / "k8s" / "operators" / "altinity-clickhouse.yaml")
              if d["kind"] == "ClickHouseInstallation"]
    assert settings["CLICKHOUSE_HOST"] == f"clickhouse-{chi['metadata']['name']}"
    volumes = grafana_deployment()["spec"]["template"]["spec"]["volumes"]
    mapped = {v["configMap"]["name"] for v in volumes if "configMap" in v}
    assert mapped == set(generated) - {"guardtrace-grafana-settings"}


def test_kubernetes_grafana_follows_the_rules_of_the_other_manifests() -> None:
    kustomization = load(GRAFANA / "kustomization.yaml")
    assert kustomization["namespace"] == "guardtrace"
    assert [r for r in kustomization["resources"] if not (GRAFANA / r).is_file()] == []
    container = grafana_container()
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/api/health", probe
    assert grafana_deployment()["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"]
    (service,) = [d for d in load_all(GRAFANA / "kubernetes.yaml") if d["kind"] == "Service"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == grafana_deployment()["spec"]["selector"]["matchLabels"]
    for doc in load_all(GRAFANA / "kubernetes.yaml"):
        assert doc["metadata"]["namespace"] == "guardtrace"


def consumer_pod() -> dict[str, Any]:
    (deployment,) = [d for d in load_all(DEPLOY / "k8s" / "consumer.yaml")
                     if d["kind"] == "Deployment"]
    return deployment["spec"]["template"]


@pytest.mark.parametrize("how", ["annotations", "podmonitor"])
def test_kubernetes_prometheus_finds_the_consumers_metrics(how: str) -> None:
    pod = consumer_pod()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    health_port = int(load(DEPLOY / "k8s" / "configmap.yaml")["data"][env.HEALTH_PORT.name])
    if how == "annotations":
        notes = pod["metadata"]["annotations"]
        assert notes["prometheus.io/scrape"] == "true"
        assert int(notes["prometheus.io/port"]) == health_port
        assert notes["prometheus.io/path"] == "/metrics"
    else:
        (monitor,) = load_all(DEPLOY / "k8s" / "operators" / "prometheus-podmonitor.yaml")
        assert monitor["kind"] == "PodMonitor"
        labels = monitor["spec"]["selector"]["matchLabels"]
        assert labels.items() <= pod["metadata"]["labels"].items()
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        assert ports[endpoint["port"]] == health_port
        assert endpoint["path"] == "/metrics"
