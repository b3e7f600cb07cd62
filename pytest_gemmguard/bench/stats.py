"""Summaries of timing samples and the regression verdict.

Pure Python, no numpy: the numbers here decide whether CI goes red, so they stay small and checkable.

Summary: the median and a distribution-free confidence interval for it, from order statistics (the
ranks come from the binomial(n, 1/2) law through its normal approximation, so no shape of the timing
distribution is assumed).

Verdict (`compare`, used for compile times; runtimes are judged on paired ratios by verdict.py): a run is a
*regression* only when both hold:
  1. the slowdown, estimated as the ratio of medians current/baseline (each normalised by a reference median
     when both runs have one), exceeds the threshold (e.g. 20%); and
  2. it is statistically significant: a one-sided Mann-Whitney U test of "current is slower than
     baseline" on the (normalised) samples rejects at level `alpha` (default 0.01).
The test's nominal false-alarm rate is `alpha` per comparison when the samples of the two runs are
exchangeable; between runs they drift by more than their within-run spread, so the threshold is what keeps
an unchanged rerun green.

With few samples the U test has little or no power at alpha = 0.01 (4 against 4 cannot reach it: the
smallest one-sided p is 1/70 = 0.014; 5 against 5 can, 1/252 = 0.004), so with fewer than
`MIN_TEST_SAMPLES` on either side it is not run, and then nothing is called a regression: a slowdown
beyond the threshold is only *possible* (`possible_regression`), reported but never failing the build,
since one sample cannot tell a regression from noise (an unchanged rerun measured +21% for a 0.13 s
session compile on the CI machine). Cold compile times (one fresh process per sample, so usually few
samples) meet this case; runtimes, with at least `MIN_TEST_SAMPLES` samples (enforced), do not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of no samples")
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def _norm_ppf(p: float) -> float:
    """Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    if p > 1 - lo:
        return -_norm_ppf(1 - p)
    q = p - 0.5
    r = q * q
    return (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


@dataclass(frozen=True)
class Summary:
    """Median of the samples with a `confidence` interval [low, high]; n samples."""

    median: float
    low: float
    high: float
    n: int
    confidence: float = 0.95

    @property
    def rel_halfwidth(self) -> float:
        """Half the CI width relative to the median: 0.01 means the median is known to about ±1%."""
        return (self.high - self.low) / (2 * self.median) if self.median > 0 else math.inf


def summarize(xs: Sequence[float], confidence: float = 0.95) -> Summary:
    """Median and its order-statistic confidence interval (exact ranks for the binomial's normal limit)."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("no samples")
    med = median(s)
    if n < 6:  # too few ranks for any interval narrower than the range
        return Summary(med, s[0], s[-1], n, confidence)
    z = _norm_ppf(0.5 + confidence / 2)
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    return Summary(med, s[lo], s[hi], n, confidence)


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided p-value that `x` tends to be larger than `y` (U test, normal approximation, ties
    corrected, continuity corrected). Small p: x is significantly slower than y."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    ranks = [0.0] * len(pooled)
    tie_term = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        avg = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[k] = avg
        t = j - i + 1
        tie_term += t**3 - t
        i = j + 1
    r1 = sum(r for r, (_, g) in zip(ranks, pooled, strict=True) if g == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    mean_u = n1 * n2 / 2
    var_u = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if var_u <= 0:
        return 0.5
    z = (u1 - mean_u - 0.5) / math.sqrt(var_u)
    return _norm_sf(z)


def parse_fraction(value: object, what: str = "threshold") -> float:
    """'5%' -> 0.05, 0.05 -> 0.05, '0.05' -> 0.05. Raises ValueError with a one-line message."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"{what}={value!r}: expected a fraction like '5%' or 0.05") from None
    if not 0 <= number < 100:
        raise ValueError(f"{what}={value!r}: must be >= 0")
    return number


# Fewest samples per side for which the U test is run (5 against 5 can reach p = 0.004 < 0.01).
MIN_TEST_SAMPLES = 5


@dataclass(frozen=True)
class Comparison:
    """Current run against baseline: the slowdown ratio (1.10 = 10% slower), its p-value, the verdict."""

    ratio: float  # current / baseline, of medians (normalised by the in-run reference when `normalised`)
    p_value: float
    threshold: float
    alpha: float
    normalised: bool
    n_current: int  # samples on each side: below MIN_TEST_SAMPLES the U test is not run
    n_baseline: int

    @property
    def tested(self) -> bool:
        """Whether the significance test ran (both sides have enough samples); else nothing can fail."""
        return min(self.n_current, self.n_baseline) >= MIN_TEST_SAMPLES

    @property
    def beyond_threshold(self) -> bool:
        return self.ratio > 1 + self.threshold

    @property
    def significant(self) -> bool:
        return self.p_value < self.alpha

    @property
    def regression(self) -> bool:
        """Statistically real: beyond the threshold and significant. Untested is never a regression."""
        return self.beyond_threshold and self.tested and self.significant

    @property
    def possible_regression(self) -> bool:
        """Beyond the threshold, but too few samples to test: reported, not failed."""
        return self.beyond_threshold and not self.tested

    def significance(self) -> str:
        """How significance was judged, in words: the test and its p, or why it was not run."""
        if self.tested:
            return f"one-sided Mann-Whitney p={self.p_value:.2g}, alpha={self.alpha:g}"
        return (
            f"significance not tested: {self.n_current} sample(s) now, {self.n_baseline} in baseline, "
            f"the U test needs >= {MIN_TEST_SAMPLES} each: reported, not failed"
        )

    def describe(self) -> str:
        how = "relative to the in-run reference" if self.normalised else "absolute"
        return f"{(self.ratio - 1) * 100:+.1f}% ({how}; threshold +{self.threshold * 100:g}%, {self.significance()})"


def compare(
    current: Sequence[float],
    baseline: Sequence[float],
    threshold: float,
    alpha: float = 0.01,
    current_ref: float | None = None,
    baseline_ref: float | None = None,
) -> Comparison:
    """Is `current` slower than `baseline` by more than `threshold`, significantly? See the module doc.

    With both reference medians given, each run's samples are divided by its own reference first, so a
    machine that is uniformly 10% slower today compares equal."""
    normalised = bool(current_ref and baseline_ref)
    cur = [v / current_ref for v in current] if normalised else list(current)
    base = [v / baseline_ref for v in baseline] if normalised else list(baseline)
    ratio = median(cur) / median(base)
    return Comparison(
        ratio, mann_whitney_greater(cur, base), threshold, alpha, normalised, n_current=len(cur), n_baseline=len(base)
    )
