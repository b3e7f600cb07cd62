"""The measuring half end to end, through pytest: real Inductor compiles on the CPU, real pytest-benchmark.

An unchanged rerun (A/A) passes against the saved baseline; a planted 2x slowdown (the timed callable
run twice) fails with the numbers; budgets fail with theirs; corrupt, foreign and missing baselines
behave as documented; pytest-benchmark's JSON and `compare` see the measurements.
"""

import json
import os
import subprocess
import sys

import pytest

BENCH_TEST = """
import os

def test_mm(gemm_benchmark):
    if os.environ.get("GG_PLANT") == "1":
        gemm_benchmark.instrument = lambda timed: (lambda: (timed(), timed()))
    m = gemm_benchmark(shape=(192, 192, 192))
    assert m.kernels and m.median_s > 0 and m.ref_median_s > 0 and m.tflops > 0

def test_plain():
    pass
"""

# On a shared 2-core CPU the run-to-run noise is several percent (docs/validation/benchmarks.md),
# so CPU gates use a wider threshold than a GPU's; the 2x plant is far beyond either.
PYPROJECT = """
[tool.pytest.ini_options]
[tool.gemmguard]
runtime_regression = "20%"
max_time_s = 0.5
cpu_threads = 1
"""

COMMON = ("-p", "no:cacheprovider", "--gemm-backends=aten", "--gemm-cold-compile=off")


@pytest.fixture
def bench_dir(pytester):
    pytester.makepyfile(test_bench=BENCH_TEST)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    return pytester


@pytest.mark.timing
def test_aa_passes_and_planted_2x_slowdown_fails(bench_dir, monkeypatch):
    base = str(bench_dir.path / "baseline.json")
    storage = bench_dir.path / "pb-storage"
    first = bench_dir.runpytest_inprocess(
        *COMMON,
        f"--gemm-baseline={base}",  # missing: reported, not failed
        f"--gemm-save-baseline={base}",
        "--benchmark-autosave",
        f"--benchmark-storage=file://{storage}",
        f"--benchmark-json={bench_dir.path / 'pb.json'}",
        f"--gemm-report-json={bench_dir.path / 'report.json'}",
        f"--gemm-report-md={bench_dir.path / 'summary.md'}",
        f"--gemm-plots={bench_dir.path / 'plots'}",
    )
    first.assert_outcomes(passed=2)
    out = first.stdout.str()
    assert f"gemmguard: no baseline at {base}: regressions not checked" in out
    assert "saved 1 measurements to baseline" in out and "no baseline" in out
    saved = json.loads(open(base).read())
    (entry,) = saved["entries"].values()
    assert entry["backend"] == "aten" and entry["kernels"] and len(entry["samples"]) >= 10

    # pytest-benchmark sees the measurement: its JSON, its storage, its compare command.
    pb = json.loads((bench_dir.path / "pb.json").read_text())
    (record,) = pb["benchmarks"]
    assert record["name"] == "test_mm[aten]" and record["extra_info"]["gemm_backend"] == "aten"
    assert record["stats"]["median"] == pytest.approx(entry["median_s"])
    assert pb["machine_info"]["gemmguard"]["cpu"] == saved["fingerprint"]["cpu"]
    compared = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "--storage", f"file://{storage}", "compare", "0001"],
        capture_output=True,
        text=True,
        cwd=bench_dir.path,
    )
    assert compared.returncode == 0 and "test_mm[aten]" in compared.stdout, compared.stderr
    # Report files.
    report = json.loads((bench_dir.path / "report.json").read_text())
    assert report["measurements"][0]["key"] == next(iter(saved["entries"]))
    assert "| aten | `mm-192x192x192-" in (bench_dir.path / "summary.md").read_text()
    assert sorted(os.listdir(bench_dir.path / "plots")) == ["compile.png", "runtime.png"]

    # A/A: the same code again passes.
    again = bench_dir.runpytest_inprocess(*COMMON, f"--gemm-baseline={base}")
    again.assert_outcomes(passed=2)
    # The benchmark row carries the verdict "ok" (compared against the baseline and within budget).
    verdicts = [line.split()[-1] for line in again.stdout.lines if line.startswith("aten ") and "ms" in line]
    assert verdicts == ["ok"], again.stdout.str()

    # A planted 2x slowdown fails, with the numbers, the baseline's and the threshold.
    monkeypatch.setenv("GG_PLANT", "1")
    slow = bench_dir.runpytest_inprocess(*COMMON, f"--gemm-baseline={base}", f"--gemm-save-baseline={base}")
    slow.assert_outcomes(passed=1, failed=1)
    text = slow.stdout.str()
    assert "runtime regression +" in text and "threshold +20%" in text and "smallest detectable" in text
    # ... and says so at once on a progress line, before pytest's reports (a run cut by a time limit has none)
    live = [line for line in slow.stdout.lines if "gemmguard benchmark test_bench.py::test_mm[aten]: FAILED (" in line]
    assert len(live) == 1 and "GemmBudgetError: " in live[0] and "broken:   runtime regression +" in live[0], text
    assert slow.stdout.lines.index(live[0]) < next(i for i, x in enumerate(slow.stdout.lines) if "FAILURES" in x)
    assert "baseline" in text and "over budget not saved" in text
    assert json.loads(open(base).read())["entries"] == saved["entries"]  # the regression was not saved
    # --gemm-runtime-regression (the gate's runtime-regression input) overrides the table for one run.
    wide = bench_dir.runpytest_inprocess(*COMMON, f"--gemm-baseline={base}", "--gemm-runtime-regression=900%")
    wide.assert_outcomes(passed=2)
    bad = bench_dir.runpytest_inprocess(*COMMON, "--gemm-runtime-regression=fast")
    assert bad.ret == 4 and "--gemm-runtime-regression" in bad.stderr.str() + bad.stdout.str()


