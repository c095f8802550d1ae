"""Every realistic user mistake is refused with a message that names the field.

Each file under tests/manifests/invalid is a whole manifest with one mistake; its ``# expect:``
lines are exactly the problems `acceltrial validate` must report, in order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acceltrial.api.validation import load_documents, validate_trial

INVALID = Path(__file__).resolve().parent.parent / "manifests" / "invalid"
CASES = sorted(INVALID.glob("*.yaml"))


def expected_problems(path: Path) -> list[str]:
    prefix = "# expect: "
    return [
        line.removeprefix(prefix)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith(prefix)
    ]


def test_there_are_at_least_twenty_mistakes() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_mistake_is_reported_with_its_field(path: Path) -> None:
    expected = expected_problems(path)
    assert expected, f"{path.name} states no expected problem"
    (document,) = load_documents(path.read_text(encoding="utf-8"))

    problems = [str(problem) for problem in validate_trial(document.body)]

    assert problems == expected
    for problem in validate_trial(document.body):
        assert problem.path, "every problem names the field it is about"
