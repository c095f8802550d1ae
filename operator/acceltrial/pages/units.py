"""Figures in the units people read them in: numbers, percentages, money, a metric's value,
and the weight a measurement's step asked for."""

from __future__ import annotations

from acceltrial.api.report import Point

_PERCENT_METRICS = ("error_ratio", "accelerator_utilization")
_COST_METRICS = ("cost_per_million_tokens", "cost_per_thousand_requests")


def number(value: float | None, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}{unit}"
    return f"{value:.{digits}g}{unit}"


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def money(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"${value:,.3f}{unit}"


def metric_value(metric: str | None, value: float | None) -> str:
    """A measured value in the unit people read it in."""
    if value is None:
        return "n/a"
    if metric in _PERCENT_METRICS:
        return percent(value)
    if metric in _COST_METRICS:
        return money(value)
    if metric and metric.startswith(("latency", "ttft", "itl")):
        return number(value, " s")
    return number(value)


def asked(point: Point) -> int:
    """The weight a measurement's step asked for (its share on points recorded before that was
    kept): which criteria applied, by their ``fromWeight``, is in its terms."""
    return point.weight if point.requested_weight is None else point.requested_weight
