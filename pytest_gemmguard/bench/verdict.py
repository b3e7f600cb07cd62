"""The runtime verdict against a baseline: regression, ok, or inconclusive (issue 13).

Each run is summarised by one estimate: the median of its *paired ratios* (kernel sample / reference sample,
the two measured back to back in a random order, timing.py), with the order-statistic 95% interval of that
median (stats.summarize). A burst of contention that lasts longer than one pair slows both halves and cancels
in their ratio; a run without a reference falls back to its absolute samples.

The noise of a run is the log half-width of that interval, ln(high/low)/2 (about the relative half-width:
0.05 means the run knows its ratio to about +-5%). The change against the baseline is R = now/baseline, and
its standard error in log space combines both runs' noise, se = sqrt(noise_now^2 + noise_base^2) / 1.96.

    regression    R > 1 + threshold  and  ln R > z_alpha * se   (beyond the budget, and significantly slower)
    inconclusive  not a regression, and z_alpha * se > ln(1 + threshold): a slowdown of the threshold itself
                  would not have been significant, so "within budget" cannot be claimed either
    ok            otherwise: the comparison could have seen the threshold and did not

The smallest change the comparison could have detected is exp(z_alpha * se) - 1 (its `detect`): when it is
at most the threshold, every R beyond the threshold is significant and so a regression; when it is above,
the verdict is inconclusive and names the side whose noise is to blame (a baseline measured under noise is
no baseline). Nominal false-alarm rate: alpha (one-sided) per comparison when the runs' estimates are
unbiased; the measured rates on a loaded CPU and the H200 are in docs/validation/benchmarks.md.

`noise_target` is the noise a run aims for while it samples: with a baseline as quiet as itself the
comparison is conclusive.

The ratio cannot see a slowdown of the measured thing that slows its reference as much: a user's function
that sleeps, or does more work, is slower compiled and eager alike. The CI gate therefore judges the
compiled time itself too, over its interleaved base/head rounds: `judge_over_rounds`, which holds either
quantity's change to how much the unchanged base moved between its own runs in the job. One round has no
such range to go by, so it judges nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .stats import _norm_ppf, _norm_sf, summarize

Z95 = _norm_ppf(0.975)  # the intervals are 95% ones: noise / Z95 is a standard error


@dataclass(frozen=True)
class Estimate:
    """One run's runtime estimate: `value` (median paired ratio, or median seconds when not `paired`) with
    its 95% interval [low, high] over `n` samples or pairs."""

    value: float
    low: float
    high: float
    n: int
    paired: bool
    legacy: bool = False  # from a baseline written before paired ratios (noise of its unpaired samples)

    @property
    def noise(self) -> float:
        """Log half-width of the 95% interval: about the relative uncertainty of `value`."""
        if self.low <= 0 or self.high <= 0:
            return math.inf
        return math.log(self.high / self.low) / 2


def paired_ratios(samples: Sequence[float], ref_samples: Sequence[float]) -> list[float]:
    """Kernel sample / reference sample, pair by pair (the two lists are in the order they were taken)."""
    return [t / r for t, r in zip(samples, ref_samples, strict=False) if r > 0]


def estimate(samples: Sequence[float], ref_samples: Sequence[float] = ()) -> Estimate:
    """The estimate of one run from its samples, paired with the reference's when it has them."""
    ratios = paired_ratios(samples, ref_samples) if ref_samples else []
    s = summarize(ratios if ratios else samples)
    return Estimate(s.median, s.low, s.high, s.n, paired=bool(ratios))


