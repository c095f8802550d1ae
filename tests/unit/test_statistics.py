"""Tests for acceltrial.engine.statistics.compare, checked against published results.

R cannot be run here, so every number asserted is either printed in a published source (cited
next to it) or derived independently inside this file: the exact null distribution of the
Mann-Whitney U by enumerating all C(n + m, n) rank assignments, the exact interval from the order
statistics of the pairwise differences, and the normal approximation from a direct pair count.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import ndtri as special_ndtri  # type: ignore[import-untyped]

from acceltrial.engine import statistics
from acceltrial.engine.statistics import Comparison, compare

NAN = float("nan")
INF = float("inf")

# Hollander & Wolfe (1973), p. 69f, as used in R's ?wilcox.test: permeability constants of the
# human chorioamnion at term (x) and at 12-26 weeks (y).
HW_X = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]
HW_Y = [1.15, 0.88, 0.90, 0.74, 1.21]

# R's ?wilcox.test: wilcox.test(Ozone ~ Month, data = airquality, subset = Month %in% c(5, 8)),
# i.e. x = Ozone in May, y = Ozone in August (R's airquality data set, NA written as NaN).
OZONE_MAY = [41, 36, 12, 18, NAN, 28, 23, 19, 8, NAN, 7, 16, 11, 14, 18, 14, 34, 6, 30, 11, 1,
             11, 4, 32, NAN, NAN, NAN, 23, 45, 115, 37]  # fmt: skip
OZONE_AUG = [39, 9, 16, 78, 35, 66, 122, 89, 110, NAN, NAN, 44, 28, 65, NAN, 22, 59, 23, 31, 44,
             21, 9, NAN, 45, 168, 73, NAN, 76, 118, 84, 85]  # fmt: skip

# CRAN package fuzzyRankTests, tests/ranksum.R and its saved R output tests/ranksum.Rout.save.
FUZZY_X = [1, 2, 3, 4, 4, 4, 5, 6, 7]
FUZZY_Y = [4, 5, 7, 7, 8, 9, 10, 11]

ENDMEMO_X = [1, 5, 9, 24, 56, 21, 3, 7, 21, 4]


# --- independent references ---------------------------------------------------------------------


def brute_u_counts(m: int, n: int) -> Counter[int]:
    """The null distribution of U for samples of m and n without ties, by full enumeration."""
    counts: Counter[int] = Counter()
    for ranks in itertools.combinations(range(1, m + n + 1), m):
        counts[sum(ranks) - m * (m + 1) // 2] += 1
    return counts


def brute_cdf(counts: Counter[int], q: int) -> Fraction:
    return Fraction(sum(c for u, c in counts.items() if u <= q), sum(counts.values()))


def u_statistic(x: list[float], y: list[float]) -> float:
    """Mann-Whitney U of x: pairs with x larger, ties counting one half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def brute_exact(x: list[float], y: list[float], confidence: float) -> tuple[float, ...]:
    """(W, p, lower, upper, estimate, achieved confidence) for tie-free x, y, by enumeration.

    p is the two-sided 2 * min(P(U <= W), P(U >= W)), capped at 1. The interval is
    [d(k), d(mn + 1 - k)] of the sorted pairwise differences, k the smallest q with
    P(U <= q) >= alpha / 2 (the alpha/2 quantile of U; k = 1 if that is 0), as in Hollander &
    Wolfe's construction and R's qwilcox().
    """
    m, n = len(x), len(y)
    counts = brute_u_counts(m, n)
    w = u_statistic(x, y)
    assert w == int(w)
    p_low = brute_cdf(counts, int(w))
    p_high = 1 - brute_cdf(counts, int(w) - 1)
    p = min(Fraction(1), 2 * min(p_low, p_high))
    half_alpha = Fraction(1.0 - confidence) / 2
    k = next(q for q in range(m * n + 1) if brute_cdf(counts, q) >= half_alpha)
    k = max(k, 1)
    diffs = sorted(a - b for a in x for b in y)
    achieved = 1 - 2 * brute_cdf(counts, k - 1)
    return w, float(p), diffs[k - 1], diffs[m * n - k], float(np.median(diffs)), float(achieved)


