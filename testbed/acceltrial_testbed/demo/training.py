"""Training scenarios: a TrainingTrial run on the real control plane against the simulated
trainer (sandbox/trainer.py), ended as the scenario's ``expect`` says.

A training scenario holds ``description``, ``trial`` (``file`` and ``patch``, as an inference
scenario's), ``trainers`` (each variant's ``tokensPerSecond`` per node, ``startupSeconds``,
``loss: {initial, final}``, ``fails``, ``format``, ``utilization``, ``logsThroughput``), an
optional ``topology``, ``expect`` and ``timeout``; the demo tells it from an inference scenario
by its ``trainers``. Without a
topology the cluster gets the nodes the trial asks for: each variant's instance type times its
nodes, with the accelerators the catalog gives it, the Neuron ones tainted as EKS taints them.
The trainer's behaviour reaches the pods the operator creates as an annotation on the trial's
templates (the baseline's, and the candidate's through ``podTemplatePatch``). A trial with
``spec.metrics`` gets a real Prometheus (its address replaced by the demo's) scraping what the
trainers export: their token counter, and dcgm-exporter and neuron-monitor on their nodes
(sandbox/trainer_metrics.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal, TextIO

import yaml
from pydantic import Field, ValidationError

from acceltrial.api.base import ApiModel
from acceltrial.api.durations import Duration, duration_seconds
from acceltrial.api.report import REPORT_KEY, report_name
from acceltrial.api.training.report import TrainingReport
from acceltrial.api.training.status import TrainingReasonCode
from acceltrial.api.validation import validate_trial
from acceltrial.engine.candidate import merge_patch
from acceltrial.pages.training import training_html, training_markdown
from acceltrial.providers.pricing.catalog import bundled_catalog
from acceltrial_testbed.demo.cluster import Client
from acceltrial_testbed.demo.plane import (
    CannotStart,
    LocalCluster,
    check_available,
    describe,
    local_cluster,
)
from acceltrial_testbed.demo.scenario import ScenarioError, TrialSource, _resolve_trial
from acceltrial_testbed.sandbox.choices import ControlPlane, uses_real_control_plane
from acceltrial_testbed.sandbox.fleet.serving import metrics_endpoint, serve_exporters
from acceltrial_testbed.sandbox.prometheus import (
    PrometheusNotFound,
    PrometheusServer,
    find_prometheus,
)
from acceltrial_testbed.sandbox.realplane.processes import StartError
from acceltrial_testbed.sandbox.topology import NodeGroup, Topology, load_topology
from acceltrial_testbed.sandbox.trainer import HOLD, TRAINER, Behaviour, Loss
from acceltrial_testbed.sandbox.trainer_metrics import TrainerMetrics

Manifest = dict[str, Any]
TRAININGS = "/apis/acceltrial.dev/v1alpha1/namespaces/{}/trainingtrials"
JOBS = "/apis/batch/v1/namespaces/{}/jobs"
TICK_SECONDS = 0.5
ENDED = ("Recommended", "NotRecommended", "Failed")
EFA_INTERFACES = {
    "p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5e.48xlarge": 32,
    "p5en.48xlarge": 16, "trn1.32xlarge": 8, "trn1n.32xlarge": 16, "trn2.48xlarge": 16,
}  # fmt: skip
"""EFA interfaces per instance (EC2's instance type pages); others have none."""


class Trainer(ApiModel):
    """How one variant's training script behaves (docs/demo.md, "Training scenarios")."""

    tokens_per_second: float = Field(gt=0)
    """Tokens per second per node, after the warm-up."""
    startup_seconds: float = Field(default=5.0, ge=0, le=600)
    """Wall-clock seconds from the pod's start to the first step (counted into the one-off
    start-up of a run)."""
    loss: Loss = Loss(initial=4.0, final=2.0)
    """The loss at the first and the last step of the trial run."""
    fails: Literal["compile", "run"] | None = None
    """compile: the precompile (or the run's compile) fails; run: the run dies a third of the
    way through. Either way with log lines."""
    format: Literal["json", "nxd", "katib"] = "json"
    """The log's format: JSON lines, NxD Training's step_loss lines or Katib's name=value."""
    utilization: float = Field(default=0.9, gt=0, le=1)
    """The accelerators' utilization while it trains, as dcgm-exporter and neuron-monitor
    report it."""
    logs_throughput: bool = True
    """false: the log's JSON or Katib lines carry no throughput; the script's exported
    ``train_tokens_total`` counter alone says how fast it trains."""


class Trainers(ApiModel):
    baseline: Trainer
    candidate: Trainer


class TrainingExpect(ApiModel):
    phase: Literal["Recommended", "NotRecommended", "Failed"]
    """The phase the trial must end in."""
    reason: str | None = None
    """Text the decision's reason must contain."""
    reason_code: TrainingReasonCode | None = None
    """The decision's reasonCode."""


class TrainingScenario(ApiModel):
    description: str
    trial: TrialSource
    trainers: Trainers
    topology: str | None = None
    """A topology file (relative to the scenario); the nodes the trial asks for otherwise."""
    expect: TrainingExpect
    timeout: Duration = "3m"
    """How long the demo waits for the decision."""


def is_training_scenario(path: Path) -> bool:
    """Whether the scenario file is a training one (it has ``trainers``)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(raw, dict) and "trainers" in raw


def load_training_scenario(path: Path) -> tuple[TrainingScenario, Manifest]:
    """The scenario and its trial, checked; ScenarioError naming each field at fault."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        scenario = TrainingScenario.model_validate(raw)
    except ValidationError as error:
        lines = [f"{path}: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()]
        raise ScenarioError("\n".join(lines)) from None
    trial = _resolve_trial(scenario.trial, path)
    if trial.get("kind") != "TrainingTrial":
        raise ScenarioError(f"{path}: trial: a training scenario runs a TrainingTrial")
    problems = validate_trial(trial)
    if problems:
        raise ScenarioError("\n".join(f"{path}: trial: {p}" for p in problems))
    return scenario, trial


def training_topology(trial: Manifest) -> Topology:
    """The nodes the trial asks for, as EKS gives them."""
    spec = trial["spec"]
    groups = []
    for variant in ("baseline", "candidate"):
        instance = spec[variant]["instanceType"]
        groups.append(_node_group(variant, instance, int(spec[variant].get("nodes", 1))))
    return Topology(nodeGroups=groups)


def _node_group(variant: str, instance: str, count: int) -> NodeGroup:
    found = bundled_catalog().spec(instance)
    allocatable = {"cpu": f"{found.vcpu - 1 if found else 95}",
                   "memory": f"{int(found.memory_gib * 0.9) if found else 1000}Gi",
                   "pods": "110"}  # fmt: skip
    neuron = found is not None and found.accelerator.kind != "gpu"
    if found is not None:
        resource = "aws.amazon.com/neuron" if neuron else "nvidia.com/gpu"
        allocatable[resource] = str(found.accelerator.devices)
    if EFA_INTERFACES.get(instance):
        allocatable["vpc.amazonaws.com/efa"] = str(EFA_INTERFACES[instance])
    taints = [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}]
    return NodeGroup.model_validate({
        "name": f"{variant}-{instance.replace('.', '-')}", "instanceType": instance,
        "count": count, "allocatable": allocatable, "taints": taints if neuron else [],
    })  # fmt: skip


def with_trainers(trial: Manifest, trainers: Trainers, seed: int = 0) -> Manifest:
    """The trial whose pods play the scenario's trainers (and that kwok leaves running until
    the trainer ends them)."""
    spec = trial["spec"]
    length = int(spec["run"].get("sequenceLength") or 4096)

    def annotations(variant: str, trainer: Trainer) -> dict[str, str]:
        nodes = int(spec[variant].get("nodes", 1))
        behaviour = Behaviour(
            tokens_per_second=trainer.tokens_per_second * nodes,
            startup_seconds=trainer.startup_seconds, loss=trainer.loss, fails=trainer.fails,
            format=trainer.format, sequence_length=length, seed=seed,
            utilization=trainer.utilization, logs_throughput=trainer.logs_throughput,
        )  # fmt: skip
        return {TRAINER: behaviour.model_dump_json(by_alias=True), **HOLD}

    patch = {"spec": {
        "baseline": {"template": {"metadata": {"annotations": annotations(
            "baseline", trainers.baseline)}}},
        "candidate": {"podTemplatePatch": merge_patch(
            spec["candidate"].get("podTemplatePatch") or {},
            {"metadata": {"annotations": annotations("candidate", trainers.candidate)}})},
    }}  # fmt: skip
    patched: Manifest = merge_patch(trial, patch)
    return patched


def topology_for(scenario: TrainingScenario, path: Path, trial: Manifest) -> Topology:
    if scenario.topology is None:
        return training_topology(trial)
    try:
        return load_topology(path.parent / scenario.topology)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise ScenarioError(f"{path}: topology: cannot load it: {error}") from None


def start_operator(cluster: LocalCluster, namespace: str, folder: Path) -> subprocess.Popen[bytes]:
    """The operator as the chart runs it, limited to the scenario's namespace."""
    env = os.environ | {
        "KUBECONFIG": str(cluster.kubeconfig),
        "ACCELTRIAL_METRICS_PORT": "0",
        "ACCELTRIAL_TICK_SECONDS": str(TICK_SECONDS),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    command = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone",
               f"--namespace={namespace}"]  # fmt: skip
    with (folder / "operator.log").open("ab") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                cwd=folder)  # fmt: skip


