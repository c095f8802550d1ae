"""The chart's operator pod passes the Pod Security Standards' ``restricted`` profile (rules in
tests/security/pod_security.py, citing the Kubernetes page), with default values and with
every value a user is likely to set."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.chart.test_chart import render
from tests.security.pod_security import violations


def operator_pod(*values: str) -> dict[str, Any]:
    pod: dict[str, Any] = render(*values)["Deployment"]["spec"]["template"]["spec"]
    return pod


@pytest.mark.parametrize(
    "values",
    [
        (),
        ("watchNamespaces={serving}", "rbac.readPrometheusSecrets=false"),
        ("serviceAccount.irsaRoleArn=arn:aws:iam::123456789012:role/x", "logLevel=debug"),
        ("priorityClassName=system-cluster-critical", "metrics.port=9100"),
    ],
    ids=["defaults", "namespaced", "irsa", "custom-ports"],
)
def test_the_operator_pod_is_restricted(values: tuple[str, ...]) -> None:
    assert violations(operator_pod(*values)) == []


BREAKS = {
    "root user": ("securityContext", "runAsUser", 0),
    "privileged": ("container", "privileged", True),
    "escalation": ("container", "allowPrivilegeEscalation", True),
    "capability": ("container", "capabilities", {"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
    "no drop": ("container", "capabilities", {}),
    "unconfined": ("securityContext", "seccompProfile", {"type": "Unconfined"}),
    "host network": ("pod", "hostNetwork", True),
    "host path": ("pod", "volumes", [{"name": "host", "hostPath": {"path": "/"}}]),
    "host port": ("port", "hostPort", 8080),
    "sysctl": ("securityContext", "sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
}


@pytest.mark.parametrize("change", BREAKS.values(), ids=list(BREAKS))
def test_the_rules_catch_each_kind_of_violation(change: tuple[str, str, Any]) -> None:
    """The checks can fail: each change a chart edit could make is caught."""
    where, key, value = change
    pod = copy.deepcopy(operator_pod())
    container = pod["containers"][0]
    target = {
        "pod": pod,
        "securityContext": pod["securityContext"],
        "container": container["securityContext"],
        "port": container["ports"][0],
    }[where]
    target[key] = value
    assert violations(pod), f"{where}.{key}={value!r} passed the restricted profile"