def normal_z(x: list[float], y: list[float], d: float, correct: bool) -> float:
    """The standardized U of x - d against y, tie-corrected, by direct pair counting."""
    m, n = len(x), len(y)
    shifted = [a - d for a in x]
    u = u_statistic(shifted, y)
    ties = sum(t**3 - t for t in Counter(shifted + y).values())
    sigma = math.sqrt(m * n / 12 * ((m + n + 1) - ties / ((m + n) * (m + n - 1))))
    dz = u - m * n / 2
    return (dz - (math.copysign(0.5, dz) if correct and dz else 0.0)) / sigma


def normal_p(x: list[float], y: list[float]) -> float:
    z = normal_z(x, y, 0.0, correct=True)
    return min(1.0, math.erfc(abs(z) / math.sqrt(2)))  # 2 * (1 - Phi(|z|))


def jump(x: list[float], y: list[float], zq: float, correct: bool) -> tuple[float, float]:
    """Where the step function d -> z(d) - zq changes sign: what R's uniroot() brackets.

    z(d) is non-increasing and only changes at pairwise differences, so test it between
    consecutive ones. Returns (d, d) for a jump at d, or the interval where it is exactly 0.
    """
    diffs = sorted({a - b for a in x for b in y})
    for left, right in itertools.pairwise(diffs):
        value = normal_z(x, y, (left + right) / 2, correct) - zq
        if value < 0:
            return left, left
        if value == 0:
            return left, right
    return diffs[-1], diffs[-1]


def within(value: float, bracket: tuple[float, float], tol: float = 1e-4) -> bool:
    return bracket[0] - tol <= value <= bracket[1] + tol


# --- published results --------------------------------------------------------------------------

