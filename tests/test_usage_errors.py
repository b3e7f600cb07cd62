"""Bad input gets one clear line, and pytest's usage-error exit code where it is a CLI problem."""

import pytest

from pytest_gemmguard import GemmUsageError, gemm_case
from pytest_gemmguard.cases.space import case_space

SIMPLE = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], shapes=[(4, 4, 4)], max_examples=1)
def test_mm(gemm):
    gemm.check()
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gemm-backends=aten,cuBLASx"], "--gemm-backends: unknown backend 'cublasx'; valid: aten, triton, cutlass"),
        (["--gemm-backends= , "], "--gemm-backends is empty"),
        (["--gemm-max-examples=0"], "--gemm-max-examples=0: must be an integer >= 1"),
        (["--gemm-replay=nonsense"], "--gemm-replay='nonsense': expected VERSION:BLOB"),
        (["--gemm-backends=aten,,cpp"], "--gemm-backends='aten,,cpp': a backend name is empty (two commas in a row"),
        (["--gemm-backends=aten,"], "--gemm-backends='aten,': a backend name is empty"),
        (
            ["--gemm-backends=aten", "--gemm-backends=cpp"],
            "--gemm-backends was given 2 times ('aten', 'cpp'); give it once, with one comma-separated list "
            "(--gemm-backends=aten,cpp)",
        ),
    ],
)
def test_bad_cli_values_are_usage_errors_with_one_line(pytester, args, message):
    pytester.makepyfile(SIMPLE)
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], result.errlines


def test_env_and_ini_select_backends_case_insensitively(pytester, monkeypatch):
    pytester.makepyfile(SIMPLE)
    monkeypatch.setenv("GEMMGUARD_BACKENDS", "ATEN")
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert "test_mm[aten]" in result.stdout.str() and "[cpp]" not in result.stdout.str()
    monkeypatch.delenv("GEMMGUARD_BACKENDS")
    pytester.makeini("[pytest]\ngemm_backends = Cpp\n")
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert "test_mm[cpp]" in result.stdout.str() and "[aten]" not in result.stdout.str()


def test_all_reports_unusable_backends_as_skipped_with_their_reason(pytester):
    pytester.makepyfile(test_usage_errors_and_all=SIMPLE)
    from pytest_gemmguard import backends

    gpu = ("triton", "cutlass", "cutedsl", "cutedsl[quack]")
    unusable = [name for name in gpu if not backends.probe(name).available]
    if not unusable:
        pytest.skip("every GPU backend can run on this machine: nothing is unusable here")
    usable = [name for name in backends.names() if name not in unusable]
    deselect = [f"--deselect=test_usage_errors_and_all.py::test_mm[{name}]" for name in usable]
    result = pytester.runpytest_inprocess("--gemm-backends=all", "-rs", *deselect)
    out = result.stdout.str()
    # The header's capability matrix says why each unusable backend cannot run on this machine.
    assert f"{unusable[0]:8s} unavailable:" in out and "fix:" in out
    result.assert_outcomes(skipped=len(unusable))  # skipped with their reason, never passed
    for name in unusable:
        assert f"gemmguard: backend {name} unavailable" in out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ops": ["mm", "gemv"]}, "@gemm_case(ops=...): unknown value 'gemv'; valid: mm, addmm, bmm, baddbmm, linear"),
        ({"dtypes": ["float8"]}, "@gemm_case(dtypes=...): unknown value 'float8'"),
        ({"layouts": []}, "@gemm_case(layouts=[]): the list is empty"),
        ({"ops": ["mm"], "dtypes": ["float8_e4m3fn"]}, "@gemm_case: no op takes these dtypes and layouts together"),
        ({"ops": ["scaled_mm"], "layouts": ["contiguous"]}, "@gemm_case: no op takes these dtypes and layouts"),
        ({"ops": ["mm"], "layouts": ["broadcast"]}, "the broadcast layout with bmm/baddbmm"),
        ({"layouts": ["aliased"], "shapes": [(4, 5, 6)]}, "(4, 5, 6) takes none of the layouts aliased (an aliased B"),
        ({"ops": ["scaled_mm"], "shapes": [(32, 32, 32), (5, 7, 9)]}, "@gemm_case(shapes=...): (5, 7, 9) suits none"),
        ({"epilogues": ["bias+swish"]}, "unknown epilogue step 'swish'"),
        ({"shapes": [(4, -1, 8)]}, "has a size <= 0"),
        ({"shapes": [(4, 8)]}, "is not (M, N, K) or (B, M, N, K)"),
        ({"max_examples": 0}, "@gemm_case(max_examples=0): must be an integer >= 1"),
        ({"opps": ["mm"]}, "@gemm_case got unknown argument 'opps'"),
    ],
)
def test_bad_decorator_arguments_name_the_argument(kwargs, message):
    with pytest.raises(GemmUsageError) as info:
        case_space("@gemm_case", **kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_decorator_argument_fails_at_collection(pytester):
    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case(dtypes=["float99"])
        def test_x(gemm):
            gemm.check()
        """
    )
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(["*GemmUsageError: @gemm_case(dtypes=...): unknown value 'float99'*"])


def test_decorated_test_must_take_gemm():
    with pytest.raises(GemmUsageError, match="must take an argument named 'gemm'"):

        @gemm_case()
        def test_x(other):  # pragma: no cover - never runs
            pass


def test_only_torchs_missing_numpy_warning_is_silenced(pytester):
    """README's main job installs no NumPy, and importing torch then warns "Failed to initialize NumPy": a new user's
    first run showed it as theirs. The plugin silences that message alone: another UserWarning still shows."""
    pytester.makepyfile(
        """
        import warnings

        def test_warns():
            warnings.warn("Failed to initialize NumPy: No module named 'numpy'", UserWarning)
            warnings.warn("a warning of the user's own", UserWarning)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, warnings=1)
    assert "a warning of the user's own" in result.stdout.str()
    assert "NumPy" not in result.stdout.str()
