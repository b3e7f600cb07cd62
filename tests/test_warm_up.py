"""A backend's one-time setup (Backend.warm_up: NVGEMM lists cutlass_api's kernels, 20.7 s on the H200) runs in
the test process while its first case compiles ahead in a worker, once, and never beside a compile of its own.
Real Inductor compiles through aten on the CPU, in a pytest subprocess with one compile-ahead worker."""

import json

SLOW_SETUP = """
import json
import os
import sys
import time

from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard import backends
from pytest_gemmguard.backends.aten import AtenBackend

LOG = os.environ["GG_WARM_LOG"]


def in_worker():
    main = getattr(sys.modules["__main__"], "__spec__", None)
    return main is not None and main.name == "pytest_gemmguard.ahead.worker"


def note(what):
    with open(LOG, "a") as f:
        f.write(json.dumps({"what": what, "where": "worker" if in_worker() else "test", "t": time.time()}) + "\\n")


class Compiling(CustomGraphPass):
    def __call__(self, graph):
        note("compiling")
        if in_worker():
            time.sleep(3.0)  # the worker's answer comes at least 3 s after this note

    def uuid(self):
        return "gemmguard-test-slow-setup"


class SlowSetup(AtenBackend):
    name = "slow-setup"

    def warm_up(self):
        return self.setup

    def setup(self):
        # Outlasts the wait for the first case: it ends about 2 s after the worker's answer.
        note("warm start")
        deadline = time.time() + 120
        while '"compiling", "where": "worker"' not in open(LOG).read() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(5.0)
        note("warm end")

    def inductor_options(self):
        note("options")
        return {**super().inductor_options(), "post_grad_custom_post_pass": Compiling()}


backends.register(SlowSetup())
"""

TESTS = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(5, 8, 8), (7, 8, 8)])
def test_first(gemm):
    gemm.check()

@gemm_case(ops=["addmm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(6, 8, 8)])
def test_second(gemm):
    gemm.check()
"""


def test_a_backends_setup_runs_once_beside_the_wait_for_its_first_case(pytester, monkeypatch):
    log = pytester.path / "warm.jsonl"
    monkeypatch.setenv("GG_WARM_LOG", str(log))
    pytester.makeconftest(SLOW_SETUP)
    pytester.makepyfile(TESTS)
    args = ("--gemm-backends=slow-setup", "--gemm-seed=3", "-v", "-p", "no:cacheprovider")
    result = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=1")
    result.assert_outcomes(passed=2)
    assert "[slow-setup] its one-time setup runs while the first case compiles ahead" in result.stdout.str()
    notes = [json.loads(line) for line in log.read_text().splitlines()]
    warm = [n for n in notes if n["what"].startswith("warm")]
    assert [(n["what"], n["where"]) for n in warm] == [("warm start", "test"), ("warm end", "test")], warm
    start, end = warm[0]["t"], warm[1]["t"]
    # Beside the wait: it began before the worker's answer (which comes 3 s after its compiling note).
    worker = [n["t"] for n in notes if n["where"] == "worker" and n["what"] == "compiling"]
    assert worker and start < min(worker) + 1.5, notes
    # Never beside a compile of its own: the test process compiled nothing while it ran, and compiled after it.
    mine = [n["t"] for n in notes if n["where"] == "test" and n["what"] == "options"]
    assert not [t for t in mine if start < t < end], notes
    assert [t for t in mine if t >= end], notes
    # Where nothing would overlap it (no workers), it is not started: the first compile pays, as before.
    log.unlink()
    alone = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=0")
    alone.assert_outcomes(passed=2)
    assert "one-time setup" not in alone.stdout.str()
    assert "warm" not in log.read_text()
