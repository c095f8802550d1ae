"""A decision report as Markdown, or as one self-contained HTML page with inline SVG charts
(matplotlib, no network, no script). Both carry the same sections: the decision, the workload,
both variants side by side (each with the measurement window its figures come from), the
economics, the weight over time and one chart per criterion with its limit, the timeline of every
measurement, compatibility, the quality check (pages/quality.py), the controlled test and, once
promoted, the manifests to commit."""

from __future__ import annotations

import html
from datetime import datetime

import yaml

from acceltrial.api.report import (
    Report,
    VariantFigures,
    Workload,
)
from acceltrial.api.status import TERMINAL_PHASES
from acceltrial.engine.routing import share_text
from acceltrial.pages.capacity_test import TITLE as CAPACITY_TEST_TITLE
from acceltrial.pages.capacity_test import (
    capacity_test_due,
    capacity_test_html,
    capacity_test_markdown,
)
from acceltrial.pages.evidence import (
    NO_EVIDENCE,
    evidence_markdown,
    evidence_summary,
    evidence_table,
)
from acceltrial.pages.quality import quality_due, quality_html, quality_markdown
from acceltrial.pages.savings import economics_window, payoff_lines, projected_count, window_of
from acceltrial.pages.units import asked, metric_value
from acceltrial.pages.units import money as _money
from acceltrial.pages.units import number as _number
from acceltrial.pages.units import percent as _percent

__all__ = [
    "health",
    "html_page",
    "markdown",
    "metric_value",
    "payoff_lines",
    "side_by_side",
    "window",
]

HASH_SHOWN = 12
"""Characters of the criteria hash shown; enough to tell two trials apart at a glance."""


def short_hash(digest: str | None) -> str:
    """The criteria hash as people compare it: its first characters."""
    return (digest or "")[:HASH_SHOWN] or "n/a"


def _clock(at: datetime | None, zone: str = " UTC") -> str:
    return "n/a" if at is None else at.strftime("%H:%M:%S") + zone


def window(variant: VariantFigures) -> str:
    """Which measurement the figures of a variant come from."""
    return window_of(variant.step, variant.weight, variant.measured_at, variant.requested_weight)


def side_by_side(report: Report) -> list[tuple[str, str, str]]:
    """(what, baseline, candidate) rows of the measured figures and costs, each group after the
    window it comes from; rows with no figure on either side are left out."""
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

    def cost_count(field: str) -> tuple[str, str]:
        return _number(getattr(b_cost, field, None)), _number(getattr(c_cost, field, None))

    target = f"{report.target_utilization or 0:.0%}"
    rows = [
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
    ]
    if econ is not None:  # the cost figures: from the window of status.economics
        rows += [
            (
                "cost figures from",
                economics_window(econ, "baseline"),
                economics_window(econ, "candidate"),
            ),
            ("replicas priced (pods in that window)", *cost_count("replicas")),
            ("cost per hour", *cost("cost_per_hour", "/h")),
            ("observed cost per 1M tokens", *cost("observed_cost_per_million_tokens", "")),
            ("projected cost per 1M tokens", *cost("projected_cost_per_million_tokens", "")),
            ("observed cost per 1k requests", *cost("observed_cost_per_thousand_requests", "")),
            ("projected cost per 1k requests", *cost("projected_cost_per_thousand_requests", "")),
            (
                f"projected replicas for all traffic at {target} utilization",
                projected_count(b_cost),
                projected_count(c_cost),
            ),
        ]
    rows.append(("price source", *pair(_source)))
    return [row for row in rows if row[1:] != ("n/a", "n/a")]


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
        f"{_number(work.concurrency)} requests in flight ({_serving(work.weight)}, "
        f"{_workload_window(work)})"
    )


def _serving(weight: int | None) -> str:
    if weight == 100:
        return "the candidate alone"
    return (
        "the baseline alone (the candidate's mirrored copies not counted)"
        if weight == 0
        else ("both variants together")
    )


def _workload_window(work: Workload) -> str:
    if work.measured_at is None:
        return "at the last measurement with traffic"
    return f"from {window_of(work.step, work.weight, work.measured_at)}"


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


def health(report: Report) -> str:
    """Whether the candidate stayed within its error criteria: no verdict for one that served no
    measured request (never deployed, or removed before any measurement)."""
    compatibility = report.compatibility
    if not compatibility.deployed:
        return "not judged (the candidate served no measured request)"
    return "yes" if compatibility.healthy else "no"


