"""Fixtures for tests against a real Prometheus loaded with the prepared histories."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from acceltrial.api.spec import AnalysisSpec
from acceltrial.engine.analysis import MeasurementWindow
from acceltrial.engine.metrics import Variant, VariantTarget
from tests.integration.histories import SCENARIOS, openmetrics
from tests.integration.prometheus_server import create_blocks, running_prometheus

HISTORY_SECONDS = 3600


def recent_history_end() -> datetime:
    """Whole minutes, a little in the past: queries use explicit times, so results never drift."""
    return datetime.fromtimestamp((int(time.time()) // 60 - 2) * 60, tz=UTC)


@contextlib.contextmanager
def history_prometheus(tmp_path_factory: pytest.TempPathFactory, end: datetime) -> Iterator[str]:
    """A real Prometheus holding the prepared histories up to ``end``; its URL."""
    data = tmp_path_factory.mktemp("prometheus") / "data"
    create_blocks(openmetrics(int(end.timestamp()), HISTORY_SECONDS), data)
    with running_prometheus(data) as url:
        yield url


@pytest.fixture(scope="session")
def history_end() -> datetime:
    return recent_history_end()


@pytest.fixture(scope="session")
def prometheus_url(
    tmp_path_factory: pytest.TempPathFactory, history_end: datetime
) -> Iterator[str]:
    with history_prometheus(tmp_path_factory, history_end) as url:
        yield url


@pytest.fixture
def window(history_end: datetime) -> MeasurementWindow:
    """The last 20 minutes of history at 15 s resolution."""
    return MeasurementWindow(history_end - timedelta(minutes=20), history_end, 15.0)


def targets(namespace: str) -> dict[Variant, VariantTarget]:
    scenario = SCENARIOS[namespace]
    return {
        "baseline": VariantTarget(
            "baseline", namespace, f"{namespace}-gpu", scenario.pods("baseline"), "gpu"
        ),
        "candidate": VariantTarget(
            "candidate", namespace, f"{namespace}-inf2", scenario.pods("candidate"), "neuron"
        ),
    }


def analysis(*criteria: dict[str, Any], preset: str = "vllm", **extra: Any) -> AnalysisSpec:
    return AnalysisSpec.model_validate(
        {
            "interval": "1m",
            "prometheus": {"address": "http://prometheus:9090"},
            "preset": preset,
            "criteria": list(criteria),
            **extra,
        }
    )


@pytest.fixture
def repo() -> Path:
    return Path(__file__).resolve().parents[2]
