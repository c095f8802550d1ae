"""Exposure at equal false rollbacks: the threshold judges loosened until they refuse no more
good candidates than acceltrial does, then their exposure on the regression traces.

bench/decisions.py compares every judge as its users configure it: the Flagger- and Argo
Rollouts-style judges catch small regressions early and refuse four A/A candidates in five. Here
each climbs a ladder of looser settings (more failed checks allowed, a higher p99 limit, a lower
success rate) and stops at the first rung whose false-rollback rate on the A/A traces is at most
acceltrial's in the same run; its exposure on the regression traces at that rung is what it costs
to be as careful with good candidates as acceltrial is.

    python -m bench.calibrated            # the full profile (a few minutes on 2 cores)
    python -m bench.calibrated --quick    # few seeds, well under a minute
    python -m bench.calibrated --json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.decisions import JUDGES, PROFILES, Cell, Profile, cells, ratio, summary
from bench.judges import ArgoJudge, FlaggerJudge, Judge
from bench.traces import BAD_LATENCY_S


@dataclass(frozen=True)
class Rung:
    """One setting of a threshold judge: failed checks allowed, success rate, p99 limit."""

    failed_checks: int
    min_success: float
    """The lowest passing request success rate (0..1)."""
    p99_factor: float
    """The p99 limit over the baseline's true p99."""

    def label(self) -> str:
        return (
            f"{self.failed_checks} failed checks, success >= {self.min_success:.0%}, "
            f"p99 <= {self.p99_factor:g}x"
        )


LADDER = (
    Rung(5, 0.99, 1.1),  # the setting bench/decisions.py uses (Flagger's tutorials)
    Rung(5, 0.99, 1.25),
    Rung(10, 0.99, 1.25),
    Rung(10, 0.98, 1.5),
    Rung(20, 0.98, 1.5),
    Rung(20, 0.97, 2.0),
    Rung(40, 0.95, 2.0),
    Rung(60, 0.90, 3.0),
)
"""From the judges' usual settings to ones that let almost anything pass."""


def flagger(rung: Rung) -> Callable[[], Judge]:
    return lambda: FlaggerJudge(
        threshold=rung.failed_checks,
        min_success_percent=100 * rung.min_success,
        max_p99_s=rung.p99_factor * BAD_LATENCY_S,
    )


def argo(rung: Rung) -> Callable[[], Judge]:
    # failureLimit is the failures tolerated: rollback at one more.
    return lambda: ArgoJudge(
        failure_limit=rung.failed_checks - 1,
        min_success=rung.min_success,
        max_p99_s=rung.p99_factor * BAD_LATENCY_S,
    )


CALIBRATED: dict[str, Callable[[Rung], Callable[[], Judge]]] = {"flagger": flagger, "argo": argo}


@dataclass(frozen=True)
class Calibration:
    """A judge at the first rung as careful with good candidates as the target."""

    judge: str
    rung: Rung | None
    """None: no rung of the ladder was (the judge at its loosest is reported)."""
    loosest_tried: Rung
    figures: dict[str, float]
    table: dict[str, Cell]
    climb: tuple[tuple[Rung, float], ...]
    """Each rung tried and its A/A false-rollback rate."""


def calibrate(name: str, target: float, profile: Profile) -> Calibration:
    """Climb the ladder for judge ``name`` until its A/A false-rollback rate is <= ``target``."""
    make = CALIBRATED[name]
    climb: list[tuple[Rung, float]] = []
    for rung in LADDER:
        aa = cells(make(rung), profile, kinds=("aa",))
        climb.append((rung, summary({name: aa})[name]["false_rollback_rate"]))
        if climb[-1][1] <= target:
            break
    found = rung if climb[-1][1] <= target else None
    table = aa | cells(make(rung), profile, kinds=("regression",))
    return Calibration(name, found, rung, summary({name: table})[name], table, tuple(climb))


def run(profile: Profile) -> tuple[dict[str, float], dict[str, Cell], list[Calibration]]:
    """acceltrial as it runs, then each threshold judge calibrated to its false rollbacks."""
    ours = cells(JUDGES["acceltrial"], profile, kinds=("aa", "regression"))
    figures = summary({"acceltrial": ours})["acceltrial"]
    target = figures["false_rollback_rate"]
    return figures, ours, [calibrate(name, target, profile) for name in CALIBRATED]


def report(
    figures: dict[str, float], ours: dict[str, Cell], calibrations: Sequence[Calibration]
) -> list[str]:
    lines = [
        f"acceltrial: exposure {figures['exposure']:.0f}, false rollbacks "
        f"{figures['false_rollback_rate']:.1%} (the target)",
    ]
    for found in calibrations:
        setting = (
            found.rung.label() if found.rung else f"none; loosest: {found.loosest_tried.label()}"
        )
        lines.append(
            f"{found.judge}: at {setting}: exposure {found.figures['exposure']:.0f}, false "
            f"rollbacks {found.figures['false_rollback_rate']:.1%}, missed "
            f"{found.figures['missed_regressions']:.2f}; acceltrial / {found.judge} "
            f"{ratio(figures['exposure'], found.figures['exposure'])}"
        )
        per_trace = [
            f"{t}: {ratio(ours[t].exposure, cell.exposure)}"
            for t, cell in found.table.items()
            if t in ours and t.split("-")[0] != "aa"
        ]
        lines.append("  per regression trace: " + ", ".join(per_trace))
        climbed = ", ".join(f"{r.label()}: {rate:.1%}" for r, rate in found.climb)
        lines.append(f"  false rollbacks on the way: {climbed}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few seeds: well under a minute")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures, ours, calibrations = run(PROFILES["quick" if args.quick else "full"])
    if args.json:
        result = {"acceltrial": figures} | {
            c.judge: {**c.figures, "setting": c.rung.label() if c.rung else None}
            for c in calibrations
        }
        print(json.dumps(result, indent=2))
        return 0
    print("\n".join(report(figures, ours, calibrations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
