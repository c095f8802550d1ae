"""``acceltrial check``: does every criterion of a trial file get a value from this Prometheus,
and, with ``spec.quality``, does each variant's model server answer as the quality check needs?

Runs each criterion's query (each cost input for cost criteria) for the baseline and the
candidate and prints the value, or why there is none: what preflight checks for the baseline
before any traffic moves, for both variants and before the trial is applied. Pods are found as
the operator finds them (the current kubeconfig context), or given as regexes offline. With
``spec.quality``, one prompt goes to each variant's Service (cli/model_check.py). Exits 0 when
every query answers and every model server asked can be checked, 1 when one cannot, 2 on a
usage error (a bad file, flag or URL, an unreachable Prometheus).
"""

from __future__ import annotations

import argparse
import json
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import TrialSpec
from acceltrial.api.validation import is_trial_candidate, load_documents, validate_trial
from acceltrial.cli.model_check import (
    ModelPlan,
    Said,
    check_models,
    cluster_plan,
    model_url,
    offline_plan,
)
from acceltrial.cli.trials import CliError, Target, connect
from acceltrial.engine.analysis import MeasurementWindow
from acceltrial.engine.candidate import TrialRef, candidate_labels, candidate_name
from acceltrial.engine.metric_check import Answer, answers, plan_check
from acceltrial.engine.metrics import Variant, VariantTarget
from acceltrial.engine.targets import baseline_pods, variant_target
from acceltrial.kube.calls import KubeError
from acceltrial.providers.metrics.factory import (
    MissingSecret,
    ResolvedSecrets,
    client_for,
    reader_for,
)
from acceltrial.providers.metrics.port import MetricsError, MetricsSource, RequestError, collect

USAGE_ERROR = 2


class UsageError(Exception):
    """The check cannot run as asked; the message says what to change."""


@dataclass(frozen=True)
class CheckOptions:
    file: Path
    prometheus: str | None = None
    namespace: str | None = None
    baseline_pods: str | None = None
    candidate_pods: str | None = None
    model_url: str | None = None
    """The template model servers are reached through (default: ACCELTRIAL_MODEL_URL, else the
    cluster's DNS)."""


def add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser(
        "check",
        help="run a trial file's queries against Prometheus: is every criterion measurable?",
        description="Run every criterion's query of TRIAL.yaml for the baseline and the "
        "candidate and print each value, or why there is none. Without --baseline-pods / "
        "--candidate-pods the pods are found in the current kubeconfig context as the operator "
        "finds them. Exits 0 when every query answers, 1 when one does not, 2 on a usage error.",
    )
    check.add_argument("file", type=Path, metavar="TRIAL.yaml", help="the AcceleratorTrial")
    check.add_argument(
        "--prometheus", metavar="URL",
        help="Prometheus to ask (default: the trial's analysis.prometheus.address)",
    )  # fmt: skip
    check.add_argument(
        "-n", "--namespace", metavar="NS",
        help="namespace of the model's pods (default: the trial's, else the context's)",
    )  # fmt: skip
    check.add_argument("--baseline-pods", metavar="REGEX", help="the baseline's pod names, offline")
    check.add_argument(
        "--candidate-pods", metavar="REGEX", help="the candidate's pod names, offline"
    )
    check.add_argument(
        "--model-url", metavar="TEMPLATE",
        help="with spec.quality, where each variant's Service answers: a URL template of "
        "{service}, {namespace} and {port} (default: ACCELTRIAL_MODEL_URL, else "
        "http://{service}.{namespace}.svc:{port}); offline {port} is 80",
    )  # fmt: skip


