"""A training trial's report as Markdown and as one HTML page (no external resource, no
script): the decision, both runs side by side, a full run's cost and time, loss parity with both
loss curves on one chart (matplotlib, the ``charts`` extra), the criteria, the payback and the
checklist."""

from __future__ import annotations

import html

from acceltrial.api.training.report import TrainingReport, TrainingVariantReport
from acceltrial.pages.render import CHARTS_MISSING

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 64rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
.verdict { font-size: 1.2rem; font-weight: 600; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; }
"""


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def side_by_side(report: TrainingReport) -> list[list[str]]:
    """Both variants' figures, row by row."""

    def rate(v: TrainingVariantReport, exported: bool = False) -> str:
        r = v.exported_tokens_per_second if exported else v.tokens_per_second
        used = " (used)" if v.throughput_source == ("prometheus" if exported else "log") else ""
        return "-" if r is None else f"{r.mean:,.0f} (95%: {r.low:,.0f} to {r.high:,.0f}){used}"

    def busy(v: TrainingVariantReport) -> str:
        r = v.accelerator_utilization
        return "-" if r is None else f"{r.mean:.0%} (95%: {r.low:.0%} to {r.high:.0%})"

    rows: list[tuple[str, str, str]] = [("", "baseline (GPU)", "candidate (Trainium)")]
    b, c = report.baseline, report.candidate
    rows += [
        ("instances", f"{b.nodes} x {b.instance_type}", f"{c.nodes} x {c.instance_type}"),
        ("price per node hour", _number(b.price_per_node_hour, "${:,.4f}"),
         _number(c.price_per_node_hour, "${:,.4f}")),
        ("steps run", _number(b.steps, "{:,}"), _number(c.steps, "{:,}")),
        ("tokens per second, log (after the warm-up)", rate(b), rate(c)),
        ("tokens per second, Prometheus", rate(b, exported=True), rate(c, exported=True)),
        ("accelerator utilization", busy(b), busy(c)),
        ("seconds per step", _number(b.seconds_per_step, "{:,.3f}"),
         _number(c.seconds_per_step, "{:,.3f}")),
        ("time to the first step", _number(b.startup_seconds, "{:,.1f} s"),
         _number(c.startup_seconds, "{:,.1f} s")),
        ("precompile", "-", _number(c.precompile_seconds, "{:,.0f} s")),
        ("final loss", _number(b.final_loss, "{:.4f}"), _number(c.final_loss, "{:.4f}")),
        (f"hours per full run ({report.full_run})", _number(b.hours_per_run, "{:,.2f}"),
         _number(c.hours_per_run, "{:,.2f}")),
        ("cost per hour (all nodes)", _number(b.cost_per_hour, "${:,.2f}"),
         _number(c.cost_per_hour, "${:,.2f}")),
        ("cost per full run", _number(b.cost_per_run, "${:,.2f}"),
         _number(c.cost_per_run, "${:,.2f}")),
        ("tokens per dollar", _number(b.tokens_per_dollar, "{:,.0f}"),
         _number(c.tokens_per_dollar, "{:,.0f}")),
    ]  # fmt: skip
    return [list(row) for row in rows]


def verdict_line(report: TrainingReport) -> str:
    return f"{report.verdict or report.phase} ({report.reason_code or 'undecided'}): " + (
        (report.reason or "").splitlines()[0] if report.reason else "no decision yet"
    )


def training_markdown(report: TrainingReport) -> str:
    """The report as Markdown."""
    out = [f"# Training trial report: {report.namespace}/{report.trial}", "",
           verdict_line(report), "", "## Side by side", ""]  # fmt: skip
    rows = side_by_side(report)
    out += [_md_row(rows[0]), "|" + "---|" * len(rows[0]), *(_md_row(r) for r in rows[1:]), ""]
    out += ["## Criteria", ""]
    out += [f"- **{c.verdict}** {c.name}: {c.message}" for c in report.criteria] or ["- none"]
    out += ["", "## Checklist", ""]
    out += [f"- {a.question} {a.answer}" for a in report.checklist]
    for name, variant in (("baseline", report.baseline), ("candidate", report.candidate)):
        if variant.log_lines:
            out += ["", f"## The {name}'s log, last lines", "", "```", *variant.log_lines, "```"]
    return "\n".join(out).rstrip() + "\n"


def training_html(report: TrainingReport) -> str:
    """The report as one HTML page."""
    esc = html.escape
    title = f"Training trial report: {report.namespace}/{report.trial}"
    criteria = "".join(
        f"<li><b>{esc(c.verdict)}</b> {esc(c.name)}: {esc(c.message)}</li>" for c in report.criteria
    )
    checklist = "".join(
        f"<tr><td>{esc(a.question)}</td><td>{esc(a.answer)}</td></tr>" for a in report.checklist
    )
    logs = "".join(
        f"<h3>The {name}'s log, last lines</h3><pre>{esc(chr(10).join(v.log_lines))}</pre>"
        for name, v in (("baseline", report.baseline), ("candidate", report.candidate))
        if v.log_lines
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{_STYLE}</style></head><body>
<h1>{esc(title)}</h1>
<p class="verdict">{esc(verdict_line(report))}</p>
<h2>Side by side</h2>{_table(side_by_side(report))}
<h2>Loss at matched steps</h2>{_loss_chart(report)}
<h2>Criteria</h2><ul>{criteria or "<li>none</li>"}</ul>
<h2>Checklist</h2><table>{checklist}</table>
{logs}
</body></html>
"""


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _table(rows: list[list[str]]) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(cell)}</th>" for cell in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows[1:]
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _loss_chart(report: TrainingReport) -> str:
    """Both loss curves on one chart (inline SVG), or how to get it without matplotlib."""
    if not (report.baseline.loss_curve or report.candidate.loss_curve):
        return "<p>No loss was logged after the warm-up.</p>"
    try:
        from acceltrial.pages.charts import loss_chart  # noqa: PLC0415 (matplotlib: an extra)
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] != "matplotlib":
            raise
        return CHARTS_MISSING
    return loss_chart(report)
