"""The judges the decision benchmark compares, each fed the same simulated metrics once a minute.

- :class:`AcceltrialJudge`: acceltrial's own engine (``judge``, ``round_outcome``, ``tally``,
  ``assess``) on the readings the preset's queries return, for an ``analysis`` spec.
- :class:`FlaggerJudge`: Flagger's builtin checks as its docs configure them: request success
  rate >= 99% and p99 under a fixed limit per 1 m interval; any failed check (a breach, or no
  values) counts, rollback once ``threshold`` checks failed; a failed check halts advancement.
- :class:`ArgoJudge`: an Argo Rollouts background analysis: success rate and p99 conditions,
  ``failureLimit``, ``inconclusiveLimit``, ``consecutiveErrorLimit``; an empty result is an error,
  NaN fails the condition; the steps go on while the limits hold.
- :class:`KayentaJudge`: Kayenta's Mann-Whitney classifier (98% confidence, direction increase)
  on p99, mean latency and error ratio since the canary started; the score is the share of
  metrics that pass; an interim score under the marginal threshold (75) fails the canary.
- :class:`SequentialJudge`: the reference, a mixture sequential probability ratio test on the
  counts behind the metrics (errors, and successes slower than three bucket bounds); it rolls
  back as soon as the evidence crosses 1/alpha, which Ville's inequality keeps under alpha for
  an A/A candidate however often it looks.

Written from the behaviour the tools document; no code of theirs is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from scipy import stats  # type: ignore[import-untyped]

from acceltrial.api.spec import AnalysisSpec
from acceltrial.api.status import AnalysisCounts
from acceltrial.engine.analysis import Reading, assess, judge, round_outcome, tally
from acceltrial.engine.sequential import sequential_check
from bench.traces import (
    BAD_LATENCY_S,
    BUCKETS,
    SCRAPE_SECONDS,
    WINDOW_SCRAPES,
    Simulation,
    Variant,
    Window,
)

Verdict = Literal["pass", "hold", "rollback", "pause"]
"""pass: the step may end when its time is up; hold: not yet; rollback / pause: stop here."""
MEASURE_SCRAPES = WINDOW_SCRAPES
"""One measurement a minute (analysis.interval 1m), every four scrape intervals."""
P99_LIMIT_S = 1.1 * BAD_LATENCY_S
"""The fixed p99 limit the threshold judges get: 10% above the baseline's true p99."""


class Judge(Protocol):
    """Decides, once a minute, from what Prometheus returns at that instant."""

    name: str

    def start_step(self, sim: Simulation) -> None: ...

    def measure(self, sim: Simulation) -> Verdict: ...


# -- acceltrial ----------------------------------------------------------------------------------


def analysis_spec(**changes: Any) -> AnalysisSpec:
    """The example's criteria (examples/llama3-8b-inf2-httproute.yaml) without the cost and
    utilization ones the traces do not model, with ``changes`` to the analysis."""
    body: dict[str, Any] = {
        "interval": "1m",
        "prometheus": {"address": "http://prometheus:9090"},
        "criteria": [
            {"name": "p99-latency", "metric": "latency_p99", "relative": {"max": 1.10}},
            {
                "name": "mean-latency",
                "metric": "latency_mean",
                "statistical": {"direction": "increase", "confidence": 0.95, "allowedChange": 0.05},
            },
            {"name": "errors", "metric": "error_ratio", "statistical": {"direction": "increase"}},
        ],
        "mode": "sequential",
        "failureLimit": 0,
        "inconclusiveLimit": 3,
    }
    body.update(changes)
    return AnalysisSpec.model_validate(body)


def sequential_spec() -> AnalysisSpec:
    """What the benchmark recommends: the sequential test of latency and errors, failing on
    clear evidence that the candidate is worse than the baseline at all (no tolerance)."""
    return analysis_spec(
        mode="sequential",
        failureLimit=0,
        criteria=[
            {"name": "latency", "metric": "latency_p99", "statistical": {"direction": "increase"}},
            {"name": "errors", "metric": "error_ratio", "statistical": {"direction": "increase"}},
        ],
    )


_VALUES: dict[str, Callable[[Window], float]] = {
    "latency_p99": lambda w: w.quantile(0.99),
    "latency_mean": Window.mean_latency,
    "error_ratio": Window.error_ratio,
}


