"""Decision benchmark: how many requests a bad candidate serves before each judge stops it, and
how often each judge refuses a candidate exactly as good as the baseline.

Every judge (bench/judges.py) runs the same step schedule (5% for 10 m, 25% for 20 m, 50% for
30 m, one measurement a minute; a step ends when its time is up and the latest measurement
passed) on the same seeded traces (bench/traces.py). Figures per trace and judge:

- exposure: requests the candidate served badly (failed, or slower than the baseline's true
  p99) until the judge rolled it back, paused it or, when it missed the regression, promoted it;
- minutes to the decision; how many runs ended in rollback, pause, promotion or stuck
  (steps held past twice the schedule);
- false rollbacks: the share of A/A runs rolled back.

    python -m bench.decisions              # the full profile (a few minutes on 2 cores)
    python -m bench.decisions --quick      # a short profile, well under a minute
    python -m bench.decisions --quick --json

``--json`` prints, per judge, ``exposure`` (bad requests summed over the regression traces, mean
over seeds) and ``false_rollback_rate`` (over the A/A traces), with a few more figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.judges import (
    MEASURE_SCRAPES,
    AcceltrialJudge,
    ArgoJudge,
    FlaggerJudge,
    Judge,
    KayentaJudge,
    SequentialJudge,
    analysis_spec,
    sequential_spec,
)
from bench.traces import SCRAPE_SECONDS, Simulation, Trace

STEPS = ((5, 10), (25, 20), (50, 30))
"""(weight %, minutes) of the example trial's steps."""
SCRAPES_PER_MINUTE = 60 // SCRAPE_SECONDS
MAX_SCRAPES = 2 * sum(m for _, m in STEPS) * SCRAPES_PER_MINUTE

TRACES = (
    Trace("aa-2rps", "aa", rate=2),
    Trace("aa-20rps", "aa", rate=20),
    Trace("aa-200rps", "aa", rate=200),
    Trace("aa-20rps-noisy", "aa", rate=20, sigma=0.8),
    Trace("aa-20rps-spiky", "aa", rate=20, spikes=0.02),
    Trace("p99-1.1x", "regression", p99_factor=1.1),
    Trace("p99-1.3x", "regression", p99_factor=1.3),
    Trace("p99-2x", "regression", p99_factor=2.0),
    Trace("mean-1.1x", "regression", mean_factor=1.1),
    Trace("mean-1.3x", "regression", mean_factor=1.3),
    Trace("mean-2x", "regression", mean_factor=2.0),
    Trace("errors-0.5%", "regression", error_ratio=0.005),
    Trace("errors-2%", "regression", error_ratio=0.02),
    Trace("errors-10%", "regression", error_ratio=0.10),
    Trace("slow-burn-2x-60m", "regression", mean_factor=2.0, burn_minutes=60),
    Trace("under-load-1.5x-from-50%", "regression", mean_factor=1.5, from_weight=50),
    Trace("spiky-baseline-mean-1.3x", "regression", mean_factor=1.3, spikes=0.05,
          baseline_spikes_only=True),
    Trace("no-traffic", "no-traffic"),
)  # fmt: skip

JUDGES: dict[str, Callable[[], Judge]] = {
    "acceltrial": lambda: AcceltrialJudge("acceltrial", sequential_spec()),
    "acceltrial-example": lambda: AcceltrialJudge("acceltrial-example", analysis_spec()),
    "flagger": FlaggerJudge,
    "argo": ArgoJudge,
    "kayenta": KayentaJudge,
    "sequential": SequentialJudge,
}
"""acceltrial: the example's criteria and limits (failureLimit 1); acceltrial-defaults: the same
criteria with the default limits (failureLimit 0)."""


@dataclass(frozen=True)
class Profile:
    aa_seeds: int
    regression_seeds: int


PROFILES = {"quick": Profile(aa_seeds=2, regression_seeds=1), "full": Profile(50, 5)}


@dataclass(frozen=True)
class Outcome:
    """How one run ended."""

    decision: str
    """rollback, pause, promote or stuck."""
    minutes: float
    exposure: int


def run(trace: Trace, trace_index: int, seed: int, judge: Judge) -> Outcome:
    """Play ``trace`` through the schedule under ``judge`` until it decides."""
    sim = Simulation(trace, trace_index, seed)
    for weight, minutes in STEPS:
        judge.start_step(sim)
        ends = sim.now + minutes * SCRAPES_PER_MINUTE
        while True:
            for _ in range(MEASURE_SCRAPES):
                sim.play(weight)
            verdict = judge.measure(sim)
            if verdict in ("rollback", "pause"):
                return _outcome(verdict, sim)
            if sim.now >= ends and verdict == "pass":
                break
            if sim.now >= MAX_SCRAPES:
                return _outcome("stuck", sim)
    return _outcome("promote", sim)


def _outcome(decision: str, sim: Simulation) -> Outcome:
    return Outcome(decision, sim.now / SCRAPES_PER_MINUTE, sim.bad_requests())


@dataclass(frozen=True)
class Cell:
    """One trace under one judge over every seed."""

    outcomes: tuple[Outcome, ...]

    def share(self, decision: str) -> float:
        return sum(o.decision == decision for o in self.outcomes) / len(self.outcomes)

    @property
    def exposure(self) -> float:
        return statistics.fmean(o.exposure for o in self.outcomes)

    @property
    def minutes(self) -> float:
        return statistics.median(o.minutes for o in self.outcomes)


