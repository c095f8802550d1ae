"""Running one scenario end to end, and cleaning up every process it started.

Order: the local control plane (default topology) with the CRD, the simulated fleet and its
metrics endpoint, a real Prometheus scraping it every second, the operator as its own
``kopf run`` process; then the GPU baseline, then the trial. It reports progress until the trial
ends, checks the outcome against ``expect`` and that routing is as the trial left it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from acceltrial.api.actions import action_annotation
from acceltrial.api.durations import duration_seconds
from acceltrial.api.report import Report, read_report, report_name
from acceltrial.api.spec import EconomicsSpec
from acceltrial.api.status import TERMINAL_PHASES
from acceltrial.engine.economics import migration_total
from acceltrial.engine.routing import share_text
from acceltrial.pages.render import health, html_page, markdown, short_hash
from acceltrial_testbed.demo import progress
from acceltrial_testbed.demo.cluster import DEPLOYMENTS, ROUTES, TRIALS, Client, baseline_objects
from acceltrial_testbed.demo.plane import (
    CannotStart,
    LocalCluster,
    check_available,
    component_pids,
    describe,
    local_cluster,
)
from acceltrial_testbed.demo.quality import install_prompts, serve_models
from acceltrial_testbed.demo.route import POOLS, uses_pools
from acceltrial_testbed.demo.scenario import (
    Manifest,
    Scenario,
    ScenarioError,
    load_scenario,
    resolve_path,
    seconds,
    shipped_scenarios,
)
from acceltrial_testbed.demo.training import is_training_scenario, run_training
from acceltrial_testbed.demo.user import ScriptedUser, served_by
from acceltrial_testbed.sandbox.choices import ControlPlane, uses_real_control_plane
from acceltrial_testbed.sandbox.fleet.accelerators import ExporterOptions
from acceltrial_testbed.sandbox.fleet.exporter import SEED_BELOW, Fleet, FleetSpec, Regression
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.fleet.newnodes import NewNodeExporters
from acceltrial_testbed.sandbox.fleet.serving import metrics_endpoint, serve_exporters
from acceltrial_testbed.sandbox.fleet.traffic import Entry
from acceltrial_testbed.sandbox.prometheus import (
    PrometheusNotFound,
    PrometheusServer,
    find_prometheus,
)
from acceltrial_testbed.sandbox.realplane.plane import free_port
from acceltrial_testbed.sandbox.topology import Topology, load_topology

TICK_SECONDS = 1.0
"""The operator's tick in a demo (10 s in production), half the shortest interval a demo
allows; at 0.5 s the promote demo's operator used 4.9 CPU-seconds instead of 3.9 for the same
decision."""
POLL_SECONDS = 0.25
MIN_INTERVAL_SECONDS = 2.0
"""Shortest analysis.interval with data: rate() needs two 1 s scrapes in the window."""


@dataclass(frozen=True)
class DemoOptions:
    scenario: str = "promote"
    speed: float = 1.0
    result_file: Path | None = None
    keep: bool = False
    """Keep the work folder (operator log, Prometheus data) even when the outcome matched."""
    report_dir: Path | None = None
    """Where to write the decision report as report.json, report.md and report.html."""
    control_plane: ControlPlane = "auto"
    """real, emulator, or auto: real when ``make control-plane`` built it (see demo.plane)."""


@dataclass
class Run:
    """What one demo run started and saw."""

    scenario: Scenario
    trial: Manifest
    out: TextIO
    folder: Path
    started: float = field(default_factory=time.monotonic)
    pids: dict[str, int] = field(default_factory=dict)
    topology: Topology | None = None
    report: Report | None = None
    """The report as the trial ended (the trial's ConfigMap goes when the trial is deleted)."""
    fleet_seed: int = 0
    """The seed of the fleet's draws: ``fleet.seed``, or drawn and printed when unset."""

    @property
    def namespace(self) -> str:
        return str(self.trial["metadata"].get("namespace", "default"))

    @property
    def trial_path(self) -> str:
        return f"{TRIALS.format(self.namespace)}/{self.trial['metadata']['name']}"

    def say(self, text: str) -> None:
        print(f"{time.monotonic() - self.started:6.1f}s  {text}", file=self.out, flush=True)


def run_demo(options: DemoOptions, out: TextIO) -> int:
    """Run the scenario; 0 when it ends as ``expect`` says, 1 when not, 2 when it cannot run."""
    path = resolve_path(options.scenario)
    if not path.is_file():
        shipped = ", ".join(shipped_scenarios()) or "none found"
        print(
            f"acceltrial demo: no scenario {options.scenario!r}: give a shipped scenario "
            f"({shipped}) or a scenario file (format: docs/demo.md)",
            file=sys.stderr,
        )
        return 2
    if is_training_scenario(path):
        return run_training(path, options.control_plane, options.result_file, options.keep, out,
                            options.report_dir)  # fmt: skip
    try:
        scenario, trial = load_scenario(path)
        trial = at_speed(trial, options.speed)
        topology = _topology(scenario, path)
        prometheus_binary = find_prometheus()
        check_available(options.control_plane)
        if uses_pools(scenario.route) and not uses_real_control_plane(options.control_plane):
            raise ScenarioError(
                "route: InferencePools are served by the real control plane only; build it "
                "with `make control-plane` and run with --control-plane real (or auto)"
            )
    except (ScenarioError, PrometheusNotFound, ValueError, *CannotStart) as error:
        print(f"acceltrial demo: {error}", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="acceltrial-demo-"))
    seed = scenario.fleet.seed
    run = Run(scenario, trial, out, folder, topology=topology, fleet_seed=_seed_or_drawn(seed))
    _introduce(run, path, options.speed)
    matched = False
    try:
        with _interrupts_as_exit():
            matched = _run(run, options, prometheus_binary)
    except KeyboardInterrupt:
        run.say("interrupted: everything the demo started has been stopped")
    except CannotStart as error:
        run.say(f"the control plane did not start: {error}")
    finally:
        if matched and not options.keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"logs and Prometheus data kept in {folder}", file=out)
    return 0 if matched else 1