def watch(client: Client, path: str, timeout: float, say: Any) -> Manifest:
    """Follow the trial until it ends (or ``timeout``), saying each new message."""
    deadline = time.monotonic() + timeout
    said = ""
    body: Manifest = {}
    while time.monotonic() < deadline:
        body = client.get(path) or {}
        status = body.get("status") or {}
        message = f"{status.get('phase', 'Pending')}: {status.get('message') or 'starting'}"
        if message != said:
            say(message.split("\n", maxsplit=1)[0][:160])
            said = message
        if status.get("phase") in ENDED:
            return body
        time.sleep(0.5)
    return body


def summary(status: Manifest) -> list[str]:
    """What the trial measured and decided, as the demo prints it."""
    lines = []
    runs = status.get("runs") or {}
    economics = status.get("economics") or {}
    for variant in ("baseline", "candidate"):
        run = runs.get(variant) or {}
        money = economics.get(variant) or {}
        exported = run.get("prometheus") or {}
        from_prometheus = run.get("throughputSource") == "prometheus"
        speed = exported.get("tokensPerSecond") if from_prometheus else run.get("tokensPerSecond")
        rate = (speed or {}).get("mean")
        parts = [f"{variant:9}"]
        where = " (Prometheus)" if from_prometheus else " (log)"
        parts.append(f"{rate:,.0f} tokens/s{where}" if rate else "no speed measured")
        busy = (exported.get("acceleratorUtilization") or {}).get("mean")
        if busy is not None:
            parts.append(f"accelerators {busy:.0%} busy")
        if run.get("startupSeconds") is not None:
            parts.append(f"first step after {run['startupSeconds']:.1f}s")
        if money:
            parts.append(f"a full run {money['hoursPerRun']:.2f} h, ${money['costPerRun']:,.0f} "
                         f"at ${money['costPerHour']:,.2f}/h")  # fmt: skip
            if money.get("tokensPerDollar"):
                parts.append(f"{money['tokensPerDollar']:,.0f} tokens/$")
        lines.append("  " + ", ".join(parts))
    parity = status.get("lossParity") or {}
    if parity.get("gap") is not None:
        lines.append(f"  loss parity: the candidate's final loss {parity['gap']:+.1%} "
                     f"(95%: {parity['low']:+.1%} to {parity['high']:+.1%}) over "
                     f"{parity['matchedSteps']} matched steps")  # fmt: skip
    for result in (status.get("decision") or {}).get("criteria") or []:
        lines.append(f"  {result['verdict']:12} {result['name']}: {result['message']}")
    return lines


