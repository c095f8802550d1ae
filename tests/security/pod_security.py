"""The Pod Security Standards' ``restricted`` profile, written down as checks of a pod spec.

Source: https://kubernetes.io/docs/concepts/security/pod-security-standards/ (Kubernetes v1.33;
the ``restricted`` level includes every ``baseline`` control). Each check returns the
violations it finds as ``"<field>: <why>"``; an empty list means the pod is admitted by a
namespace labelled ``pod-security.kubernetes.io/enforce: restricted``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Pod = dict[str, Any]

# Baseline, "Sysctls": the safe set.
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
# Restricted, "Volume Types": only these.
ALLOWED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
    "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip
# Baseline, "SELinux": the allowed types (empty or unset too).
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def containers(pod: Pod) -> Iterator[tuple[str, dict[str, Any]]]:
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for index, container in enumerate(pod.get(field) or []):
            yield f"spec.{field}[{index}]", container


def _contexts(pod: Pod) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "spec.securityContext", pod.get("securityContext") or {}
    for where, container in containers(pod):
        yield f"{where}.securityContext", container.get("securityContext") or {}


def host_process(pod: Pod) -> list[str]:
    return [
        f"{where}.windowsOptions.hostProcess: must be unset or false"
        for where, context in _contexts(pod)
        if (context.get("windowsOptions") or {}).get("hostProcess")
    ]


def host_namespaces(pod: Pod) -> list[str]:
    return [f"spec.{f}: must be unset or false" for f in ("hostNetwork", "hostPID", "hostIPC")
            if pod.get(f)]  # fmt: skip


def privileged(pod: Pod) -> list[str]:
    return [f"{w}.privileged: must be unset or false" for w, c in _contexts(pod)
            if c.get("privileged")]  # fmt: skip


def host_ports(pod: Pod) -> list[str]:
    return [
        f"{where}.ports[{i}].hostPort: must be unset or 0"
        for where, container in containers(pod)
        for i, port in enumerate(container.get("ports") or [])
        if port.get("hostPort")
    ]


def apparmor(pod: Pod) -> list[str]:
    return [
        f"{where}.appArmorProfile.type: must be RuntimeDefault or Localhost"
        for where, context in _contexts(pod)
        if (context.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault",
                                                                        "Localhost")
    ]  # fmt: skip


def selinux(pod: Pod) -> list[str]:
    found = []
    for where, context in _contexts(pod):
        options = context.get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES:
            found.append(f"{where}.seLinuxOptions.type: not an allowed type")
        found += [f"{where}.seLinuxOptions.{k}: must be unset" for k in ("user", "role")
                  if options.get(k)]  # fmt: skip
    return found


def proc_mount(pod: Pod) -> list[str]:
    return [f"{w}.procMount: must be Default" for w, c in _contexts(pod)
            if c.get("procMount") not in (None, "Default")]  # fmt: skip


def sysctls(pod: Pod) -> list[str]:
    unsafe = [s.get("name") for s in (pod.get("securityContext") or {}).get("sysctls") or []]
    return [f"spec.securityContext.sysctls: {n} is not safe" for n in unsafe
            if n not in SAFE_SYSCTLS]  # fmt: skip


def volume_types(pod: Pod) -> list[str]:
    found = []
    for index, volume in enumerate(pod.get("volumes") or []):
        kinds = set(volume) - {"name"}
        found += [f"spec.volumes[{index}].{kind}: not an allowed volume type"
                  for kind in sorted(kinds - ALLOWED_VOLUMES)]  # fmt: skip
    return found


def privilege_escalation(pod: Pod) -> list[str]:
    return [
        f"{where}.securityContext.allowPrivilegeEscalation: must be false"
        for where, container in containers(pod)
        if (container.get("securityContext") or {}).get("allowPrivilegeEscalation") is not False
    ]


def non_root(pod: Pod) -> list[str]:
    pod_level = (pod.get("securityContext") or {}).get("runAsNonRoot")
    found = ["spec.securityContext.runAsNonRoot: must not be false"] if pod_level is False else []
    for where, container in containers(pod):
        own = (container.get("securityContext") or {}).get("runAsNonRoot")
        if own is False or (own is None and pod_level is not True):
            found.append(f"{where}.securityContext.runAsNonRoot: must be true (here or the pod)")
    return found


def non_root_user(pod: Pod) -> list[str]:
    return [f"{w}.runAsUser: must not be 0" for w, c in _contexts(pod)
            if c.get("runAsUser") == 0]  # fmt: skip


def seccomp(pod: Pod) -> list[str]:
    def kind(context: dict[str, Any]) -> Any:
        return (context.get("seccompProfile") or {}).get("type")

    pod_kind = kind(pod.get("securityContext") or {})
    found = []
    if pod_kind not in (None, "RuntimeDefault", "Localhost"):
        found.append(
            "spec.securityContext.seccompProfile.type: must be RuntimeDefault or Localhost"
        )
    for where, container in containers(pod):
        own = kind(container.get("securityContext") or {})
        if own not in (None, "RuntimeDefault", "Localhost") or (own is None and pod_kind is None):
            found.append(f"{where}.securityContext.seccompProfile.type: must be RuntimeDefault"
                         " or Localhost (here or the pod)")  # fmt: skip
    return found


def capabilities(pod: Pod) -> list[str]:
    found = []
    for where, container in containers(pod):
        caps = (container.get("securityContext") or {}).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"{where}.securityContext.capabilities.drop: must include ALL")
        added = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
        found += [f"{where}.securityContext.capabilities.add: {c} is not allowed"
                  for c in sorted(added)]  # fmt: skip
    return found


RESTRICTED: dict[str, Callable[[Pod], list[str]]] = {
    # baseline
    "HostProcess": host_process,
    "Host Namespaces": host_namespaces,
    "Privileged Containers": privileged,
    "HostPath Volumes": volume_types,  # hostPath is not among the restricted volume types
    "Host Ports": host_ports,
    "AppArmor": apparmor,
    "SELinux": selinux,
    "/proc Mount Type": proc_mount,
    "Sysctls": sysctls,
    # restricted
    "Volume Types": volume_types,
    "Privilege Escalation": privilege_escalation,
    "Running as Non-root": non_root,
    "Running as Non-root user": non_root_user,
    "Seccomp": seccomp,
    "Capabilities": capabilities,
}


def violations(pod: Pod) -> list[str]:
    """Every violation of the restricted profile in a pod spec, deduplicated, in order."""
    found: list[str] = []
    for check in RESTRICTED.values():
        found += [v for v in check(pod) if v not in found]
    return found
