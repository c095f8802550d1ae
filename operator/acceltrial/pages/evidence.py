"""The report's evidence section, for Markdown and HTML alike: per criterion the candidate's
requests judged against what it needs, then per criterion and step the requests each variant
served in the judged windows (thin ones counted apart) and how sure the figure is."""

from __future__ import annotations

from acceltrial.api.report import Report


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _step(step: int, weight: int) -> str:
    return f"bake ({weight}%)" if step == 0 else f"step {step} ({weight}%)"


def evidence_summary(report: Report) -> list[str]:
    """One sentence per counted criterion: its requests judged, and what it needs."""
    lines = []
    for criterion in report.controlled_test.criteria:
        if criterion.requests_needed is None:
            continue
        judged = criterion.requests_judged or 0
        enough = "enough" if judged >= criterion.requests_needed else "not enough to promote"
        lines.append(
            f"{criterion.name}: judged on {judged:,.0f} of the candidate's requests; needs "
            f"{criterion.requests_needed:,} ({enough})"
        )
    return lines


def evidence_table(report: Report) -> list[list[str]]:
    """Header and rows: criterion, step, windows (thin), requests of each variant, how sure."""
    rows = [
        [
            "criterion",
            "step",
            "windows (thin)",
            "candidate requests",
            "baseline requests",
            "how sure",
        ]
    ]
    rows += [
        [
            row.criterion,
            _step(row.step, row.weight),
            f"{row.windows} ({row.thin_windows})",
            _count(row.candidate_requests),
            _count(row.baseline_requests),
            row.how_sure,
        ]
        for row in report.evidence
    ]
    return rows


NO_EVIDENCE = "No request was counted for any criterion yet."


def evidence_markdown(report: Report) -> list[str]:
    """The section's Markdown lines (without its heading)."""
    rows = evidence_table(report)
    if len(rows) == 1:
        return [NO_EVIDENCE]
    return [
        *[f"- {line}" for line in evidence_summary(report)],
        "",
        "| " + " | ".join(rows[0]) + " |",
        "|" + "---|" * len(rows[0]),
        *["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows[1:]],
    ]
