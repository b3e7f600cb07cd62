"""Issue 41, "Nothing passes untested": a test that verified nothing, a listed case the budget left out, a result
with nothing to compare, a backend list that is not what it looks like, a decorator used in a way it cannot run,
and a replay that replayed nothing each end in one line saying so, never in a pass or a raw traceback."""

import re

import pytest

RUN = ("--gemm-backends=aten", "-p", "no:cacheprovider")


def _test_errors(out: str) -> str:
    """The aten row's test-error cell of the results table."""
    row = next(line.split() for line in out.splitlines() if line.startswith("aten "))
    return row[[i for i, cell in enumerate(row) if cell == "|"][1] + 1]


# ---------------------------------------------------------------- 1. a test that never calls check


def test_a_test_that_never_calls_check_fails_with_one_line(pytester):
    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case(ops=["mm"], dtypes=["float32"], shapes=[(4, 4, 4)], max_examples=2)
        def test_forgot(gemm):
            assert gemm.m == 4  # looks at the case, verifies nothing
        """
    )
    result = pytester.runpytest_inprocess(*RUN)
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    line = "gemmguard: test_forgot() returned without calling gemm.check() (or gemm.check(fn)), so nothing was verified"
    assert line in out, out
    assert _test_errors(out) == "1", out  # the test's own mistake, not the backend's failure


# ---------------------------------------------------------------- 2. every listed or harvested case runs once

RECORDING = """
import os

from pytest_gemmguard import gemm_case
from pytest_gemmguard.harvest.items import HarvestedGemm

HARVEST = [HarvestedGemm("mm", m, 8, 8, 0, "float32", "contiguous") for m in (3, 5, 7)]


def _record(gemm):
    with open(os.environ["RAN_FILE"], "a") as f:
        f.write(f"{gemm.op} {gemm.batch} {gemm.m} {gemm.n} {gemm.k} {gemm.case.dtype} {gemm.layout} {gemm.epilogue}\\n")
    gemm.check()


@gemm_case(ops=["mm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"],
           shapes=[(4, 4, 4), (5, 6, 7), (8, 8, 8), (3, 2, 1)], max_examples=1)
def test_four_shapes_budget_1(gemm):
    _record(gemm)


@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"],
           shapes=[(4, 4, 4), (5, 6, 7), (8, 8, 8), (3, 2, 1)], max_examples=6)
def test_four_shapes_and_draws(gemm):
    _record(gemm)


@gemm_case(ops=["mm", "bmm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"],
           shapes=[(4, 4, 4), (2, 3, 4, 5), (5, 6, 7)], max_examples=1)
def test_two_ops(gemm):
    _record(gemm)


@gemm_case(harvested=HARVEST, max_examples=1)
def test_harvested(gemm):
    _record(gemm)
"""


@pytest.mark.parametrize(
    ("test", "runs", "shapes"),
    [
        # Each listed shape once (the budget of 1 ran one of them, and a draw that was the same case again).
        ("test_four_shapes_budget_1", 4, {(4, 4, 4), (5, 6, 7), (8, 8, 8), (3, 2, 1)}),
        # The listed shapes, then draws up to the budget: six distinct cases (one ran twice before).
        ("test_four_shapes_and_draws", 6, {(4, 4, 4), (5, 6, 7), (8, 8, 8), (3, 2, 1)}),
        # mm's second shape too (the tour gave mm every other row, and took its first shape each time).
        ("test_two_ops", 3, {(4, 4, 4), (3, 4, 5), (5, 6, 7)}),
        # Every harvested GEMM, whatever the budget (it ran the first only).
        ("test_harvested", 3, {(3, 8, 8), (5, 8, 8), (7, 8, 8)}),
    ],
)
def test_every_listed_or_harvested_case_runs_exactly_once(pytester, monkeypatch, test, runs, shapes):
    ran_file = pytester.path / "ran.txt"
    monkeypatch.setenv("RAN_FILE", str(ran_file))
    pytester.makepyfile(test_listed=RECORDING)
    result = pytester.runpytest_inprocess(f"test_listed.py::{test}", "-v", "--gemm-seed=3", *RUN)
    out = result.stdout.str()
    result.assert_outcomes(passed=1)
    ran = ran_file.read_text().splitlines()
    assert len(ran) == len(set(ran)) == runs, ran  # no case twice, and as many as said
    assert {tuple(int(d) for d in line.split()[2:5]) for line in ran} == shapes, ran
    counts = re.findall(r"gemmguard \[aten\] (\d+)/(\d+) ", out)
    assert sorted(int(s) for s, _ in counts) == list(range(1, runs + 1)), out  # the progress count is true
    assert {int(t) for _, t in counts} == {runs}, out


# ---------------------------------------------------------------- 3. a result with nothing to compare


def test_a_function_whose_result_is_not_finite_anywhere_is_the_test_s_error(pytester):
    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case(ops=["mm"], dtypes=["float32"], shapes=[(4, 5, 6)], max_examples=1)
        def test_nan(gemm):
            gemm.check(lambda a, b: (a @ b) * float("nan"))

        @gemm_case(ops=["mm"], dtypes=["float32"], shapes=[(4, 5, 6)], max_examples=1)
        def test_inf(gemm):
            gemm.check(lambda a, b: a @ b + float("inf"))
        """
    )
    result = pytester.runpytest_inprocess(*RUN)
    out = result.stdout.str()
    result.assert_outcomes(failed=2)
    line = "gemm.check(fn): your function's result is NaN or infinite in every element, so nothing could be compared"
    # each test's report (not the short summary's FAILED lines, which pytest leaves whole under CI=true)
    reports = [x for x in out.splitlines() if f"errors.UserCodeError: {line}" in x and not x.startswith("FAILED ")]
    assert len(reports) == 2, out
    assert _test_errors(out) == "2", out  # the test's error: no backend failed, nothing passed
    assert "aten produced a wrong result" not in out


