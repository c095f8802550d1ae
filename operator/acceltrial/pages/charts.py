"""The report's charts: the weight over time and one chart per criterion with its limit, as
inline SVG (matplotlib, headless, text kept as text). matplotlib is the ``charts`` extra
(``pip install 'acceltrial[charts]'``): the operator image never draws, and the HTML page says
how to get the charts when it is missing (``render``)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime

import matplotlib

matplotlib.use("Agg")  # headless: no display, no GUI toolkit

from matplotlib import pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from acceltrial.api.report import CriterionLimit, CriterionSummary, Point, Report
from acceltrial.api.training.report import TrainingReport
from acceltrial.pages.units import asked, metric_value

# Text stays text in the SVG: selectable, searchable, rendered in the page's font.
matplotlib.rcParams["svg.fonttype"] = "none"
COLOURS = {"baseline": "#4c72b0", "candidate": "#dd8452", "limit": "#c0392b"}
_PERCENT_METRICS = ("error_ratio", "accelerator_utilization")
_COST_METRICS = ("cost_per_million_tokens", "cost_per_thousand_requests")


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


def loss_chart(report: TrainingReport) -> str:
    """A training trial's two loss curves, step by step after the warm-up, on one chart."""
    figure, axis = plt.subplots(figsize=(8, 3.2))
    for variant in ("baseline", "candidate"):
        curve = getattr(report, variant).loss_curve
        axis.plot([p.step for p in curve], [p.loss for p in curve], label=variant,
                  color=COLOURS[variant], linewidth=1.4)  # fmt: skip
    axis.set_xlabel("step")
    axis.set_ylabel("loss")
    axis.legend(frameon=False)
    axis.grid(alpha=0.3)
    return _svg(figure)
