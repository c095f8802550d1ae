"""At 100% the baseline serves nothing, so its queries look at its last window of traffic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from acceltrial.engine.analysis import MeasurementWindow, PlannedQuery
from acceltrial.providers.metrics.port import Series, collect

BAKE_START = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
NOW = BAKE_START + timedelta(minutes=10)


class RecordingSource:
    """A metrics backend that answers 1.0 and remembers when it was asked about."""

    def __init__(self) -> None:
        self.asked: dict[str, list[datetime]] = {}

    def instant(self, query: str, at: datetime) -> list[Series]:
        self.asked[query] = [at]
        return [Series({}, ((at.timestamp(), 1.0),))]

    def range(self, query: str, start: datetime, end: datetime, step: float) -> list[Series]:
        self.asked[query] = [start, end]
        return [Series({}, ((end.timestamp(), 1.0),))]


def planned(mode: str) -> list[PlannedQuery]:
    return [
        PlannedQuery("c", "baseline", f"base-{mode}", mode, False),  # type: ignore[arg-type]
        PlannedQuery("c", "candidate", f"cand-{mode}", mode, False),  # type: ignore[arg-type]
    ]


def test_with_a_baseline_end_the_baseline_is_measured_then_and_the_candidate_now() -> None:
    source = RecordingSource()
    window = MeasurementWindow(BAKE_START, NOW, 15.0, baseline_end=BAKE_START)
    collect([*planned("instant"), *planned("range")], source, window)
    assert source.asked["base-instant"] == [BAKE_START]
    assert source.asked["cand-instant"] == [NOW]
    # The same span as the candidate's, ending when the baseline stopped serving.
    assert source.asked["base-range"] == [BAKE_START - timedelta(minutes=10), BAKE_START]
    assert source.asked["cand-range"] == [BAKE_START, NOW]


def test_without_one_both_variants_share_the_window() -> None:
    source = RecordingSource()
    collect(planned("instant"), source, MeasurementWindow(BAKE_START, NOW, 15.0))
    assert source.asked["base-instant"] == source.asked["cand-instant"] == [NOW]
