"""The house rules on size (the developers' guide; #30): no operator module over 500 lines,
and the state machine under 450, so each issue that adds spec and engine code splits a module
rather than grow one past what a reader holds at once."""

from __future__ import annotations

from tests.conftest import REPO

OPERATOR = REPO / "operator" / "acceltrial"


def lines(path_of: str) -> int:
    return len((OPERATOR / path_of).read_text(encoding="utf-8").splitlines())


def test_no_operator_module_is_over_500_lines() -> None:
    sizes = {
        str(path.relative_to(OPERATOR)): len(path.read_text(encoding="utf-8").splitlines())
        for path in OPERATOR.rglob("*.py")
    }
    assert sizes, "the operator's modules are found"
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_the_state_machine_stays_under_450_lines() -> None:
    assert lines("engine/lifecycle.py") < 450