def benchmark(
    profile: Profile, judges: Sequence[str] = tuple(JUDGES), traces: Sequence[Trace] = TRACES
) -> dict[str, dict[str, Cell]]:
    """Every judge on every trace, seeds 0..n-1: {judge: {trace: Cell}}."""
    return {name: cells(JUDGES[name], profile, traces) for name in judges}


def cells(
    judge: Callable[[], Judge],
    profile: Profile,
    traces: Sequence[Trace] = TRACES,
    kinds: Sequence[str] = ("aa", "regression", "no-traffic"),
) -> dict[str, Cell]:
    """One judge (a fresh one per run) on the traces of ``kinds``, seeds 0..n-1: {trace: Cell}.
    Each trace plays the traffic of its position in ``traces``, whichever kinds are run."""
    table = {}
    for index, trace in enumerate(traces):
        if trace.kind not in kinds:
            continue
        seeds = profile.aa_seeds if trace.kind == "aa" else profile.regression_seeds
        table[trace.name] = Cell(tuple(run(trace, index, seed, judge()) for seed in range(seeds)))
    return table


def summary(
    table: dict[str, dict[str, Cell]], traces: Sequence[Trace] = TRACES
) -> dict[str, dict[str, float]]:
    """Per judge: exposure summed over the regression traces, A/A false rollbacks and pauses."""
    kinds = {t.name: t.kind for t in traces}
    result = {}
    for name, cells in table.items():
        regressions = [c for t, c in cells.items() if kinds[t] == "regression"]
        aa = [o for t, c in cells.items() if kinds[t] == "aa" for o in c.outcomes]
        result[name] = {
            "exposure": round(sum(c.exposure for c in regressions), 1),
            "false_rollback_rate": round(sum(o.decision == "rollback" for o in aa) / len(aa), 4),
            "aa_pause_rate": round(sum(o.decision == "pause" for o in aa) / len(aa), 4),
            "missed_regressions": round(sum(c.share("promote") for c in regressions), 2),
            "aa_runs": len(aa),
        }
    return result


def print_table(table: dict[str, dict[str, Cell]], traces: Sequence[Trace] = TRACES) -> None:
    judges = list(table)
    width = max(len(t.name) for t in traces)
    print("exposure (bad candidate requests, mean) / minutes to decision (median) / decisions:")
    print(
        "R rolled back, H paused (held for a person), P promoted, S stuck past twice the schedule"
    )
    print(f"{'trace':<{width}}  " + "  ".join(f"{j:>22}" for j in judges))
    for trace in traces:
        cells = [table[j][trace.name] for j in judges]
        print(f"{trace.name:<{width}}  " + "  ".join(f"{_cell(c, trace):>22}" for c in cells))


_LETTERS = {"rollback": "R", "pause": "H", "promote": "P", "stuck": "S"}


def _cell(cell: Cell, trace: Trace) -> str:
    shares = {d: cell.share(d) for d in ("rollback", "pause", "promote", "stuck")}
    said = " ".join(f"{_LETTERS[d]}{v:.0%}" for d, v in shares.items() if v)
    if trace.kind == "aa":
        return f"{cell.minutes:.0f}m {said}"
    return f"{cell.exposure:.0f} {cell.minutes:.0f}m {said}"


def print_summary(figures: dict[str, dict[str, float]], table: dict[str, dict[str, Cell]]) -> None:
    print()
    print(
        f"{'judge':<20} {'exposure':>10} {'false rollbacks':>16} {'A/A pauses':>11} {'missed':>7}"
    )
    for name, f in figures.items():
        print(
            f"{name:<20} {f['exposure']:>10.0f} {f['false_rollback_rate']:>16.1%} "
            f"{f['aa_pause_rate']:>11.1%} {f['missed_regressions']:>7.2f}"
        )
    ours = table.get("acceltrial")
    if ours is None:
        return
    for other in ("flagger", "sequential"):
        if other not in table:
            continue
        ratios = [
            f"{t}: {ratio(ours[t].exposure, c.exposure)}"
            for t, c in table[other].items()
            if _kind(t) == "regression"
        ]
        print(f"\nexposure acceltrial / {other} per regression trace:")
        print("  " + ", ".join(ratios))


def _kind(name: str) -> str:
    return next(t.kind for t in TRACES if t.name == name)


def ratio(ours: float, theirs: float) -> str:
    """ours / theirs as printed: 0/0 and inf where theirs is 0."""
    if theirs == 0:
        return "0/0" if ours == 0 else "inf"
    return f"{ours / theirs:.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few seeds: well under a minute")
    parser.add_argument("--json", action="store_true", help="print the per-judge figures as JSON")
    parser.add_argument("--judges", nargs="+", choices=list(JUDGES), default=list(JUDGES))
    parser.add_argument(
        "--seeds",
        type=int,
        nargs=2,
        metavar=("AA", "REGRESSION"),
        help="seeds per A/A trace and per regression trace (overrides the profile)",
    )
    args = parser.parse_args(argv)
    profile = PROFILES["quick" if args.quick else "full"]
    if args.seeds:
        profile = Profile(*args.seeds)
    table = benchmark(profile, args.judges)
    figures = summary(table)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print_table(table)
    print_summary(figures, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