@dataclass
class AcceltrialJudge:
    """acceltrial's engine judging the readings its preset queries return."""

    name: str
    analysis: AnalysisSpec
    counts: AnalysisCounts = field(default_factory=AnalysisCounts)
    step_start: int = 0

    def start_step(self, sim: Simulation) -> None:
        self.counts = AnalysisCounts()
        self.step_start = sim.now - 1

    def measure(self, sim: Simulation) -> Verdict:
        k = sim.now - 1
        judgements = []
        for criterion in self.analysis.criteria:
            readings = {v: self._reading(sim, criterion, v, k) for v in ("baseline", "candidate")}
            judgements.append(
                judge(criterion, readings["baseline"], readings["candidate"], self.analysis)
            )
        outcome, _ = round_outcome(judgements)
        self.counts = tally(self.counts, outcome)
        status = assess(self.counts, self.analysis)
        if status in ("Failed", "Errored"):
            return "rollback"
        if status == "Inconclusive":
            return "rollback" if self.analysis.on_inconclusive == "rollback" else "pause"
        return "pass" if outcome == "Pass" else "hold"

    def _reading(self, sim: Simulation, criterion: Any, variant: Variant, k: int) -> Reading:
        if not sim.ever_served(variant, k):
            return Reading(values=(), series=0)  # no series exported yet: the query is empty
        check = sequential_check(self.analysis, criterion)
        if check is not None:
            return _counters(sim, variant, check.stream, range(self.step_start, k + 1))
        value = _VALUES[criterion.metric]
        if criterion.statistical is not None:
            # A range query from the step's start at interval / 4 (15 s): one point per scrape.
            points = range(self.step_start, k + 1)
            return Reading(values=tuple(value(sim.window(variant, j)) for j in points), series=1)
        window = sim.window(variant, k)
        requests = window.requests_in_window() if criterion.min_requests is not None else None
        return Reading(values=(value(window),), series=1, requests=requests)


def _counters(sim: Simulation, variant: Variant, stream: str, points: range) -> Reading:
    """What ``sum by (le)`` of the histogram's buckets, or ``sum by (status)`` of
    http_requests_total, returns as a range query at one point per scrape."""
    c = sim.counters[variant]
    start = points.start
    requests = np.cumsum(c.requests)
    if stream == "errors":
        errors = np.cumsum(c.errors)
        series = {
            "2xx": [float(requests[j] - errors[j]) for j in points],
            "5xx": [float(errors[j]) for j in points],
        }
    else:
        buckets = np.cumsum(np.array(c.buckets), axis=0)
        successes = requests - np.cumsum(c.errors)
        series = {f"{b:g}" if b != int(b) else f"{b:.1f}": [float(buckets[j][i]) for j in points]
                  for i, b in enumerate(BUCKETS)}  # fmt: skip
        series["+Inf"] = [float(successes[j]) for j in points]
    seconds = [float((j - start) * SCRAPE_SECONDS) for j in points]
    parts = tuple(
        (label, tuple(zip(seconds, values, strict=True))) for label, values in series.items()
    )
    return Reading(series=len(parts), parts=parts)


# -- Flagger ---------------------------------------------------------------------------------------


@dataclass
class FlaggerJudge:
    """Flagger's builtin request-success-rate and request-duration checks."""

    name: str = "flagger"
    threshold: int = 5
    """Failed checks before rollback; 5 in Flagger's tutorials (its default is 1)."""
    min_success_percent: float = 99.0
    max_p99_s: float = P99_LIMIT_S
    failed_checks: int = 0

    def start_step(self, sim: Simulation) -> None:
        """Flagger counts failed checks over the whole canary run, not per step."""

    def measure(self, sim: Simulation) -> Verdict:
        window = sim.window("candidate", sim.now - 1)
        success = 100 * (1 - window.error_ratio())
        p99 = window.quantile(0.99)
        # NaN (no values found) fails the check, as a breach does.
        passed = success >= self.min_success_percent and p99 <= self.max_p99_s
        if passed:
            return "pass"
        self.failed_checks += 1
        return "rollback" if self.failed_checks >= self.threshold else "hold"


# -- Argo Rollouts --------------------------------------------------------------------------------


@dataclass
class ArgoJudge:
    """An Argo Rollouts background AnalysisRun with two metrics."""

    name: str = "argo"
    failure_limit: int = 3
    """failureLimit of the success-rate example in Argo Rollouts' docs (its default is 0)."""
    inconclusive_limit: int = 0
    consecutive_error_limit: int = 4
    min_success: float = 0.99
    max_p99_s: float = P99_LIMIT_S
    failed: dict[str, int] = field(default_factory=lambda: {"success": 0, "p99": 0})
    errors: dict[str, int] = field(default_factory=lambda: {"success": 0, "p99": 0})

    def start_step(self, sim: Simulation) -> None:
        """One AnalysisRun spans the rollout: its counts carry over steps."""

    def measure(self, sim: Simulation) -> Verdict:
        k = sim.now - 1
        window = sim.window("candidate", k)
        values = {"success": 1 - window.error_ratio(), "p99": window.quantile(0.99)}
        conditions = {
            "success": lambda x: x >= self.min_success,
            "p99": lambda x: x <= self.max_p99_s,
        }
        for metric, value in values.items():
            if not sim.ever_served("candidate", k):
                self.errors[metric] += 1  # "metric result is nil or empty"
                continue
            self.errors[metric] = 0
            if not conditions[metric](value):  # NaN compares false: Failed
                self.failed[metric] += 1
        if any(f > self.failure_limit for f in self.failed.values()):
            return "rollback"
        if any(e > self.consecutive_error_limit for e in self.errors.values()):
            return "rollback"
        return "pass"


