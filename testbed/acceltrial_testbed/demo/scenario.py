"""Demo scenarios: a trial, the simulated fleet and its variants, and the outcome to expect.

A scenario file is YAML (format: docs/demo.md). Mistakes are reported as
:class:`ScenarioError` with one line per problem naming the field, and the trial it holds is
checked with the same rules as ``acceltrial validate``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator
from pydantic.functional_validators import field_validator

from acceltrial.api.actions import USER_ACTIONS
from acceltrial.api.base import ApiModel
from acceltrial.api.durations import Duration, duration_seconds
from acceltrial.api.reasons import ReasonCode
from acceltrial.api.status import Phase
from acceltrial.api.validation import validate_trial
from acceltrial.engine.candidate import merge_patch
from acceltrial.engine.quality.prompts import PromptsError, parse_prompts
from acceltrial_testbed.demo.route import RouteSpec, route_problems, with_route_namespace

SCENARIOS_DIR = Path("examples") / "scenarios"
TRIAL_FILES = frozenset({"trial", "training-trial"})
"""The trials the shipped scenarios patch: in the folder, not scenarios themselves."""
Manifest = dict[str, Any]


class ScenarioError(Exception):
    """The scenario cannot be run; the message names each field at fault."""


class TrialSource(ApiModel):
    """The AcceleratorTrial to run: a file (relative to the scenario) or inline, then a patch."""

    file: str | None = None
    """A YAML file holding the AcceleratorTrial, relative to the scenario file."""
    manifest: Manifest | None = None
    """The AcceleratorTrial inline."""
    patch: Manifest = Field(default_factory=dict)
    """A JSON merge patch applied to the trial (null removes a key)."""

    @model_validator(mode="after")
    def _one_source(self) -> TrialSource:
        if (self.file is None) == (self.manifest is None):
            raise ValueError("set exactly one of trial.file and trial.manifest")
        return self


class Tokens(ApiModel):
    prompt: int = Field(default=512, ge=0)
    """Prompt (prefill) tokens per request."""
    generated: int = Field(default=200, ge=1)
    """Generated tokens per request."""


class Gateway(ApiModel):
    honors_weights: bool = True
    """false: a gateway that ignores backendRefs weights (everything to the first backend)."""


VLLM_VERSION = r"^v?\d+\.\d+(\.\d+)?$"
SEED_MAX = 2**63 - 1
"""The largest fleet.seed (a non-negative 64-bit integer)."""


class GpuExporter(ApiModel):
    """dcgm-exporter, one pod per GPU node, scraped through a ServiceMonitor."""

    honor_labels: bool = False
    """The ServiceMonitor's honorLabels (false in dcgm-exporter's chart): false renames the
    GPU's pod/namespace/container labels to exported_pod/exported_namespace/exported_container."""


class NeuronExporter(ApiModel):
    """neuron-monitor, one pod per Neuron node, scraped through a ServiceMonitor."""

    k8s_info: bool = Field(default=False, alias="k8sInfo")
    """--enable-k8s-info (off in the sample DaemonSet): series also carry pod, namespace,
    container; otherwise only instance-level labels (instance_id, instance_type, ...)."""
    honor_labels: bool = False
    """The ServiceMonitor's honorLabels; matters only with k8sInfo."""


class Exporters(ApiModel):
    gpu: GpuExporter = GpuExporter()
    neuron: NeuronExporter = NeuronExporter()


class FleetTraffic(ApiModel):
    rps: float = Field(gt=0)
    """Requests per second offered in all, split by what the cluster holds."""
    tokens: Tokens = Tokens()
    gateway: Gateway = Gateway()
    server: Literal["vllm", "tgi"] = "vllm"
    """The model server both variants run, and so the metrics they export."""
    vllm_version: str = Field(default="0.11.0", pattern=VLLM_VERSION)
    """The vLLM release (server: vllm): from 0.11 vllm:inter_token_latency_seconds, before 0.12
    vllm:time_per_output_token_seconds, from 0.8.3 http_requests_total."""
    exporters: Exporters = Exporters()
    seed: int | None = Field(default=None, ge=0, le=SEED_MAX, strict=True)
    """Seeds the fleet's random draws (arrivals, latencies, tokens, outcomes): the same seed
    draws the same requests for the same history of traffic. Unset: a random seed, which the
    demo prints so the run can be repeated with it."""