def estimate_of(entry: Mapping[str, Any], paired: bool = True) -> Estimate | None:
    """The estimate a measurement or baseline entry holds (Measurement.as_dict()); None without samples.
    Entries of baseline versions 1 and 2 have no paired ratios: their ratio is median / reference median and
    their noise that of the unpaired samples (the reference's own noise was not kept), marked `legacy`.
    `paired=False` asks for the absolute estimate (when the other side has no reference)."""
    if paired and entry.get("ratio") and entry.get("ratio_low") and entry.get("ratio_high"):
        n = int(entry.get("ratio_n") or entry.get("n") or 0)
        return Estimate(float(entry["ratio"]), float(entry["ratio_low"]), float(entry["ratio_high"]), n, True)
    samples = [float(v) for v in entry.get("samples") or []]
    if not samples:
        return None
    s = summarize(samples)
    ref = entry.get("ref_median_s")
    if paired and ref:
        return Estimate(s.median / ref, s.low / ref, s.high / ref, s.n, paired=True, legacy=True)
    return Estimate(s.median, s.low, s.high, s.n, paired=False)


def z_alpha(alpha: float) -> float:
    return _norm_ppf(1 - alpha)


def noise_target(threshold: float, alpha: float = 0.01) -> float:
    """The noise one run needs so that, against a baseline as quiet, a slowdown of `threshold` is
    significant: z_alpha * sqrt(2) * noise / Z95 <= ln(1 + threshold)."""
    return Z95 * math.log1p(threshold) / (z_alpha(alpha) * math.sqrt(2))


def detectable(noise: float, alpha: float = 0.01) -> float:
    """The smallest slowdown one run of this noise can detect against a baseline as quiet (for reports)."""
    return math.expm1(z_alpha(alpha) * math.sqrt(2) * noise / Z95) if math.isfinite(noise) else math.inf


@dataclass(frozen=True)
class RuntimeVerdict:
    """Current run against baseline: the change, how precisely it is known, and the three-way verdict."""

    ratio: float  # now / baseline (each a median paired ratio when `normalised`)
    threshold: float
    alpha: float
    noise_now: float
    noise_base: float
    normalised: bool
    legacy_base: bool = False

    @property
    def se(self) -> float:
        return math.hypot(self.noise_now, self.noise_base) / Z95

    @property
    def p_value(self) -> float:
        if not math.isfinite(self.se) or self.ratio <= 0:
            return 1.0
        return _norm_sf(math.log(self.ratio) / self.se) if self.se > 0 else float(self.ratio <= 1)

    @property
    def detect(self) -> float:
        """The smallest slowdown this comparison could have called significant."""
        return math.expm1(z_alpha(self.alpha) * self.se) if math.isfinite(self.se) else math.inf

    @property
    def regression(self) -> bool:
        return self.ratio > 1 + self.threshold and self.p_value < self.alpha

    @property
    def inconclusive(self) -> bool:
        return not self.regression and self.detect > self.threshold

    @property
    def verdict(self) -> str:
        return "regression" if self.regression else ("inconclusive" if self.inconclusive else "ok")

    def blame(self) -> str:
        """Whose noise hides the threshold: each side may use its share, `noise_target`; both within it make
        the comparison conclusive, so an inconclusive one has at least one side over it."""
        share = noise_target(self.threshold, self.alpha)
        base_bad, now_bad = self.noise_base > share, self.noise_now > share
        if base_bad and now_bad:
            return "both this run and the baseline were measured under noise"
        if base_bad:
            return "the baseline was measured under noise (record it again on a quieter machine)"
        return "this run was measured under noise (rerun on a quieter machine, or give it more time)"

    def describe(self) -> str:
        how = "relative to the in-run reference, paired" if self.normalised else "absolute"
        noise = f"noise +-{_pct(self.noise_now)} now, +-{_pct(self.noise_base)} in baseline"
        if self.legacy_base:
            noise += " (an older baseline: its noise from unpaired samples)"
        text = (
            f"{(self.ratio - 1) * 100:+.1f}% ({how}; threshold +{self.threshold * 100:g}%; {noise}; "
            f"smallest detectable +{_pct(self.detect)}; p={self.p_value:.2g}, alpha={self.alpha:g})"
        )
        if self.inconclusive:
            text += f": inconclusive, {self.blame()}"
        return text


