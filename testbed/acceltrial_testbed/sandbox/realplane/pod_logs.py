"""Pod logs on the real control plane: ``pods/<name>/log`` answered as a kubelet answers it.

kube-apiserver proxies a log request to the node's kubelet; here kwok plays that kubelet's
server too (``--server-address``, with the plane's serving certificate), and serves a pod's log
from a file named by a kwok ``Logs`` object (kwok.x-k8s.io/v1alpha1, named like the pod). Every
Node gets an ``ExternalIP`` of 127.0.0.1 beside its simulated InternalIP, and the API server
prefers it (``--kubelet-preferred-address-types=ExternalIP``), so it reaches kwok on the
loopback while pods keep their nodes' addresses.

What a pod prints is the test bed's ``sandbox.acceltrial.dev/log`` annotation, as on the
emulator (sandbox/jobs.py): :class:`PodLogs` finds the pods of Jobs that carry it, writes it to a
file in the CRI log format (``<time> stdout F <line>``, what kwok reads, as a kubelet does) and
creates the pod's ``Logs``. A pod with a ``sandbox.acceltrial.dev/trainer`` annotation instead
plays the simulated trainer (sandbox/trainer.py): once Running, its lines are appended as they
fall due, each stamped with its time, and when its script ends the pod gets the exit-code
annotation kwok's stage ends it with (kwok-job-stages.yaml). Only Jobs' pods are looked at (a
label selector), every :data:`POLL_SECONDS`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from acceltrial_testbed.sandbox.jobs import EXIT_CODE, LOG
from acceltrial_testbed.sandbox.realplane.client import AdminClient, ApiError
from acceltrial_testbed.sandbox.trainer import STEPS_ENV, TRAINER, Behaviour, Script, script

KUBELET_ADDRESS = {"type": "ExternalIP", "address": "127.0.0.1"}
"""Where the API server reaches each Node's kubelet API (kwok's server)."""
KUBELET_ADDRESS_TYPES = "--kubelet-preferred-address-types=ExternalIP"
LOGS = "/apis/kwok.x-k8s.io/v1alpha1/namespaces/{}/logs"
JOB_PODS = "/api/v1/pods?labelSelector=batch.kubernetes.io/job-name"
POLL_SECONDS = 0.5
VARIANT_LABEL = "acceltrial.dev/variant"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def node_addresses(addresses: list[dict[str, str]], name: str) -> list[dict[str, str]]:
    """A simulated Node's addresses as the plane registers it: its own, the Hostname a kubelet
    reports (kwok fills in addresses unless both kinds are there) and :data:`KUBELET_ADDRESS`."""
    return [*addresses, {"type": "Hostname", "address": name}, dict(KUBELET_ADDRESS)]


def cri_lines(text: str, at: datetime) -> str:
    """``text`` as a container runtime writes a container's stdout, line by line."""
    stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return "".join(f"{stamp} stdout F {line}\n" for line in text.splitlines())