class Latency(ApiModel):
    p50: float = Field(gt=0)
    """Median end-to-end latency at low load, in seconds."""
    p99: float = Field(gt=0)
    """99th percentile at low load, in seconds; above p50."""

    @model_validator(mode="after")
    def _ordered(self) -> Latency:
        if self.p99 <= self.p50:
            raise ValueError("p99 must be above p50")
        return self


class Utilization(ApiModel):
    idle: float = Field(default=0.0, ge=0, le=1)
    """Accelerator utilization with no load (0..1)."""
    at_capacity: float = Field(default=0.95, gt=0, le=1)
    """Utilization when the replica serves capacityRps (0..1)."""


class Outputs(ApiModel):
    """How this variant's answers deviate from a healthy compile of the same model (the fleet's
    tiny model: float32 for the baseline, bfloat16 for the candidate)."""

    token_error_rate: float = Field(default=0.0, ge=0, le=1)
    """The share of generated positions where its top-1 token is made to differ from the
    reference's, beyond any rounding drift."""
    logprob_noise: float = Field(default=0.0, ge=0, le=10)
    """Standard deviation of the noise on the log-probabilities it reports (nats)."""
    prompt_logprobs: bool = True
    """Whether it can score a given continuation (``echo`` with ``logprobs``); without, the
    quality check re-prompts at each divergence."""


class VariantProfile(ApiModel):
    latency: Latency
    capacity_rps: float = Field(gt=0)
    """Requests per second one replica serves at most; latency grows as load nears it."""
    error_ratio: float = Field(default=0.0, ge=0, le=1)
    """Share of requests answered with a 5xx."""
    utilization: Utilization = Utilization()
    vllm_version: str | None = Field(default=None, pattern=VLLM_VERSION)
    """This variant's vLLM release, when it differs from fleet.vllmVersion (a Neuron build
    follows its own release line)."""
    outputs: Outputs = Outputs()
    """How its answers to the quality check's prompts deviate from a healthy compile."""


class Variants(ApiModel):
    baseline: VariantProfile
    candidate: VariantProfile


class When(ApiModel):
    weight: int | None = Field(default=None, ge=1, le=100)
    """Active while the variant gets at least this percentage of the requests."""
    after: Duration | None = None
    """Active from this long after the variant first served a request."""

    @model_validator(mode="after")
    def _one(self) -> When:
        if (self.weight is None) == (self.after is None):
            raise ValueError("set exactly one of when.weight and when.after")
        return self


class Regression(ApiModel):
    variant: Literal["baseline", "candidate"]
    when: When
    latency_factor: float = Field(default=1.0, gt=0)
    """Latency is multiplied by this while the regression is active."""
    error_ratio: float | None = Field(default=None, ge=0, le=1)
    """Share of 5xx responses while the regression is active."""


class Outage(ApiModel):
    from_: Duration = Field(alias="from")
    """How long after the trial is applied (or after fromPhase) Prometheus stops."""
    to: Duration
    """When it is back, counted from the same moment."""
    from_phase: Phase | None = None
    """Count from when the trial is first seen in this phase (e.g. Progressing: after preflight,
    which checks that every query answers) instead of from when it is applied."""


class PrometheusOptions(ApiModel):
    outage: Outage | None = None


class Baseline(ApiModel):
    replicas: int = Field(default=2, ge=1)
    """Pods of the GPU Deployment the demo installs."""
    image: str = "vllm/vllm-openai:v0.11.0"


class ActionWhen(ApiModel):
    phase: Phase | None = None
    """Fire when the trial is first seen in this phase."""
    after: Duration | None = None
    """Fire this long after the trial was applied."""

    @model_validator(mode="after")
    def _one(self) -> ActionWhen:
        if (self.phase is None) == (self.after is None):
            raise ValueError("set exactly one of when.phase and when.after")
        return self


