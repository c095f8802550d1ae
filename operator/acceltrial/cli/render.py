"""A decision report as Markdown, or as one self-contained HTML page with inline SVG charts
(matplotlib, no network, no script). Both carry the same sections: the decision, the workload,
both variants side by side (each with the measurement window its figures come from), the
economics, the weight over time and one chart per criterion with its limit, the timeline of every
measurement, compatibility, the controlled test and, once promoted, the manifests to commit."""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from datetime import datetime

import matplotlib
import yaml

matplotlib.use("Agg")  # headless: no display, no GUI toolkit

from matplotlib import pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from acceltrial.api.report import (
    CriterionLimit,
    CriterionSummary,
    Point,
    Report,
    VariantFigures,
)
from acceltrial.api.status import TERMINAL_PHASES
from acceltrial.engine.routing import share_text

# Text stays text in the SVG: selectable, searchable, rendered in the page's font.
matplotlib.rcParams["svg.fonttype"] = "none"
COLOURS = {"baseline": "#4c72b0", "candidate": "#dd8452", "limit": "#c0392b"}
HASH_SHOWN = 12
"""Characters of the criteria hash shown; enough to tell two trials apart at a glance."""
_PERCENT_METRICS = ("error_ratio", "accelerator_utilization")
_COST_METRICS = ("cost_per_million_tokens", "cost_per_thousand_requests")


def short_hash(digest: str | None) -> str:
    """The criteria hash as people compare it: its first characters."""
    return (digest or "")[:HASH_SHOWN] or "n/a"


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


def _clock(at: datetime | None, zone: str = " UTC") -> str:
    return "n/a" if at is None else at.strftime("%H:%M:%S") + zone


def metric_value(metric: str | None, value: float | None) -> str:
    """A measured value in the unit people read it in."""
    if value is None:
        return "n/a"
    if metric in _PERCENT_METRICS:
        return _percent(value)
    if metric in _COST_METRICS:
        return _money(value)
    if metric and metric.startswith(("latency", "ttft", "itl")):
        return _number(value, " s")
    return _number(value)


def window(variant: VariantFigures) -> str:
    """Which measurement the figures of a variant come from."""
    if variant.measured_at is None:
        return "never measured with traffic"
    where = "the bake" if variant.step == 0 or variant.weight == 100 else f"step {variant.step}"
    share = share_text(variant.weight or 0, variant.requested_weight)
    return f"{where} ({share} to the candidate), window ending {_clock(variant.measured_at)}"


def asked(point: Point) -> int:
    """The weight a measurement's step asked for (its share on points recorded before that was
    kept): which criteria applied, by their ``fromWeight``, is in its terms."""
    return point.weight if point.requested_weight is None else point.requested_weight


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
        ("figures from", *pair(window)),
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


def workload_line(report: Report) -> str:
    work = report.workload
    if work.requests_per_second is None:
        return "No traffic measured."
    return (
        f"{_number(work.requests_per_second)} requests/s, {_number(work.tokens_per_second)} "
        f"generated tokens/s, {_number(work.tokens_per_request)} tokens per request, "
        f"{_number(work.concurrency)} requests in flight (both variants together, at the last "
        "measurement)"
    )


def capacity_line(report: Report) -> str:
    """What capacity the trial added for the candidate, and when it was given back."""
    capacity = report.capacity
    if capacity is None:
        return "No capacity was added for the candidate."
    added = ""
    if capacity.added_at is not None:
        added = f"added {capacity.added_nodes} node(s) at {_clock(capacity.added_at)}; "
    back = f"; given back at {_clock(capacity.released_at)}" if capacity.released_at else ""
    return f"{capacity.source} ({capacity.provider}): {added}{capacity.message}{back}."


def payoff_lines(report: Report) -> list[str]:
    """Savings and payback: as made only for a promoted (or still running) trial; otherwise as
    what the candidate would have cost, beside the reason of the decision."""
    decision = report.decision
    verdict = decision.verdict if decision else None
    if verdict == "none":
        return ["Economics unknown: the trial ended before anything was deployed or measured."]
    econ = report.economics
    savings = econ.projected_monthly_savings if econ else None
    payback = econ.payback_months if econ else None
    target = f"{report.target_utilization or 0:.0%}"
    if verdict in ("rollback", "abort"):
        return _not_promoted(report, savings, payback, target)
    lines = []
    if savings is not None:
        said = "saves" if savings >= 0 else "costs"
        lines.append(
            f"All traffic on the candidate {said} ${abs(savings):,.0f} per month "
            f"(projected at {target} utilization)."
        )
    if report.migration_cost is not None:
        if payback is not None:
            when = f"pays back in {payback:.1f} months"
        elif savings is not None and savings <= 0:
            when = "does not pay back (the candidate saves nothing)"
        else:
            when = "payback unknown (no cost figures were measured)"
        lines.append(f"Migration effort ${report.migration_cost:,.0f}: {when}.")
    return lines


