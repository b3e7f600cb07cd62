"""Benchmarks under pytest-xdist (-n 2), real compiles on the CPU: the workers' measurements reach the
controller, which writes one baseline; comparisons happen on the workers, where a regression fails the
test; the summary warns that the timings shared the machine."""

import json

import pytest

pytest.importorskip("xdist")

BENCH = """
import os

def test_a(gemm_benchmark):
    if os.environ.get("GG_PLANT") == "1":  # a planted 2x slowdown: the timed callable runs twice
        gemm_benchmark.instrument = lambda timed: (lambda: (timed(), timed()))
    gemm_benchmark(shape=(128, 128, 128))

def test_b(gemm_benchmark):
    gemm_benchmark(shape=(96, 96, 96))

def test_plain():
    pass
"""

# Two workers share 2 cores while timing: a wide threshold for the unchanged test; the plant is ~2x.
# Compile time (this session's, one sample: never failed) is not the subject here; load alone doubles it.
PYPROJECT = """
[tool.gemmguard]
runtime_regression = "50%"
compile_regression = "1000%"
max_time_s = 0.3
cpu_threads = 1
cold_compile = false
"""


@pytest.mark.timing
def test_save_and_compare_baselines_with_two_workers(pytester, monkeypatch):
    pytester.makepyfile(test_bench=BENCH)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    base = pytester.path / "base.json"
    report = pytester.path / "report.json"
    common = ("-p", "no:cacheprovider", "-n", "2", "--gemm-backends=aten")
    monkeypatch.delenv("GG_PLANT", raising=False)
    first = pytester.runpytest_inprocess(*common, f"--gemm-save-baseline={base}", f"--gemm-report-json={report}")
    first.assert_outcomes(passed=3)
    out = first.stdout.str()
    assert "saved 2 measurements to baseline" in out, out
    assert "gemmguard: warning: 2 measurement(s) were taken by 2 pytest-xdist workers" in out
    assert "same CPU cores" in out
    doc = json.loads(base.read_text())
    tests = sorted(e["test"] for e in doc["entries"].values())
    assert tests == ["test_bench.py::test_a[aten]", "test_bench.py::test_b[aten]"]
    assert all(len(e["samples"]) >= 10 for e in doc["entries"].values())
    assert len(json.loads(report.read_text())["measurements"]) == 2
    assert not list(pytester.path.glob(".gemmguard-*.tmp"))  # one atomic write, no leftovers

    # The workers read the baseline and fail the planted regression where it ran; the controller does not
    # save the failed measurement.
    monkeypatch.setenv("GG_PLANT", "1")
    slow = pytester.runpytest_inprocess(*common, f"--gemm-baseline={base}", f"--gemm-save-baseline={base}")
    slow.assert_outcomes(passed=2, failed=1)
    text = slow.stdout.str()
    assert "FAILED test_bench.py::test_a[aten]" in text and "runtime regression +" in text
    assert "threshold +50%" in text and "smallest detectable" in text
    assert "saved 1 measurements to baseline" in text and "1 over budget not saved" in text
    after = json.loads(base.read_text())
    assert _entry(after, "test_a") == _entry(doc, "test_a")  # the regression did not replace its baseline
    assert _entry(after, "test_b")["when"] >= _entry(doc, "test_b")["when"]


def _entry(doc, test):
    return next(e for e in doc["entries"].values() if e["test"].endswith(f"::{test}[aten]"))
