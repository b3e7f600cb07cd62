"""Compile-time regressions get the runtime rule: beyond the threshold and, with >= 5 cold compiles on
each side (each its own fresh process and empty cache), a significant one-sided Mann-Whitney U test.

End to end through pytest with real Inductor compiles (ATen backend, CPU): a baseline of 5 cold compiles,
an A/A rerun that passes, and a planted compile slowdown that fails with the numbers (15 fresh
processes); and the default single sample a side, where a planted slowdown is reported as possible but
never fails (one sample cannot tell it from noise). The plant is a real
Inductor post-grad graph pass that sleeps in proportion to the compile's own time so far: a fixed delay
would shrink to noise against a compile slowed down by a loaded machine, a proportional one does not.
"""

import json

import pytest

from pytest_gemmguard.bench.budget import Budget, check
from pytest_gemmguard.bench.measurement import Measurement

PLANT = '''
import os
import time

from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard import backends
from pytest_gemmguard.backends.aten import AtenBackend

IMPORTED = time.perf_counter()  # in a cold compile's fresh process: just before its compile starts


class SlowPass(CustomGraphPass):
    """A real post-grad pass that changes nothing but makes the compile `factor` times slower up to here."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, graph):
        time.sleep(self.factor * (time.perf_counter() - IMPORTED))

    def uuid(self):
        return f"gemmguard-test-slow-{self.factor}"


class SlowCompile(AtenBackend):
    """ATen, plus the planted pass in cold compiles when GG_COMPILE_SLOWER is set: same kernels, slower compile."""

    name = "cold-compile-plant"  # unique: the registry is per process, shared by in-process pytester runs

    def inductor_options(self):
        factor = float(os.environ.get("GG_COMPILE_SLOWER", "0"))
        options = super().inductor_options()
        if factor and os.environ.get("GEMMGUARD_COLD_ROOT"):  # only the budgeted cold compiles pay for it
            return {**options, "post_grad_custom_post_pass": SlowPass(factor)}
        return options


backends.register(SlowCompile())
'''

TEST = """
def test_mm(gemm_benchmark):
    m = gemm_benchmark(shape=(16, 16, 16))
    assert m.kernels
"""

# Compile times have no in-run reference to cancel machine drift, and this 2-core machine is shared: a
# wide threshold keeps the A/A run green; the plant (about 2-2.5x the compile) is far beyond it.
PYPROJECT = """
[tool.gemmguard]
compile_regression = "60%"
runtime_regression = "500%"
max_time_s = 0.05
min_samples = 5
cpu_threads = 1
reference = false
"""

# The plant sleeps 1.5x the compile's time up to the post-grad passes (most of a cold compile: imports,
# Dynamo, AOT), so the compile takes about 2-2.5x as long however loaded the machine is.
SLOWER = "1.5"


@pytest.fixture
def plant_dir(pytester):
    # The plant lives in an importable module, not the conftest: the cold compile's fresh process
    # imports it by name (spec["backend_module"]) to register the same backend there.
    pytester.makepyfile(gg_slow_compile=PLANT, test_compile=TEST)
    pytester.makeconftest("import gg_slow_compile  # noqa: F401\n")
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.syspathinsert()
    return pytester


def _entry(path):
    (entry,) = json.loads(open(path).read())["entries"].values()
    return entry


@pytest.mark.timing
def test_one_cold_compile_a_side_is_reported_as_possible_never_failed(plant_dir, monkeypatch):
    """The default (1 sample): a planted slowdown is named as a possible compile regression, and the test
    passes, since one sample cannot tell it from noise. Two fresh processes: cheap enough for every run."""
    base = str(plant_dir.path / "base.json")
    common = ("-p", "no:cacheprovider", "--gemm-backends=cold-compile-plant")
    monkeypatch.delenv("GG_COMPILE_SLOWER", raising=False)
    plant_dir.runpytest_inprocess(*common, f"--gemm-save-baseline={base}").assert_outcomes(passed=1)
    assert len(_entry(base)["cold_compile_samples"]) == 1
    monkeypatch.setenv("GG_COMPILE_SLOWER", SLOWER)
    slow = plant_dir.runpytest_inprocess(*common, f"--gemm-baseline={base}")
    slow.assert_outcomes(passed=1)
    text = slow.stdout.str()
    assert "(possible)" in text, text
    assert "compile time of 1 case(s) not tested for significance" in text
    assert "possible compile regressions, not failed: " in text


