"""Every mistake gets one clear line, nothing the user had is lost, and a run never goes green having tested
nothing. The option table below covers every setting gemmguard declares (a new one without a row fails)."""

import os
import stat
import subprocess
import sys

import pytest

from pytest_gemmguard import validate

SIMPLE = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], shapes=[(4, 4, 4)], max_examples=1)
def test_mm(gemm):
    gemm.check()
"""

# One bad value for every setting with a flag, and the words its one-line error must hold.
BAD_FLAGS = {
    "--gemm-backends": ("", "--gemm-backends is empty; valid: aten"),
    "--gemm-allow-unavailable": None,  # a plain switch: there is no bad value
    "--gemm-max-examples": ("many", "--gemm-max-examples='many': must be an integer >= 1"),
    "--gemm-seed": ("x1", "--gemm-seed='x1': must be an integer"),
    "--gemm-replay": ("nonsense", "--gemm-replay='nonsense': expected VERSION:BLOB"),
    "--gemm-dynamic": None,
    "--gemm-compile-timeout": ("-1", "--gemm-compile-timeout=-1: must be a number of seconds >= 0 (0: no limit)"),
    "--gemm-memory-limit": ("lots", "--gemm-memory-limit='lots': must be 'auto', 'off' or a number of bytes >= 1"),
    "--gemm-shrink-time": ("-1", "--gemm-shrink-time=-1: must be a number of seconds >= 0 (0: Hypothesis's own limit)"),
    "--gemm-compile-workers": ("-1", "--gemm-compile-workers='-1': must be 'auto' or an integer >= 0"),
    "--gemm-gpus": ("x", "--gemm-gpus='x': must be 'all', 'none' or distinct GPU indices like 0,2"),
    "--gemm-cache-dir": ("/etc/passwd", "--gemm-cache-dir='/etc/passwd': cannot be used as a directory"),
    "--gemm-kernel-cache": ("/etc/passwd", "--gemm-kernel-cache='/etc/passwd': cannot be used as a directory"),
    "--gemm-repro-dir": ("/proc/gemmguard", "--gemm-repro-dir='/proc/gemmguard': cannot be used as a directory"),
    "--gemm-known": ("/nowhere/known.toml", "/nowhere/known.toml: cannot read the known-failures file"),
    "--gemm-known-strict": None,
    "--gemm-known-shipped": ("maybe", "--gemm-known-shipped='maybe': must be 'on' or 'off'"),
    "--gemm-verdicts": ("/proc/v.json", "--gemm-verdicts='/proc/v.json': cannot be written"),
    "--gemm-base-verdicts": ("/nowhere/base.json", "/nowhere/base.json: no such verdict record"),
    "--gemm-baseline": None,  # a path to read: a missing file is a note, or an error with --gemm-require-baseline
    "--gemm-require-baseline": None,
    "--gemm-save-baseline": ("/proc/g/b.json", "--gemm-save-baseline='/proc/g/b.json': cannot be written"),
    "--gemm-baseline-force": None,
    "--gemm-bench-only": None,
    "--gemm-no-bench": None,
    "--gemm-cold-compile": ("maybe", "--gemm-cold-compile='maybe': must be 'on' or 'off'"),
    "--gemm-all-choices": ("maybe", "--gemm-all-choices='maybe': must be 'on' or 'off'"),
    "--gemm-fewer-threads": ("some", "--gemm-fewer-threads='some': must be 'auto' (Inductor's own CPU kernels)"),
    "--gemm-profile": ("huge", "--gemm-profile='huge': must be 'default' or 'big'"),
    "--gemm-compile-samples": ("0", "--gemm-compile-samples='0': must be an integer >= 1"),
    "--gemm-bench-time": ("0", "--gemm-bench-time=0: must be > 0"),
    "--gemm-cpu-threads": ("-2", "--gemm-cpu-threads=-2: must be an integer >= 1"),
    "--gemm-inconclusive": ("maybe", "--gemm-inconclusive='maybe': must be 'fail' or 'warn'"),
    "--gemm-report-json": ("/proc/r.json", "--gemm-report-json='/proc/r.json': cannot be written"),
    "--gemm-report-md": ("/etc", "--gemm-report-md='/etc': cannot be written: /etc is a directory"),
    "--gemm-plots": ("/proc/p", "--gemm-plots='/proc/p': cannot be used as a directory"),
    "--gemm-runtime-regression": ("lots", "--gemm-runtime-regression='lots': expected a fraction like '20%' or 0.2"),
}


def test_the_table_covers_every_declared_flag():
    flags = {s.flag for s in (*validate.CORE, *validate.BENCH) if s.flag}
    assert flags == set(BAD_FLAGS)


def _one_error_line(result, message):
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], result.errlines


@pytest.mark.parametrize("flag", sorted(f for f, bad in BAD_FLAGS.items() if bad is not None))
def test_every_flag_with_a_bad_value_is_one_line_naming_it(pytester, flag):
    value, message = BAD_FLAGS[flag]
    pytester.makepyfile(SIMPLE)
    _one_error_line(pytester.runpytest_inprocess(f"{flag}={value}", "-p", "no:cacheprovider"), message)


def test_one_run_cannot_name_both_caches(pytester, tmp_path):
    pytester.makepyfile(SIMPLE)
    result = pytester.runpytest_inprocess(
        f"--gemm-cache-dir={tmp_path / 'a'}", f"--gemm-kernel-cache={tmp_path / 'b'}", "-p", "no:cacheprovider"
    )
    _one_error_line(result, "--gemm-cache-dir and --gemm-kernel-cache name two caches for one run; give one")


@pytest.mark.parametrize(
    ("where", "setup", "message"),
    [
        ("env", {"GEMMGUARD_BACKENDS": "aten,bogus"}, "environment GEMMGUARD_BACKENDS: unknown backend 'bogus'"),
        ("env", {"GEMMGUARD_ALLOW_UNAVAILABLE": "perhaps"}, "environment GEMMGUARD_ALLOW_UNAVAILABLE='perhaps'"),
        ("env", {"GEMMGUARD_ALL_CHOICES": "1"}, "environment GEMMGUARD_ALL_CHOICES='1': must be 'on' or 'off'"),
        ("ini", "[pytest]\ngemm_max_examples = 0\n", "ini gemm_max_examples=0: must be an integer >= 1"),
        ("ini", "[pytest]\ngemm_backends = nope\n", "ini gemm_backends: unknown backend 'nope'"),
        ("pyproject", "[tool.gemmguard]\ncompile_samples = 0\n", "[tool.gemmguard] compile_samples=0: must be"),
        ("pyproject", "[tool.gemmguard]\nmin_samples = 3\n", "[tool.gemmguard] min_samples=3: must be >= 5"),
        ("pyproject", "[tool.gemmguard]\ncold_compile = 'sometimes'\n", "[tool.gemmguard] cold_compile='sometimes'"),
        ("env", {"GEMMGUARD_INCONCLUSIVE": "pass"}, "environment GEMMGUARD_INCONCLUSIVE='pass': must be 'fail' or"),
        ("ini", "[pytest]\ngemm_inconclusive = ok\n", "ini gemm_inconclusive='ok': must be 'fail' or 'warn'"),
        ("pyproject", "[tool.gemmguard]\ninconclusive = 'ignore'\n", "[tool.gemmguard] inconclusive='ignore'"),
    ],
)
def test_env_ini_and_pyproject_values_are_checked_by_the_same_path(pytester, monkeypatch, where, setup, message):
    pytester.makepyfile(SIMPLE)
    if where == "env":
        for key, value in setup.items():
            monkeypatch.setenv(key, value)
    elif where == "ini":
        monkeypatch.delenv("GEMMGUARD_BACKENDS", raising=False)  # the environment outranks the ini file
        pytester.makeini(setup)
    else:
        pytester.makefile(".toml", pyproject=setup)
    _one_error_line(pytester.runpytest_inprocess("-p", "no:cacheprovider"), message)


def test_a_backend_environment_setting_is_validated_where_it_is_read(monkeypatch):
    from pytest_gemmguard.backends.settings import backend_env
    from pytest_gemmguard.errors import GemmUsageError

    monkeypatch.setenv("GEMMGUARD_CUTLASS_CONFIGS", "lots")
    with pytest.raises(GemmUsageError, match="environment GEMMGUARD_CUTLASS_CONFIGS='lots': must be an integer"):
        backend_env("GEMMGUARD_CUTLASS_CONFIGS", 2)


def test_a_required_missing_baseline_is_an_error_and_an_optional_one_a_note(pytester):
    pytester.makepyfile(SIMPLE)
    missing = pytester.path / "nope.json"
    required = pytester.runpytest_inprocess(f"--gemm-baseline={missing}", "--gemm-require-baseline")
    _one_error_line(required, f"--gemm-baseline={missing} does not exist and --gemm-require-baseline is set")
    optional = pytester.runpytest_inprocess(f"--gemm-baseline={missing}", "--gemm-backends=aten")
    assert optional.ret == 0 and f"no baseline at {missing}" in optional.stdout.str()


@pytest.mark.parametrize(
    ("decorator", "message"),
    [
        ('epilogues=["bias+bias"]', "@gemm_case(epilogues=...): epilogue step 'bias' appears twice in 'bias+bias'"),
        ('ops="mm", layouts=5', "@gemm_case(layouts=5): expected a name or a list of names"),
    ],
)
def test_a_bad_decorator_argument_is_one_line_at_collection(pytester, decorator, message):
    source = f"from pytest_gemmguard import gemm_case\n\n@gemm_case({decorator})\ndef test_x(gemm):\n    pass\n"
    pytester.makepyfile(source)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error, before any compile
    assert message in result.stdout.str()


def test_gemm_benchmark_and_the_strategy_use_the_same_validator():
    from pytest_gemmguard.bench.fixture import make_case
    from pytest_gemmguard.cases.strategies import gemm_cases
    from pytest_gemmguard.errors import GemmUsageError

    with pytest.raises(GemmUsageError, match=r"gemm_benchmark\(layout=...\): unknown value 'foo'; valid: contiguous"):
        make_case("mm", (4, 4, 4), "float32", "none", "foo")
    with pytest.raises(GemmUsageError, match=r"gemm_cases\(ops=...\): unknown value 'gemv'; valid: mm, addmm"):
        gemm_cases(ops=["gemv"])


BLAME = """
import torch
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], shapes=[(4, 5, 6)], max_examples=2)
def test_returns_a_tuple(gemm):
    gemm.check(lambda a, b: (a @ b, a))

