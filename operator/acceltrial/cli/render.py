"""A decision report as Markdown, or as one self-contained HTML page with inline SVG charts
(matplotlib, no network, no script): latency per variant over time with the step boundaries,
the weight timeline, and the projected cost per 1M tokens per variant."""

from __future__ import annotations

import html
import io
import json
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # headless: no display, no GUI toolkit

from matplotlib import pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from acceltrial.api.report import Point, Report, VariantFigures

COLOURS = {"baseline": "#4c72b0", "candidate": "#dd8452"}


def _number(value: float | None, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}{unit}"
    return f"{value:.{digits}g}{unit}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def _money(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"${value:,.3f}{unit}"


def side_by_side(report: Report) -> list[tuple[str, str, str]]:
    """(what, baseline, candidate) rows of the measured figures and costs."""
    base, cand = report.variants.baseline, report.variants.candidate
    econ = report.economics
    b_cost = econ.baseline if econ else None
    c_cost = econ.candidate if econ else None

    def pair(getter: object) -> tuple[str, str]:
        assert callable(getter)
        return getter(base), getter(cand)

    def cost(field: str, unit: str) -> tuple[str, str]:
        return (
            _money(getattr(b_cost, field, None), unit),
            _money(getattr(c_cost, field, None), unit),
        )

    return [
        ("instance type", *pair(lambda v: v.instance_type)),
        ("replicas", *pair(lambda v: _number(v.replicas))),
        ("requests/s", *pair(lambda v: _number(v.requests_per_second))),
        ("tokens/s", *pair(lambda v: _number(v.tokens_per_second))),
        ("latency mean", *pair(lambda v: _number(v.latency_mean, " s"))),
        ("latency p50", *pair(lambda v: _number(v.latency_p50, " s"))),
        ("latency p99", *pair(lambda v: _number(v.latency_p99, " s"))),
        ("error ratio", *pair(lambda v: _percent(v.error_ratio))),
        ("accelerator utilization", *pair(lambda v: _percent(v.utilization))),
        ("cost per hour", *cost("cost_per_hour", "/h")),
        ("observed cost per 1M tokens", *cost("observed_cost_per_million_tokens", "")),
        ("projected cost per 1M tokens", *cost("projected_cost_per_million_tokens", "")),
        ("observed cost per 1k requests", *cost("observed_cost_per_thousand_requests", "")),
        ("projected cost per 1k requests", *cost("projected_cost_per_thousand_requests", "")),
        ("price source", *pair(_source)),
    ]


def _source(variant: VariantFigures) -> str:
    return variant.price_source or "n/a"


def verdict_line(report: Report) -> str:
    decision = report.decision
    if decision is None:
        return f"{report.phase or 'Pending'}: no decision yet"
    return f"{decision.verdict.upper()} ({report.phase}): {decision.reason}"


def payoff_lines(report: Report) -> list[str]:
    econ = report.economics
    lines = []
    if econ and econ.projected_monthly_savings is not None:
        savings = econ.projected_monthly_savings
        said = "saves" if savings >= 0 else "costs"
        target = f"{report.target_utilization or 0:.0%}"
        lines.append(
            f"All traffic on the candidate {said} ${abs(savings):,.0f} per month "
            f"(projected at {target} utilization)."
        )
    if report.migration_cost is not None:
        payback = econ.payback_months if econ else None
        when = f"pays back in {payback:.1f} months" if payback is not None else "does not pay back"
        lines.append(f"Migration effort ${report.migration_cost:,.0f}: {when}.")
    return lines


