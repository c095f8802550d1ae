"""handlers/freshness.py: the last status written for each trial, and whether a copy is behind."""

from __future__ import annotations

from acceltrial.handlers.freshness import WrittenStatuses


def test_a_copy_is_behind_only_when_it_lacks_the_last_write() -> None:
    written = WrittenStatuses()
    assert not written.behind("uid-1", {"phase": "Pending"}), "nothing written: trust kopf"
    written.remember("uid-1", {"phase": "Preflight", "message": "checking"})
    assert written.behind("uid-1", {"phase": "Pending"})
    assert not written.behind("uid-1", {"message": "checking", "phase": "Preflight"})
    assert not written.behind("uid-2", {"phase": "Pending"}), "per trial"
    written.forget("uid-1")
    assert not written.behind("uid-1", {"phase": "Pending"})


def test_the_least_recently_written_trials_are_forgotten_first() -> None:
    written = WrittenStatuses(kept=2)
    for uid in ("a", "b", "c"):
        written.remember(uid, {"phase": "Progressing"})
    assert not written.behind("a", {}), "forgotten"
    assert written.behind("b", {})
    assert written.behind("c", {})
