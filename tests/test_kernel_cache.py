"""--gemm-kernel-cache: a second run rebuilds no kernel and still autotunes afresh.

Repeated measurement rounds (the GitHub gate's base and head rounds) must not carry one round's autotune
pick into the next (one unlucky pick would repeat in every round), but need not rebuild identical kernels
(on the H200 a CUTLASS benchmark spent 125 s of nvcc in every round). Proven with real Inductor compiles in
fresh processes: a planted extra autotune choice logs each time autotuning benchmarks it, and the C++
libraries Inductor built are listed after each run. The same two runs with --gemm-cache-dir (which keeps
everything, the FX graph cache with its winner included) show that the log does see a kept decision.
"""

import os
from pathlib import Path

from actrun import plants

PLANT = plants.AUTOTUNE_LOG_CONFTEST  # a right extra mm choice; each autotuning of it adds a line

TEST = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["relu"], layouts=["contiguous"], shapes=[(8, 16, 32)],
           max_examples=1)
def test_mm(gemm):
    gemm.check()
"""


def _libraries(cache: Path) -> dict[str, float]:
    return {str(p.relative_to(cache)): p.stat().st_mtime for p in cache.rglob("*.so")}


def _autotunes(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _two_runs(pytester, flag: str, cache: Path) -> tuple[list[int], list[dict[str, float]]]:
    pytester.makeconftest(PLANT)
    pytester.makepyfile(TEST)
    log = pytester.path / "autotuned.txt"
    tuned, built = [], []
    for _ in range(2):
        before = _autotunes(log)
        result = pytester.runpytest_subprocess("--gemm-backends=aten", f"{flag}={cache}", "-p", "no:cacheprovider")
        result.assert_outcomes(passed=1)
        tuned.append(_autotunes(log) - before)
        built.append(_libraries(cache))
    return tuned, built


def test_a_second_run_reuses_the_kernels_and_autotunes_afresh(pytester, tmp_path):
    cache = tmp_path / "kernels"
    tuned, built = _two_runs(pytester, "--gemm-kernel-cache", cache)
    assert tuned[0] >= 1 and tuned[1] >= 1, tuned  # the second run measured its candidates again
    assert built[0], "the first run built no C++ library: nothing here shows reuse"
    assert built[1] == built[0]  # the same libraries, none rebuilt, none added
    assert os.path.isdir(cache)  # kept for the next run


def test_a_full_cache_keeps_the_decision_which_the_log_sees(pytester, tmp_path, no_kernel_cache):
    """The contrast: --gemm-cache-dir keeps the FX graph with its winner, so the second run autotunes nothing.
    Without this the first test's "autotuned again" could not tell a kept decision from a fresh one."""
    tuned, _ = _two_runs(pytester, "--gemm-cache-dir", tmp_path / "everything")
    assert tuned[0] >= 1 and tuned[1] == 0, tuned