PUBLISHED = [
    pytest.param(
        HW_X, HW_Y, "exact", 35, 0.2544, 4,
        id="R ?wilcox.test, Hollander & Wolfe p.69: W = 35, p = 0.1272 one-sided, 0.2544 two",
    ),
    pytest.param(
        [19, 22, 16, 29, 24], [20, 11, 17, 12], "exact", 17, 0.1111, 4,
        id="SciPy mannwhitneyu docs (males vs females): U1 = 17, exact p = 0.1111",
    ),
    pytest.param(
        OZONE_MAY, OZONE_AUG, "normal", 127.5, 0.0001208, 7,
        id="R ?wilcox.test airquality Ozone May vs Aug: W = 127.5, p = 0.0001208",
    ),
    pytest.param(
        ENDMEMO_X, [12, 15, 5, 9, 9, 14, 56, 22, 3, 7, 32, 5], "normal", 51.5, 0.5966, 4,
        id="endmemo.com/r/wilcoxon.php, ties: W = 51.5, p = 0.5966",
    ),
    pytest.param(
        ENDMEMO_X, [1233, 4356, 987, 39999, 1111, 200000], "normal", 0, 0.001364, 6,
        id="endmemo.com/r/wilcoxon.php, ties: W = 0, p = 0.001364",
    ),
    pytest.param(
        FUZZY_X, FUZZY_Y, "normal", 8, 0.007566, 6,
        id="fuzzyRankTests tests/ranksum.Rout.save: W = 8, p = 0.007566",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("x", "y", "method", "w", "p", "digits"), PUBLISHED)
def test_published_statistic_and_p_value(  # noqa: PLR0917 - one argument per table column
    x: list[float], y: list[float], method: str, w: float, p: float, digits: int
) -> None:
    result = compare(x, y, 0.95)
    assert result.method == method
    assert result.statistic == w
    assert round(result.p_value, digits) == p
    finite_x = [v for v in x if math.isfinite(v)]
    finite_y = [v for v in y if math.isfinite(v)]
    reference = brute_exact(finite_x, finite_y, 0.95)[1] if method == "exact" else None
    if reference is not None:
        assert result.p_value == pytest.approx(reference, rel=1e-12)
    else:
        assert result.p_value == pytest.approx(normal_p(finite_x, finite_y), rel=1e-9)


def test_published_normal_interval_and_estimate_digit_for_digit() -> None:
    """R 2.15.2, saved in fuzzyRankTests 0.3-4 tests/ranksum.Rout.save:

        > wilcox.test(x, y, conf.int = TRUE)
        W = 8, p-value = 0.007566
        95 percent confidence interval:
         -6.000051 -1.000052
        difference in location
                      -3.99995

    The odd digits are uniroot()'s tolerance of 1e-4 around the true jumps at -6, -1 and -4, so
    matching them to R's 7 printed digits checks the port of R's root finder iterate by iterate.
    R 4.0-4.5 run the same algorithm (the code was only restructured).
    """
    result = compare(FUZZY_X, FUZZY_Y, 0.95)
    assert f"{result.lower:.7g}" == "-6.000051"
    assert f"{result.upper:.7g}" == "-1.000052"
    assert f"{result.estimate:.7g}" == "-3.99995"
    assert result.confidence == 0.95


def test_r_2_6_estimate_with_continuity_correction_matches_the_port() -> None:
    """R 2.3.0 and 2.6.0 (fuzzyRankTests 0.3 and 0.3-2 Rout.save) printed the estimate as
    -3.999972: those versions kept the continuity correction on for the estimate (later R turns it
    off). Feeding that variant to the same root finder reproduces their digits too.
    """
    x = np.asarray(FUZZY_X, dtype=np.float64)
    y = np.asarray(FUZZY_Y, dtype=np.float64)
    lo, hi = float(x.min() - y.max()), float(x.max() - y.min())

    def f(d: float) -> float:
        return statistics._asymptotic_statistic(x, y, d, True)

    root = statistics._zeroin(f, lo, hi, f(lo), f(hi), tol=1e-4)
    assert f"{root:.7g}" == "-3.999972"


def test_normal_bounds_sit_within_tolerance_of_the_exact_jumps() -> None:
    """R's asymptotic bounds are roots of a step function: each must be within tol.root of the
    pairwise difference where the independently computed statistic crosses the normal quantile.
    """
    x = [v for v in OZONE_MAY if math.isfinite(v)]
    y = [v for v in OZONE_AUG if math.isfinite(v)]
    result = compare(OZONE_MAY, OZONE_AUG, 0.95)
    z = 1.959963984540054
    assert within(result.lower, jump(x, y, z, correct=True))
    assert within(result.upper, jump(x, y, -z, correct=True))
    assert within(result.estimate, jump(x, y, 0.0, correct=False))
    assert result.lower < result.estimate < result.upper < 0


def test_tol_root_tightens_the_normal_bounds_onto_the_jumps() -> None:
    result = compare(FUZZY_X, FUZZY_Y, 0.95, tol_root=1e-10)
    assert result.lower == pytest.approx(-6, abs=1e-9)
    assert result.upper == pytest.approx(-1, abs=1e-9)
    assert result.estimate == pytest.approx(-4, abs=1e-9)


# --- exact branch against enumeration -----------------------------------------------------------


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 2), (2, 5), (3, 4), (5, 3), (6, 6), (4, 9)])
def test_exact_distribution_matches_enumeration(m: int, n: int) -> None:
    counts = brute_u_counts(m, n)
    assert statistics._wilcox_frequencies(m, n) == tuple(counts[u] for u in range(m * n + 1))


def test_exact_distribution_at_the_largest_exact_size_is_a_distribution() -> None:
    frequencies = statistics._wilcox_frequencies(49, 49)
    assert sum(frequencies) == math.comb(98, 49)
    assert frequencies == frequencies[::-1]  # symmetric about mn / 2
    assert min(frequencies) == 1


EXACT_CASES = [
    pytest.param(HW_X, HW_Y, id="Hollander-Wolfe permeability"),
    pytest.param([19, 22, 16, 29, 24], [20, 11, 17, 12], id="SciPy docs males/females"),
    pytest.param([3.1, 0.2, 5.5, 4.4], [1.0, 2.2, 6.3, 0.9, 7.7, 8.1], id="interleaved"),
    pytest.param([10.5, 11.2, 12.9, 10.1, 13.3, 12.2, 11.7], [1.5, 2.5, 0.5], id="far apart"),
]


