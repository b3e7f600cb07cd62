"""The public fixtures on real backends, and the shipped example suite end to end."""

import pathlib
import re

import torch

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


def test_gemm_compile_proves_the_backend_ran(gemm_compile, gemm_backend):
    """Runs once per selected backend (aten and cpp here), like any gemmguard test."""
    x, w = torch.randn(24, 40), torch.randn(40, 16)
    out = gemm_compile(lambda x, w: torch.relu(x @ w), weights=(1,))(x, w)
    torch.testing.assert_close(out, torch.relu(x @ w))
    kernels = [k for g in gemm_compile.last_record.graphs for k in g.gemm_kernels(gemm_backend)]
    assert len(kernels) == 1


def test_the_example_suite_runs_on_both_cpu_backends(pytester):
    pytester.syspathinsert(EXAMPLES)
    pytester.makepyfile(test_examples=(EXAMPLES / "test_example_gemms.py").read_text())
    result = pytester.runpytest_inprocess(
        "--gemm-backends=aten,cpp", "--gemm-max-examples=3", "--gemm-seed=3", "-v", "-p", "no:cacheprovider"
    )
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "gemmguard results" in out
    # The header's capability matrix, the per-example progress lines, the per-backend table.
    assert " * aten" in out and " * cpp" in out
    assert "gemmguard [cpp] 1/3" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("aten ", "cpp "))}
    # columns: backend passed unsup. failed unavail | verified unsup. failed ...
    assert int(rows["aten"][1]) >= 3 and int(rows["aten"][3]) == 0
    assert int(rows["cpp"][3]) == 0 and int(rows["cpp"][6]) >= 1


def test_the_results_table_is_the_same_under_pytest_xdist(pytester):
    """Workers run the tests; the controller prints the table from what their reports carry."""
    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["relu"], layouts=["contiguous"],
                   shapes=[(9, 17, 33), (16, 24, 40)])
        def test_a(gemm):
            gemm.check()

        @gemm_case(ops=["baddbmm"], shapes=[(2, 8, 8, 8)], max_examples=1)
        def test_b(gemm):
            gemm.check()
        """
    )
    result = pytester.runpytest_subprocess(
        "-n", "2", "--gemm-backends=cpp", "--gemm-max-examples=2", "-p", "no:cacheprovider"
    )
    out = result.stdout.str()
    result.assert_outcomes(passed=1, skipped=1)
    row = next(line for line in out.splitlines() if line.startswith("cpp "))
    cols = row.split()  # backend passed unsup. failed unavail | verified unsup. failed ...
    assert cols[1:5] == ["1", "1", "0", "0"] and int(cols[6]) >= 2 and int(cols[7]) >= 1, row
    assert "unsupported by cpp" in out and "NoValidChoicesError" in out


def test_progress_shows_without_verbose_but_sparingly(pytester):
    """A long GPU run must not sit silent for minutes under plain `pytest`: the first progress line shows at
    once, later ones at most every 30 s, a failure's first line at once; `-v` shows every example."""
    from pytest_gemmguard._state import Throttled

    seen: list[str] = []
    throttled = Throttled(seen.append, every_s=3600)
    lines = ["[aten] 1/3 a: verified", "[aten] 2/3 b: verified", "[aten] 3/3 c: FAILED (wrong result)",
             "[aten] 3/3 c': FAILED (wrong result)", "[aten] 3/3 c'': FAILED (wrong result)"]  # fmt: skip
    for line in lines:
        throttled(line)
    # The first failure at once; its shrinking's failing steps are throttled like any line.
    assert seen == [lines[0], lines[2]]

    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], shapes=[(9, 17, 33), (16, 24, 40)])
        def test_a(gemm):
            gemm.check()
        """
    )
    args = ("--gemm-backends=aten", "--gemm-max-examples=3", "--gemm-seed=3", "-p", "no:cacheprovider")
    plain = pytester.runpytest_inprocess(*args).stdout.str()
    assert plain.count("gemmguard [aten]") == 1, plain
    quiet = pytester.runpytest_inprocess(*args, "-q").stdout.str()
    assert "gemmguard [aten]" not in quiet, quiet


def test_progress_counts_the_examples_that_run(pytester):
    """The count is what runs, never "2/1": a budget of 1 runs the listed shape's case alone (a listed case
    runs whatever the budget, and fills it); a larger budget runs the tour's cases plus the draws (a draw that
    meets a tour case runs it in the tour's place, and Hypothesis draws another)."""
    pytester.makepyfile(
        """
        from pytest_gemmguard import gemm_case

        @gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], shapes=[(4, 5, 6)])
        def test_a(gemm):
            gemm.check()
        """
    )
    for budget, total in (("1", 1), ("3", 3)):
        args = (
            "--gemm-backends=aten",
            f"--gemm-max-examples={budget}",
            "--gemm-seed=3",
            "-v",
            "-p",
            "no:cacheprovider",
        )
        out = pytester.runpytest_inprocess(*args).stdout.str()
        counts = re.findall(r"gemmguard \[aten\] (\d+)/(\d+) ", out)
        assert counts and {int(t) for _, t in counts} == {total}, (budget, out)
        assert max(int(s) for s, _ in counts) == total, (budget, out)