# 15 fresh processes (3 runs of 5 cold compiles), about 3 minutes on the 2-core CI machine: the one proof
# that the significance path works end to end, so it runs in every suite.
@pytest.mark.timing
def test_repeated_cold_compiles_aa_passes_and_planted_slowdown_fails(plant_dir, monkeypatch):
    base = str(plant_dir.path / "base.json")
    report = plant_dir.path / "report.json"
    common = ("-p", "no:cacheprovider", "--gemm-backends=cold-compile-plant", "--gemm-compile-samples=5")
    monkeypatch.delenv("GG_COMPILE_SLOWER", raising=False)
    first = plant_dir.runpytest_inprocess(*common, "-v", f"--gemm-save-baseline={base}")
    first.assert_outcomes(passed=1)
    out = first.stdout.str()
    for i in range(1, 6):  # a progress line per cold compile
        assert f"cold compile {i}/5 in a fresh process with empty caches" in out
    entry = _entry(base)
    assert len(entry["cold_compile_samples"]) == 5 and len(entry["warm_compile_samples"]) == 5
    assert entry["cold_compile_s"] == pytest.approx(sorted(entry["cold_compile_samples"])[2], abs=1e-3)
    assert json.loads(open(base).read())["version"] == 3  # the samples since version 2, paired ratios since 3

    # A/A: the same compile again, 5 fresh samples against 5: tested for significance, and passes.
    again = plant_dir.runpytest_inprocess(*common, f"--gemm-baseline={base}", f"--gemm-report-json={report}")
    again.assert_outcomes(passed=1)
    compared = json.loads(report.read_text())["measurements"][0]["compared"]["compile"]
    assert compared["tested"] and compared["n"] == [5, 5] and not compared["regression"], compared
    assert "not tested for significance" not in again.stdout.str()

    # The planted slowdown fails with the numbers: ratio, threshold, the U test, both sets of samples.
    monkeypatch.setenv("GG_COMPILE_SLOWER", SLOWER)
    slow = plant_dir.runpytest_inprocess(*common, f"--gemm-baseline={base}")
    slow.assert_outcomes(failed=1)
    text = slow.stdout.str()
    assert "gemmguard: cold-compile-plant broke its performance budget" in text
    line = next(ln for ln in text.splitlines() if "compile time regression" in ln)
    assert "(cold; threshold +60%, one-sided Mann-Whitney p=" in line and "alpha=0.01)" in line, line
    assert "now median" in line and "of 5 (" in line and "baseline median" in line, line
    assert "cold median" in text and "over 5 fresh process(es)" in text


def _measured(cold: list[float]) -> Measurement:
    return Measurement(
        key="k", test="t", backend="aten", op="mm", shape=(8, 8, 8), dtype="float32", epilogue="none",
        layout="contiguous", device="cpu", fn="case", median_s=1e-3, ci_low_s=1e-3, ci_high_s=1e-3, n=10,
        method="cpu", stopped="converged", samples=[1e-3] * 10, ref_median_s=None, flops=1.0, peak_tflops=None,
        compile_s=1.0, cold_compile_s=sorted(cold)[(len(cold) - 1) // 2], cold_compile_samples=cold,
    )  # fmt: skip


def test_compile_verdict_needs_significance_and_untested_slowdowns_are_only_possible():
    budget = Budget(compile_regression=0.2)
    base = {"median_s": 1e-3, "samples": [1e-3] * 10, "cold_compile_samples": [1.0, 1.1, 0.9, 1.05, 0.95]}
    # 30% slower in the median, but the samples overlap: not significant, no regression.
    noisy = _measured([1.3, 0.8, 1.4, 0.9, 1.35])
    broken, info = check(noisy, base, budget)
    assert info["compile"]["tested"] and info["compile"]["ratio"] > 1.2 and not broken
    # Every sample slower: beyond the threshold and significant.
    slow = _measured([1.5, 1.6, 1.55, 1.45, 1.7])
    broken, info = check(slow, base, budget)
    assert info["compile"]["p_value"] < 0.01 and len(broken) == 1
    # One sample on either side (the default, or a version-1 baseline): untested, so possible, not failed.
    old_base = {"median_s": 1e-3, "samples": [1e-3] * 10, "cold_compile_s": 1.0}
    broken, info = check(slow, old_base, budget)
    assert not info["compile"]["tested"] and info["compile"]["p_value"] is None
    assert not broken and info["compile"]["possible"]
    broken, info = check(_measured([1.1]), old_base, budget)
    assert not broken and not info["compile"]["possible"]  # +10% is within the threshold


def test_bad_compile_samples_is_one_line(pytester):
    pytester.makepyfile(TEST)
    for value in ("0", "two"):
        result = pytester.runpytest_inprocess("--collect-only", f"--gemm-compile-samples={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        errors = [line for line in result.errlines if line.startswith("ERROR:")]
        assert errors == [f"ERROR: --gemm-compile-samples={value!r}: must be an integer >= 1"], result.errlines


def test_too_few_runtime_samples_for_the_significance_test_is_one_line(pytester):
    """min_samples below what the U test needs would make runtime verdicts threshold-only, silently."""
    pytester.makepyprojecttoml("[tool.gemmguard]\nmin_samples = 3\n")
    pytester.makepyfile("def test_x(gemm_benchmark):\n    pass\n")
    result = pytester.runpytest_inprocess("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == ["ERROR: [tool.gemmguard] min_samples=3: must be >= 5, what the significance test needs"], errors