def _pct(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{100 * x:.1f}%"


def judge(now: Estimate, base: Estimate, threshold: float, alpha: float = 0.01) -> RuntimeVerdict:
    """The three-way verdict of `now` against `base` (see the module doc)."""
    return RuntimeVerdict(
        now.value / base.value,
        threshold,
        alpha,
        now.noise,
        base.noise,
        normalised=now.paired and base.paired,
        legacy_base=base.legacy,
    )


# How far beyond the threshold a round's change must go, in units of the base's range between its own runs
# (max - min of their log values), for `n` rounds. Where every run's log value is an independent draw from one
# normal distribution (an unchanged pull request on a machine that drifts between runs), the statistic
# min over rounds of (head_i - base_i) / range(base) does not depend on how far the machine drifts; these are
# its 99.5th percentiles, simulated (2 million draws, four seeds, rounded up; tests/test_bench_verdict.py checks
# them against a fresh simulation). Holding every round to them keeps an unchanged case failing all its rounds
# at most 0.5% of the time, on a quiet runner as on one whose runs move by far more than the threshold (a case
# of tens of microseconds, mostly a call's fixed cost, moved +-35% between runs on a 2-core CPU). Two base runs
# tell little about the drift, so two rounds see only changes far beyond it; from eight rounds on the range
# alone is enough.
DRIFT_RANGES = {2: 23.6, 3: 2.0, 4: 0.72, 5: 0.35, 6: 0.16, 7: 0.05}


def drift_ranges(rounds: int) -> float:
    """The allowance for the base's drift, in base ranges, for a gate of `rounds` (at least 2) rounds."""
    return DRIFT_RANGES.get(rounds, 0.0)


def judge_over_rounds(
    now: Sequence[Estimate], base: Sequence[Estimate], threshold: float, alpha: float = 0.01
) -> list[RuntimeVerdict] | None:
    """One verdict per round of the CI gate, now[i] against base[i] (measured one after the other), on the
    ratio to eager or on the compiled time itself. Each run's own interval cannot see how much the quantity moves
    *between* runs (a shared runner drifts; the reference and the kernel feel it differently), so a round counts
    as a regression only where its change is significant by the runs' own noise and beyond the threshold *plus*
    `drift_ranges(n)` times the base's between-run range: how far the unchanged code moved between its own runs in
    this job, scaled so that an A/A case fails every round at most 0.5% of the time however much the runner
    drifts (DRIFT_RANGES). The head's own spread is not used: a change may make the head erratic (2.7x in one
    round, 127x in the next), which must not hide it. tests/test_bench_verdict.py simulates what this catches.
    None with fewer than two rounds: one run of a side has no range, and a slower function and a slower machine
    look alike."""
    if len(now) != len(base) or len(now) < 2:
        return None
    logs = [math.log(e.value) for e in base if e.value > 0]
    if len(logs) != len(base):
        return None
    drift = max(logs) - min(logs)
    wider = (1 + threshold) * math.exp(drift_ranges(len(base)) * drift) - 1
    return [
        RuntimeVerdict(n.value / b.value, wider, alpha, n.noise, b.noise, normalised=n.paired and b.paired)
        for n, b in zip(now, base, strict=True)
    ]


def judge_entries(now: Mapping[str, Any], base: Mapping[str, Any], threshold: float, alpha: float = 0.01):
    """`judge` on a measurement and a baseline entry (dicts); None when either has no samples. Both sides
    are normalised by their reference when both have one, else both are compared in absolute seconds."""
    paired = bool((now.get("ratio") or now.get("ref_median_s")) and (base.get("ratio") or base.get("ref_median_s")))
    a, b = estimate_of(now, paired), estimate_of(base, paired)
    if a is None or b is None:
        return None
    return judge(a, b, threshold, alpha)
