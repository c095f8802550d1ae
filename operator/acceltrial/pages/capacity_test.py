"""The report's measured-capacity section (``spec.capacityTest``), for Markdown and HTML alike:
what one candidate pod carried within the SLO before any user's request reached it, beside
what a projection from its utilization would have made of the same load; the cost both
variants come to at those capacities; and every stair of the sweep."""

from __future__ import annotations

import html

from acceltrial.api.capacity_test import CapacityTestStatus, VariantCapacityTest
from acceltrial.api.report import Report

TITLE = "Capacity (measured before exposure)"
NOT_SWEPT = "The candidate has not been swept yet."
HEADER = ("concurrency", "requests/s", "error ratio", "latency p99 (s)", "within the SLO")


def capacity_test_due(report: Report) -> bool:
    return report.capacity_test is not None


def _number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


def summary_lines(swept: CapacityTestStatus) -> list[str]:
    """The verdict, the measured capacity beside the utilization projection, and the cost."""
    when = swept.measured_at.strftime("%H:%M:%S UTC")
    lines = [f"{swept.verdict.upper()} (measured {when}): {swept.reason}"]
    found = swept.candidate
    if found is not None:
        lines.append(_measured_line(found))
        projected = _projection_line(found)
        if projected:
            lines.append(projected)
    cost = swept.cost
    if cost is not None:
        lines.append(
            "Cost per unit of capacity at the target utilization: the candidate "
            f"${_number(cost.candidate_per_million_tokens, 4)} per 1M tokens and "
            f"${_number(cost.candidate_per_thousand_requests, 4)} per 1k requests at its "
            f"measured capacity; the baseline ${_number(cost.baseline_per_million_tokens, 4)} "
            f"and ${_number(cost.baseline_per_thousand_requests, 4)} at "
            f"{_number(cost.baseline_rps_per_pod)} requests/s per pod, its production operating "
            "point (not load-tested: the comparison is asymmetric)."
        )
    return lines


def _measured_line(found: VariantCapacityTest) -> str:
    if found.rps_per_pod is None:
        return f"No stair met the SLO ({found.stopped_because}: {found.reason})."
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
    return (
        f"One candidate pod carries {_number(found.rps_per_pod)} requests/s{tokens} within the "
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
    if swept.candidate is not None and swept.candidate.stairs:
        out += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        out += ["| " + " | ".join(row) + " |" for row in stair_rows(swept.candidate)]
    return out


def capacity_test_html(report: Report) -> str:
    swept = report.capacity_test
    if swept is None:
        return f"<p>{html.escape(NOT_SWEPT)}</p>"
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(swept))
    table = ""
    if swept.candidate is not None and swept.candidate.stairs:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
            for row in stair_rows(swept.candidate)
        )
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<ul>{lines}</ul>{table}"
