"""At 100% the baseline serves nothing, so its readings look at its last window of traffic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from acceltrial.engine.analysis import MeasurementWindow, Reading
from acceltrial.engine.metrics import MetricRequest, PresetMetric, Variant, VariantTarget
from acceltrial.providers.metrics.port import collect
from tests.unit.memory_metrics import MemorySource

BAKE_START = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
NOW = BAKE_START + timedelta(minutes=10)
WINDOW = MeasurementWindow(BAKE_START, NOW, 15.0)
TARGETS: dict[Variant, VariantTarget] = {
    "baseline": VariantTarget("baseline", "ns", "web", ("web-1",), "gpu"),
    "candidate": VariantTarget("candidate", "ns", "web-c", ("web-c-1",), "neuron"),
}


def planned(metric: str, mode: str) -> list[MetricRequest]:
    return [
        MetricRequest("c", "baseline", PresetMetric(metric), mode),  # type: ignore[arg-type]
        MetricRequest("c", "candidate", PresetMetric(metric), mode),  # type: ignore[arg-type]
    ]


def test_with_a_baseline_end_the_baseline_is_measured_then_and_the_candidate_now() -> None:
    source = MemorySource()
    window = MeasurementWindow(BAKE_START, NOW, 15.0, baseline_end=BAKE_START)
    collect(planned("error_ratio", "instant"), source, TARGETS, window)
    collect(planned("latency_p99", "range"), source, TARGETS, window)
    assert source.windows("error_ratio")["baseline"][1] == BAKE_START
    assert source.windows("error_ratio")["candidate"][1] == NOW
    # The same span as the candidate's, ending when the baseline stopped serving.
    spans = source.windows("latency_p99")
    assert spans["baseline"] == (BAKE_START - timedelta(minutes=10), BAKE_START)
    assert spans["candidate"] == (BAKE_START, NOW)


def test_without_one_both_variants_share_the_window() -> None:
    source = MemorySource()
    collect(
        planned("error_ratio", "instant"), source, TARGETS, MeasurementWindow(BAKE_START, NOW, 15.0)
    )
    spans = source.windows("error_ratio")
    assert spans["baseline"] == spans["candidate"] == (BAKE_START, NOW)


def test_each_variant_is_read_for_its_own_pods() -> None:
    source = MemorySource()
    collect(
        planned("error_ratio", "instant"), source, TARGETS, MeasurementWindow(BAKE_START, NOW, 15.0)
    )
    assert {a.request.variant: a.target.pods for a in source.asked} == {
        "baseline": ("web-1",),
        "candidate": ("web-c-1",),
    }


class GapAtBakeStart(MemorySource):
    """The baseline's window ending at the bake's start lost its scrapes; earlier ones have data."""

    def read_together(self, asks, start, end, resolution_seconds):  # type: ignore[no-untyped-def]
        readings = super().read_together(asks, start, end, resolution_seconds)
        return [
            Reading() if a.request.variant == "baseline" and end == BAKE_START else r
            for a, r in zip(asks, readings, strict=True)
        ]


def test_an_empty_baseline_window_at_the_bake_start_reaches_back_to_one_with_data() -> None:
    source = GapAtBakeStart(
        readings={("error_ratio", "baseline"): Reading(values=(0.01,), series=1)}
    )
    earlier = (BAKE_START - timedelta(seconds=60), BAKE_START - timedelta(seconds=120))
    window = MeasurementWindow(BAKE_START, NOW, 15.0, BAKE_START, earlier)
    readings = collect(planned("error_ratio", "instant"), source, TARGETS, window).readings
    assert readings[("c", "baseline")].values == (0.01,)
    # One interval back had data, so the second was never asked.
    assert [a.end for a in source.asked if a.request.variant == "baseline"] == [
        BAKE_START,
        earlier[0],
    ]


def test_a_baseline_window_with_data_is_not_asked_again() -> None:
    source = MemorySource(readings={("error_ratio", "baseline"): Reading(values=(0.0,), series=1)})
    window = MeasurementWindow(BAKE_START, NOW, 15.0, BAKE_START, (BAKE_START,))
    collect(planned("error_ratio", "instant"), source, TARGETS, window)
    assert [a.end for a in source.asked if a.request.variant == "baseline"] == [BAKE_START]


def test_a_baseline_empty_everywhere_stays_empty_after_every_earlier_end() -> None:
    earlier = tuple(BAKE_START - timedelta(seconds=60 * k) for k in (1, 2, 3))
    source = MemorySource()
    window = MeasurementWindow(BAKE_START, NOW, 15.0, BAKE_START, earlier)
    readings = collect(planned("error_ratio", "instant"), source, TARGETS, window).readings
    assert readings[("c", "baseline")].values == ()
    assert len([a for a in source.asked if a.request.variant == "baseline"]) == 4