def matches(expect: TrainingExpect, status: Manifest) -> tuple[bool, str]:
    decision = status.get("decision") or {}
    problems = []
    if status.get("phase") != expect.phase:
        problems.append(f"phase {status.get('phase')} (expected {expect.phase})")
    if expect.reason_code and decision.get("reasonCode") != expect.reason_code:
        problems.append(f"reasonCode {decision.get('reasonCode')} (expected {expect.reason_code})")
    if expect.reason and expect.reason not in str(decision.get("reason", "")):
        problems.append(f"the reason does not say {expect.reason!r}")
    return not problems, "; ".join(problems) or "matched"


def expected_text(expect: TrainingExpect) -> str:
    code = f" (reasonCode {expect.reason_code})" if expect.reason_code else ""
    return f"{expect.phase}{code}"


def result_json(
    status: Manifest, jobs: list[Manifest], matched: bool, report: Manifest | None = None
) -> str:
    running = [j["metadata"]["name"] for j in jobs if not (j.get("status") or {}).get(
        "conditions") and not j["metadata"].get("deletionTimestamp")]  # fmt: skip
    return json.dumps({"kind": "TrainingTrial", "status": status, "runningJobs": running,
                       "matched": matched, "report": report}, indent=2)  # fmt: skip


def timeout_seconds(scenario: TrainingScenario) -> float:
    return duration_seconds(scenario.timeout)