QUERIES_SAID = (
    "The query each reading used, as last asked (each gives the same answer alone; a "
    "measurement asks them together, one query per window)."
)


def query_rows(report: Report) -> list[list[str]]:
    """A header and one row per reading and variant: its query and the window it was asked for."""
    rows = [["reading", "variant", "last asked for", "query"]]
    for query in report.queries:
        when = window_of(query.step, query.weight, query.measured_at)
        if query.variant == "baseline" and (query.step == 0 or query.weight == 100):
            ended = _clock(query.measured_at)
            when = f"its last window with traffic, ending {ended} as the bake began"
        rows.append([query.reading, query.variant, when, query.query])
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
        "## Evidence",
        "",
        *evidence_markdown(report),
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
    asked = query_rows(report)
    out += ["", "## Queries", ""]
    if len(asked) > 1:
        out += [QUERIES_SAID, ""]
        out += [f"- `{r}`, {v}, {when}: ``{q}``" for r, v, when, q in asked[1:]]
    else:
        out.append(_no_measurement(report))
    out += [
        "",
        "## Compatibility",
        "",
        f"- deployed and served traffic: {'yes' if report.compatibility.deployed else 'no'}",
        f"- healthy: {health(report)}",
        *[f"- {note}" for note in report.compatibility.notes],
        "",
    ]
    if quality_due(report):
        out += ["## Quality (output parity)", "", *quality_markdown(report), ""]
    if capacity_test_due(report):
        out += [f"## {CAPACITY_TEST_TITLE}", "", *capacity_test_markdown(report), ""]
    out += ["## The controlled test", ""]
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


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 64rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
table.timeline { font-size: 0.8rem; }
.verdict { font-size: 1.2rem; padding: 0.6rem; background: #f4f4f4; }
pre { background: #f4f4f4; padding: 0.6rem; overflow-x: auto; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, monospace; }
table.examples { width: 100%; table-layout: fixed; font-size: 0.85rem; }
"""


def _table(rows: list[list[str]], css: str = "") -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(cell)}</th>" for cell in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows[1:]
    )
    klass = f' class="{css}"' if css else ""
    return f"<table{klass}><tr>{head}</tr>{body}</table>"


CHARTS_MISSING = (
    "<p>The charts need matplotlib, the <code>charts</code> extra: "
    "<code>pip install 'acceltrial[charts]'</code>.</p>"
)


def _figures(report: Report) -> str:
    """The charts as inline SVG, or a line saying how to get them without matplotlib."""
    try:
        from acceltrial.pages.charts import charts  # noqa: PLC0415 (matplotlib: an extra)
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] != "matplotlib":
            raise
        return CHARTS_MISSING
    return "".join(f"<h3>{html.escape(title)}</h3>{svg}" for title, svg in charts(report))


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
    figures = _figures(report)
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
    evidence_rows = evidence_table(report)
    evidence = (
        "<ul>"
        + "".join(f"<li>{esc(line)}</li>" for line in evidence_summary(report))
        + "</ul>"
        + _table(evidence_rows)
        if len(evidence_rows) > 1
        else f"<p>{esc(NO_EVIDENCE)}</p>"
    )
    asked = query_rows(report)
    queries = (
        f"<p>{esc(QUERIES_SAID)}</p>{_table(asked, 'timeline')}"
        if len(asked) > 1
        else f"<p>{esc(_no_measurement(report))}</p>"
    )
    quality = (
        f"<h2>Quality (output parity)</h2>{quality_html(report)}" if quality_due(report) else ""
    )
    if capacity_test_due(report):
        quality += f"<h2>{esc(CAPACITY_TEST_TITLE)}</h2>{capacity_test_html(report)}"
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
<h2>Evidence</h2>{evidence}
<h2>Over time</h2>{figures or f"<p>{esc(_no_measurement(report))}</p>"}
<h2>Timeline</h2>{timeline}
<h2>Compatibility</h2><ul>
<li>deployed and served traffic: {"yes" if report.compatibility.deployed else "no"}</li>
<li>healthy: {esc(health(report))}</li>{notes}</ul>
{quality}
<h2>Queries</h2>{queries}
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