# 4. --gemm-backends as written (an empty name, the flag given twice): tests/test_usage_errors.py's table.


# ---------------------------------------------------------------- 5. @gemm_case where it cannot go as written


def test_bare_gemm_case_and_a_method_run_like_any_gemm_case_test(pytester):
    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case
        def test_bare(gemm):
            gemm.check()

        class TestInAClass:
            @gemm_case(ops=["mm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"], shapes=[(4, 4, 4)])
            def test_method(self, gemm, tmp_path):
                assert isinstance(self, TestInAClass) and tmp_path.is_dir()
                gemm.check()
        """
    )
    result = pytester.runpytest_inprocess("--gemm-max-examples=1", "-v", *RUN)
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "test_bare[aten] PASSED" in out and "TestInAClass::test_method[aten] PASSED" in out


STACKED = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"])
@gemm_case(dtypes=["float32"])
def test_twice(gemm):
    gemm.check()
"""

GIVEN_INSIDE = """
from hypothesis import given, strategies as st
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"])
@given(x=st.integers())
def test_given_inside(gemm, x):
    gemm.check()
"""

GIVEN_OUTSIDE = """
from hypothesis import given, strategies as st
from pytest_gemmguard import gemm_case

@given(x=st.integers())
@gemm_case(ops=["mm"])
def test_given_outside(gemm, x):
    gemm.check()
"""


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (STACKED, "@gemm_case: test_twice() has two @gemm_case decorators; use one"),
        (GIVEN_INSIDE, "@gemm_case: test_given_inside() is also a Hypothesis @given test"),
        (GIVEN_OUTSIDE, "@gemm_case: test_given_outside() is also a Hypothesis @given test"),
    ],
)
def test_a_misused_gemm_case_is_one_line_at_collection(pytester, source, message):
    pytester.makepyfile(source)
    result = pytester.runpytest_inprocess(*RUN)
    out = result.stdout.str() + "\n".join(result.errlines)
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.USAGE_ERROR), out  # nothing ran
    assert message in out, out
    assert "TypeError" not in out and "FailedHealthCheck" not in out and "Falsifying" not in out


# ---------------------------------------------------------------- 6. a replay that does not reproduce

REPLAYED = """
import os

from pytest_gemmguard import gemm_case
from pytest_gemmguard.harvest.items import HarvestedGemm

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], shapes=[(4, 4, 4), (8, 8, 8)], max_examples=3)
def test_was_broken(gemm):
    assert os.environ.get("BROKEN") != "1", "planted: the test fails on every case while BROKEN=1"
    gemm.check()

@gemm_case(ops=["bmm"], dtypes=["bfloat16"], epilogues=["relu"], max_examples=1)
def test_other(gemm):
    gemm.check()

@gemm_case(harvested=[HarvestedGemm("mm", 4, 8, 8, 0, "float32", "contiguous")])
def test_harvested(gemm):
    gemm.check()
"""


def test_a_replay_that_does_not_fail_again_says_so_in_one_line(pytester, monkeypatch):
    pytester.makepyfile(test_replayed=REPLAYED)
    monkeypatch.setenv("BROKEN", "1")
    broken = pytester.runpytest_inprocess("test_replayed.py::test_was_broken", *RUN)
    broken.assert_outcomes(failed=1)
    replay = re.search(r"--gemm-replay='([^']+)'", broken.stdout.str()).group(1)
    monkeypatch.delenv("BROKEN")
    head = "gemmguard: --gemm-replay did not reproduce a failure of test_replayed.py::"
    for test, said in (
        # Fixed since: the example ran, and passed.
        ("test_was_broken", "the replayed example (mm 4×4×4 float32 contiguous epilogue=none) passed on aten, so "
         "the failure it recorded may be fixed (or the blob is from another test)"),
        # Another test's blob: too few choices for this test's cases, so nothing ran.
        ("test_other", "the blob is not an example of this test (it is from another test, or the test's "
         "arguments changed since it was printed)"),
        ("test_harvested", "the blob is not an example of this test (its cases are harvested, never drawn)"),
    ):  # fmt: skip
        result = pytester.runpytest_inprocess(f"test_replayed.py::{test}", f"--gemm-replay={replay}", *RUN)
        out = result.stdout.str()
        result.assert_outcomes(failed=1)
        assert f"{head}{test}[aten]: {said}" in out.splitlines(), out  # one line, the whole report
        assert "DidNotReproduce" not in out and "Traceback" not in out, out