class PodLogs:
    """Gives each Job pod that carries a log annotation its log, until stopped."""

    def __init__(self, client: AdminClient, directory: Path) -> None:
        self.client = client
        self.directory = directory
        self._served: set[str] = set()
        self._playing: dict[str, _Playing] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-logs", daemon=True)

    def start(self) -> PodLogs:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.serve_new()
            except (ApiError, OSError):
                continue  # the API server restarting or stopping: asked again next time

    def serve_new(self) -> None:
        """Serve the log of each Job pod with a log annotation not served yet."""
        listed = self.client.get(JOB_PODS)
        for pod in listed.get("items") or []:
            meta = pod["metadata"]
            uid = meta["uid"]
            if TRAINER in (meta.get("annotations") or {}):
                self._play(pod)
                continue
            text = (meta.get("annotations") or {}).get(LOG)
            if uid in self._served or text is None:
                continue
            try:
                self._serve(pod, str(text))
            except ApiError as error:
                # 409: served before; 403/404: its namespace is going. Else: again next time.
                if error.status not in (403, 404, 409):
                    continue
            self._served.add(uid)

    def _play(self, pod: dict[str, Any]) -> None:
        """Append the trainer's lines that fell due; end the pod when its script ends."""
        meta = pod["metadata"]
        playing = self._playing.get(meta["uid"])
        if playing is None:
            if (pod.get("status") or {}).get("phase") != "Running" or meta.get("deletionTimestamp"):
                return
            behaviour = Behaviour.model_validate_json(str(meta["annotations"][TRAINER]))
            trainer = TrainerPod.of(pod, behaviour)
            played = _script_of(pod, behaviour, trainer.role)
            playing = _Playing(played, datetime.now(UTC), trainer)
            try:
                self._serve(pod, "")
            except ApiError as error:
                if error.status != 409:
                    return
            with self._lock:
                self._playing[meta["uid"]] = playing
        elapsed = (datetime.now(UTC) - playing.started).total_seconds()
        due = [(at, line) for at, line in playing.script.lines[playing.printed :] if at <= elapsed]
        if due:
            with self._log_path(meta).open("a", encoding="utf-8") as log:
                for at, line in due:
                    log.write(cri_lines(line, playing.started + timedelta(seconds=at)))
            playing.printed += len(due)
        if elapsed >= playing.script.ends_at and not playing.ended:
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            exit_code = {"metadata": {"annotations": {EXIT_CODE: str(playing.script.exit_code)}}}
            try:
                self.client.merge_patch(path, exit_code)
            except ApiError as error:
                if error.status != 404:
                    return
            playing.ended = True

    def trainers(self) -> list[tuple[TrainerPod, Script, float]]:
        """Each trainer pod played so far, its script and the seconds since it started (for
        the metrics it exports: sandbox/trainer_metrics.py)."""
        now = datetime.now(UTC)
        with self._lock:
            playing = list(self._playing.values())
        return [(p.pod, p.script, (now - p.started).total_seconds()) for p in playing]

    def _log_path(self, meta: dict[str, Any]) -> Path:
        return self.directory / f"{meta['namespace']}_{meta['name']}_{meta['uid']}.log"

    def _serve(self, pod: dict[str, Any], text: str) -> None:
        meta = pod["metadata"]
        path = self._log_path(meta)
        created = datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))
        path.write_text(cri_lines(text, created), encoding="utf-8")
        containers = [c["name"] for c in pod["spec"]["containers"]]
        body = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": {"logs": [{"containers": containers, "logsFile": str(path)}]},
        }
        self.client.create(LOGS.format(meta["namespace"]), body)


@dataclass(frozen=True)
class TrainerPod:
    """Who a trainer pod is, as its exporters label it."""

    namespace: str
    name: str
    node: str
    container: str
    role: str
    rank_zero: bool
    """The Job's first pod (completion index 0, or a Job that is not indexed)."""
    gpus: int
    neuron_devices: int
    utilization: float

    @classmethod
    def of(cls, pod: dict[str, Any], behaviour: Behaviour) -> TrainerPod:
        meta, spec = pod["metadata"], pod["spec"]
        annotations = meta.get("annotations") or {}
        limits: dict[str, Any] = {}
        for container in spec["containers"]:
            limits |= (container.get("resources") or {}).get("limits") or {}
        return cls(
            namespace=meta["namespace"],
            name=meta["name"],
            node=spec.get("nodeName", ""),
            container=spec["containers"][0]["name"],
            role=(meta.get("labels") or {}).get(VARIANT_LABEL, "baseline"),
            rank_zero=annotations.get(COMPLETION_INDEX, "0") == "0",
            gpus=int(str(limits.get("nvidia.com/gpu", 0))),
            neuron_devices=int(str(limits.get("aws.amazon.com/neuron", 0))),
            utilization=behaviour.utilization,
        )


@dataclass
class _Playing:
    """A trainer pod being played: its script, when it started, how far it printed."""

    script: Script
    started: datetime
    pod: TrainerPod
    printed: int = 0
    ended: bool = False


def _script_of(pod: dict[str, Any], behaviour: Behaviour, role: str) -> Script:
    """The trainer's script for the pod: its behaviour, its role, its steps."""
    env = [e for c in pod["spec"]["containers"] for e in c.get("env") or []]
    steps = next((int(e["value"]) for e in env if e.get("name") == STEPS_ENV), 100)
    return script(behaviour, role, steps)
