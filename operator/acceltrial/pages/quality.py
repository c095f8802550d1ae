"""The report's quality section (output parity, ``spec.quality``), for Markdown and HTML alike:
the verdict and why, how the baseline's answers were scored through the candidate, the prompts
asked, each criterion's figure with its interval and limit, and the prompts where the candidate
agreed least, both answers side by side with their first difference marked.

The prompts and answers come from model servers: the HTML escapes every one of them, and the
Markdown puts them in code spans, where a viewer renders no HTML."""

from __future__ import annotations

import html
import json

from acceltrial.api.quality import QualityExample, QualityStatus
from acceltrial.api.report import CriterionLimit, Report

SCORING = {
    "promptLogprobs": "teacher-forced by prompt log-probabilities",
    "reprompting": "by re-prompting at each divergence",
}
NOT_CHECKED = "The candidate has not answered the prompt set yet."
SNIPPET = 40
"""Characters of each answer shown from where they part, in the Markdown."""


def quality_due(report: Report) -> bool:
    """Whether the report has a quality section: the trial asks a quality check, or ran one."""
    return report.quality is not None or bool(report.quality_limits)


def verdict_line(quality: QualityStatus) -> str:
    """The verdict, when and where it was reached, and why."""
    when = (
        "before any user request reached the candidate"
        if quality.step == 0
        else f"at step {quality.step}"
    )
    checked = quality.checked_at.strftime("%H:%M:%S UTC")
    return f"{quality.verdict.upper()} ({when}, checked {checked}): {quality.reason}"


def asked_line(quality: QualityStatus) -> str:
    """The prompts asked and unanswered, and how the answers were scored."""
    scored = (
        f"the baseline's answers were scored through the candidate {SCORING[quality.scoring]}"
        if quality.scoring
        else "no answer was scored"
    )
    asked = f"{quality.prompts} prompts asked of both variants, {quality.unanswered} unanswered"
    return f"{asked}; {scored}."


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _limit_text(limit: CriterionLimit | None) -> str:
    if limit is None:
        return "n/a"
    bounds = [f"{word} {value:.4g}" for word, value in (("min", limit.min), ("max", limit.max))
              if value is not None]  # fmt: skip
    said = " and ".join(bounds)
    return f"candidate / baseline {said}" if limit.kind == "relative" else said


def criteria_rows(report: Report) -> list[list[str]]:
    """A header and one row per criterion: its figure, interval, limit and verdict; a figure
    nothing measured says why instead."""
    quality = report.quality
    limits = {q.name: q.limit for q in report.quality_limits}
    rows = [["criterion", "metric", "figure", "interval (confidence)", "limit", "verdict"]]
    for c in quality.criteria if quality else []:
        interval = "n/a"
        if c.low is not None and c.high is not None:
            sure = f" ({c.confidence:.0%})" if c.confidence is not None else ""
            interval = f"{_figure(c.low)} to {_figure(c.high)}{sure}"
        figure = _figure(c.value) if c.value is not None else f"n/a: {c.reason}"
        rows.append([c.name, c.metric, figure, interval, _limit_text(limits.get(c.name)),
                     c.verdict])  # fmt: skip
    return rows


def _parted(example: QualityExample, text: str) -> tuple[str, str]:
    """``text`` up to the answers' first difference, and from it ("" where they agree or the
    difference lies past the text kept)."""
    at = example.diverges_at
    if at is None or at >= len(text):
        return text, ""
    return text[:at], text[at:]


def _agreement(example: QualityExample) -> str:
    parted = (
        f"; the answers part at character {example.diverges_at}"
        if example.diverges_at is not None
        else ""
    )
    return f"the candidate agreed at {example.agreement:.1%} of the answer's positions{parted}"


# Markdown


def _quoted(text: str) -> str:
    """``text`` on one line, quoted (newlines as ``\\n``), as a code span."""
    shown = json.dumps(text, ensure_ascii=False)
    fence = "`"
    while fence in shown:
        fence += "`"
    return f"{fence} {shown} {fence}"


def _cells(row: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"


def _snippet(text: str) -> str:
    return text if len(text) <= SNIPPET else text[:SNIPPET] + "..."


def _example_markdown(number: int, example: QualityExample) -> list[str]:
    lines = [
        f"{number}. prompt {_quoted(example.prompt)}: {_agreement(example)}",
        f"   - baseline:  {_quoted(example.baseline)}",
        f"   - candidate: {_quoted(example.candidate)}",
    ]
    _, base_tail = _parted(example, example.baseline)
    _, cand_tail = _parted(example, example.candidate)
    if base_tail or cand_tail:
        lines.append(
            f"   - from there: baseline {_quoted(_snippet(base_tail))}, candidate "
            f"{_quoted(_snippet(cand_tail))}"
        )
    return lines


def quality_markdown(report: Report) -> list[str]:
    """The section's Markdown lines (without its heading)."""
    quality = report.quality
    if quality is None:
        return [NOT_CHECKED]
    rows = criteria_rows(report)
    out = [verdict_line(quality), "", asked_line(quality), ""]
    if len(rows) > 1:
        out += [_cells(rows[0]), "|" + "---|" * len(rows[0]), *map(_cells, rows[1:]), ""]
    if quality.examples:
        out += ["The prompts where the candidate agreed least:", ""]
        for number, example in enumerate(quality.examples, start=1):
            out += _example_markdown(number, example)
    return out


# HTML


def _marked(example: QualityExample, text: str) -> str:
    """``text`` escaped, from the first difference on in a ``<mark>``."""
    same, rest = _parted(example, text)
    marked = f"<mark>{html.escape(rest)}</mark>" if rest else ""
    return html.escape(same) + marked


def _examples_html(quality: QualityStatus) -> str:
    esc = html.escape
    rows = "".join(
        f'<tr><td><div class="text">{esc(e.prompt)}</div><small>{esc(_agreement(e))}</small>'
        f'</td><td class="text">{_marked(e, e.baseline)}</td>'
        f'<td class="text">{_marked(e, e.candidate)}</td></tr>'
        for e in quality.examples
    )
    return (
        "<p>The prompts where the candidate agreed least, the answers from their first "
        'difference marked:</p><table class="examples"><tr><th>prompt</th><th>baseline</th>'
        f"<th>candidate</th></tr>{rows}</table>"
    )


def _criteria_html(report: Report) -> str:
    esc = html.escape
    rows = criteria_rows(report)
    if len(rows) == 1:
        return ""
    head = "".join(f"<th>{esc(cell)}</th>" for cell in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows[1:]
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def quality_html(report: Report) -> str:
    """The section's HTML (without its heading)."""
    esc = html.escape
    quality = report.quality
    if quality is None:
        return f"<p>{esc(NOT_CHECKED)}</p>"
    examples = _examples_html(quality) if quality.examples else ""
    return (
        f"<p><strong>{esc(verdict_line(quality))}</strong></p><p>{esc(asked_line(quality))}</p>"
        f"{_criteria_html(report)}{examples}"
    )