def run_training(  # noqa: PLR0917
    path: Path,
    control_plane: ControlPlane,
    result_file: Path | None,
    keep: bool,
    out: TextIO,
    report_dir: Path | None = None,
) -> int:
    """Run a training scenario; 0 when it ends as ``expect`` says, 1 when not, 2 when it
    cannot run (a mistake in it, or no real control plane: training trials run on it only)."""
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"{time.monotonic() - started:6.1f}s  {text}", file=out, flush=True)

    try:
        scenario, trial = load_training_scenario(path)
        topology = topology_for(scenario, path, trial)
        if not uses_real_control_plane(control_plane):
            raise ScenarioError(
                "training scenarios run on the real control plane only: build it with "
                "`make control-plane` and run with --control-plane real (or auto)"
            )
        check_available(control_plane)
    except (ScenarioError, *CannotStart) as error:
        print(f"acceltrial demo: {error}", file=sys.stderr)
        return 2
    print(f"Scenario {path.stem}: {scenario.description.strip()}", file=out)
    print(f"Expected: {expected_text(scenario.expect)}", file=out, flush=True)
    folder = Path(tempfile.mkdtemp(prefix="acceltrial-demo-"))
    matched = False
    try:
        played = with_trainers(trial, scenario.trainers)
        files = (result_file, report_dir)
        matched = _run_training(scenario, played, topology, control_plane, folder, files, say, out)
    except CannotStart as error:
        say(f"the control plane did not start: {error}")
    except PrometheusNotFound as error:
        say(f"the trial reads Prometheus (spec.metrics): {error}")
    finally:
        if matched and not keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"logs kept in {folder}", file=out)
    return 0 if matched else 1