def _seed_or_drawn(seed: int | None) -> int:
    return secrets.randbelow(SEED_BELOW) if seed is None else seed


def _topology(scenario: Scenario, path: Path) -> Topology | None:
    if scenario.topology is None:
        return None
    file = path.parent / scenario.topology
    try:
        return load_topology(file)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise ScenarioError(f"{path}: topology: cannot load {file}: {error}") from None


def at_speed(trial: Manifest, speed: float) -> Manifest:
    """The trial with every duration divided by ``speed``; ValueError if the interval gets
    shorter than Prometheus can measure at a 1 s scrape."""
    if speed <= 0:
        raise ValueError("--speed must be above 0")
    spec = json.loads(json.dumps(trial["spec"]))

    def scaled(text: str) -> str:
        return f"{duration_seconds(text) / speed:g}s"

    for step in spec.get("steps", []):
        step["duration"] = scaled(step["duration"])
    analysis = spec.setdefault("analysis", {})
    analysis["interval"] = scaled(analysis.get("interval", "1m"))
    if duration_seconds(analysis["interval"]) < MIN_INTERVAL_SECONDS:
        raise ValueError(
            f"--speed {speed:g} makes spec.analysis.interval {analysis['interval']}, shorter than "
            f"the {MIN_INTERVAL_SECONDS:g}s a 1s scrape needs; use a lower --speed"
        )
    promotion = spec.setdefault("promotion", {})
    promotion["bakeTime"] = scaled(promotion.get("bakeTime", "10m"))
    if "progressDeadline" in spec:
        spec["progressDeadline"] = scaled(spec["progressDeadline"])
    return {**trial, "spec": spec}


