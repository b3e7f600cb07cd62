"""The statistics behind the regression verdict: intervals, the U test, and what counts as a regression."""

import random

import pytest

from pytest_gemmguard.bench.stats import compare, mann_whitney_greater, median, parse_fraction, summarize


def _draw(rng: random.Random, n: int, scale: float = 1.0) -> list[float]:
    # Timing-like: positive, right-skewed.
    return [scale * rng.lognormvariate(0.0, 0.05) for _ in range(n)]


def test_median_interval_contains_the_median_and_narrows_with_n():
    rng = random.Random(1)
    small, large = summarize(_draw(rng, 20)), summarize(_draw(rng, 2000))
    for s in (small, large):
        assert s.low <= s.median <= s.high
    assert large.rel_halfwidth < small.rel_halfwidth < 0.1
    assert median([3.0, 1.0, 2.0, 10.0]) == 2.5


def test_median_interval_has_its_coverage():
    # The true median of lognormal(0, s) is 1: a 95% interval must miss it about 5% of the time.
    rng = random.Random(2)
    misses = sum(not (s.low <= 1.0 <= s.high) for s in (summarize(_draw(rng, 60)) for _ in range(400)))
    assert misses / 400 < 0.09


def test_mann_whitney_is_one_sided():
    rng = random.Random(3)
    base = _draw(rng, 80)
    assert mann_whitney_greater(_draw(rng, 80, 1.1), base) < 1e-6
    assert mann_whitney_greater(_draw(rng, 80, 0.9), base) > 0.99
    assert mann_whitney_greater([1.0] * 10, [1.0] * 10) == pytest.approx(0.5, abs=0.1)  # all ties


def test_aa_false_alarm_rate_is_at_most_alpha():
    rng = random.Random(4)
    trials = 400
    significant = sum(compare(_draw(rng, 50), _draw(rng, 50), 0.0, 0.05).significant for _ in range(trials))
    assert significant / trials < 0.09  # nominal 5%
    # With a 5% threshold on top, equal distributions never count as a regression.
    assert not any(compare(_draw(rng, 50), _draw(rng, 50), 0.05).regression for _ in range(200))


def test_planted_slowdowns_are_caught_and_small_ones_need_the_threshold():
    rng = random.Random(5)
    base = _draw(rng, 200)
    assert compare(_draw(rng, 200, 2.0), base, 0.05).regression
    three = compare(_draw(rng, 200, 1.03), base, 0.05)
    assert three.significant and not three.regression  # real, but within the 5% budget


def test_in_run_reference_cancels_machine_drift():
    rng = random.Random(6)
    base, today = _draw(rng, 200), _draw(rng, 200, 1.15)  # the whole machine is 15% slower today
    assert compare(today, base, 0.05).regression  # absolute times would cry wolf
    normalised = compare(today, base, 0.05, current_ref=1.15, baseline_ref=1.0)
    assert normalised.normalised and not normalised.regression
    assert normalised.ratio == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), (0.2, 0.2), ("0.01", 0.01), (" 20% ", 0.2)])
def test_parse_fraction(text, value):
    assert parse_fraction(text) == pytest.approx(value)


def test_parse_fraction_rejects_nonsense_in_one_line():
    with pytest.raises(ValueError, match="runtime_regression='five': expected a fraction"):
        parse_fraction("five", "runtime_regression")