def _run_training(  # noqa: PLR0917
    scenario: TrainingScenario,
    trial: Manifest,
    topology: Topology,
    control_plane: ControlPlane,
    folder: Path,
    files: tuple[Path | None, Path | None],
    say: Any,
    out: TextIO,
) -> bool:
    result_file, report_dir = files
    namespace = str(trial["metadata"].get("namespace", "default"))
    name = trial["metadata"]["name"]
    with local_cluster(control_plane, topology) as cluster, contextlib.ExitStack() as stack:
        client = Client(cluster.access)
        groups = ", ".join(f"{g.count} x {g.instance_type}" for g in topology.node_groups)
        say(f"{describe(cluster)} ({groups})")
        if (trial["spec"].get("metrics") or {}).get("prometheus") is not None:
            url = _scrape_trainers(cluster, client, folder, stack)
            trial = with_prometheus(trial, url)
            say(f"Prometheus at {url}, scraping the trainers' token counter and dcgm-exporter "
                "and neuron-monitor on their nodes every 1s")  # fmt: skip
        if namespace != "default":
            client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": namespace}})  # fmt: skip
        operator = start_operator(cluster, namespace, folder)
        try:
            say(f"operator started (kopf run -m acceltrial.handlers, pid {operator.pid})")
            client.create(TRAININGS.format(namespace), trial)
            say(f"applied TrainingTrial {namespace}/{name}")
            body = watch(client, f"{TRAININGS.format(namespace)}/{name}",
                         timeout_seconds(scenario), say)  # fmt: skip
            jobs = (client.get(JOBS.format(namespace)) or {}).get("items") or []
            report = _report(client, namespace, name)
        finally:
            operator.terminate()
            operator.wait(timeout=30)
    status = body.get("status") or {}
    decision = status.get("decision") or {}
    print(file=out)
    print(f"Decision: {status.get('phase', 'none')} ({decision.get('reasonCode', 'none')})",
          file=out)  # fmt: skip
    print(f"  why: {decision.get('reason') or status.get('message')}", file=out)
    for line in summary(status):
        print(line, file=out)
    if report is not None:
        for answer in report.checklist:
            print(f"  {answer.question} {answer.answer}", file=out)
        if report_dir is not None:
            _save_report(report, report_dir)
            print(f"Report written to {report_dir}/report.{{json,md,html}}", file=out)
    matched, said = matches(scenario.expect, status)
    print(f"Expected {expected_text(scenario.expect)}: {said}", file=out, flush=True)
    if result_file is not None:
        report_json = None if report is None else report.model_dump(mode="json", by_alias=True)
        result_file.write_text(result_json(status, jobs, matched, report_json), encoding="utf-8")
    return matched


def _scrape_trainers(
    cluster: LocalCluster, client: Client, folder: Path, stack: contextlib.ExitStack
) -> str:
    """A Prometheus scraping what the trainers export (closed with ``stack``); its URL."""
    pod_logs = getattr(cluster, "pod_logs", None)
    if pod_logs is None:
        raise StartError("the control plane serves no pod logs, so no trainer runs")
    metrics = TrainerMetrics(pod_logs.trainers)
    url = stack.enter_context(metrics_endpoint(metrics))
    nodes = (client.get("/api/v1/nodes") or {}).get("items") or []
    jobs = serve_exporters(metrics.node_exporters(nodes), stack)
    prometheus = PrometheusServer(find_prometheus(), folder / "prometheus",
                                  [url.removeprefix("http://")], jobs).start()  # fmt: skip
    stack.callback(prometheus.stop)
    return prometheus.url


def with_prometheus(trial: Manifest, url: str) -> Manifest:
    """The trial reading the demo's Prometheus."""
    patched: Manifest = merge_patch(trial, {"spec": {"metrics": {"prometheus": {"address": url}}}})
    return patched


def _report(client: Client, namespace: str, name: str) -> TrainingReport | None:
    config_map = client.get(f"/api/v1/namespaces/{namespace}/configmaps/{report_name(name)}")
    text = ((config_map or {}).get("data") or {}).get(REPORT_KEY)
    return None if not text else TrainingReport.model_validate_json(text)


def _save_report(report: TrainingReport, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(
        report.model_dump_json(by_alias=True, indent=2), encoding="utf-8"
    )
    (folder / "report.md").write_text(training_markdown(report), encoding="utf-8")
    (folder / "report.html").write_text(training_html(report), encoding="utf-8")
