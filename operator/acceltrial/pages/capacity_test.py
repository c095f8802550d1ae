"""The report's measured-capacity section (``spec.capacityTest``), for Markdown and HTML alike:
what one candidate pod carried within the SLO before any user's request reached it, beside
what a projection from its utilization would have made of the same load; the same for the
baseline's temporary replica when it was swept alike, or else that the comparison is
asymmetric and why; the cost both variants come to at those capacities; and every stair of
each sweep."""

from __future__ import annotations

import html

from acceltrial.api.capacity_test import CapacityTestStatus, VariantCapacityTest
from acceltrial.api.report import Report

TITLE = "Capacity (measured before exposure)"
NOT_SWEPT = "The candidate has not been swept yet."
HEADER = ("concurrency", "requests/s", "error ratio", "latency p99 (s)", "within the SLO")
Swept = tuple[str, VariantCapacityTest]


def capacity_test_due(report: Report) -> bool:
    return report.capacity_test is not None


def _number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


def summary_lines(swept: CapacityTestStatus) -> list[str]:
    """The verdict, each variant's measured capacity beside its utilization projection, where
    the baseline's figure comes from, and the cost."""
    when = swept.measured_at.strftime("%H:%M:%S UTC")
    lines = [f"{swept.verdict.upper()} (measured {when}): {swept.reason}"]
    sent = swept.requests
    if sent is not None:
        source = (
            "as spec.capacityTest.requests gives them"
            if sent.source == "spec"
            else ("the baseline's own means, from its token histograms")
        )
        lines.append(
            f"Requests: {sent.prompt_tokens} prompt tokens and {sent.generated_tokens} "
            f"generated tokens each, {source}."
        )
    for variant, found in _swept(swept):
        lines.append(_measured_line(variant, found))
        projected = _projection_line(found)
        if projected:
            lines.append(projected)
    symmetric = swept.baseline_from == "sweep"
    if swept.baseline_from == "production":
        lines.append(
            "The baseline was not load-tested: its figure is production's operating point (its "
            "throughput over its utilization), so the comparison is asymmetric "
            f"({swept.baseline_note or 'no reason recorded'})."
        )
    cost = swept.cost
    if cost is not None:
        where = "measured by its replica's sweep" if symmetric else "its production operating point"
        lines.append(
            "Cost per unit of capacity at the target utilization: the candidate "
            f"${_number(cost.candidate_per_million_tokens, 4)} per 1M tokens and "
            f"${_number(cost.candidate_per_thousand_requests, 4)} per 1k requests at its "
            f"measured capacity; the baseline ${_number(cost.baseline_per_million_tokens, 4)} "
            f"and ${_number(cost.baseline_per_thousand_requests, 4)} at "
            f"{_number(cost.baseline_rps_per_pod)} requests/s per pod, {where}."
        )
    return lines


def _swept(swept: CapacityTestStatus) -> list[Swept]:
    return [(variant, found) for variant, found in (("candidate", swept.candidate),
            ("baseline", swept.baseline)) if found is not None]  # fmt: skip


def _measured_line(variant: str, found: VariantCapacityTest) -> str:
    if found.rps_per_pod is None:
        return f"The {variant}: no stair met the SLO ({found.stopped_because}: {found.reason})."
    tokens = (
        f", {_number(found.tokens_per_second_per_pod)} generated tokens/s"
        if found.tokens_per_second_per_pod
        else ""
    )
    streamed = "".join(
        f", {name} p99 {_number(value)} s"
        for name, value in (("TTFT", found.ttft_p99), ("ITL", found.itl_p99))
        if value is not None
    )
    pod = "candidate pod" if variant == "candidate" else "baseline pod (a temporary replica)"
    return (
        f"One {pod} carries {_number(found.rps_per_pod)} requests/s{tokens} within the "
        f"SLO, at concurrency {found.concurrency} over {found.pods} pod(s) (latency p50 "
        f"{_number(found.latency_p50)} s, p99 {_number(found.latency_p99)} s{streamed}); the "
        f"sweep took {found.seconds:.0f} s and stopped on {found.stopped_because}."
    )


def _projection_line(found: VariantCapacityTest) -> str:
    projected, measured = found.utilization_rps_per_pod, found.rps_per_pod
    if projected is None or measured is None or found.utilization is None:
        return ""
    return (
        f"Projected from utilization ({found.utilization:.0%} busy at that load), one pod would "
        f"carry {_number(projected)} requests/s: {projected / measured:.2f}x what was measured. "
        "The cost model uses the measured figure."
    )


def stair_rows(found: VariantCapacityTest) -> list[tuple[str, ...]]:
    return [
        (str(s.concurrency), _number(s.rps), _number(s.error_ratio), _number(s.latency_p99),
         "yes" if s.within_slo else "no")
        for s in found.stairs
    ]  # fmt: skip


def capacity_test_markdown(report: Report) -> list[str]:
    swept = report.capacity_test
    if swept is None:
        return [NOT_SWEPT]
    out = [f"- {line}" for line in summary_lines(swept)]
    for variant, found in _swept(swept):
        if found.stairs:
            out += ["", f"The {variant}'s stairs:", ""]
            out += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
            out += ["| " + " | ".join(row) + " |" for row in stair_rows(found)]
    return out


def capacity_test_html(report: Report) -> str:
    swept = report.capacity_test
    if swept is None:
        return f"<p>{html.escape(NOT_SWEPT)}</p>"
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(swept))
    tables = ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    for variant, found in _swept(swept):
        if not found.stairs:
            continue
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
            for row in stair_rows(found)
        )
        tables += (
            f"<p>The {html.escape(variant)}'s stairs:</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )
    return f"<ul>{lines}</ul>{tables}"