@pytest.mark.parametrize(("x", "y"), EXACT_CASES)
@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_exact_branch_matches_enumeration(
    x: list[float], y: list[float], confidence: float
) -> None:
    w, p, lower, upper, estimate, achieved = brute_exact(x, y, confidence)
    result = compare(x, y, confidence)
    assert result.method == "exact"
    assert result.statistic == w
    assert result.p_value == pytest.approx(p, rel=1e-12)
    assert (result.lower, result.upper) == (lower, upper)
    assert result.estimate == pytest.approx(estimate, rel=1e-15)
    expected_confidence = confidence if achieved >= confidence - (1 - confidence) / 2 else achieved
    assert result.confidence == pytest.approx(expected_confidence, rel=1e-12)


def test_exact_interval_for_hollander_wolfe() -> None:
    """Hand check for n = 10, m = 5 (3003 arrangements): P(U <= 8) = 60/3003 < 0.025 <=
    P(U <= 9) = 83/3003, so qwilcox(0.025, 10, 5) = 9 (8 is the usual two-sided 5% critical value
    of U in Mann-Whitney tables) and the 95% interval is [d(9), d(42)] of the 50 sorted
    differences, with exact coverage 1 - 2 * 60/3003 = 0.96004; the estimate is the mean of d(25)
    and d(26).
    """
    diffs = sorted(a - b for a in HW_X for b in HW_Y)
    counts = brute_u_counts(10, 5)
    assert brute_cdf(counts, 8) == Fraction(60, 3003)
    assert brute_cdf(counts, 9) == Fraction(83, 3003)
    result = compare(HW_X, HW_Y, 0.95)
    assert (result.lower, result.upper) == (diffs[8], diffs[41])
    assert (result.lower, result.upper) == pytest.approx((-0.15, 0.76))
    assert result.estimate == (diffs[24] + diffs[25]) / 2
    assert result.estimate == pytest.approx(0.305)
    assert result.confidence == 0.95  # achievable: R keeps the requested level
    assert result.lower < 0 < result.upper  # consistent with p = 0.2544


def test_unachievable_confidence_is_reported_like_r() -> None:
    """n = m = 2: the only arrangements are C(4, 2) = 6, so no interval reaches 95%. R warns
    "Requested conf.level not achievable", uses [min d, max d] and reports 1 - 2/6.
    """
    result = compare([1.0, 2.0], [3.0, 4.0], 0.95)
    assert result.method == "exact"
    assert (result.lower, result.estimate, result.upper) == (-3.0, -2.0, -1.0)
    assert result.confidence == pytest.approx(2 / 3)
    assert result.p_value == pytest.approx(1 / 3)  # 2 * P(U <= 0) = 2/6


# --- switching between exact and normal ---------------------------------------------------------


@pytest.mark.parametrize(
    ("nx", "ny", "method"),
    [
        (49, 49, "exact"),
        (50, 49, "normal"),
        (49, 50, "normal"),
        (2, 49, "exact"),
        (50, 2, "normal"),
    ],
)
def test_exact_below_50_without_ties(nx: int, ny: int, method: str) -> None:
    x = [i + 0.25 for i in range(nx)]
    y = [i + 0.75 for i in range(ny)]
    result = compare(x, y, 0.95)
    assert result.method == method
    assert (result.candidate_n, result.baseline_n) == (nx, ny)
    if method == "normal":
        assert result.p_value == pytest.approx(normal_p(x, y), rel=1e-9)


@pytest.mark.parametrize(
    ("x", "y"),
    [
        pytest.param([1.0, 2.0, 3.0], [3.0, 4.0, 5.0], id="tie across samples"),
        pytest.param([1.0, 1.0, 3.0], [4.0, 5.0, 6.0], id="tie within the candidate"),
        pytest.param([1.0, 2.0, 3.0], [5.0, 5.0, 6.0], id="tie within the baseline"),
        pytest.param([0.0, 2.0, 3.0], [-0.0, 5.0, 6.0], id="0.0 and -0.0 tie"),
    ],
)
def test_any_tie_means_normal(x: list[float], y: list[float]) -> None:
    result = compare(x, y, 0.95)
    assert result.method == "normal"
    assert result.p_value == pytest.approx(normal_p(x, y), rel=1e-9)


