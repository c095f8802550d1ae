"""Traffic-split arithmetic: Gateway API weights and replica shares."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acceltrial.engine.routing import (
    RoutingError,
    candidate_percent,
    replica_percent,
    replica_share,
    replicas_for_share,
    serving,
    share_text,
    split,
)

ORIGINAL = [{"name": "llama3-gpu", "port": 8000}]
CANDIDATE = {"name": "llama3-inf2-candidate", "port": 8000}


def test_split_gives_the_candidate_its_percent() -> None:
    assert split(ORIGINAL, "llama3-gpu", CANDIDATE, 25) == [
        {"name": "llama3-gpu", "port": 8000, "weight": 75},
        {"name": "llama3-inf2-candidate", "port": 8000, "weight": 25},
    ]


def test_weight_zero_is_the_original_exactly() -> None:
    assert split(ORIGINAL, "llama3-gpu", CANDIDATE, 0) == ORIGINAL


def test_other_backends_keep_their_share() -> None:
    mixed = [{"name": "llama3-gpu", "weight": 3}, {"name": "llama3-legacy", "weight": 1}]
    refs = split(mixed, "llama3-gpu", CANDIDATE, 50)
    assert [r["weight"] for r in refs] == [150, 100, 150]  # legacy keeps 1/4 of all traffic


def test_a_route_without_the_baseline_is_refused_with_names() -> None:
    with pytest.raises(
        RoutingError, match=r"no backendRef to Service llama3-gpu \(it has: other\)"
    ):
        split([{"name": "other"}], "llama3-gpu", CANDIDATE, 5)


@given(
    weight=st.integers(min_value=0, max_value=100), base=st.integers(min_value=0, max_value=1000)
)
def test_reading_back_recovers_the_percent(weight: int, base: int) -> None:
    refs = split([{"name": "b", "weight": base}], "b", {"name": "c"}, weight)
    assert candidate_percent(refs, "b", "c") == (weight if base else 0)


@pytest.mark.parametrize(
    ("baseline", "weight", "replicas", "share"),
    [(4, 20, 1, 20), (4, 50, 4, 50), (3, 25, 1, 25), (10, 5, 1, 9), (2, 100, 2, 50)],
)
def test_replica_shares(baseline: int, weight: int, replicas: int, share: int) -> None:
    assert replicas_for_share(baseline, weight) == replicas
    assert replica_percent(baseline, replicas) == share


@pytest.mark.parametrize(
    ("baseline", "weight", "share"),
    [(2, 25, 33), (2, 50, 50), (2, 5, 33), (4, 20, 20), (3, 25, 25), (6, 10, 14), (2, 100, 100)],
)
def test_the_share_a_weight_really_gives_in_whole_pods(
    baseline: int, weight: int, share: int
) -> None:
    """One candidate pod beside two baseline pods is 1/3 = 33%, whether 5% or 25% was asked;
    all traffic is 100%: the bake takes the baseline's pods out of the Service."""
    assert replica_share(baseline, weight) == share


def test_a_share_is_said_with_the_weight_asked_beside_it_when_they_differ() -> None:
    assert share_text(33, 25) == "33% (asked 25%)"
    assert share_text(50, 50) == "50%"
    assert share_text(20, None) == "20%"


def test_a_terminating_pod_serves_nothing_even_while_ready() -> None:
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    terminating = {"metadata": {"deletionTimestamp": "2026-12-06T05:00:00Z"}, **ready}
    starting = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    assert serving(ready)
    assert not serving(terminating)
    assert not serving(starting)