def run_check(options: CheckOptions, out: TextIO, err: TextIO) -> int:
    try:
        trial, spec = _load(options.file)
        address = _prometheus_address(options.prometheus or spec.analysis.prometheus.address)
        template = _model_url(options.model_url) if spec.quality is not None else None
        cluster = None if _offline(options) else _connect(options, trial)
        targets = _targets(options, trial, spec, cluster)
        prometheus = client_for(
            spec.analysis.prometheus.model_copy(update={"address": address}), ResolvedSecrets()
        )
        _reachable(prometheus, address)
        found = _run(spec, targets, reader_for(spec.analysis, prometheus))
        plan = _model_plan(options, trial, spec, cluster, template) if template else None
    except (UsageError, CliError, MissingSecret) as error:
        print(f"acceltrial check: {error}", file=err)
        return USAGE_ERROR
    _print(found, targets, out)
    answered = plan is None or _print_models(plan, check_models(plan, _model(spec)), out)
    return 0 if found and all(a.usable for a in found) and answered else 1


def _load(path: Path) -> tuple[dict[str, Any], TrialSpec]:
    try:
        documents = [d.body for d in load_documents(path.read_text(encoding="utf-8"))]
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise UsageError(f"{path} is not valid YAML: {error}") from None
    trials = [d for d in documents if is_trial_candidate(d)]
    if len(trials) != 1:
        raise UsageError(f"{path} must hold exactly one AcceleratorTrial (it holds {len(trials)})")
    problems = validate_trial(trials[0])
    if problems:
        raise UsageError(f"{path} is not a valid trial: " + "; ".join(map(str, problems)))
    try:
        return trials[0], TrialSpec.model_validate(trials[0]["spec"])
    except ValidationError as error:  # validate_trial catches these first
        raise UsageError(f"{path}: {error}") from None


def _prometheus_address(url: str) -> str:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(
            f"--prometheus {url!r} is not an http(s) URL (e.g. http://127.0.0.1:9090, "
            "after kubectl port-forward to your Prometheus)"
        )
    return url


def _model_url(flag: str | None) -> str:
    try:
        return model_url(flag)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _offline(options: CheckOptions) -> bool:
    return options.baseline_pods is not None or options.candidate_pods is not None


def _connect(options: CheckOptions, trial: dict[str, Any]) -> Target:
    return connect(options.namespace or (trial.get("metadata") or {}).get("namespace"))


def _offline_namespace(options: CheckOptions, meta: dict[str, Any]) -> str:
    namespace = options.namespace or meta.get("namespace")
    if not namespace:
        raise UsageError("offline, --namespace is needed (the trial file names none)")
    return str(namespace)


def _targets(
    options: CheckOptions, trial: dict[str, Any], spec: TrialSpec, cluster: Target | None
) -> dict[Variant, VariantTarget]:
    meta = trial.get("metadata") or {}
    if cluster is not None:
        return _cluster_targets(cluster, meta, spec)
    namespace = _offline_namespace(options, meta)
    found: dict[Variant, VariantTarget] = {}
    if options.baseline_pods is not None:
        found["baseline"] = VariantTarget(
            "baseline", namespace, spec.baseline.deployment_ref.name, (), "gpu",
            pods_regex=options.baseline_pods,
        )  # fmt: skip
    if options.candidate_pods is not None:
        found["candidate"] = VariantTarget(
            "candidate", namespace, f"{meta.get('name')}-candidate", (), "neuron",
            pods_regex=options.candidate_pods,
        )  # fmt: skip
    return found


def _cluster_targets(
    target: Target, meta: dict[str, Any], spec: TrialSpec
) -> dict[Variant, VariantTarget]:
    kube, namespace = target.kube, target.namespace
    trial = TrialRef(str(meta.get("name")), namespace, "")
    try:
        baseline = kube.deployment(namespace, spec.baseline.deployment_ref.name)
        if baseline is None:
            raise UsageError(
                f"baseline Deployment {namespace}/{spec.baseline.deployment_ref.name} not found"
            )
        selector = baseline.get("spec", {}).get("selector", {}).get("matchLabels") or {}
        nodes = kube.nodes()
        pods = baseline_pods(kube.pods(namespace, selector), trial.name)
        candidates = kube.pods(namespace, candidate_labels(trial))
    except KubeError as error:
        raise UsageError(f"cannot read the cluster: {error}") from None
    found = {
        "baseline": variant_target(
            "baseline", namespace, spec.baseline.deployment_ref.name, pods,
            nodes=nodes, accelerator="gpu",
        )
    }  # fmt: skip
    if candidates:
        found["candidate"] = variant_target(
            "candidate", namespace, candidate_name(trial), candidates,
            nodes=nodes, accelerator="neuron",
        )  # fmt: skip
    return found  # type: ignore[return-value]


