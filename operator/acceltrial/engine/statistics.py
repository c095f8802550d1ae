"""The two-sample location test behind statistical criteria: Mann-Whitney with Hodges-Lehmann.

This module owns one question: *is the candidate's metric shifted against the baseline's, by how
much, and how sure are we?* :func:`compare` answers it with a two-sided Wilcoxon rank-sum
(Mann-Whitney) test, the Hodges-Lehmann estimate of the shift ``candidate - baseline`` and its
confidence interval, computed the way R's

    wilcox.test(x = candidate, y = baseline, conf.int = TRUE, conf.level = confidence)

does it in R 4.0 to 4.5 (defaults ``exact = NULL``, ``correct = TRUE``, ``tol.root = 1e-4``,
``digits.rank = Inf``):

* **exact** when both samples have fewer than 50 finite values and the pooled sample has no ties:
  exact p-value from the null distribution of W (``pwilcox``); interval
  ``[d(k), d(mn + 1 - k)]`` from the sorted pairwise differences with ``k = qwilcox(alpha/2)``
  (``k = 1`` when that quantile is 0); estimate ``median(d)``. When the sample is too small for
  the requested level R says "Requested conf.level not achievable" and reports the level the
  interval does have; :attr:`Comparison.confidence` carries that level too.
* **normal** otherwise: normal approximation with tie correction and continuity correction for
  the p-value; the interval bounds and the estimate are the roots, found with R's ``uniroot``
  (Brent's zeroin, ported below) to absolute tolerance ``tol_root``, of the asymptotic statistic
  of ``candidate - d`` against ``baseline``. In this branch the estimate is therefore R's root,
  not the median of the pairwise differences computed directly (R does not compute it either):
  it lies, give or take ``tol_root``, between the two middle pairwise differences, at whichever
  point of that interval the root finder first lands (not necessarily the midpoint). So in this
  branch swapping the samples negates the estimate only to within that interval, and the bounds
  and estimate are within about ``tol_root`` of the exact jump points they approximate.

NaN and +/-Inf values are removed from each sample before anything else (R does the same with
``x[is.finite(x)]``). Fewer than two finite values on either side, or a confidence outside
(0, 1), is a :class:`ValueError`.

One case R cannot answer: when every value of each sample is the same (say, an error rate that is
0 on both sides), every pairwise difference equals ``candidate[0] - baseline[0]`` and R stops with
"cannot compute confidence interval when all observations are tied". Here the estimate and both
bounds are that difference, and the p-value is 1 if it is 0 (R reports NaN).

Pure: numbers in, a frozen dataclass out; no I/O and no clock.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

__all__ = ["EXACT_MAX_SAMPLES", "Comparison", "compare"]

EXACT_MAX_SAMPLES = 49
"""The largest sample (on each side) for which the exact distribution is used, as in R (< 50)."""

_EPS = float(np.finfo(np.float64).eps)  # C's DBL_EPSILON
_UNIROOT_MAXITER = 1000  # R's uniroot() default
_Array = npt.NDArray[np.float64]


def _stats() -> Any:
    """``scipy.stats``, imported on first use: loading it adds about 46 MiB to the operator's
    RSS beyond ``scipy.special``, and only a criterion judged by this comparison needs it (a
    statistical one in fixed mode, or one sequential mode cannot test as a stream). Imported
    once: later calls find it in ``sys.modules``."""
    return importlib.import_module("scipy.stats")


@dataclass(frozen=True, slots=True)
class Comparison:
    """The result of :func:`compare`: the shift ``candidate - baseline`` and the test of it.

    ``estimate``, ``lower`` and ``upper`` are R's ``estimate`` and ``conf.int``; ``p_value`` is
    R's two-sided ``p.value``; ``confidence`` is R's ``attr(conf.int, "conf.level")``, which is
    the requested level unless the exact interval cannot reach it (tiny samples), in which case it
    is the lower level the interval does have. ``statistic`` is R's ``W``: the Mann-Whitney U of
    the candidate (how many (candidate, baseline) pairs have the candidate larger, ties counting
    one half). ``candidate_n`` and ``baseline_n`` count the finite values used.
    """

    estimate: float
    lower: float
    upper: float
    p_value: float
    confidence: float
    method: Literal["exact", "normal"]
    candidate_n: int
    baseline_n: int
    statistic: float


def compare(
    candidate: Sequence[float],
    baseline: Sequence[float],
    confidence: float,
    *,
    tol_root: float = 1e-4,
) -> Comparison:
    """Two-sided Mann-Whitney test of ``candidate`` against ``baseline``, as R's ``wilcox.test``.

    ``confidence`` is the level of the interval for the shift, strictly between 0 and 1.
    ``tol_root`` is R's ``tol.root``: the absolute tolerance of the root finding that places the
    interval bounds and the estimate in the normal branch. R's default of 1e-4 is coarse for
    values that are themselves around 1e-3 (latencies in seconds, say): pass a smaller one, or
    scale the values, if that matters. It has no effect on the exact branch.

    NaN and +/-Inf values are dropped first; :class:`ValueError` if fewer than two finite values
    remain on either side, or if ``confidence`` or ``tol_root`` is out of range.
    """
    x = _finite(candidate, "candidate")
    y = _finite(baseline, "baseline")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        raise ValueError(
            f"confidence must be a number strictly between 0 and 1, not {confidence!r}"
        )
    conf = float(confidence)
    if not 0.0 < conf < 1.0:  # also rejects NaN
        raise ValueError(f"confidence must be strictly between 0 and 1, not {confidence!r}")
    if not (isinstance(tol_root, (int, float)) and math.isfinite(tol_root) and tol_root > 0):
        raise ValueError(f"tol_root must be a positive finite number, not {tol_root!r}")

    pooled = np.concatenate((x, y))
    ties = np.unique(pooled).size != pooled.size
    if x.size <= EXACT_MAX_SAMPLES and y.size <= EXACT_MAX_SAMPLES and not ties:
        return _exact(x, y, conf)
    return _normal(x, y, conf, float(tol_root))


def _finite(values: Sequence[float], side: str) -> _Array:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the {side} samples must be a sequence of numbers: {error}") from None
    if array.ndim != 1:
        raise ValueError(f"the {side} samples must be a flat sequence of numbers")
    finite = array[np.isfinite(array)]
    if finite.size < 2:
        raise ValueError(
            f"the {side} has {finite.size} finite value(s) (of {array.size}); at least 2 are needed"
        )
    return finite


# --- exact branch ------------------------------------------------------------------------------


def _exact(x: _Array, y: _Array, conf: float) -> Comparison:
    nx, ny = x.size, y.size
    test = _stats().mannwhitneyu(x, y, alternative="two-sided", method="exact")
    diffs = np.sort(np.subtract.outer(x, y).ravel())
    alpha = 1.0 - conf
    qu = _qwilcox(alpha / 2, nx, ny)
    if qu == 0:
        qu = 1
    ql = nx * ny - qu
    lower, upper = float(diffs[qu - 1]), float(diffs[ql])  # R: diffs[qu], diffs[ql + 1]
    achieved_alpha = 2 * _pwilcox(qu - 1, nx, ny)
    if achieved_alpha - alpha > alpha / 2:  # R: "Requested conf.level not achievable"
        conf = 1.0 - achieved_alpha
    return Comparison(
        estimate=_median_sorted(diffs),
        lower=lower,
        upper=upper,
        p_value=float(test.pvalue),
        confidence=conf,
        method="exact",
        candidate_n=nx,
        baseline_n=ny,
        statistic=float(test.statistic),
    )


def _median_sorted(values: _Array) -> float:
    half = values.size // 2
    if values.size % 2:
        return float(values[half])
    return float((values[half - 1] + values[half]) / 2)


@lru_cache(maxsize=64)
def _wilcox_frequencies(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m + n, m) rank assignments give U = 0, 1, ..., m * n (no ties).

    The generating function of U is the Gaussian binomial coefficient
    prod_{i=1..m} (1 - q^(n + i)) / (1 - q^i), expanded with exact integers modulo q^(mn + 1).
    """
    if m > n:
        return _wilcox_frequencies(n, m)
    size = m * n + 1
    coefficients = np.zeros(size, dtype=object)
    coefficients[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        if shift < size:  # times (1 - q^(n + i))
            coefficients[shift:] = coefficients[shift:] - coefficients[: size - shift]
        for start in range(i):  # divided by (1 - q^i): a running sum with stride i
            coefficients[start::i] = np.cumsum(coefficients[start::i])
    return tuple(int(c) for c in coefficients)


def _qwilcox(p: float, m: int, n: int) -> int:
    """R's ``qwilcox(p, m, n)`` for ``0 < p <= 0.5``: the smallest q with P(U <= q) >= p.

    Mirrors R's C code, including its floating-point running sum and its 10 * DBL_EPSILON slack.
    """
    frequencies = _wilcox_frequencies(m, n)
    total = float(math.comb(m + n, n))
    target = p - 10 * _EPS
    cumulative = 0.0
    q = 0
    while True:
        cumulative += float(frequencies[q]) / total
        if cumulative >= target or q == m * n:
            return q
        q += 1


def _pwilcox(q: int, m: int, n: int) -> float:
    """R's ``pwilcox(q, m, n)``: P(U <= q), summed over the shorter tail as R does."""
    if q < 0:
        return 0.0
    if q >= m * n:
        return 1.0
    frequencies = _wilcox_frequencies(m, n)
    total = float(math.comb(m + n, n))
    if q <= m * n / 2:
        return _sum_floats(float(f) / total for f in frequencies[: q + 1])
    return 1.0 - _sum_floats(float(f) / total for f in frequencies[: m * n - q])


def _sum_floats(terms: Iterable[float]) -> float:
    """Left-to-right floating-point sum, as R's C loops accumulate (not math.fsum)."""
    total = 0.0
    for term in terms:
        total += term
    return total


# --- normal branch -----------------------------------------------------------------------------


def _normal(x: _Array, y: _Array, conf: float, tol_root: float) -> Comparison:
    nx, ny = x.size, y.size
    mumin = float(x.min() - y.max())
    mumax = float(x.max() - y.min())
    if mumin >= mumax:  # every value of each sample is the same: R cannot build the interval
        identical = mumin == 0.0
        p_value = (
            1.0
            if identical
            else float(
                _stats().mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue
            )
        )
        return Comparison(
            estimate=mumin,
            lower=mumin,
            upper=mumin,
            p_value=p_value,
            confidence=conf,
            method="normal",
            candidate_n=nx,
            baseline_n=ny,
            statistic=nx * ny / 2 if identical else float(np.sum(x[:, None] > y[None, :])),
        )

    test = _stats().mannwhitneyu(
        x, y, alternative="two-sided", method="asymptotic", use_continuity=True
    )
    alpha = 1.0 - conf

    def statistic(d: float, correct: bool) -> float:
        return _asymptotic_statistic(x, y, d, correct)

    w_min = statistic(mumin, True)
    w_max = statistic(mumax, True)

    def root(zq: float) -> float:
        # R: in extreme cases the bound is an end of the range, e.g. wilcox.test(1, 2:60, ...)
        f_lower = w_min - zq
        if f_lower <= 0:
            return mumin
        f_upper = w_max - zq
        if f_upper >= 0:
            return mumax
        return _zeroin(
            lambda d: statistic(d, True) - zq, mumin, mumax, f_lower, f_upper, tol=tol_root
        )

    # R: qnorm(alpha/2, lower.tail = FALSE) for the lower bound, qnorm(alpha/2) for the upper.
    z_half = float(special.ndtri(alpha / 2))
    lower = root(-z_half)
    upper = root(z_half)

    # R: no continuity correction for the estimate; uniroot(W, c(mumin, mumax), tol = tol.root).
    e_lower = statistic(mumin, False)
    e_upper = statistic(mumax, False)
    if e_lower * e_upper > 0:  # R would stop; only reachable through rounding at the range ends
        estimate = _median_sorted(np.sort(np.subtract.outer(x, y).ravel()))
    else:
        estimate = _zeroin(
            lambda d: statistic(d, False), mumin, mumax, e_lower, e_upper, tol=tol_root
        )
    return Comparison(
        estimate=estimate,
        lower=lower,
        upper=upper,
        p_value=float(test.pvalue),
        confidence=conf,
        method="normal",
        candidate_n=nx,
        baseline_n=ny,
        statistic=float(test.statistic),
    )


def _asymptotic_statistic(x: _Array, y: _Array, d: float, correct: bool) -> float:
    """R's ``W(d)``: the standardized rank-sum statistic of ``x - d`` against ``y``.

    Tie-corrected variance, and with ``correct`` the two-sided continuity correction
    ``sign(dz) / 2``. Operations follow R's order so the values agree to the last bit.
    """
    nx, ny = float(x.size), float(y.size)
    ranks = _stats().rankdata(np.concatenate((x - d, y)))
    _, tie_sizes = np.unique(ranks, return_counts=True)
    t = tie_sizes.astype(np.float64)
    dz = float(np.sum(ranks[: x.size])) - nx * (nx + 1) / 2 - nx * ny / 2
    correction = float(np.sign(dz)) * 0.5 if correct else 0.0
    tie_term = float(np.sum(t**3 - t))
    sigma = math.sqrt((nx * ny / 12) * ((nx + ny + 1) - tie_term / ((nx + ny) * (nx + ny - 1))))
    return (dz - correction) / sigma


def _zeroin(
    f: Callable[[float], float],
    ax: float,
    bx: float,
    fa: float,
    fb: float,
    *,
    tol: float,
    maxit: int = _UNIROOT_MAXITER,
) -> float:
    """R's ``R_zeroin2`` (src/library/stats/src/zeroin.c), the engine of ``uniroot``.

    Brent's root finder (Forsythe, Malcolm and Moler), ported statement by statement so that
    every iterate, and therefore the returned root, is the one R computes.
    """
    a, b = ax, bx
    c, fc = a, fa
    if fa == 0.0:
        return a
    if fb == 0.0:
        return b
    for _ in range(maxit + 1):
        prev_step = b - a
        if abs(fc) < abs(fb):  # swap so that b is the best approximation
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol_act = 2 * _EPS * abs(b) + tol / 2
        new_step = (c - b) / 2
        if abs(new_step) <= tol_act or fb == 0.0:
            return b
        if abs(prev_step) >= tol_act and abs(fa) > abs(fb):  # try interpolation
            new_step = _interpolated_step((a, b, c), (fa, fb, fc), prev_step, tol_act, new_step)
        if abs(new_step) < tol_act:
            new_step = tol_act if new_step > 0 else -tol_act
        a, fa = b, fb
        b += new_step
        fb = f(b)
        if (fb > 0 and fc > 0) or (fb < 0 and fc < 0):
            c, fc = a, fa
    return b  # R warns "_NOT_ converged in 1000 iterations" and returns the last iterate


def _interpolated_step(
    abc: tuple[float, float, float],
    fabc: tuple[float, float, float],
    prev_step: float,
    tol_act: float,
    bisection: float,
) -> float:
    """The secant or inverse-quadratic step of zeroin, or ``bisection`` when it is not safe."""
    a, b, c = abc
    fa, fb, fc = fabc
    cb = c - b
    if a == c:  # only two distinct points: linear interpolation
        t1 = fb / fa
        p = cb * t1
        q = 1.0 - t1
    else:  # inverse quadratic interpolation
        q = fa / fc
        t1 = fb / fc
        t2 = fb / fa
        p = t2 * (cb * q * (q - t1) - (b - a) * (t1 - 1.0))
        q = (q - 1.0) * (t1 - 1.0) * (t2 - 1.0)
    if p > 0:
        q = -q
    else:
        p = -p
    if p < (0.75 * cb * q - abs(tol_act * q) / 2) and p < abs(prev_step * q / 2):
        return p / q
    return bisection