@contextlib.contextmanager
def _interrupts_as_exit() -> Iterator[None]:
    """SIGTERM ends the demo like Ctrl-C does, so the cleanup below always runs."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _introduce(run: Run, path: Path, speed: float) -> None:
    spec = run.trial["spec"]
    steps = " -> ".join(
        f"{s['weight']}% for {s['duration']}"
        if "weight" in s
        else f"{s['mirror']}% mirrored for {s['duration']}"
        for s in spec["steps"]
    )
    print(f"acceltrial demo: {path.stem}", file=run.out)
    print(f"  {run.scenario.description.strip()}", file=run.out)
    print(
        f"  baseline {spec['baseline']['deploymentRef']['name']} on "
        f"{spec['baseline']['instanceType']} GPUs; candidate on "
        f"{spec['candidate']['instanceType']} ({spec['candidate'].get('neuronCores', '?')} "
        f"NeuronCores per pod)",
        file=run.out,
    )
    print(f"  steps: {steps}; judged every {spec['analysis']['interval']}", file=run.out)
    print(f"  expected outcome: {_expected(run.scenario)}", file=run.out)
    seed = run.fleet_seed
    drawn = (
        "" if run.scenario.fleet.seed is not None else f" (drawn; set fleet.seed: {seed} to repeat)"
    )
    print(f"  requests drawn at random with fleet.seed {seed}{drawn}", file=run.out)
    if speed != 1:
        print(f"  durations divided by --speed {speed:g}", file=run.out)
    print(file=run.out, flush=True)


def _expected(scenario: Scenario) -> str:
    expect = scenario.expect
    parts: list[str] = [expect.phase]
    if expect.step is not None:
        parts.append(f"at step {expect.step}")
    if expect.reason:
        parts.append(f"because of {expect.reason!r}")
    if expect.reason_code:
        parts.append(f"(reasonCode {expect.reason_code})")
    if expect.served_by:
        parts.append(f"then served by the {expect.served_by}")
    if expect.max_candidate_user_requests is not None:
        most = expect.max_candidate_user_requests
        parts.append(f"with at most {most:g} users' requests answered by the candidate")
    return " ".join(parts)


def _run(run: Run, options: DemoOptions, prometheus_binary: str) -> bool:
    with (
        local_cluster(options.control_plane, run.topology) as sandbox,
        contextlib.ExitStack() as stack,
    ):
        client = Client(sandbox.access)
        run.pids.update(component_pids(sandbox))
        run.say(f"{describe(sandbox)} (simulated g5 and inf2 nodes)")
        fleet = Fleet(sandbox.access, _fleet_spec(run, options.speed)).start()
        stack.callback(fleet.stop)
        metrics_url = stack.enter_context(metrics_endpoint(fleet))
        operator_port = free_port()  # the chart's ServiceMonitor scrapes the operator alike
        jobs = [*serve_exporters(fleet.node_exporters(), stack), operator_job(operator_port)]
        prometheus = PrometheusServer(
            prometheus_binary,
            run.folder / "prometheus",
            [metrics_url.removeprefix("http://")],
            jobs,
        ).start()
        stack.callback(prometheus.stop)
        if sandbox.topology.node_pools or sandbox.eks is not None:  # nodes can come later
            stack.callback(NewNodeExporters(fleet, prometheus, stack, jobs).start().stop)
        assert prometheus.process is not None
        run.pids["prometheus"] = prometheus.process.pid
        run.say(
            f"Prometheus at {prometheus.url}, scraping the simulated fleet every 1s "
            "(dcgm-exporter and neuron-monitor through ServiceMonitor-style jobs, one target "
            "per node) and the operator's own metrics"
        )
        models, model_env = serve_models(run.scenario, sandbox.access, stack, fleet)
        operator = _start_operator(run, sandbox, model_env, operator_port)
        stack.callback(_stop, operator)
        run.say(f"operator started (kopf run -m acceltrial.handlers, pid {operator.pid})")
        _install_baseline(run, client)
        stored = install_prompts(run.scenario, run.trial, client)
        if stored:
            run.say(stored)
        trial = _with_prometheus(run.trial, prometheus.url)
        client.create(TRIALS.format(run.namespace), trial)
        run.say(f"applied AcceleratorTrial {run.namespace}/{trial['metadata']['name']}")
        status = _watch(run, client, fleet, prometheus, options.speed)
        candidate_users = fleet.snapshot().variants["candidate"].user_requests
        if models.answered:
            asked = ", ".join(f"{v} {n}" for v, n in sorted(models.answered.items()))
            run.say(
                f"the trial's own requests (quality check, capacity sweep), not users': {asked}"
            )
        return _conclude(run, client, status, options, candidate_users)


def _fleet_spec(run: Run, speed: float) -> FleetSpec:
    scenario, spec = run.scenario, run.trial["spec"]
    traffic = spec.get("traffic", {})
    baseline = spec["baseline"]
    service = (baseline.get("serviceRef") or {}).get("name", baseline["deploymentRef"]["name"])
    routing = traffic.get("gatewayapi") if traffic.get("router") == "gatewayapi" else None
    entry = Entry(
        namespace=run.namespace,
        route=routing["httpRouteRef"]["name"] if routing else None,
        service=None if routing else service,
        route_namespace=routing["httpRouteRef"].get("namespace") if routing else None,
        honors_weights=scenario.fleet.gateway.honors_weights,
    )
    profiles = {
        name: ServingProfile(
            p50=profile.latency.p50,
            p99=profile.latency.p99,
            capacity_rps=profile.capacity_rps,
            error_ratio=profile.error_ratio,
            utilization_idle=profile.utilization.idle,
            utilization_at_capacity=profile.utilization.at_capacity,
        )
        for name, profile in (
            ("baseline", scenario.variants.baseline),
            ("candidate", scenario.variants.candidate),
        )
    }
    regressions = [
        Regression(
            variant=r.variant,
            from_weight=r.when.weight,
            after_seconds=None if r.when.after is None else seconds(r.when.after, speed),
            latency_factor=r.latency_factor,
            error_ratio=r.error_ratio,
        )
        for r in scenario.regressions
    ]
    fleet, exporters = scenario.fleet, scenario.fleet.exporters
    variants = {"baseline": scenario.variants.baseline, "candidate": scenario.variants.candidate}
    return FleetSpec(
        entry=entry,
        rps=fleet.rps,
        seed=run.fleet_seed,
        prompt_tokens=fleet.tokens.prompt,
        generated_tokens=fleet.tokens.generated,
        profiles=profiles,  # type: ignore[arg-type]
        regressions=regressions,
        model_name="meta-llama/Meta-Llama-3-8B-Instruct",
        server=fleet.server,
        vllm_versions={
            name: variant.vllm_version or fleet.vllm_version  # type: ignore[misc]
            for name, variant in variants.items()
        },
        gpu_exporter=ExporterOptions(
            kubernetes_labels=True, honor_labels=exporters.gpu.honor_labels
        ),
        neuron_exporter=ExporterOptions(
            kubernetes_labels=exporters.neuron.k8s_info,
            honor_labels=exporters.neuron.honor_labels,
        ),
    )


def operator_job(port: int) -> dict[str, Any]:
    """The scrape job of the operator's /metrics (job ``acceltrial``), as the chart's
    ServiceMonitor (monitoring.serviceMonitor) makes one: its dashboard reads these."""
    return {"job_name": "acceltrial", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}


def _start_operator(
    run: Run, sandbox: LocalCluster, settings: dict[str, str], metrics_port: int
) -> subprocess.Popen[bytes]:
    """The operator as the chart runs it, limited to the scenario's namespace."""
    env = (
        os.environ
        | settings
        | {
            "KUBECONFIG": str(sandbox.kubeconfig),
            "ACCELTRIAL_METRICS_PORT": str(metrics_port),
            "ACCELTRIAL_TICK_SECONDS": str(TICK_SECONDS),
            "ACCELTRIAL_LOG_LEVEL": "INFO",
            # Pricing comes from the bundled catalog; nothing should reach out to AWS.
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    if sandbox.eks is not None:  # managed node groups live in the sandbox's moto EKS API
        env |= sandbox.eks.environment()
    command = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone"]
    with (run.folder / "operator.log").open("ab") as log:
        process = subprocess.Popen(
            [*command, f"--namespace={run.namespace}"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=run.folder,
        )
    run.pids["operator"] = process.pid
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _install_baseline(run: Run, client: Client) -> None:
    scenario = run.scenario
    for path, body in baseline_objects(
        run.trial, scenario.baseline, scenario.route, scenario.reference_grant
    ):
        client.create(path, body)
    name = run.trial["spec"]["baseline"]["deploymentRef"]["name"]
    run.say(
        f"installed the GPU baseline: Deployment {name} ({run.scenario.baseline.replicas} pods), "
        "its Service and HTTPRoute"
    )
    deadline = time.monotonic() + 30
    path = f"{DEPLOYMENTS.format(run.namespace)}/{name}"
    while time.monotonic() < deadline:
        deployment = client.get(path) or {}
        if (deployment.get("status") or {}).get(
            "availableReplicas"
        ) == run.scenario.baseline.replicas:
            run.say(f"baseline Available; it serves {run.scenario.fleet.rps:g} req/s in all")
            return
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"baseline Deployment {name} did not become Available")


def _with_prometheus(trial: Manifest, url: str) -> Manifest:
    spec = json.loads(json.dumps(trial["spec"]))
    spec["analysis"]["prometheus"] = {**spec["analysis"].get("prometheus", {}), "address": url}
    return {**trial, "spec": spec}


def _watch(
    run: Run, client: Client, fleet: Fleet, prometheus: PrometheusServer, speed: float
) -> Manifest:
    applied = time.monotonic()
    outage = run.scenario.prometheus.outage
    down_at = None if outage is None else seconds(outage.from_, speed)
    up_at = None if outage is None else seconds(outage.to, speed)
    timeout = seconds(run.scenario.timeout, speed)
    seen = _Seen()
    user = ScriptedUser(run.scenario.actions, speed)
    aborted = False
    last: Manifest = {}
    outage_origin: float | None = None if outage and outage.from_phase else applied
    while True:
        elapsed = time.monotonic() - applied
        # Seconds since the outage's origin; -1 while its phase has not been seen.
        since = -1.0 if outage_origin is None else time.monotonic() - outage_origin
        if down_at is not None and since >= down_at and prometheus.process is not None:
            prometheus.stop()
            run.say("Prometheus stopped (the scenario's outage): queries will fail")
            down_at = None
        if up_at is not None and down_at is None and since >= up_at and prometheus.process is None:
            prometheus.start()
            run.say("Prometheus is back")
            up_at = None
        body = client.get(run.trial_path)
        if body is None and user.deleted_trial:
            time.sleep(3)  # what the trial left behind now meets the garbage collector
            run.say("the trial is gone (its finalizer ran, garbage collection followed)")
            return last
        last = body = body or {}
        status = body.get("status") or {}
        if outage_origin is None and outage and status.get("phase") == outage.from_phase:
            outage_origin = time.monotonic()
        seen.report(run, status, fleet)
        ended = status.get("phase") in TERMINAL_PHASES
        if ended and run.report is None:
            run.report = _report(run, client)
        for action in user.due(status.get("phase"), elapsed):
            run.say(user.perform(action, client, run.trial))
        if ended and not user.deleted_trial and not user.waiting_for_time:
            return body
        if elapsed > timeout and not aborted:
            run.say(f"no decision within {timeout:g}s: aborting the trial")
            client.merge(run.trial_path, action_annotation("abort"))
            aborted = True
        if elapsed > timeout + 60:
            return body
        time.sleep(POLL_SECONDS)


@dataclass
class _Seen:
    """What was already printed, so each change is told once, in the order it happened: the
    measurement that decided a step before the phase it led to."""

    phase: str | None = None
    step: int | None = None
    measurement: str | None = None
    done: float = 0.0
    """The furthest progress shown: the bar never goes backwards."""
    detailed: set[tuple[str, int]] = field(default_factory=set)
    quality: str | None = None

    def report(self, run: Run, status: Manifest, fleet: Fleet) -> None:
        steps = len(run.trial["spec"]["steps"])
        phase, step = status.get("phase"), status.get("step")
        at = status.get("lastMeasurementAt")
        if at and at != self.measurement:
            self.measurement = at
            self._measurement(run, status, fleet, steps)
        quality = status.get("quality") or {}
        if quality.get("checkedAt") and quality["checkedAt"] != self.quality:
            self.quality = quality["checkedAt"]
            run.say(f"quality check at step {quality.get('step')}: {quality.get('verdict')}: "
                    f"{quality.get('reason')}")  # fmt: skip
        if phase != self.phase:
            self.phase = phase
            said = status.get("message") or progress.PHASE_STORY.get(str(phase), "")
            run.say(f"{phase}: {said}")
        if phase in ("Progressing", "Paused") and step and step != self.step:
            self.step = step
            weight = status.get("canaryWeight", 0)
            share = share_text(weight, status.get("requestedWeight"))
            mirror = run.trial["spec"]["steps"][step - 1].get("mirror") if step <= steps else None
            run.say(
                f"step {step}/{steps}: {mirror}% of requests mirrored to the candidate, its "
                "answers discarded (no user served by it)"
                if mirror and not weight
                else f"step {step}/{steps}: {share} of requests go to the candidate"
            )

    def _measurement(self, run: Run, status: Manifest, fleet: Fleet, steps: int) -> None:
        results = progress.latest_results(status)
        # The tick that measured may also have moved on (next step, rollback): the results
        # carry the step and weight they were measured at.
        measured_step = results[0]["step"] if results else int(status.get("step") or 0)
        weight = results[0]["weight"] if results else status.get("canaryWeight", 0)
        asked = results[0].get("requestedWeight") if results else status.get("requestedWeight")
        counts = status.get("counts") or {}
        same_step = bool(counts.get("lastOutcome"))
        outcome = counts.get("lastOutcome") if same_step else _worst(results)
        self.done = max(self.done, progress.progress(status, steps))
        tally = (
            f" (this step: {counts.get('passes', 0)} passed, {counts.get('failures', 0)} "
            f"failed, {counts.get('inconclusive', 0)} inconclusive, {counts.get('thin', 0)} thin)"
            if same_step
            else ""
        )
        # Weight 0 during a step is a mirror step: the candidate is judged on copies.
        where = (
            "on mirrored copies"
            if weight == 0 and measured_step
            else f"at {share_text(weight, asked)}"
        )
        run.say(f"{progress.bar(self.done)} measurement {where}: {outcome}{tally}")
        # Every criterion's numbers for the first measurement of a step and for any that did
        # not pass; a passing repeat is one line.
        key = (str(weight), int(measured_step))
        if outcome == "Pass" and key in self.detailed:
            return
        self.detailed.add(key)
        metrics = _metrics_by_criterion(run.trial)
        for result in results:
            line = progress.criterion_line(result, metrics.get(result["criterion"]))
            print(f"{'':10}{line}", file=run.out)
        print(f"{'':10}{progress.traffic_line(fleet.snapshot())}", file=run.out, flush=True)


def _worst(results: list[Manifest]) -> str:
    verdicts = {"Thin" if r.get("thin") else r.get("verdict") for r in results}
    return next((v for v in ("Fail", "Inconclusive", "Thin", "Pass") if v in verdicts), "?")


def _metrics_by_criterion(trial: Manifest) -> dict[str, str | None]:
    return {c["name"]: c.get("metric") for c in trial["spec"]["analysis"]["criteria"]}


def _conclude(
    run: Run, client: Client, body: Manifest, options: DemoOptions, candidate_users: float
) -> bool:
    status = body.get("status") or {}
    decision = status.get("decision") or {}
    out = run.out
    print(file=out)
    print(
        f"Decision: {str(decision.get('verdict', 'none')).upper()} -> {status.get('phase')}",
        file=out,
    )
    print(f"  why: {decision.get('reason') or status.get('message')}", file=out)
    spec = run.trial["spec"]
    instances = [spec["baseline"]["instanceType"], spec["candidate"]["instanceType"]]
    deciding = progress.deciding_criteria(status, _metrics_by_criterion(run.trial))
    economics = EconomicsSpec.model_validate(spec.get("economics") or {})
    for line in progress.economics_lines(
        status.get("economics"), instances, decision, deciding,
        target=economics.target_utilization, migration=migration_total(economics.migration_cost),
    ):  # fmt: skip
        print(line, file=out)
    report = _report(run, client) or run.report
    for line in _report_lines(run, report):
        print(line, file=out)
    if report is not None and options.report_dir is not None:
        _save_report(report, options.report_dir)
        print(f"Report written to {options.report_dir}/report.{{json,md,html}}", file=out)
    routing_ok, routing_said = _routing_check(run, client, status)
    print(f"Routing: {routing_said}", file=out)
    serving, serving_said = served_by(client, run.trial)
    print(f"Serving: {serving_said}", file=out)
    print(f"Users' requests the candidate answered: {candidate_users:.0f}", file=out)
    matched, said = _matches(run.scenario, status, serving, candidate_users)
    print(f"Expected {_expected(run.scenario)}: {said}", file=out, flush=True)
    if options.result_file is not None:
        options.result_file.write_text(
            json.dumps(
                {
                    "status": status,
                    "route": _route(run, client),
                    "deployments": _deployments(run, client),
                    **_pools(run, client),
                    "report": None
                    if report is None
                    else report.model_dump(mode="json", by_alias=True, exclude_none=True),
                    "matched": matched and routing_ok,
                    "candidateUserRequests": round(candidate_users, 3),
                    "fleetSeed": run.fleet_seed,
                    "pids": run.pids,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return matched and routing_ok


def _report(run: Run, client: Client) -> Report | None:
    name = report_name(run.trial["metadata"]["name"])
    return read_report(client.get(f"/api/v1/namespaces/{run.namespace}/configmaps/{name}"))


def _planned(mirrors: list[int], weights: list[int]) -> str:
    shadow = f"mirror {mirrors} then " if mirrors else ""
    return f"{shadow}{weights}"


def _report_lines(run: Run, report: Report | None) -> list[str]:
    name = report_name(run.trial["metadata"]["name"])
    if report is None:
        return [f"Report: the operator wrote no ConfigMap {name}"]
    test, work = report.controlled_test, report.workload
    compatibility = report.compatibility
    return [
        f"Report (ConfigMap {run.namespace}/{name}, `acceltrial report {report.trial}` on a "
        "cluster):",
        "  workload: not measured"
        if work.requests_per_second is None
        else f"  workload: {work.requests_per_second:.1f} req/s, "
        f"{work.tokens_per_second or 0:.0f} tokens/s, "
        f"{work.concurrency or 0:.1f} requests in flight",
        f"  candidate deployed and served traffic: {'yes' if compatibility.deployed else 'no'}; "
        f"healthy: {health(report)}",
        f"  controlled test: {test.measurements} measurements at weights {test.weights_reached} "
        f"of {_planned(test.planned_mirrors, test.planned_weights)}; criteria hash "
        f"{short_hash(test.criteria_hash)}; "
        f"rollback ready: "
        f"{'yes' if test.rollback_ready else 'no'}",
        *(["  GitOps: commit " + ", ".join(report.gitops)] if report.gitops else []),
    ]


def _save_report(report: Report, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = report.model_dump(mode="json", by_alias=True, exclude_none=True)
    (folder / "report.json").write_text(json.dumps(body, indent=2), encoding="utf-8")
    (folder / "report.md").write_text(markdown(report), encoding="utf-8")
    (folder / "report.html").write_text(html_page(report), encoding="utf-8")


def _pools(run: Run, client: Client) -> dict[str, list[str]]:
    """The InferencePools left in the namespace (``inferencePools``), for a route to pools."""
    if not uses_pools(run.scenario.route):
        return {}
    listed = client.get(POOLS.format(run.namespace)) or {}
    return {"inferencePools": sorted(p["metadata"]["name"] for p in listed.get("items", []))}


def _deployments(run: Run, client: Client) -> list[str]:
    """The Deployments left in the trial's namespace at the end."""
    listed = client.get(f"/apis/apps/v1/namespaces/{run.namespace}/deployments") or {}
    return sorted(d["metadata"]["name"] for d in listed.get("items") or [])


def _route(run: Run, client: Client) -> Manifest | None:
    routing = run.trial["spec"].get("traffic", {}).get("gatewayapi")
    if not routing:
        return None
    ref = routing["httpRouteRef"]
    return client.get(f"{ROUTES.format(ref.get('namespace') or run.namespace)}/{ref['name']}")


def _routing_check(run: Run, client: Client, status: Manifest) -> tuple[bool, str]:
    """After a rollback the route must be as found; after a promotion, all on the candidate."""
    route = _route(run, client)
    original = (status.get("original") or {}).get("httpRoute")
    if route is None or original is None:
        if route is not None:
            return True, "the trial recorded no routing: it never changed the HTTPRoute"
        return True, "no HTTPRoute to check (replicas router)"
    rules = route["spec"]["rules"]
    if status.get("phase") == "Promoted":
        split = [rules[i] for i in original.get("splitRules") or [original.get("ruleIndex", 0)]]
        on = {r["name"] for rule in split for r in rule.get("backendRefs") or []
              if r.get("weight", 1) > 0}  # fmt: skip
        ok = len(on) == 1 and next(iter(on)).endswith("-candidate")
        return ok, f"all traffic of the split rules on {', '.join(sorted(on)) or '?'}"
    if original.get("rules") is not None:
        ok = rules == original["rules"]
    else:
        ok = rules[original.get("ruleIndex", 0)].get("backendRefs") == original["backendRefs"]
    said = "restored exactly as status.original" if ok else f"differs from status.original: {rules}"
    return ok, said


def _matches(
    scenario: Scenario, status: Manifest, serving: str | None, candidate_users: float = 0.0
) -> tuple[bool, str]:
    expect = scenario.expect
    problems = []
    most = expect.max_candidate_user_requests
    if most is not None and candidate_users > most:
        problems.append(f"the candidate answered {candidate_users:.0f} users' requests")
    if expect.served_by is not None and serving != expect.served_by:
        problems.append(f"served by {serving or 'nothing'}, not the {expect.served_by}")
    if status.get("phase") != expect.phase:
        problems.append(f"ended {status.get('phase')}")
    if expect.step is not None and status.get("step") != expect.step:
        problems.append(f"decided at step {status.get('step')}")
    reason = (status.get("decision") or {}).get("reason") or status.get("message") or ""
    if expect.reason and expect.reason not in reason:
        problems.append(f"the reason was {reason!r}")
    code = (status.get("decision") or {}).get("reasonCode")
    if expect.reason_code is not None and code != expect.reason_code:
        problems.append(f"the reason code was {code or 'none'}")
    return (not problems, "matched" if not problems else "NOT matched: " + "; ".join(problems))