def _reachable(prometheus: Any, address: str) -> None:
    try:
        prometheus.instant("vector(1)", datetime.now(UTC))
    except MetricsError as error:
        raise UsageError(f"Prometheus at {address} does not answer: {error}") from None


def _run(
    spec: TrialSpec, targets: dict[Variant, VariantTarget], source: MetricsSource
) -> list[Answer]:
    planned = plan_check(spec.analysis, tuple(targets))
    interval = timedelta(seconds=duration_seconds(spec.analysis.interval))
    now = datetime.now(UTC)
    window = MeasurementWindow(now - interval, now, max(1.0, interval.total_seconds() / 4))
    try:
        readings = collect(planned, source, targets, window).readings
    except RequestError as error:
        raise UsageError(f"a query cannot be rendered: {error}") from None
    return answers(planned, readings)


def _model_plan(
    options: CheckOptions,
    trial: dict[str, Any],
    spec: TrialSpec,
    cluster: Target | None,
    template: str,
) -> ModelPlan:
    meta = trial.get("metadata") or {}
    name = str(meta.get("name"))
    if cluster is None:
        ref = TrialRef(name, _offline_namespace(options, meta), "")
        return offline_plan(spec, ref, template, options.candidate_pods is not None)
    try:
        return cluster_plan(spec, TrialRef(name, cluster.namespace, ""), cluster.kube, template)
    except KubeError as error:
        raise UsageError(f"cannot read the cluster: {error}") from None


def _model(spec: TrialSpec) -> str | None:
    return spec.quality.model if spec.quality else None


def _print_models(plan: ModelPlan, said: list[Said], out: TextIO) -> bool:
    """Print the model servers' lines; whether the quality check can run on what they said (a
    candidate not deployed yet is no failure)."""
    prompt = plan.prompt
    asking = json.dumps(prompt.messages[-1][1] if prompt.chat else prompt.text, ensure_ascii=False)
    print(f"quality: asking {asking}, {plan.source}", file=out)
    for line in said:
        print(f"{line.mark:>2}  quality  {line.who:<9}  {line.said}", file=out)
    failed = {line.who for line in said if line.mark == "NO"}
    answering = sum(variant not in failed for variant in plan.urls)
    needs = f"{answering} of {len(plan.urls)} model servers asked answer as the check needs"
    print(f"quality: {needs}", file=out)
    return not failed


def _print(found: list[Answer], targets: dict[Variant, VariantTarget], out: TextIO) -> None:
    for variant in ("baseline", "candidate"):
        if variant not in targets:
            why = "no pods found" if variant == "candidate" else "not given"
            print(f"{variant}: not checked ({why}; give --{variant}-pods REGEX)", file=out)
    width = max((len(a.request.criterion) for a in found), default=9)
    for a in found:
        mark = "ok" if a.usable else "NO"
        said = a.said if a.usable else f"no usable value: {a.said}"
        name, variant = a.request.criterion, a.request.variant
        print(f"{mark:>2}  {name:<{width}}  {variant:<9}  {said}", file=out)
        if not a.usable:
            print(f"{'':4}{'':<{width}}  {'':<9}  query: {a.asked}", file=out)
    judged = sum(a.usable for a in found)
    print(f"{judged} of {len(found)} queries give a value to judge", file=out)