def markdown(report: Report) -> str:
    """The report as Markdown."""
    out = [f"# Decision report: {report.namespace}/{report.trial}", "", verdict_line(report), ""]
    work = report.workload
    out += [
        "## Workload",
        "",
        f"- {_number(work.requests_per_second)} requests/s, {_number(work.tokens_per_second)} "
        f"generated tokens/s, {_number(work.tokens_per_request)} tokens per request, "
        f"{_number(work.concurrency)} requests in flight",
        "",
        "## Side by side",
        "",
        "| | baseline | candidate |",
        "|---|---|---|",
        *[f"| {what} | {b} | {c} |" for what, b, c in side_by_side(report)],
        "",
        *payoff_lines(report),
        "",
        "## Compatibility",
        "",
        f"- deployed and served traffic: {'yes' if report.compatibility.deployed else 'no'}",
        f"- healthy: {'yes' if report.compatibility.healthy else 'no'}",
        *[f"- {note}" for note in report.compatibility.notes],
        "",
        "## The controlled test",
        "",
    ]
    test = report.controlled_test
    out += [
        f"- criteria fixed before the start (hash `{test.criteria_hash}`), "
        f"started {test.started_at}",
        f"- planned weights {test.planned_weights}; reached {test.weights_reached}; "
        f"{test.measurements} measurements",
        f"- rollback ready (routing recorded before the first change): "
        f"{'yes' if test.rollback_ready else 'no'}",
        "",
        "| criterion | judged | from weight | last verdict | reason |",
        "|---|---|---|---|---|",
        *[
            f"| {c.name} | {c.judged} | {c.from_weight}% | {c.verdict or '-'} | {c.reason or ''} |"
            for c in test.criteria
        ],
    ]
    if report.gitops:
        out += ["", "## Commit these (GitOps)", ""]
        for name, manifest in report.gitops.items():
            out += [f"`{name}`:", "", "```json", json.dumps(manifest, indent=2), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: inline in HTML


def _seconds(timeline: Sequence[Point]) -> list[float]:
    start = timeline[0].at
    return [(p.at - start).total_seconds() for p in timeline]


def _step_lines(axis: Axes, timeline: Sequence[Point], xs: Sequence[float]) -> None:
    for i in range(1, len(timeline)):
        if timeline[i].weight != timeline[i - 1].weight:
            axis.axvline(xs[i], color="#999999", linestyle=":", linewidth=1)


def charts(report: Report) -> list[tuple[str, str]]:
    """(title, inline SVG) of each chart; none without measurements."""
    timeline = report.timeline
    if not timeline:
        return []
    xs = _seconds(timeline)
    made = []
    for title, metric, unit in (
        ("Latency p99 per variant", "latency_p99", "seconds"),
        ("Projected cost per 1M tokens per variant", "cost_per_million_tokens", "USD"),
    ):
        figure, axis = plt.subplots(figsize=(8, 3))
        for variant in ("baseline", "candidate"):
            values = [getattr(p, variant).get(metric) for p in timeline]
            points = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
            if points:
                axis.plot(*zip(*points, strict=True), marker="o", markersize=3, label=variant,
                          color=COLOURS[variant])  # fmt: skip
        _step_lines(axis, timeline, xs)
        axis.set_xlabel("seconds since the first measurement (dotted: weight changes)")
        axis.set_ylabel(unit)
        axis.legend(loc="best")
        made.append((title, _svg(figure)))
    figure, axis = plt.subplots(figsize=(8, 2.2))
    axis.step(xs, [p.weight for p in timeline], where="post", color=COLOURS["candidate"])
    axis.set_ylim(0, 105)
    axis.set_ylabel("% to candidate")
    axis.set_xlabel("seconds since the first measurement")
    made.insert(1, ("Candidate weight", _svg(figure)))
    return made


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; }
.verdict { font-size: 1.2rem; padding: 0.6rem; background: #f4f4f4; }
pre { background: #f4f4f4; padding: 0.6rem; overflow-x: auto; }
"""


def html_page(report: Report) -> str:
    """The report as one HTML page: no external resource, no script."""
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(w)}</td><td>{esc(b)}</td><td>{esc(c)}</td></tr>"
        for w, b, c in side_by_side(report)
    )
    criteria = "".join(
        f"<tr><td>{esc(c.name)}</td><td>{esc(c.judged)}</td><td>{c.from_weight}%</td>"
        f"<td>{esc(c.verdict or '-')}</td><td>{esc(c.reason or '')}</td></tr>"
        for c in report.controlled_test.criteria
    )
    figures = "".join(f"<h3>{esc(title)}</h3>{svg}" for title, svg in charts(report))
    gitops = "".join(
        f"<h3>{esc(name)}</h3><pre>{esc(json.dumps(m, indent=2))}</pre>"
        for name, m in (report.gitops or {}).items()
    )
    test = report.controlled_test
    payoff = "".join(f"<p>{esc(line)}</p>" for line in payoff_lines(report))
    notes = "".join(f"<li>{esc(n)}</li>" for n in report.compatibility.notes)
    title = f"Decision report: {report.namespace}/{report.trial}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{_STYLE}</style></head><body>
<h1>{esc(title)}</h1>
<p class="verdict">{esc(verdict_line(report))}</p>
<h2>Side by side</h2><table><tr><th></th><th>baseline</th><th>candidate</th></tr>{rows}</table>
{payoff}
<h2>Over time</h2>{figures or "<p>No measurement yet.</p>"}
<h2>Compatibility</h2><ul>
<li>deployed and served traffic: {"yes" if report.compatibility.deployed else "no"}</li>
<li>healthy: {"yes" if report.compatibility.healthy else "no"}</li>{notes}</ul>
<h2>The controlled test</h2>
<p>Criteria fixed before the start (hash <code>{esc(test.criteria_hash or "")}</code>). Planned
weights {test.planned_weights}, reached {test.weights_reached}, {test.measurements} measurements.
Rollback ready: {"yes" if test.rollback_ready else "no"}.</p>
<table><tr><th>criterion</th><th>judged</th><th>from weight</th><th>last verdict</th>
<th>reason</th></tr>{criteria}</table>
{"<h2>Commit these (GitOps)</h2>" + gitops if gitops else ""}
<p><small>Generated {esc(str(report.generated_at))} by acceltrial.</small></p>
</body></html>
"""
