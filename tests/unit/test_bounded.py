"""BoundedMap: at most ``kept`` entries, the least recently used going first, and safe to use
from the threads kopf runs sync handlers on."""

from __future__ import annotations

import sys
import threading

import pytest

from acceltrial.bounded import BoundedMap


def test_it_keeps_at_most_kept_entries_dropping_the_least_recently_used() -> None:
    kept: BoundedMap[str, int] = BoundedMap(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # a is now the most recently used
    kept.put("c", 3)

    assert len(kept) == 2
    assert kept.get("b") is None
    assert kept.get("a") == 1
    assert kept.get("c") == 3


def test_writing_an_entry_again_replaces_it_and_makes_it_the_newest() -> None:
    kept: BoundedMap[str, int] = BoundedMap(2)
    kept.put("a", 1)
    kept.put("b", 2)
    kept.put("a", 10)
    kept.put("c", 3)

    assert kept.get("a") == 10
    assert kept.get("b") is None


def test_pop_removes_and_returns_the_entry_or_none() -> None:
    kept: BoundedMap[str, int] = BoundedMap(2)
    kept.put("a", 1)

    assert kept.pop("a") == 1
    assert kept.pop("a") is None
    assert kept.get("a") is None


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="kept must be at least 1"):
        BoundedMap(0)


def test_threads_writing_reading_and_evicting_at_once_never_fail_nor_pass_the_bound() -> None:
    # Threads switch every microsecond instead of every 5 ms: a check-then-act without the lock
    # (an entry evicted between ``in`` and ``move_to_end``) then fails within the run.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    kept: BoundedMap[int, int] = BoundedMap(16)
    errors: list[BaseException] = []

    def churn(offset: int) -> None:
        try:
            for i in range(50_000):
                key = (offset + i) % 64
                kept.put(key, i)
                kept.get((key + 1) % 64)
                if i % 7 == 0:
                    kept.pop((key + 3) % 64)
        except BaseException as error:  # any failure in a thread fails the test
            errors.append(error)

    threads = [threading.Thread(target=churn, args=(n * 13,)) for n in range(8)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(previous)

    assert errors == []
    assert len(kept) <= 16