@gemm_case(ops=["mm"], dtypes=["float32"], shapes=[(4, 5, 6)], max_examples=2)
def test_raises(gemm):
    gemm.check(lambda a, b: a @ b.t())  # wrong shapes: the test's own bug

def test_bad_benchmark_argument(gemm_benchmark):
    gemm_benchmark(layout="foo")
"""


def test_the_test_s_own_error_is_never_blamed_on_the_backend(pytester):
    pytester.makepyfile(BLAME)
    result = pytester.runpytest_inprocess("--gemm-backends=aten", "-p", "no:cacheprovider")
    out = result.stdout.str()
    result.assert_outcomes(failed=3)
    assert "your function returned tuple; it must return one tensor" in out
    assert "your function raised RuntimeError when run eagerly" in out
    assert "gemm_benchmark(layout=...): unknown value 'foo'" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("aten "))
    test_error = row[[i for i, cell in enumerate(row) if cell == "|"][1] + 1]
    assert row[3] == "0" and test_error == "3", row  # no backend failure; three tests in their own error
    assert "aten produced a wrong result" not in out


UNAVAILABLE = """
from pytest_gemmguard import backends
from pytest_gemmguard.backends.aten import AtenBackend
from pytest_gemmguard.backends.base import Probe


class BrokenCuda(AtenBackend):
    '''A backend whose machine lost its GPU: the planted defect of a CI runner whose CUDA broke.'''

    name = "broken-cuda"

    def probe(self):
        return Probe(False, "no CUDA device visible", "run on a machine with an NVIDIA GPU")