UserDoes = Literal[
    "pause",
    "resume",
    "abort",
    "approve",
    "promote",
    "delete-trial",
    "scale-baseline",
    "set-route-weights",
]
TRIAL_ACTIONS = USER_ACTIONS
_CALL = re.compile(r"^\s*([a-z-]+)\s*\((.*)\)\s*$")


class ScenarioAction(ApiModel):
    """What a person, an autoscaler or a GitOps tool does during the scenario."""

    when: ActionWhen
    do: UserDoes
    """pause, resume, abort, approve, promote (the acceltrial.dev/action annotation, as the CLI
    sets it), delete-trial, scale-baseline (needs replicas) or set-route-weights (needs
    weights). The short forms scale-baseline(3) and set-route-weights(name=100, other=0) work
    too."""
    replicas: int | None = Field(default=None, ge=0)
    """scale-baseline: the baseline Deployment's new replica count."""
    weights: dict[str, int] | None = None
    """set-route-weights: the weight of each backendRef of the trial's HTTPRoute rule, by
    Service name (as Argo CD or a person would write them back)."""

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("do"), str):
            return data
        call = _CALL.match(data["do"])
        if call is None:
            return data
        name, arguments = call.group(1), call.group(2).strip()
        expanded = {**data, "do": name}
        if name == "scale-baseline" and arguments:
            expanded["replicas"] = int(arguments) if arguments.isdigit() else arguments
        elif name == "set-route-weights" and arguments:
            pairs = [part.split("=", 1) for part in arguments.split(",")]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError("set-route-weights(...) takes name=weight pairs, comma-separated")
            expanded["weights"] = {k.strip(): v.strip() for k, v in pairs}
        return expanded

    @field_validator("weights")
    @classmethod
    def _weights_in_range(cls, weights: dict[str, int] | None) -> dict[str, int] | None:
        for name, weight in (weights or {}).items():
            if not 0 <= weight <= 1_000_000:
                raise ValueError(f"the weight of {name} must be 0..1000000 (got {weight})")
        return weights

    @model_validator(mode="after")
    def _arguments(self) -> ScenarioAction:
        if self.do == "scale-baseline" and self.replicas is None:
            raise ValueError("scale-baseline needs replicas (e.g. do: scale-baseline(2))")
        if self.do == "set-route-weights" and not self.weights:
            raise ValueError(
                "set-route-weights needs weights by Service name "
                "(e.g. weights: {llama3-8b-gpu: 100, llama3-8b-inf2-candidate: 0})"
            )
        return self


class Expect(ApiModel):
    phase: Phase
    """The phase the trial must end in (the last phase seen, if the scenario deletes it)."""
    served_by: Literal["candidate", "baseline"] | None = None
    """Which variant receives all traffic when the scenario ends, checked from the route (or
    the baseline Service) and the Ready pods behind it."""
    step: int | None = Field(default=None, ge=0)
    """The step at which it is decided (status.step at the end)."""
    reason: str | None = None
    """Text the decision's reason must contain."""
    reason_code: ReasonCode | None = None
    """The decision's status.decision.reasonCode (CriterionFailed, Inconclusive, ...)."""
    max_candidate_user_requests: float | None = Field(default=None, ge=0)
    """At most this many users' requests answered by the candidate over the whole run, as the
    fleet counts them (mirrored copies are not users' requests): 0 for a shadow step that
    rolls a broken build back before any user sees it."""


class Scenario(ApiModel):
    """One demo run."""

    description: str
    trial: TrialSource
    baseline: Baseline = Baseline()
    fleet: FleetTraffic
    variants: Variants
    regressions: list[Regression] = Field(default_factory=list)
    actions: list[ScenarioAction] = Field(default_factory=list)
    """What users, autoscalers and GitOps do while the trial runs (and after it ends)."""
    topology: str | None = None
    """A topology file for the local cluster (relative to the scenario); the default fleet
    otherwise (testbed/acceltrial_testbed/sandbox/default-topology.yaml shows the format)."""
    prometheus: PrometheusOptions = PrometheusOptions()
    route: RouteSpec | None = None
    """The HTTPRoute as the trial finds it: namespace and rules (docs/demo.md); by default one
    rule with one backendRef to the baseline, in the trial's namespace."""
    reference_grant: bool | None = None
    """For a route in another namespace: install the ReferenceGrant letting it reach the trial's
    Services (default true); false leaves it out, and preflight stops with the one to create."""
    prompts: list[str | dict[str, Any]] | None = Field(default=None, min_length=1)
    """The quality check's prompt set: strings (completions prompts) or objects as in its JSON
    Lines (``prompt`` or ``messages``, optional ``expected``); stored as the ConfigMap key the
    trial's ``spec.quality.prompts.configMapRef`` names."""
    expect: Expect
    timeout: Duration = "240s"
    """How long the demo waits for the outcome before it aborts the trial."""