# --- behaviour ----------------------------------------------------------------------------------


def test_identical_samples() -> None:
    sample = [0.12, 0.15, 0.11, 0.19, 0.13, 0.17]
    result = compare(sample, list(sample), 0.95)
    assert result.method == "normal"  # every value is tied with its twin
    assert result.estimate == 0.0
    assert result.p_value == 1.0
    assert result.lower < 0.0 < result.upper


def test_constant_samples_r_cannot_answer() -> None:
    same = compare([0.0] * 20, [0.0] * 20, 0.95)
    assert (same.estimate, same.lower, same.upper, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    apart = compare([3.0] * 5, [1.0] * 4, 0.95)
    assert (apart.estimate, apart.lower, apart.upper) == (2.0, 2.0, 2.0)
    assert apart.statistic == 20.0
    assert apart.p_value == pytest.approx(normal_p([3.0] * 5, [1.0] * 4), rel=1e-9)


@pytest.mark.parametrize("n", [30, 200])
def test_clear_shift(n: int) -> None:
    """Baseline at the normal quantiles (mean 100, sd 5), candidate the same plus 20: every
    pairwise difference is 20 + (b_i - b_j), symmetric about 20, so the estimate is 20.
    """
    baseline = 100.0 + 5.0 * special_ndtri((np.arange(n) + 0.5) / n)
    candidate = baseline + 20.0
    result = compare(candidate.tolist(), baseline.tolist(), 0.95)
    assert result.method == ("exact" if n < 50 else "normal")
    assert result.p_value < 1e-8
    assert 0.0 < result.lower < 20.0 < result.upper
    assert result.estimate == pytest.approx(20.0, abs=1e-4)
    assert result.lower <= result.estimate <= result.upper


def test_non_finite_values_are_dropped() -> None:
    noisy_x = [NAN, *HW_X[:5], INF, *HW_X[5:], -INF]
    noisy_y = [*HW_Y, NAN, NAN, INF]
    assert compare(noisy_x, noisy_y, 0.9) == compare(HW_X, HW_Y, 0.9)
    result = compare(noisy_x, noisy_y, 0.9)
    assert (result.candidate_n, result.baseline_n) == (10, 5)


@pytest.mark.parametrize(
    ("candidate", "baseline", "side"),
    [
        ([], [1.0, 2.0], "candidate"),
        ([1.0], [1.0, 2.0], "candidate"),
        ([NAN, 1.0, INF], [1.0, 2.0], "candidate"),
        ([1.0, 2.0], [-INF, INF, NAN], "baseline"),
        ([1.0, 2.0], [5.0], "baseline"),
    ],
)
def test_too_few_finite_values(candidate: list[float], baseline: list[float], side: str) -> None:
    with pytest.raises(ValueError, match=f"the {side} has .* at least 2"):
        compare(candidate, baseline, 0.95)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, NAN, INF, True, "0.95", None])
def test_invalid_confidence(confidence: object) -> None:
    with pytest.raises(ValueError, match="confidence"):
        compare(HW_X, HW_Y, confidence)  # type: ignore[arg-type]


@pytest.mark.parametrize("tol_root", [0.0, -1e-4, NAN, INF])
def test_invalid_tol_root(tol_root: float) -> None:
    with pytest.raises(ValueError, match="tol_root"):
        compare(FUZZY_X, FUZZY_Y, 0.95, tol_root=tol_root)


def test_result_is_frozen() -> None:
    result = compare(HW_X, HW_Y, 0.95)
    assert isinstance(result, Comparison)
    with pytest.raises(AttributeError):
        result.estimate = 0.0  # type: ignore[misc]


# --- properties ---------------------------------------------------------------------------------

# Integer values keep every shift exact in floating point, so ties survive a shift unchanged;
# a narrow range makes ties (and so the normal branch) common, a wide one makes them rare.
samples = st.lists(st.integers(-40, 40) | st.integers(-(10**6), 10**6), min_size=2, max_size=25)
TOL = 2.5e-4  # two root-finding tolerances: each normal-branch bound is within 1e-4 of its jump


