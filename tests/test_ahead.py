"""Compile-ahead (--gemm-compile-workers): worker processes compile the upcoming cases; the test process
checks every case as before, so the verdicts cannot change, and a case that kills its process kills a
worker, never the test session. Real Inductor compiles through aten on the CPU, in pytest subprocesses."""

import re

import pytest

from pytest_gemmguard import ahead

PASSING = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm", "addmm"], dtypes=["float32"], max_examples=7)
def test_gemms(gemm):
    gemm.check()

@gemm_case(ops=["linear"], dtypes=["float32"], max_examples=4)
def test_linear(gemm):  # queued at collection, so its cases are compiled while the first test runs
    gemm.check()
"""

# A real post-grad pass that kills the process compiling any mm whose M is 7: a segfault in the backend.
SEGFAULT = """
import os
import signal

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard import backends
from pytest_gemmguard.backends.aten import AtenBackend


class SegfaultOnM7(CustomGraphPass):
    def __call__(self, graph):
        for node in graph.nodes:
            if node.target is torch.ops.aten.mm.default and node.meta["val"].shape[0] == 7:
                os.kill(os.getpid(), signal.SIGSEGV)

    def uuid(self):
        return "gemmguard-test-segfault-m7"


class Segfaults(AtenBackend):
    name = "segv-m7"

    def inductor_options(self):
        return {**super().inductor_options(), "post_grad_custom_post_pass": SegfaultOnM7()}


backends.register(Segfaults())
"""

TWO_TESTS = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(5, 8, 8), (7, 8, 8)])
def test_meets_m7(gemm):
    gemm.check()

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(5, 8, 8), (9, 8, 8)])
def test_never_m7(gemm):
    gemm.check()
"""

EXAMPLE = re.compile(r"gemmguard \[(\S+)\] \d+/\d+ (.+?): (\w+) \(")


def _examples(result) -> list[tuple[str, str]]:
    return [(m.group(2), m.group(3)) for m in map(EXAMPLE.search, result.outlines) if m]


def test_workers_serve_every_case_and_the_verdicts_do_not_change(pytester):
    pytester.makepyfile(PASSING)
    args = ("--gemm-backends=aten", "--gemm-seed=5", "-v", "-p", "no:cacheprovider")
    alone = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=0")
    pooled = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=1")
    alone.assert_outcomes(passed=2)
    pooled.assert_outcomes(passed=2)
    seen_alone, seen_pooled = _examples(alone), _examples(pooled)
    assert len(seen_alone) == 11 and seen_pooled == seen_alone  # the same cases, in order, the same verdicts
    ahead_lines = [line for line in pooled.outlines if "compiled ahead;" in line]
    verified = sum(verdict == "verified" for _, verdict in seen_pooled)
    assert len(ahead_lines) == verified > 0, pooled.stdout.str()  # every verified case was compiled ahead
    assert "compiled ahead" not in alone.stdout.str()
    assert f"aten: {verified} examples compiled ahead by worker processes" in pooled.stdout.str()
    # Where the time went: the pooled run waits for its worker and compiles little itself (a cache hit of the
    # worker's compile); the serial one compiles everything in the test process and waits for nobody.
    (_, wait_p, compile_p, _), (_, wait_a, compile_a, _) = times = _times(pooled), _times(alone)
    assert wait_p > 0 and wait_a == 0 and compile_p < compile_a, times
    for total, wait, compile_s, rest in times:
        assert abs(total - (wait + compile_s + rest)) <= 0.2 and compile_s > 0


TIMES = re.compile(
    r"aten: ([\d.]+) s in examples: ([\d.]+) s waiting for compile-ahead workers, ([\d.]+) s compiling in the "
    r"test process, ([\d.]+) s drawing, checking and confirming"
)


def _times(result) -> tuple[float, ...]:
    (found,) = [m for m in map(TIMES.search, result.outlines) if m]
    return tuple(float(x) for x in found.groups())


def test_a_case_that_kills_its_process_fails_and_the_session_goes_on(pytester):
    pytester.makeconftest(SEGFAULT)
    pytester.makepyfile(TWO_TESTS)
    args = ("--gemm-backends=segv-m7", "-p", "no:cacheprovider")
    pooled = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=1")
    pooled.assert_outcomes(passed=1, failed=1)
    out = pooled.stdout.str()
    assert "test_meets_m7[segv-m7] FAILED" in out or "FAILED test_a_case" in out or "failed" in out
    assert "segv-m7 broke the process that compiled and ran the case ahead" in out
    assert "died with SIGSEGV" in out and "the test process did not run it" in out
    assert re.search(r"mm 7×8×8 float32", out), out
    # The plant is real: without workers, the same run dies with the segfault.
    alone = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=0")
    assert alone.ret not in (0, 1) and "passed" not in alone.stdout.str().splitlines()[-1]


@pytest.mark.parametrize(
    ("cores", "xdist", "expected"), [(2, 1, 0), (3, 1, 0), (4, 1, 1), (16, 1, 7), (16, 4, 1), (64, 1, 8)]
)
def test_auto_workers_leave_the_cores_to_the_test_process_on_small_machines(cores, xdist, expected):
    assert ahead.auto_workers(cores, xdist) == expected


@pytest.mark.parametrize(("cores", "workers", "expected"), [(16, 7, "2"), (2, 1, "1"), (64, 8, "7"), (4, 8, "1")])
def test_workers_share_the_cores_for_inductors_compile_pool(cores, workers, expected):
    """Each worker's Inductor would size its compile pool to the whole machine (8 processes on 16 cores: up to
    128 compile subprocesses); a worker gets its share, and a setting of the user's is kept."""
    env = ahead.worker_env(workers, cores, base={})
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == expected
    assert (
        ahead.worker_env(workers, cores, base={"TORCHINDUCTOR_COMPILE_THREADS": "9"})["TORCHINDUCTOR_COMPILE_THREADS"]
        == "9"
    )


def test_no_worker_compiles_while_a_benchmark_times():
    """session.quiet() (held by gemm_benchmark while it autotunes and times) keeps queued jobs queued."""
    import time

    from pytest_gemmguard.cases import GemmCase

    pool = ahead.AheadPool(1)
    case = GemmCase("mm", 8, 8, 8)
    try:
        with pool.paused():
            pool.submit("aten", [case], "t")
            deadline = time.monotonic() + 60
            while pool._procs[0] is None and time.monotonic() < deadline:  # the worker starts meanwhile
                time.sleep(0.2)
            time.sleep(1.0)
            assert pool._procs[0] is not None and pool._jobs[("aten", case)].state == "queued"
        assert pool.vet("aten", case, "t")["status"] == "ok"  # released: the job runs
    finally:
        pool.close()


def test_collecting_only_starts_no_worker(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest_subprocess("--co", "--gemm-backends=aten", "--gemm-compile-workers=1", "-v")
    assert result.ret == 0 and "compile-ahead" not in result.stdout.str()


def test_a_case_needed_now_jumps_the_queue():
    """A case the test process waits for goes first, even when it was queued long before (jobs of a test
    that never ran, a skipped one, would otherwise sit in front of it)."""
    from pytest_gemmguard.cases import GemmCase

    pool = ahead.AheadPool(0)  # no workers: the queue alone
    cases = [GemmCase("mm", m, 8, 8) for m in (1, 2, 3)]
    pool.submit("aten", cases, "t")
    pool.submit("aten", [cases[2]], "t", first=True)
    assert [job.key[1] for job in pool._queue] == [cases[2], cases[0], cases[1]]
    pool.forget("t")
    assert not pool._queue