def test_budgets_fail_with_the_numbers_on_both_cpu_backends(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gemm_budget(runtime_ms=1e-6, compile_s=1e-6)
        def test_tight(gemm_benchmark):
            gemm_benchmark(op="linear", shape=(64, 96, 128))

        @pytest.mark.gemm_budget(runtime_ms=1e6)
        def test_loose(gemm_benchmark):
            gemm_benchmark(op="linear", shape=(64, 96, 128))
        """
    )
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--gemm-backends=aten,cpp", "--gemm-cold-compile=off", "--gemm-bench-time=0.3"
    )
    result.assert_outcomes(passed=2, failed=2)
    text = result.stdout.str()
    for backend in ("aten", "cpp"):
        assert f"gemmguard: {backend} broke its performance budget" in text
    assert "> budget runtime_ms=1e-06 ms" in text and "> budget compile_s=1e-06 s" in text
    assert "95% CI" in text


def test_bad_baselines_at_the_command_line(pytester, tmp_path):
    pytester.makepyfile(test_bench=BENCH_TEST)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "gemmguard-baseline", "entr')
    result = pytester.runpytest_inprocess("--collect-only", f"--gemm-baseline={corrupt}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "is corrupt" in errors[0]
    result = pytester.runpytest_inprocess("--collect-only", f"--gemm-save-baseline={corrupt}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert corrupt.read_text() == '{"format": "gemmguard-baseline", "entr'

    from pytest_gemmguard.bench import baseline

    foreign = str(tmp_path / "foreign.json")
    baseline.save(foreign, {**baseline.fingerprint("cpu"), "cpu": "Some Other CPU"}, {})
    result = pytester.runpytest_inprocess("--collect-only", f"--gemm-baseline={foreign}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "other hardware/software (cpu: " in errors[0] and "--gemm-baseline-force" in errors[0]
    forced = pytester.runpytest_inprocess("--collect-only", f"--gemm-baseline={foreign}", "--gemm-baseline-force")
    assert forced.ret == pytest.ExitCode.OK
    assert "compared anyway (forced)" in forced.stdout.str()


def test_bench_only_and_no_bench_select(pytester):
    pytester.makepyfile(test_bench=BENCH_TEST)
    only = pytester.runpytest_inprocess("--collect-only", "-q", "--gemm-backends=aten", "--gemm-bench-only")
    assert "test_mm[aten]" in only.stdout.str() and "test_plain" not in only.stdout.str()
    none = pytester.runpytest_inprocess("--collect-only", "-q", "--gemm-backends=aten", "--gemm-no-bench")
    assert "test_mm" not in none.stdout.str() and "test_plain" in none.stdout.str()
    both = pytester.runpytest_inprocess("--collect-only", "--gemm-bench-only", "--gemm-no-bench")
    assert both.ret == pytest.ExitCode.USAGE_ERROR


def test_custom_function_with_cold_compile_in_a_fresh_process(pytester):
    pytester.makepyfile(
        test_fn="""
        import torch

        def scaled_relu(a, b):
            return torch.relu(a @ b) * 2

        def test_fn(gemm_benchmark):
            m = gemm_benchmark(scaled_relu, shape=(64, 64, 64))
            assert m.fn == "scaled_relu" and m.kernels
            assert m.cold_error is None, m.cold_error
            assert m.cold_compile_s > m.warm_compile_s > 0
            assert m.cold_phases["inductor"] > 0 and m.cold_phases["dynamo"] > 0

        def test_closure(gemm_benchmark):
            m = gemm_benchmark(lambda a, b: a @ b, shape=(64, 64, 64))
            assert m.cold_compile_s is None and "not importable" in m.cold_error
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--gemm-backends=aten", "--gemm-bench-time=0.2")
    result.assert_outcomes(passed=2)


FLOAT8_TEST = """
def test_fp8(gemm_benchmark):
    m = gemm_benchmark(op="scaled_mm_rowwise", shape=(64, 64, 64), dtype="float8_e4m3fn", layout="transposed_b")
    assert m.kernels == ["_scaled_mm"] and 0 < m.pct_peak and m.dtype == "float8_e4m3fn"
"""


def test_a_float8_case_is_benchmarked_against_a_float8_peak(pytester):
    """The peak for a float8 case is torch._scaled_mm's (torch.mm has no float8 kernel)."""
    pytester.makepyfile(FLOAT8_TEST)
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.runpytest_inprocess(*COMMON).assert_outcomes(passed=1)


MISSED = """
def test_mm(gemm_benchmark):
    # The planted defect: a timer that never sees the kernel (as a CUDA graph that did not capture it).
    gemm_benchmark.instrument = lambda timed: (lambda: None)
    gemm_benchmark(shape=(192, 192, 192), dtype="float32")
"""


ONCE_MISSED = """
def test_mm(gemm_benchmark):
    # The first timing sees nothing (as a burst of load the peak met and the kernel did not); the next is real.
    calls = []

    def instrument(timed):
        calls.append(1)
        return (lambda: None) if len(calls) == 1 else timed

    gemm_benchmark.instrument = instrument
    m = gemm_benchmark(shape=(192, 192, 192), dtype="float32")
    assert len(calls) == 2 and "timed again" in m.timing_note, m.timing_note
"""


def test_an_impossible_timing_is_taken_again_before_it_is_refused(pytester):
    """On a busy machine the kernel's samples and the peak's meet different loads: one impossible timing is
    retaken, and a believable second one is kept, with a note saying so."""
    pytester.makepyfile(test_once=ONCE_MISSED)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.runpytest_inprocess(*COMMON).assert_outcomes(passed=1)


def test_a_timing_no_kernel_could_reach_is_refused_not_reported(pytester):
    """A measurement far above this machine's measured library peak means the timer missed the work: the
    test fails with the numbers, and nothing reaches the baseline."""
    pytester.makepyfile(test_missed=MISSED)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    base = pytester.path / "base.json"
    result = pytester.runpytest_inprocess(*COMMON, f"--gemm-save-baseline={base}")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "the timer cannot have seen the kernel run, so this measurement is refused" in out
    assert "x the most this machine can do" in out and "baseline" in out and not base.exists()


INTERRUPTED = """
def test_mm(gemm_benchmark):
    gemm_benchmark(shape=(64, 64, 64))

def test_z_interrupt():
    raise KeyboardInterrupt  # what Ctrl-C (SIGINT) raises in the test process
"""


def test_an_interrupted_run_leaves_the_baseline_as_it_was(pytester, plugin_args):
    # Seen: a benchmark run stopped with SIGINT after one measurement merged that partial result into the baseline.
    pytester.makepyfile(test_bench=INTERRUPTED)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    base = pytester.path / "baseline.json"
    # A process of its own: pytester re-raises an in-process run's KeyboardInterrupt in the outer session.
    result = pytester.runpytest_subprocess(*plugin_args, *COMMON, f"--gemm-save-baseline={base}")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert not base.exists(), base.read_text()
    assert "interrupted after 1 measurement(s): baseline" in result.stdout.str()