def _not_promoted(
    report: Report, savings: float | None, payback: float | None, target: str
) -> list[str]:
    assert report.decision is not None
    what = "rolled back" if report.decision.verdict == "rollback" else "was aborted"
    lines = []
    if savings is not None:
        would = f"saved ${savings:,.0f}" if savings >= 0 else f"cost ${-savings:,.0f} more"
        paid = f" and paid back the migration in {payback:.1f} months" if payback else ""
        lines.append(
            f"Had it been promoted, all traffic on the candidate would have {would} per month "
            f"(projected at {target} utilization){paid}."
        )
    lines.append(
        f"Nothing is saved: the trial {what} ({report.decision.reason}); the cost figures are "
        "what the candidate would have cost."
    )
    return lines


def timeline_rows(report: Report) -> list[list[str]]:
    """A header and one row per measurement: when, where, the outcome, each charted criterion's
    candidate and baseline values, and why."""
    criteria = [c for c in report.controlled_test.criteria if c.metric]
    header = ["time (UTC)", "step", "weight", "outcome"]
    header += [f"{c.name} (candidate / baseline)" for c in criteria] + ["why"]
    rows = [header]
    for point in report.timeline:
        row = [_clock(point.at, ""), "bake" if asked(point) == 100 else str(point.step),
               share_text(point.weight, point.requested_weight), point.outcome]  # fmt: skip
        for criterion in criteria:
            metric = criterion.metric
            shown = (
                f"{metric_value(metric, point.candidate.get(metric or ''))} / "
                f"{metric_value(metric, point.baseline.get(metric or ''))}"
            )
            row.append(shown if asked(point) >= criterion.from_weight else f"({shown})")
        row.append(point.reason or "")
        rows.append(row)
    return rows


def gitops_yaml(report: Report) -> list[tuple[str, str]]:
    """(file name, YAML) of each manifest to commit."""
    files = []
    for manifest in (report.gitops or {}).values():
        name = f"{str(manifest.get('kind', 'object')).lower()}-{manifest['metadata']['name']}.yaml"
        files.append((name, yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False)))
    return files


def _no_measurement(report: Report) -> str:
    if report.phase in TERMINAL_PHASES:
        return "No measurement: the trial ended before any."
    return "No measurement yet."