def resolve_path(name: str) -> Path:
    """A scenario by file path, or by name among the shipped ones (in ``examples/scenarios``
    of the working directory, else of the source checkout this package runs from)."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    for folder in _scenario_folders():
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    return SCENARIOS_DIR / f"{name}.yaml"


def _scenario_folders() -> tuple[Path, Path]:
    return SCENARIOS_DIR, Path(__file__).resolve().parents[3] / SCENARIOS_DIR


def shipped_scenarios() -> list[str]:
    """Names of the scenarios in ``examples/scenarios`` (every YAML file but the trials), of the
    working directory or else of the source checkout this package runs from."""
    folder = next((f for f in _scenario_folders() if f.is_dir()), SCENARIOS_DIR)
    return sorted(p.stem for p in folder.glob("*.yaml") if p.stem not in TRIAL_FILES)


def load_scenario(path: Path) -> tuple[Scenario, Manifest]:
    """The scenario and its resolved, validated trial; ScenarioError on any mistake."""
    raw = _read_yaml(path, "scenario")
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a YAML mapping (description, trial, ...)")
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as error:
        lines = [f"{path}: {_where(e['loc'])}: {e['msg']}" for e in error.errors()]
        raise ScenarioError("\n".join(lines)) from None
    trial = _resolve_trial(scenario.trial, path)
    problems = validate_trial(trial) + _prompts_problems(scenario, trial)
    if problems:
        raise ScenarioError("\n".join(f"{path}: trial: {p}" for p in problems))
    if scenario.route is not None:
        trial = with_route_namespace(trial, scenario.route)
        found = route_problems(scenario.route, trial, scenario.reference_grant)
        if found:
            raise ScenarioError("\n".join(f"{path}: {p}" for p in found))
    return scenario, trial


def prompts_jsonl(prompts: list[str | dict[str, Any]]) -> str:
    """The scenario's ``prompts`` as the JSON Lines the trial's ConfigMap holds."""
    lines = [json.dumps({"prompt": p} if isinstance(p, str) else p) for p in prompts]
    return "\n".join(lines) + "\n"


def _prompts_problems(scenario: Scenario, trial: Manifest) -> list[str]:
    quality = (trial.get("spec") or {}).get("quality")
    if scenario.prompts is None:
        return []
    if quality is None:
        return ["prompts: the trial has no spec.quality to use them; add it or remove prompts"]
    try:
        parse_prompts(prompts_jsonl(scenario.prompts))
    except PromptsError as error:
        return [f"prompts: {error}"]
    return []


def _resolve_trial(source: TrialSource, scenario_path: Path) -> Manifest:
    if source.file is not None:
        trial_path = scenario_path.parent / source.file
        manifest = _read_yaml(trial_path, "trial.file")
        if not isinstance(manifest, dict):
            raise ScenarioError(f"{scenario_path}: trial.file: {trial_path} holds no mapping")
    else:
        manifest = copy.deepcopy(source.manifest or {})
    patched: Manifest = merge_patch(manifest, source.patch)
    return patched


def _read_yaml(path: Path, field: str) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ScenarioError(f"{field}: cannot read {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from None


def _where(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if not str(p).startswith("function-after")]
    return ".".join(parts) or "(top level)"


def seconds(duration: str, speed: float) -> float:
    """A scenario duration at ``speed`` (2 runs twice as fast)."""
    return duration_seconds(duration) / speed
