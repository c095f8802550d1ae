"""The chart's opt-in monitoring: a ServiceMonitor, a PrometheusRule and a Grafana dashboard.

The alerts are checked and unit-tested by the real promtool (``acceltrial.rules.test.yaml``
beside this file); every dashboard query is parsed by promtool here and run against a demo's
Prometheus in ``tests/demo/test_demo_scenarios.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.test_chart import render
from tests.conftest import REPO, tool

MONITORING = REPO / "charts" / "acceltrial" / "files" / "monitoring"
RULES = MONITORING / "acceltrial.rules.yaml"
DASHBOARD = MONITORING / "dashboard.json"
ALL_ON = (
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.dashboard.enabled=true",
)
# What Grafana puts for its variables when a query runs, so the expressions parse and run.
GRAFANA_VARIABLES = {"$namespace": ".*", "$trial": ".*", "$__rate_interval": "1m"}


def dashboard_queries(dashboard: dict[str, Any] | None = None) -> dict[str, str]:
    """Every panel's expressions by panel title and refId, with Grafana's variables filled."""
    dashboard = dashboard or json.loads(DASHBOARD.read_text())
    queries: dict[str, str] = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            queries[f"{panel['title']} ({target['refId']})"] = expr
    return queries


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_without_the_values_nothing_of_monitoring_renders() -> None:
    kinds = {doc["kind"] for doc in render_all()}
    assert not {"ServiceMonitor", "PrometheusRule", "ConfigMap"} & kinds


def test_with_the_values_the_three_objects_render() -> None:
    rendered = render(*ALL_ON)
    monitor = rendered["ServiceMonitor"]
    service = rendered["Service"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    rules = rendered["PrometheusRule"]
    assert rules["spec"] == yaml.safe_load(RULES.read_text())
    dashboard = rendered["ConfigMap"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["acceltrial.json"]) == json.loads(DASHBOARD.read_text())


def test_labels_given_reach_the_objects_prometheus_selects_by() -> None:
    rendered = render(
        *ALL_ON,
        "monitoring.serviceMonitor.labels.release=kps",
        "monitoring.prometheusRule.labels.release=kps",
        "monitoring.dashboard.namespace=monitoring",
    )
    assert rendered["ServiceMonitor"]["metadata"]["labels"]["release"] == "kps"
    assert rendered["PrometheusRule"]["metadata"]["labels"]["release"] == "kps"
    assert rendered["ConfigMap"]["metadata"]["namespace"] == "monitoring"


def test_a_servicemonitor_without_the_metrics_service_is_refused_with_the_fix() -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        render("monitoring.serviceMonitor.enabled=true", "metrics.service.enabled=false")
    assert "needs metrics.service.enabled" in refused.value.stderr


def test_the_alert_rules_pass_promtool_check_and_its_unit_tests() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout
    tested = promtool("test", "rules", "acceltrial.rules.test.yaml", cwd=Path(__file__).parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_is_documented_with_what_to_do() -> None:
    operations = (REPO / "docs" / "operations.md").read_text()
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            assert re.search(rf"^\| `{rule['alert']}` \|", operations, re.MULTILINE), rule["alert"]


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    """promtool parses each expression as a recording rule's (it has no parse-only command)."""
    queries = dashboard_queries()
    rules = [{"record": f"panel:query:{n}", "expr": q} for n, q in enumerate(queries.values())]
    path = tmp_path / "dashboard.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert len(queries) >= 9


def render_all(*values: str) -> list[dict[str, Any]]:
    args = [tool("helm"), "template", "acceltrial", str(REPO / "charts" / "acceltrial")]
    args += ["--kube-version", "1.33.0", *(a for v in values for a in ("--set", v))]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]
