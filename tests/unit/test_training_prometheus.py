"""A finished training run read from Prometheus (providers/metrics/prometheus/training.py):
the queries it renders for the Job's pods, the steady window it asks over, and the samples'
mean with its interval. The client is a stand-in that records each range query and answers
with series shaped as Prometheus' query_range answers; the real Prometheus reads the test
bed's trainer in the training demo (tests/demo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from acceltrial.providers.metrics.prometheus import PrometheusUnreachable, QueryRejected, Series
from acceltrial.providers.metrics.prometheus.training import (
    AskAgain,
    SteadyWindow,
    exported_reading,
)

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
WINDOW = SteadyWindow("candidate", "training", "llama-candidate", "neuron", T0,
                      T0 + timedelta(minutes=5))  # fmt: skip
TOKENS = 'sum(rate(train_tokens_total{namespace="{{namespace}}",pod=~"{{pods}}"}[{{interval}}]))'


@dataclass
class Recording:
    answers: dict[str, Any]
    asked: list[tuple[str, datetime, datetime, float]] = field(default_factory=list)

    def range(self, query: str, start: datetime, end: datetime, step: float) -> list[Series]:
        self.asked.append((query, start, end, step))
        key = "tokens" if "train_tokens_total" in query else "utilization"
        answer = self.answers[key]
        if isinstance(answer, Exception):
            raise answer
        return answer


def series(*values: float, **labels: str) -> Series:
    return Series(labels, tuple((1_800_000_000.0 + 30 * i, v) for i, v in enumerate(values)))


def test_throughput_and_utilization_are_averaged_over_the_steady_window() -> None:
    client = Recording({
        "tokens": [series(59_000, 61_000, 60_000, 60_000)],
        # neuron-monitor per NeuronCore: averaged at each time (the preset averages already)
        "utilization": [series(0.8, 0.82, 0.81, 0.79)],
    })  # fmt: skip
    found = exported_reading(client, WINDOW, "30s", TOKENS)  # type: ignore[arg-type]

    assert found.tokens_per_second.mean == pytest.approx(60_000)
    assert found.tokens_per_second.low < 60_000 < found.tokens_per_second.high
    assert found.accelerator_utilization.mean == pytest.approx(0.805)
    assert (found.samples, found.note) == (4, None)
    (utilization, start, end, step), (tokens, *_) = client.asked
    # Every rate() window inside the steady steps: from one interval after their start.
    assert (start, end, step) == (T0 + timedelta(seconds=30), WINDOW.end, 30.0)
    assert 'pod=~"^llama-candidate-[a-z0-9-]+$"' in tokens
    assert 'namespace="training"' in tokens
    assert "[30s]" in tokens
    assert "neuroncore_utilization_ratio" in utilization
    assert 'pod=~"^llama-candidate-[a-z0-9-]+$"' in utilization


def test_a_job_exported_by_several_pods_sums_their_throughput() -> None:
    client = Recording({"tokens": [series(30_000, 30_000), series(29_000, 31_000)],
                        "utilization": [series(0.5, 0.7)]})  # fmt: skip
    found = exported_reading(client, WINDOW, "30s", TOKENS)  # type: ignore[arg-type]
    assert found.tokens_per_second.mean == pytest.approx(60_000)
    assert found.accelerator_utilization.mean == pytest.approx(0.6)


def test_a_gpu_run_reads_dcgm_exporter_and_without_a_tokens_query_only_utilization() -> None:
    client = Recording({"utilization": [series(0.93, 0.95)]})
    gpu = SteadyWindow("baseline", "training", "llama-baseline", "gpu", T0, WINDOW.end)
    found = exported_reading(client, gpu, "30s", None)  # type: ignore[arg-type]
    assert found.tokens_per_second is None
    assert found.accelerator_utilization.mean == pytest.approx(0.94)
    assert len(client.asked) == 1
    assert "DCGM_FI_DEV_GPU_UTIL" in client.asked[0][0]


def test_a_rejected_query_is_a_note_and_an_unreachable_prometheus_is_asked_again() -> None:
    rejected = Recording({"tokens": QueryRejected("parse error at char 5"),
                          "utilization": []})  # fmt: skip
    found = exported_reading(rejected, WINDOW, "30s", TOKENS)  # type: ignore[arg-type]
    assert found.tokens_per_second is None
    assert found.accelerator_utilization is None
    assert found.note == (
        "accelerator_utilization: no samples between 12:00:30 and 12:05:00; "
        "tokens_per_second: parse error at char 5"
    )
    down = Recording({"tokens": [], "utilization": PrometheusUnreachable("connection refused")})
    with pytest.raises(AskAgain):
        exported_reading(down, WINDOW, "30s", TOKENS)  # type: ignore[arg-type]


def test_a_window_shorter_than_the_interval_is_read_at_its_end() -> None:
    short = SteadyWindow("candidate", "training", "llama-candidate", "neuron", T0,
                         T0 + timedelta(seconds=10))  # fmt: skip
    client = Recording({"tokens": [series(60_000)], "utilization": [series(0.8)]})
    exported_reading(client, short, "30s", TOKENS)  # type: ignore[arg-type]
    assert {(start, end) for _, start, end, _ in client.asked} == {(short.end, short.end)}
