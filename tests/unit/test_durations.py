"""Kubernetes-style durations: the grammar accepted and the seconds they stand for."""

from __future__ import annotations

import pytest

from acceltrial.api.durations import duration_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("1h", 3600),
        ("1h30m", 5400),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("0s", 0),
    ],
)
def test_duration_seconds(text: str, seconds: float) -> None:
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "-5m", "10 minutes", "1d", "m", "1h 30m", "1.s"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        duration_seconds(text)
