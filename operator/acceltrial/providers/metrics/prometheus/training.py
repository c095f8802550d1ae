"""A training run's figures from Prometheus over its steady steps: the throughput its script
exports (``spec.metrics.tokensPerSecond``, a template) and the accelerator utilization of its
Job's pods (dcgm-exporter or neuron-monitor, the inference presets' queries).

A range query from the first steady step plus one ``interval`` (so every rate() window lies in
the steady steps) to the last step, one sample per ``interval``; the samples' mean with its
95% interval. The Job's pods are matched by name (``<job>-...``): they are gone when this is
read, their series are not.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from acceltrial.api.durations import duration_seconds
from acceltrial.api.training.status import ExportedReading, Rate
from acceltrial.engine.metrics import UTILIZATION_METRIC, Accelerator, Variant, VariantTarget
from acceltrial.engine.training.runs import mean_interval
from acceltrial.providers.metrics.port import MetricsError, RequestError
from acceltrial.providers.metrics.prometheus.client import PrometheusClient, Series
from acceltrial.providers.metrics.prometheus.presets import preset_template, render


@dataclass(frozen=True)
class SteadyWindow:
    """Whose run, where, and the steady steps' span."""

    variant: Variant
    namespace: str
    job: str
    accelerator: Accelerator
    start: datetime
    end: datetime


class AskAgain(Exception):
    """Prometheus could not answer now (unreachable, busy, a timeout): read again next tick."""


def exported_reading(
    client: PrometheusClient, window: SteadyWindow, interval: str, tokens_query: str | None
) -> ExportedReading:
    """What Prometheus shows of the run; AskAgain on a temporary failure."""
    target = VariantTarget(
        variant=window.variant,
        namespace=window.namespace,
        deployment=window.job,
        pods=(),
        accelerator=window.accelerator,
        pods_regex=f"^{window.job}-[a-z0-9-]+$",
    )
    step = duration_seconds(interval)
    start = min(window.start + timedelta(seconds=step), window.end)
    notes, figures, samples = [], {}, 0
    utilization = preset_template("", UTILIZATION_METRIC, target.accelerator)
    queries = {"accelerator_utilization": utilization}
    if tokens_query is not None:
        queries["tokens_per_second"] = tokens_query
    for name, template in queries.items():
        try:
            series = client.range(render(template, target, interval), start, window.end, step)
        except RequestError as error:
            notes.append(f"{name}: {error}")
            continue
        except MetricsError as error:
            if error.temporary:
                raise AskAgain(str(error)) from error
            notes.append(f"{name}: {error}")
            continue
        values = _per_timestamp(series, total=name == "tokens_per_second")
        samples = max(samples, len(values))
        found = mean_interval(values)
        if found is None:
            notes.append(f"{name}: no samples between {start:%H:%M:%S} and {window.end:%H:%M:%S}")
            continue
        figures[name] = Rate(mean=max(0.0, found.mean), low=found.low, high=found.high)
    return ExportedReading(**figures, samples=samples, note="; ".join(notes)[:2048] or None)


def _per_timestamp(series: Sequence[Series], total: bool) -> list[float]:
    """One value per timestamp: the series summed (a job's throughput over its pods) or
    averaged (utilization)."""
    by_time: dict[float, list[float]] = defaultdict(list)
    for one in series:
        for at, value in one.samples:
            if math.isfinite(value):
                by_time[at].append(value)
    return [sum(v) if total else sum(v) / len(v) for _, v in sorted(by_time.items())]
