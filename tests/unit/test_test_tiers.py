"""The Makefile's two test tiers: ``make test-fast`` (no cluster) and ``make test-cluster``
together run every directory of tests/, each exactly once, so a new directory is never left out
of ``make test`` (which runs both)."""

from __future__ import annotations

import re

from tests.conftest import REPO, slowest_files


def tier(name: str) -> list[str]:
    makefile = (REPO / "Makefile").read_text()
    found = re.search(rf"^{name} := (.+)$", makefile, re.MULTILINE)
    assert found is not None, f"the Makefile defines no {name}"
    return found.group(1).split()


def test_every_test_directory_is_in_exactly_one_tier() -> None:
    fast, cluster = tier("FAST_TESTS"), tier("CLUSTER_TESTS")
    directories = sorted(
        f"tests/{d.name}" for d in (REPO / "tests").iterdir() if any(d.glob("test_*.py"))
    )
    assert sorted(fast + cluster) == directories
    assert not set(fast) & set(cluster)


def test_make_test_runs_both_tiers_after_the_static_checks() -> None:
    """The static checks and the fast tier in one make (two at a time), then the cluster tier."""
    script = (REPO / "scripts" / "test.sh").read_text()
    checks = ("lint", "typecheck", "contracts", "verify-crds", "verify-api-docs", "chart-lint")
    first = re.search(r'^"\$\{make\[@\]\}" -j2 -O (.+)$', script, re.MULTILINE)
    assert first is not None, "scripts/test.sh runs the checks and test-fast in one make -j2"
    assert set(first.group(1).split()) == {"test-fast", *checks}
    assert first.start() < script.index('"${make[@]}" test-cluster')


def test_the_slowest_files_listed_are_cluster_tests_that_exist() -> None:
    """tests/slowest-files.txt names files ``make test-cluster`` runs (a renamed or moved file
    would silently lose its place at the front), each once."""
    cluster = tier("CLUSTER_TESTS")
    listed = slowest_files()
    assert listed, "tests/slowest-files.txt lists no file"
    assert len(listed) == len(set(listed))
    for name in listed:
        assert (REPO / name).is_file(), f"{name} is listed in tests/slowest-files.txt but gone"
        assert any(name.startswith(f"{directory}/") for directory in cluster), name


def test_the_cluster_tier_keeps_the_slowest_first_order() -> None:
    """pytest-xdist reorders files by their number of tests unless told not to."""
    makefile = (REPO / "Makefile").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in makefile
