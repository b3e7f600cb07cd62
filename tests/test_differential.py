"""The cross-backend differential in a failure report, through real pytest runs on the CPU's two backends.

The plants: two ATen backends with one defect added (every GEMM's result shifted by a real graph pass), and
an ATen whose compile raises; CPP is the real one. A failure's report must show how the run's other backends
did on the same inputs, and say whether the failing backend is wrong alone or wrong like another.
"""

import re

from actrun import plants

# Every GEMM's result 0.01 too large (a real Inductor graph pass), planted in two backends; and a compile crash.
SHIFT = plants.shift_gemms("Shift", 0.01, ops=("mm", "addmm"))
PLANTED = (
    plants.planted_backend("wrong-aten", SHIFT)
    + plants.planted_backend("also-wrong", SHIFT)
    + plants.planted_backend("crashy", plants.graph_pass("Raise", 'raise RuntimeError("planted compile crash")'))
    + """
from pytest_gemmguard.crosscheck import differential

# Count the differentials run (each costs compiles): one per reported failure, none per shrinking step.
_original = differential.run
calls = []


def counted(*args, **kwargs):
    calls.append(args[1].backend)
    return _original(*args, **kwargs)


differential.run = counted


def pytest_unconfigure(config):
    differential.run = _original
    open("differentials.txt", "w").write("\\n".join(calls))
"""
)

TEST = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["linear"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(5, 7, 9)],
           max_examples=3)
def test_linear(gemm):
    gemm.check()
"""


def _report(out: str, backend: str) -> str:
    """The failure report of `backend`, from its first line to its repro line."""
    match = re.search(rf"gemmguard: {re.escape(backend)} produced a wrong result.*?repro:", out, re.S)
    assert match, out
    return match.group(0)


def test_a_failure_shows_the_other_backends_on_the_same_inputs_and_wrong_alone(pytester):
    pytester.makeconftest(PLANTED)
    pytester.makepyfile(TEST)
    result = pytester.runpytest_inprocess("--gemm-backends=wrong-aten,cpp,crashy", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2, passed=1)  # wrong-aten (wrong) and crashy (its own crash); cpp passes
    report = _report(result.stdout.str(), "wrong-aten")
    assert "  backends: wrong alone" in report, report
    ratio = re.search(r"\s{4}cpp: max\|err\|/tol ([0-9.e+-]+) \(ok\)\n", report)
    assert ratio and float(ratio.group(1)) <= 1, report
    # A backend that raises on the same inputs is one line of the report, never the failure's outcome.
    assert re.search(r"\s{4}crashy: error \(BackendCrashed: .*planted compile crash\)\n", report), report
    # The crash's own report names the code that raised (here the planted graph pass), not only the message.
    assert re.search(r"gemmguard: raised at \S*conftest\.py:\d+ in __call__\n", result.stdout.str())
    # Paid for once per reported failure (wrong-aten's), not per Hypothesis step.
    assert (pytester.path / "differentials.txt").read_text().split() == ["wrong-aten"]


def test_a_failure_other_backends_share_reads_wrong_like_them(pytester):
    pytester.makeconftest(PLANTED)
    pytester.makepyfile(TEST)
    result = pytester.runpytest_inprocess("--gemm-backends=wrong-aten,also-wrong", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "  backends: wrong like also-wrong" in _report(out, "wrong-aten")
    assert "  backends: wrong like wrong-aten" in _report(out, "also-wrong")
    assert re.search(r"\s{4}also-wrong: max\|err\|/tol [0-9.e+-]+ \(wrong\)\n", _report(out, "wrong-aten"))


def test_classification_and_lines():
    from pytest_gemmguard.crosscheck.differential import Other, classify, report_lines

    ok, wrong = Other("aten", "ok", 0.31), Other("cpp", "wrong", 7.0)
    unsup = Other("triton", "unsupported", detail="Inductor found no valid choice")
    assert classify([ok, unsup]) == "wrong alone"
    assert classify([ok, wrong]) == "wrong like cpp"
    assert classify([unsup]).startswith("undecided")
    assert classify([]).startswith("undecided")
    assert report_lines([ok])[1] == "    aten: max|err|/tol 0.31 (ok)"
    assert report_lines([unsup])[1] == "    triton: unsupported (Inductor found no valid choice)"