def close(a: float, b: float, method: str) -> bool:
    return abs(a - b) <= (TOL if method == "normal" else 1e-9 * max(1.0, abs(a)))


def middle_differences(x: list[float], y: list[float]) -> tuple[float, float]:
    """The two middle order statistics of the pairwise differences (equal when mn is odd)."""
    diffs = sorted(a - b for a in x for b in y)
    k = len(diffs)
    return diffs[(k - 1) // 2], diffs[k // 2]


def check_estimate(result: Comparison, x: list[float], y: list[float]) -> None:
    """Exact branch: the estimate is the median of the pairwise differences. Normal branch: R's
    root of the uncorrected statistic, which changes sign only between the two middle differences
    (where it is exactly 0 when they differ), so it is some point of that interval, not
    necessarily its midpoint, give or take the root-finding tolerance.
    """
    low, high = middle_differences(x, y)
    if result.method == "exact":
        assert result.estimate == (low + high) / 2
    else:
        assert within(result.estimate, (low, high))


@settings(max_examples=60, deadline=None)
@given(
    x=samples,
    y=samples,
    shift=st.integers(-1000, 1000),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_properties(x: list[int], y: list[int], shift: int, confidence: float) -> None:
    fx, fy = [float(v) for v in x], [float(v) for v in y]
    base = compare(fx, fy, confidence)
    assert 0.0 <= base.p_value <= 1.0
    assert 0.0 < base.confidence <= confidence
    assert base.lower <= base.upper
    slack = TOL if base.method == "normal" else 0.0
    assert base.lower - slack <= base.estimate <= base.upper + slack
    check_estimate(base, fx, fy)

    # Shifting both samples changes nothing but the rounding of the root finder's iterates.
    both = compare([v + shift for v in fx], [v + shift for v in fy], confidence)
    assert both.method == base.method
    assert both.p_value == base.p_value
    assert close(both.lower, base.lower, base.method)
    assert close(both.upper, base.upper, base.method)
    check_estimate(both, fx, fy)

    # Shifting the candidate by c shifts the bounds, and the estimate's interval, by c. (The
    # p-value and the exact/normal choice legitimately change: ties with the baseline come and go.)
    moved_x = [v + shift for v in fx]
    moved = compare(moved_x, fy, confidence)
    check_estimate(moved, moved_x, fy)
    if moved.method == base.method:
        assert close(moved.lower, base.lower + shift, base.method)
        assert close(moved.upper, base.upper + shift, base.method)

    # Swapping the sides mirrors the interval and negates the exact estimate.
    swapped = compare(fy, fx, confidence)
    assert swapped.method == base.method
    assert swapped.p_value == pytest.approx(base.p_value, rel=1e-9, abs=1e-15)
    assert swapped.statistic == len(x) * len(y) - base.statistic
    assert close(swapped.lower, -base.upper, base.method)
    assert close(swapped.upper, -base.lower, base.method)
    check_estimate(swapped, fy, fx)
    if base.method == "exact":
        assert swapped.estimate == -base.estimate


def test_normal_estimate_is_a_point_between_the_middle_differences_not_their_midpoint() -> None:
    """Found by the property test: x = (0, 1), y = (0, 1, -2) has ties, so the normal branch; the
    six differences sorted are -1, 0, 0, 1, 2, 3, and the uncorrected statistic is exactly 0 on
    (0, 1). R's uniroot() stops at the first iterate where it is 0: not the median 0.5. Swapping
    the sides lands on a different point of (-1, 0), so the estimate is not exactly antisymmetric.
    """
    forward = compare([0.0, 1.0], [0.0, 1.0, -2.0], 0.8)
    backward = compare([0.0, 1.0, -2.0], [0.0, 1.0], 0.8)
    assert forward.method == backward.method == "normal"
    assert 0.0 < forward.estimate < 1.0
    assert -1.0 < backward.estimate < 0.0
    assert forward.estimate != pytest.approx(0.5)