backends.register(BrokenCuda())
"""


def test_a_backend_named_explicitly_that_cannot_run_fails_the_run(pytester):
    pytester.makeconftest(UNAVAILABLE)
    pytester.makepyfile(SIMPLE)
    named = pytester.runpytest_inprocess("--gemm-backends=broken-cuda", "-p", "no:cacheprovider")
    named.assert_outcomes(failed=1)
    assert named.ret == pytest.ExitCode.TESTS_FAILED
    assert "gemmguard: backend broken-cuda unavailable: no CUDA device visible" in named.stdout.str()
    assert "--gemm-allow-unavailable" in named.stdout.str()
    # Opting out makes it a skip, but a run that tested nothing still does not pass.
    allowed = pytester.runpytest_inprocess(
        "--gemm-backends=broken-cuda", "--gemm-allow-unavailable", "-p", "no:cacheprovider"
    )
    allowed.assert_outcomes(skipped=1)
    assert allowed.ret == pytest.ExitCode.TESTS_FAILED
    assert "no selected backend ran anything" in allowed.stdout.str()
    # With a backend that runs beside it, the skip is just a skip.
    mixed = pytester.runpytest_inprocess(
        "--gemm-backends=aten,broken-cuda", "--gemm-allow-unavailable", "-p", "no:cacheprovider"
    )
    mixed.assert_outcomes(passed=1, skipped=1)
    assert mixed.ret == pytest.ExitCode.OK


def test_ctrl_c_ends_the_run_without_a_failing_example_epitaph(pytester):
    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case(ops=["mm"], dtypes=["float32"], max_examples=5)
        def test_interrupted(gemm):
            raise KeyboardInterrupt
        """
    )
    result = pytester.runpytest_subprocess("--gemm-backends=aten", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Falsifying" not in result.stdout.str() and "Failing explicit example" not in result.stdout.str()


def test_saving_a_baseline_keeps_its_mode_and_repro_scripts_follow_the_umask(tmp_path):
    from pytest_gemmguard.bench import baseline
    from pytest_gemmguard.files import write_text_atomic

    path = tmp_path / "base.json"
    baseline.save(str(path), {"cpu": "x"}, {})
    os.chmod(path, 0o644)
    baseline.save(str(path), {"cpu": "x"}, {"k": {"median_s": 1.0}})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    os.chmod(path, 0o600)
    baseline.save(str(path), {"cpu": "x"}, {})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    mask = os.umask(0o022)
    try:
        fresh = write_text_atomic(str(tmp_path / "sub" / "repro_x.py"), "print(1)\n")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o644


def test_measurements_survive_a_baseline_write_that_fails_at_the_end(pytester):
    """Writable when the run starts, a directory by the time it ends: the measurements go to a rescue file."""
    base = pytester.path / "base.json"
    pytester.makepyfile(
        f"""
        import os

        def test_mm(gemm_benchmark):
            gemm_benchmark(shape=(32, 32, 32), dtype="float32")

        def test_zz_breaks_the_path():
            os.makedirs({str(base)!r})
        """
    )
    result = pytester.runpytest_inprocess(
        "--gemm-backends=aten", "--gemm-cold-compile=off", "--gemm-bench-time=0.2", f"--gemm-save-baseline={base}"
    )
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    line = next(x for x in out.splitlines() if "could not write baseline" in x)
    rescue = line.rsplit("measurements kept in ", 1)[1].strip()
    from pytest_gemmguard.bench import baseline

    assert len(baseline.read(rescue)["entries"]) == 1
    os.unlink(rescue)
    os.rmdir(os.path.dirname(rescue))


def test_a_report_a_full_disk_cannot_take_names_the_file_and_the_error_and_keeps_its_text(pytester, monkeypatch):
    """Issue 41: a report the disk had no room for said "(None)" and was lost. Each report that cannot be written
    is one line naming its file and the OS error, its text kept in a temporary file (as the baseline's
    measurements are), the reports after it say so, and nothing half-written is left beside it."""
    import errno
    import json

    full = os.path.realpath(pytester.path / "full")
    os.makedirs(full)
    real_fsync = os.fsync

    def fsync(fd):  # the planted defect: the disk holding `full` is full (a flush there fails, naming no file)
        if os.path.realpath(f"/proc/self/fd/{fd}").startswith(full + os.sep):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    pytester.makepyfile("def test_mm(gemm_benchmark):\n    gemm_benchmark(shape=(32, 32, 32), dtype='float32')\n")
    js, md, base = (os.path.join(full, name) for name in ("report.json", "summary.md", "base.json"))
    result = pytester.runpytest_inprocess(
        "--gemm-backends=aten", "--gemm-cold-compile=off", "--gemm-bench-time=0.2", f"--gemm-report-json={js}",
        f"--gemm-report-md={md}", f"--gemm-save-baseline={base}", "-p", "no:cacheprovider",
    )  # fmt: skip
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and "(None)" not in out, out
    kept = {}
    for what, path in (("JSON report", js), ("Markdown summary", md)):
        line = next(x for x in result.stdout.lines if x.startswith(f"gemmguard: could not write the {what}"))
        assert f"the {what} {path} (No space left on device (ENOSPC)); its text is kept in " in line, line
        kept[what] = line.rsplit("its text is kept in ", 1)[1].strip()
    assert f"could not write baseline {base} (No space left on device (ENOSPC)); measurements kept in " in out
    report = json.loads(open(kept["JSON report"]).read())
    assert len(report["measurements"]) == 1 and report["format"] == "gemmguard-report"
    summary = open(kept["Markdown summary"]).read()
    assert "## gemmguard benchmarks" in summary and f"could not write the JSON report {js}" in summary
    assert os.listdir(full) == []  # no half-written report, no temporary file
    kept["baseline"] = out.split("measurements kept in ", 1)[1].split()[0]
    for path in kept.values():
        os.unlink(path)
        os.rmdir(os.path.dirname(path))


def test_help_lists_every_backend_and_the_results_table_stays_aligned():
    from pytest_gemmguard.report.table import results_table
    from pytest_gemmguard.report.tally import Tally

    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True).stdout
    assert "cutedsl[quack]" in help_text
    tally = Tally()
    for name in ("aten", "cutedsl[quack]"):
        tally.add_outcome(name, "passed")
    lines = results_table(["aten", "cutedsl[quack]"], tally, dynamic=False)
    bars = {tuple(i for i, ch in enumerate(line) if ch == "|") for line in lines[:2] + lines[3:5]}
    assert len(bars) == 1 and len(next(iter(bars))) == 2, lines  # the group labels, the header and the rows


def test_a_gemm_case_test_is_reported_at_its_own_line(pytester):
    """Skips, failures and CI annotations name the user's test, not gemmguard's wrapper."""
    pytester.makeconftest(UNAVAILABLE)
    written = pytester.makepyfile(SIMPLE).read_text().splitlines()
    result = pytester.runpytest_inprocess("--gemm-backends=broken-cuda", "--gemm-allow-unavailable", "-rs")
    line = next(i for i, text in enumerate(written, 1) if text.startswith("@gemm_case"))  # where pytest puts a def
    assert f"test_a_gemm_case_test_is_reported_at_its_own_line.py:{line}: gemmguard: backend" in result.stdout.str()
