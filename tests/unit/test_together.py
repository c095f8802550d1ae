"""tests/together.py: a module's ``@together`` tests run at once, each keeps its own ID, outcome
and failure message, and a body that asks for a fixture the batch cannot give is refused by
name."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import REPO

pytest_plugins = ["pytester"]

MODULE = """
import time
import pytest
from tests.together import start_together, together

def nap():
    # Each body's span, to tell overlap from sequence whatever the machine's load.
    start = time.monotonic()
    time.sleep(1)
    with open("spans.txt", "a") as spans:
        spans.write(f"{start} {time.monotonic()}\\n")

@pytest.fixture(scope="module")
def shared():
    return "the cluster"

@pytest.fixture(scope="module")
def together_batch(request, shared):
    with start_together(request, {"shared": shared}) as batch:
        yield batch

@together
def test_first(shared):
    nap()
    assert shared == "the cluster"

@together
def test_second(shared, tmp_path):
    nap()
    assert tmp_path.is_dir()

@together
@pytest.mark.parametrize("n", [1, 2])
def test_third(shared, n):
    nap()
    assert n == 1, f"n was {n}"
"""


@pytest.fixture(autouse=True)
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner pytest imports tests.together from this checkout."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))


def test_the_bodies_overlap_and_each_test_reports_its_own_outcome(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_batch=MODULE)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--durations=0")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*test_third[[]2[]]*", "*AssertionError: n was 2*"])
    spans = [
        tuple(map(float, line.split()))
        for line in (pytester.path / "spans.txt").read_text().splitlines()
    ]
    assert len(spans) == 4
    latest_start, earliest_end = max(s for s, _ in spans), min(e for _, e in spans)
    assert latest_start < earliest_end, "four one-second bodies, six at a time: all at once"


def test_a_fixture_the_batch_cannot_give_is_refused_by_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_refused=textwrap.dedent("""
            import pytest
            from tests.together import start_together, together

            @pytest.fixture
            def per_test():
                return 1

            @pytest.fixture(scope="module")
            def together_batch(request):
                with start_together(request, {}) as batch:
                    yield batch

            @together
            def test_needs_it(per_test):
                pass
        """)
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*not 'per_test'*"])
    assert result.ret != 0
