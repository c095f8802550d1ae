"""Benchmark: judge 10 criteria x 2 variants over a 1 h window at 15 s resolution.

Runs against a real Prometheus loaded with the prepared test histories, and prints the time one
measurement takes (queries, then judging), how many queries it made, and the share of the time
spent in the pure judge versus waiting on Prometheus.
Run from the repository root: `make bench` (or .venv/bin/python -m bench.analysis).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.integration.conftest import analysis, targets
from tests.integration.histories import openmetrics
from tests.integration.prometheus_server import create_blocks, running_prometheus

from acceltrial.engine.analysis import MeasurementWindow, judge, plan
from acceltrial.providers.metrics.factory import reader_for
from acceltrial.providers.metrics.port import collect
from acceltrial.providers.metrics.prometheus import PrometheusClient

METRICS = [
    "latency_mean", "latency_p50", "latency_p90", "latency_p99", "itl_p99",
    "ttft_p99", "request_rate", "token_rate", "error_ratio", "accelerator_utilization",
]  # fmt: skip
ROUNDS = 5


def main() -> None:
    end = datetime.fromtimestamp((int(time.time()) // 60 - 2) * 60, tz=UTC)
    spec = analysis(
        *(
            {"name": m.replace("_", "-"), "metric": m, "statistical": {"direction": "either"}}
            for m in METRICS
        )
    )
    window = MeasurementWindow(end - timedelta(hours=1), end, 15.0)
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data"
        create_blocks(openmetrics(int(end.timestamp()), 3600), data)
        with running_prometheus(data) as url:
            source = reader_for(spec, PrometheusClient(url))
            query_times, judge_times, queries, samples = [], [], 0, 0
            for _ in range(ROUNDS):
                started = time.perf_counter()
                planned = plan(spec, weight=50)
                collection = collect(planned, source, targets("healthy"), window)
                queried = time.perf_counter()
                for criterion in spec.criteria:
                    judgement = judge(
                        criterion,
                        collection.readings[(criterion.name, "baseline")],
                        collection.readings[(criterion.name, "candidate")],
                    )
                    samples = judgement.baseline_samples
                judge_times.append(time.perf_counter() - queried)
                query_times.append(queried - started)
                queries = collection.queries
    query_s, judge_s = statistics.median(query_times), statistics.median(judge_times)
    print(f"criteria x variants        : {len(METRICS)} x 2 over 1 h at 15 s ({samples} samples)")
    print(f"queries per measurement    : {queries}")
    print(f"measurement (median of {ROUNDS})  : {query_s + judge_s:.3f} s")
    print(f"  querying Prometheus      : {query_s:.3f} s")
    print(f"  judging (pure engine)    : {judge_s:.3f} s")
    print(f"judge / query time ratio   : {judge_s / query_s:.2f}")


if __name__ == "__main__":
    main()