# -- Kayenta ----------------------------------------------------------------------------------


@dataclass
class KayentaJudge:
    """Kayenta's Mann-Whitney judge over every sample since the canary started, one a minute."""

    name: str = "kayenta"
    confidence: float = 0.98
    marginal: float = 75.0
    passing: float = 95.0
    start: int | None = None

    def start_step(self, sim: Simulation) -> None:
        if self.start is None:
            self.start = sim.now - 1

    def measure(self, sim: Simulation) -> Verdict:
        k = sim.now - 1
        assert self.start is not None
        classified = [self._classify(sim, metric, k) for metric in _VALUES]
        counted = [c for c in classified if c != "Nodata"]
        if not counted:
            return "hold"
        score = 100 * sum(c == "Pass" for c in counted) / len(counted)
        if score < self.marginal:
            return "rollback"
        return "pass" if score >= self.passing else "hold"

    def _classify(self, sim: Simulation, metric: str, k: int) -> str:
        value = _VALUES[metric]
        assert self.start is not None
        samples = {
            v: [value(sim.window(v, j)) for j in range(k, self.start, -MEASURE_SCRAPES)]
            for v in ("baseline", "candidate")
        }
        base = [x for x in samples["baseline"] if math.isfinite(x)]
        cand = [x for x in samples["candidate"] if math.isfinite(x)]
        if len(base) < 2 or len(cand) < 2:
            return "Nodata"
        # The Hodges-Lehmann interval at this confidence lies above 0 exactly when the two-sided
        # rank-sum test rejects at 1 - confidence with the candidate ranked higher; direction
        # increase with the default effect size 1.0 makes any such increase High.
        test = stats.mannwhitneyu(cand, base, alternative="two-sided")
        higher = test.statistic > len(cand) * len(base) / 2
        return "High" if higher and test.pvalue < 1 - self.confidence else "Pass"


# -- the sequential reference ---------------------------------------------------------------------

_RATIOS = np.array([1.1, 1.2, 1.3, 1.5, 2.0, 3.0, 5.0, 10.0])
"""The alternatives the mixture averages over: the candidate's rate of bad events over the
baseline's."""
_BOUNDS = (BUCKETS.index(1.5), BUCKETS.index(2.5), BUCKETS.index(5.0))


@dataclass
class SequentialJudge:
    """Mixture SPRT, one-sided, on four streams: errors and successes slower than 1.5, 2.5, 5 s.

    In each scrape interval, given how many events (say errors) both variants had and how many
    requests each served, the candidate's share of the events is binomial with its share of
    the requests when both behave alike, and larger when the candidate's event rate is r times
    the baseline's. The likelihood ratio of r against 1, averaged over ``_RATIOS``, is a
    nonnegative martingale under A/A; a rollback when any stream's crosses streams / alpha
    (Bonferroni) is a false rollback with probability at most alpha, at any number of looks.
    """

    name: str = "sequential"
    alpha: float = 0.01
    seen: int = 0
    log_lr: np.ndarray = field(default_factory=lambda: np.zeros((4, len(_RATIOS))))

    def start_step(self, sim: Simulation) -> None:
        """The evidence carries over steps: each interval is conditioned on its own shares."""

    def measure(self, sim: Simulation) -> Verdict:
        base, cand = sim.counters["baseline"], sim.counters["candidate"]
        for k in range(self.seen, sim.now):
            streams = [(cand.errors[k], base.errors[k], cand.requests[k], base.requests[k])]
            ok_c, ok_b = cand.requests[k] - cand.errors[k], base.requests[k] - base.errors[k]
            for b in _BOUNDS:
                streams.append(
                    (ok_c - int(cand.buckets[k][b]), ok_b - int(base.buckets[k][b]), ok_c, ok_b)
                )
            for i, (x_c, x_b, n_c, n_b) in enumerate(streams):
                if n_c == 0 or n_b == 0 or x_c + x_b == 0:
                    continue
                share = n_c / (n_c + n_b)
                q = _RATIOS * share / (_RATIOS * share + 1 - share)
                self.log_lr[i] += x_c * np.log(q / share) + x_b * np.log((1 - q) / (1 - share))
        self.seen = sim.now
        threshold = math.log(len(self.log_lr) / self.alpha)
        mixture = _logmeanexp(self.log_lr)
        return "rollback" if np.any(mixture >= threshold) else "pass"


def _logmeanexp(log_values: np.ndarray) -> np.ndarray:
    top = log_values.max(axis=1, keepdims=True)
    mixture: np.ndarray = top + np.log(np.mean(np.exp(log_values - top), axis=1, keepdims=True))
    return mixture.ravel()
