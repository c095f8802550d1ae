"""The operator loads scipy.stats only when a criterion is judged by the Mann-Whitney comparison
(engine/statistics.py): it adds about 46 MiB to the process, which trials whose criteria are
tested sequentially, or are not statistical, never need."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def test_starting_the_operator_does_not_load_scipy_stats() -> None:
    printed = _loaded_after("import sys, acceltrial.handlers; print('scipy.stats' in sys.modules)")
    assert printed == "False"


def test_a_fixed_mode_comparison_loads_it_when_first_needed() -> None:
    printed = _loaded_after(
        "import sys\n"
        "from acceltrial.engine.statistics import compare\n"
        "before = 'scipy.stats' in sys.modules\n"
        "result = compare([1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0], 0.95)\n"
        "print(before, 'scipy.stats' in sys.modules, 0 <= result.p_value <= 1)"
    )
    assert printed == "False True True"
