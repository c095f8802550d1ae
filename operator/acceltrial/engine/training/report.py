"""A training trial's report from its spec and status (api/training/report.py). Pure."""

from __future__ import annotations

from acceltrial.api.training import RunEconomicsStatus, RunStatus, TrainingTrialSpec
from acceltrial.api.training.report import (
    ChecklistAnswer,
    Payback,
    TrainingReport,
    TrainingVariantReport,
)
from acceltrial.api.training.status import TrainingTrialStatus
from acceltrial.engine.economics import migration_total


def training_report(
    name: str, namespace: str, spec: TrainingTrialSpec, status: TrainingTrialStatus
) -> TrainingReport:
    runs = status.runs
    economics = status.economics
    baseline = _variant(spec.baseline.instance_type, spec.baseline.nodes,
                        runs.baseline if runs else None,
                        economics.baseline if economics else None)  # fmt: skip
    candidate = _variant(spec.candidate.instance_type, spec.candidate.nodes,
                         runs.candidate if runs else None,
                         economics.candidate if economics else None)  # fmt: skip
    decision = status.decision
    report = TrainingReport(
        trial=name,
        namespace=namespace,
        phase=status.phase,
        verdict=decision.verdict if decision else None,
        reason_code=decision.reason_code if decision else None,
        reason=decision.reason if decision else status.message,
        decided_at=decision.decided_at if decision else None,
        full_run=_full_run(spec),
        warmup_steps=spec.run.warmup_steps,
        baseline=baseline,
        candidate=candidate,
        loss_parity=status.loss_parity,
        criteria=list(decision.criteria or []) if decision else [],
        payback=_payback(spec, baseline, candidate),
    )
    return report.model_copy(update={"checklist": checklist(report)})


def _variant(
    instance: str, nodes: int, run: RunStatus | None, money: RunEconomicsStatus | None
) -> TrainingVariantReport:
    run = run or RunStatus()
    exported = run.prometheus
    return TrainingVariantReport(
        instance_type=instance,
        nodes=nodes,
        price_per_node_hour=money.price_per_node_hour if money else None,
        price_source=money.price_source if money else None,
        steps=run.steps,
        startup_seconds=run.startup_seconds,
        tokens_per_second=run.tokens_per_second,
        samples_per_second=run.samples_per_second,
        seconds_per_step=run.seconds_per_step,
        final_loss=run.final_loss,
        precompile_seconds=run.precompile_seconds,
        cost_per_hour=money.cost_per_hour if money else None,
        hours_per_run=money.hours_per_run if money else None,
        cost_per_run=money.cost_per_run if money else None,
        tokens_per_dollar=money.tokens_per_dollar if money else None,
        throughput_source=run.throughput_source,
        exported_tokens_per_second=exported.tokens_per_second if exported else None,
        accelerator_utilization=exported.accelerator_utilization if exported else None,
        prometheus_note=exported.note if exported else None,
        loss_curve=list(run.loss_curve or []),
        log_lines=list(run.log_lines or []),
    )


def _full_run(spec: TrainingTrialSpec) -> str:
    if spec.full_run.tokens is not None:
        return f"{spec.full_run.tokens:,.4g} tokens"
    return f"{spec.full_run.steps:,} steps"


def _payback(
    spec: TrainingTrialSpec, baseline: TrainingVariantReport, candidate: TrainingVariantReport
) -> Payback | None:
    if baseline.cost_per_run is None or candidate.cost_per_run is None:
        return None
    saving = baseline.cost_per_run - candidate.cost_per_run
    runs = spec.economics.runs_per_month
    migration = migration_total(spec.economics.migration_cost) or 0.0
    monthly = saving * runs
    months = migration / monthly if monthly > 0 else None
    return Payback(saving_per_run=saving, runs_per_month=runs, monthly_saving=monthly,
                   migration_cost=migration, months=months)  # fmt: skip


def checklist(report: TrainingReport) -> list[ChecklistAnswer]:
    """The evaluation's questions for a training workload, answered from what was measured."""
    b, c = report.baseline, report.candidate
    answers = [
        ("Does the job run on Trainium?", _ran(c, report)),
        ("What does a full training run cost?", _both(b, c, "cost_per_run", "${:,.0f}")),
        ("How long does a full training run take?", _both(b, c, "hours_per_run", "{:,.2f} h")),
        ("How many tokens per dollar?", _both(b, c, "tokens_per_dollar", "{:,.0f}")),
        ("How long until the first step (image pull, compilation, graph load)?",
         _both(b, c, "startup_seconds", "{:,.0f} s")),
        ("Are the accelerators busy while it trains?", _utilization(b, c)),
        ("Does it learn the same (loss at matched steps)?", _parity(report)),
        ("When does the migration pay for itself?", _payback_text(report.payback)),
        ("Was the comparison controlled?",
         f"the same steps on both, the first {report.warmup_steps} left out of speed and loss, "
         "criteria fixed in the spec before the start, each judged on its 95% range"),
    ]  # fmt: skip
    return [ChecklistAnswer(question=q, answer=a) for q, a in answers]


def _ran(candidate: TrainingVariantReport, report: TrainingReport) -> str:
    if candidate.steps:
        return f"yes: {candidate.steps} steps on {candidate.nodes} x {candidate.instance_type}"
    if report.reason_code in ("CompileFailed", "RunFailed", "NoSteps"):
        return f"no: {report.reason_code} ({(report.reason or '').splitlines()[0]})"
    return "not measured"


def _both(b: TrainingVariantReport, c: TrainingVariantReport, field: str, fmt: str) -> str:
    def one(v: TrainingVariantReport) -> str:
        value = getattr(v, field)
        return "not measured" if value is None else fmt.format(value)

    return f"GPU {one(b)}, Trainium {one(c)}"


def _utilization(b: TrainingVariantReport, c: TrainingVariantReport) -> str:
    def one(v: TrainingVariantReport) -> str:
        busy = v.accelerator_utilization
        return "not measured" if busy is None else f"{busy.mean:.0%}"

    if b.accelerator_utilization is None and c.accelerator_utilization is None:
        return "not measured (spec.metrics names no Prometheus, or it had no samples)"
    return f"GPU {one(b)}, NeuronCores {one(c)} (dcgm-exporter, neuron-monitor)"


def _parity(report: TrainingReport) -> str:
    parity = report.loss_parity
    if parity is None:
        return "not judged"
    if parity.gap is None:
        return f"not judged: {parity.note}"
    low, high = parity.low or parity.gap, parity.high or parity.gap
    return (
        f"the candidate's final loss is {parity.gap:+.1%} of the baseline's (95%: {low:+.1%} "
        f"to {high:+.1%}) over {parity.matched_steps} matched steps"
    )


def _payback_text(payback: Payback | None) -> str:
    if payback is None:
        return "not computed (a run's cost was not measured)"
    if payback.months is None:
        return f"never: a run costs ${-payback.saving_per_run:,.0f} more on Trainium"
    return (f"after {payback.months:,.1f} months: ${payback.saving_per_run:,.0f} saved a run, "
            f"{payback.runs_per_month:g} runs a month, against ${payback.migration_cost:,.0f} "
            "of migration")  # fmt: skip