def markdown(report: Report) -> str:
    """The report as Markdown."""
    out = [f"# Decision report: {report.namespace}/{report.trial}", "", verdict_line(report), ""]
    out += [
        "## Workload",
        "",
        workload_line(report),
        "",
        "## Capacity",
        "",
        capacity_line(report),
        "",
        "## Side by side",
        "",
        "| | baseline | candidate |",
        "|---|---|---|",
        *[f"| {what} | {b} | {c} |" for what, b, c in side_by_side(report)],
        "",
        *payoff_lines(report),
        "",
        "## Timeline",
        "",
    ]
    rows = timeline_rows(report)
    if len(rows) > 1:
        out += [
            "Every measurement; values in parentheses were measured below the criterion's "
            "`fromWeight` and not judged.",
            "",
            "| " + " | ".join(rows[0]) + " |",
            "|" + "---|" * len(rows[0]),
            *[
                "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                for row in rows[1:]
            ],
        ]
    else:
        out.append(_no_measurement(report))
    out += [
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
        f"- criteria fixed before the start (hash `{short_hash(test.criteria_hash)}`), "
        f"started {test.started_at}",
        f"- {_shadow(test.planned_mirrors, test.mirrors_reached)}planned weights "
        f"{test.planned_weights}; reached {test.weights_reached}; {test.measurements} measurements",
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
    files = gitops_yaml(report)
    if files:
        out += ["", "## Commit these (GitOps)", ""]
        for name, text in files:
            out += [f"`{name}`:", "", "```yaml", text.rstrip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: inline in HTML


def _times(moments: Sequence[datetime]) -> tuple[list[float], str]:
    """x positions since the first moment, in seconds or, for long trials, minutes."""
    start = moments[0]
    seconds = [(at - start).total_seconds() for at in moments]
    if seconds[-1] > 600:
        return [s / 60 for s in seconds], "minutes"
    return seconds, "seconds"


def _step_lines(axis: Axes, timeline: Sequence[Point], xs: Sequence[float]) -> None:
    for i in range(1, len(timeline)):
        if timeline[i].weight != timeline[i - 1].weight:
            axis.axvline(xs[i], color="#999999", linestyle=":", linewidth=1)


def _scale(metric: str) -> tuple[float, str]:
    if metric in _PERCENT_METRICS:
        return 100.0, "%"
    if metric in _COST_METRICS:
        per = "1M tokens" if metric == "cost_per_million_tokens" else "1k requests"
        return 1.0, f"projected USD per {per}"
    if metric.startswith(("latency", "ttft", "itl")):
        return 1.0, "seconds"
    return 1.0, metric


def _criterion_chart(
    report: Report,
    criterion: CriterionSummary,
    xs: Sequence[float],
    span: Sequence[float],
    unit: str,
) -> str | None:
    """The criterion's metric per variant at the measurements that judged it, with its limit;
    None when no judged measurement has a value."""
    metric = criterion.metric
    assert metric is not None
    factor, label = _scale(metric)
    timeline = report.timeline
    judged = [
        (x, p) for x, p in zip(xs, timeline, strict=True) if asked(p) >= criterion.from_weight
    ]
    series = {
        variant: [(x, v * factor) for x, p in judged
                  if (v := getattr(p, variant).get(metric)) is not None]
        for variant in ("baseline", "candidate")
    }  # fmt: skip
    if not any(series.values()):
        return None
    figure, axis = plt.subplots(figsize=(10, 3))
    for variant, points in series.items():
        if points:
            axis.plot(*zip(*points, strict=True), marker="o", markersize=3, label=variant,
                      color=COLOURS[variant])  # fmt: skip
    tops = [v for points in series.values() for _, v in points]
    tops += _draw_limit(axis, criterion, series["baseline"], factor)
    _mark_beyond(axis, criterion, series, factor)
    _step_lines(axis, timeline, xs)
    _same_x_range(axis, span)
    # From zero: a small gap between two variants must look small.
    axis.set_ylim(0, max([*tops, 0.0]) * 1.15 or 1)
    axis.set_ylabel(label)
    skipped = len(timeline) - len(judged)
    note = (
        f"; {skipped} measurement(s) below {criterion.from_weight}% not judged, not shown"
        if skipped
        else ""
    )
    axis.set_xlabel(f"{unit} since the first measurement (dotted: weight changes){note}")
    axis.legend(loc="best", fontsize="small")
    return _svg(figure)


def _draw_limit(
    axis: Axes, criterion: CriterionSummary, baseline: Sequence[tuple[float, float]], factor: float
) -> list[float]:
    """Draw the criterion's bounds; the values drawn, for the axis range."""
    limit = criterion.limit
    if limit is None:
        return []
    drawn: list[float] = []
    for name, bound in (("max", limit.max), ("min", limit.min)):
        if bound is None:
            continue
        if limit.kind == "absolute":
            shown = metric_value(criterion.metric, bound)
            axis.axhline(bound * factor, color=COLOURS["limit"], linestyle="--", linewidth=1,
                         label=f"limit: {name} {shown}")  # fmt: skip
            drawn.append(bound * factor)
        elif baseline:
            xs, ys = zip(*baseline, strict=True)
            bounded = [y * bound for y in ys]
            axis.plot(xs, bounded, color=COLOURS["limit"], linestyle="--", linewidth=1,
                      label=f"limit: {name} {bound:g}x baseline")  # fmt: skip
            drawn += bounded
    return drawn


def _beyond(limit: CriterionLimit, candidate: float, baseline: float | None, factor: float) -> bool:
    """Whether a charted candidate value lies outside the limit (all in the chart's units)."""
    scale = factor if limit.kind == "absolute" else baseline
    if scale is None:
        return False
    over = limit.max is not None and candidate > limit.max * scale
    return over or (limit.min is not None and candidate < limit.min * scale)


def _mark_beyond(
    axis: Axes,
    criterion: CriterionSummary,
    series: dict[str, list[tuple[float, float]]],
    factor: float,
) -> None:
    """A red cross on each candidate value outside the criterion's limit."""
    if criterion.limit is None:
        return
    baseline = dict(series["baseline"])
    crossed = [
        (x, y)
        for x, y in series["candidate"]
        if _beyond(criterion.limit, y, baseline.get(x), factor)
    ]
    if crossed:
        axis.plot(*zip(*crossed, strict=True), linestyle="none", marker="x", markersize=9,
                  color=COLOURS["limit"], label="beyond the limit")  # fmt: skip


def _same_x_range(axis: Axes, xs: Sequence[float]) -> None:
    """Every chart spans the whole trial, so their times line up."""
    pad = (xs[-1] - xs[0]) * 0.03 or 1.0
    axis.set_xlim(xs[0] - pad, xs[-1] + pad)


def charts(report: Report) -> list[tuple[str, str]]:
    """(title, inline SVG) of each chart: the weight over time, then each criterion with a
    metric; none without measurements."""
    timeline = report.timeline
    if not timeline:
        return []
    # The weight the trial ended at (0 after a rollback, 100 once promoted), when it ended.
    ending = {"Promoted": 100, "RolledBack": 0, "Aborted": 0}.get(str(report.phase))
    moments = [p.at for p in timeline]
    weights = [p.weight for p in timeline]
    requested = [asked(p) for p in timeline]
    if ending is not None and report.generated_at > moments[-1]:
        moments.append(report.generated_at)
        weights.append(ending)
        requested.append(ending)
    span, unit = _times(moments)
    xs = span[: len(timeline)]
    figure, axis = plt.subplots(figsize=(10, 2.2))
    axis.step(span, weights, where="post", color=COLOURS["candidate"], label="share")
    if requested != weights:
        # The replicas router shares by whole pods: the asked weight beside what it gave.
        axis.step(span, requested, where="post", color="#999999", linestyle="--", label="asked")
        axis.legend(loc="upper left", fontsize="small")
    _same_x_range(axis, span)
    axis.set_ylim(0, 105)
    axis.set_ylabel("% to candidate")
    axis.set_xlabel(f"{unit} since the first measurement")
    made = [("Candidate's share of traffic", _svg(figure))]
    for criterion in report.controlled_test.criteria:
        if criterion.metric is None:
            continue
        svg = _criterion_chart(report, criterion, xs, span, unit)
        if svg is not None:
            made.append((f"{criterion.name}: {criterion.judged}", svg))
    return made


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 64rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
table.timeline { font-size: 0.8rem; }
.verdict { font-size: 1.2rem; padding: 0.6rem; background: #f4f4f4; }
pre { background: #f4f4f4; padding: 0.6rem; overflow-x: auto; }
"""


def _table(rows: list[list[str]], css: str = "") -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(cell)}</th>" for cell in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows[1:]
    )
    klass = f' class="{css}"' if css else ""
    return f"<table{klass}><tr>{head}</tr>{body}</table>"


def html_page(report: Report) -> str:
    """The report as one HTML page: no external resource, no script."""
    esc = html.escape
    side = _table([["", "baseline", "candidate"], *[list(row) for row in side_by_side(report)]])
    criteria = _table(
        [
            ["criterion", "judged", "from weight", "last verdict", "reason"],
            *[
                [c.name, c.judged, f"{c.from_weight}%", c.verdict or "-", c.reason or ""]
                for c in report.controlled_test.criteria
            ],
        ]
    )
    figures = "".join(f"<h3>{esc(title)}</h3>{svg}" for title, svg in charts(report))
    rows = timeline_rows(report)
    timeline = (
        "<p>Every measurement; values in parentheses were measured below the criterion's "
        f"fromWeight and not judged.</p>{_table(rows, 'timeline')}"
        if len(rows) > 1
        else f"<p>{esc(_no_measurement(report))}</p>"
    )
    gitops = "".join(
        f"<h3>{esc(name)}</h3><pre>{esc(text)}</pre>" for name, text in gitops_yaml(report)
    )
    test = report.controlled_test
    payoff = "".join(f"<p>{esc(line)}</p>" for line in payoff_lines(report))
    notes = "".join(f"<li>{esc(n)}</li>" for n in report.compatibility.notes)
    title = f"Decision report: {report.namespace}/{report.trial}"
    digest = test.criteria_hash or ""
    shadow = esc(_shadow(test.planned_mirrors, test.mirrors_reached).capitalize())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{_STYLE}</style></head><body>
<h1>{esc(title)}</h1>
<p class="verdict">{esc(verdict_line(report))}</p>
<h2>Workload</h2><p>{esc(workload_line(report))}</p>
<h2>Capacity</h2><p>{esc(capacity_line(report))}</p>
<h2>Side by side</h2>{side}
{payoff}
<h2>Over time</h2>{figures or f"<p>{esc(_no_measurement(report))}</p>"}
<h2>Timeline</h2>{timeline}
<h2>Compatibility</h2><ul>
<li>deployed and served traffic: {"yes" if report.compatibility.deployed else "no"}</li>
<li>healthy: {"yes" if report.compatibility.healthy else "no"}</li>{notes}</ul>
<h2>The controlled test</h2>
<p>Criteria fixed before the start (hash
<code title="{esc(digest)}">{esc(short_hash(digest))}</code>).
{shadow}Planned weights {test.planned_weights}, reached {test.weights_reached}, {test.measurements}
measurements. Rollback ready: {"yes" if test.rollback_ready else "no"}.</p>
{criteria}
{"<h2>Commit these (GitOps)</h2>" + gitops if gitops else ""}
<p><small>Generated {esc(str(report.generated_at))} by acceltrial.</small></p>
</body></html>
"""


def _shadow(mirrors: list[int], reached: list[int]) -> str:
    """The shadow steps, as a sentence's opening, when the trial had any."""
    if not mirrors:
        return ""
    return (
        f"shadow steps mirroring {mirrors}% of requests (no user served by the candidate), "
        f"reached {reached}; "
    )
