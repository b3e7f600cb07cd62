"""Compile-ahead (--gemm-compile-workers): worker processes compile the upcoming cases; the test process
checks every case as before, so the verdicts cannot change, and a case that kills its process kills a
worker, never the test session. Real Inductor compiles through aten on the CPU, in pytest subprocesses."""

import os
import re
import sys

import pytest
from actrun import plants

from pytest_gemmguard.ahead import policy as ahead_policy
from pytest_gemmguard.ahead import pool as ahead
from pytest_gemmguard.ahead.reply import Reply

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
SEGFAULT = plants.planted_backend(
    "segv-m7",
    plants.graph_pass(
        "SegfaultOnM7",
        """
        for node in graph.nodes:
            if node.target is torch.ops.aten.mm.default and node.meta["val"].shape[0] == 7:
                os.kill(os.getpid(), signal.SIGSEGV)
        """,
    ),
    imports="import os\nimport signal\n",
)

# A backend none of whose kernels is ever its own: every case compiles, runs, and is unsupported.
CLAIMS_NOTHING = """
from pytest_gemmguard import backends
from pytest_gemmguard.backends.aten import AtenBackend


class ClaimsNothing(AtenBackend):
    name = "claims-nothing"

    def claims(self, launch):
        return False


backends.register(ClaimsNothing())
"""


def in_workers_only(name: str, planted: str, attribute: str = "") -> str:
    """The source of a backend `name` (aten) whose post-grad pass runs the statement `planted` only inside a
    compile-ahead worker, never in the test process (`attribute`: one more line of the backend's class)."""
    in_workers = f"""
        main = getattr(sys.modules["__main__"], "__spec__", None)
        if main is not None and main.name == "pytest_gemmguard.ahead.worker":
            {planted}
    """
    plant = plants.graph_pass("InWorkersOnly", in_workers)
    return plants.planted_backend(name, plant, imports="import sys\nimport time\n", members=attribute)


# A backend whose compile raises in a compile-ahead worker only: the test process compiles the case itself.
RAISES_IN_WORKERS = in_workers_only("worker-raises", 'raise RuntimeError("planted: only a worker\'s compile fails")')

TWO_TESTS = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(5, 8, 8), (7, 8, 8)])
def test_meets_m7(gemm):
    gemm.check()

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(5, 8, 8), (9, 8, 8)])
def test_never_m7(gemm):
    gemm.check()
"""

# A test's own function, a lambda reading a module constant: it travels to the workers (ahead/travel.py).
OWN_FUNCTION = """
import torch
from pytest_gemmguard import gemm_case

SCALE = 0.5

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], max_examples=5)
def test_own(gemm):
    gemm.check(lambda a, b: torch.tanh(a @ b) * SCALE)
"""

EXAMPLE = re.compile(r"gemmguard \[(\S+)\] \d+/\d+ (.+?): (\w+) \(")


def _examples(result) -> list[tuple[str, str]]:
    return [(m.group(2), m.group(3)) for m in map(EXAMPLE.search, result.outlines) if m]


# no_kernel_cache: the test compares the compile time the workers spare the test process; kernels a shared cache
# already holds shrink both sides to the same few seconds (seen: 2.6 s and 2.6 s).
@pytest.mark.parametrize("backend", ["aten", "cpp"])
def test_workers_serve_every_case_and_the_verdicts_do_not_change(pytester, backend, no_kernel_cache):
    """cpp freezes its weights and compiles again in the test process (no FX graph cache), yet compiles less
    there: the worker built its C++ kernels into the session's code cache, and settled its unsupported cases.
    (cpp leaves out the offset layout: torch 2.13's CPP template is wrong on an offset weight, a known failure.)"""
    no_offset = 'dtypes=["float32"], layouts=["contiguous", "transposed_a", "transposed_b"]'
    pytester.makepyfile(PASSING if backend == "aten" else PASSING.replace('dtypes=["float32"]', no_offset))
    args = (f"--gemm-backends={backend}", "--gemm-seed=5", "-v", "-p", "no:cacheprovider")
    alone = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=0")
    pooled = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=1")
    alone.assert_outcomes(passed=2)
    pooled.assert_outcomes(passed=2)
    seen_alone, seen_pooled = _examples(alone), _examples(pooled)
    assert len(seen_alone) == 11 and seen_pooled == seen_alone  # the same cases, in order, the same verdicts
    ahead_lines = [line for line in pooled.outlines if re.search(r"compiled ahead in [\d.]+ s;", line)]
    verified = sum(verdict == "verified" for _, verdict in seen_pooled)
    assert len(ahead_lines) == verified > 0, pooled.stdout.str()  # every verified case was compiled ahead
    assert "compiled ahead" not in alone.stdout.str()
    assert "not drawn ahead" not in pooled.stdout.str()  # the draw beforehand was the run's own draw
    assert f"{backend}: {verified} examples compiled ahead by worker processes" in pooled.stdout.str()
    # Where the time went: the pooled run waits for its worker and compiles little itself (a cache hit of the
    # worker's compile); the serial one compiles everything in the test process and waits for nobody.
    (_, wait_p, compile_p, _), (_, wait_a, compile_a, _) = times = _times(pooled, backend), _times(alone, backend)
    assert wait_p > 0 and wait_a == 0 and compile_p < compile_a, times
    for total, wait, compile_s, rest in times:
        assert abs(total - (wait + compile_s + rest)) <= 0.26 and compile_s > 0  # each shown to 0.05 s


def test_a_tests_own_function_is_what_the_workers_compile(pytester):
    pytester.makepyfile(OWN_FUNCTION)
    args = ("--gemm-backends=aten", "--gemm-seed=3", "-v", "-p", "no:cacheprovider")
    alone = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=0")
    pooled = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=1")
    alone.assert_outcomes(passed=1)
    pooled.assert_outcomes(passed=1)
    assert _examples(pooled) == _examples(alone) and len(_examples(alone)) == 5
    verified = sum(verdict == "verified" for _, verdict in _examples(pooled))
    # Every verified example was compiled ahead with the lambda itself, none with the bare mm, so the test
    # process's own compile of the lambda is a cache hit of the worker's.
    line = f"aten: {verified} examples compiled ahead by worker processes ({verified} with the test's own function)"
    assert line in pooled.stdout.str(), pooled.stdout.str()
    (_, _, compile_p, _), (_, _, compile_a, _) = times = _times(pooled), _times(alone)
    assert compile_p < 0.5 * compile_a, times


def test_a_function_that_cannot_travel_leaves_the_case_to_its_own_gemm(pytester):
    import threading

    from pytest_gemmguard.ahead import travel

    lock = threading.Lock()
    payload, why = travel.pack(lambda a, b: (lock, a @ b))
    assert payload is None and "cannot be pickled" in why
    assert travel.pack(threading.Lock())[0] is None
    pytester.makepyfile(OWN_FUNCTION.replace("SCALE = 0.5", "import threading\nSCALE = 0.5\nLOCK = threading.Lock()")
                        .replace("* SCALE)", "* SCALE if LOCK else None)"))  # fmt: skip
    pooled = pytester.runpytest_subprocess("--gemm-backends=aten", "--gemm-seed=3", "-p", "no:cacheprovider",
                                           "--gemm-compile-workers=1")  # fmt: skip
    pooled.assert_outcomes(passed=1)
    out = pooled.stdout.str()
    assert "examples compiled ahead by worker processes (--gemm-compile-workers)" in out, out  # the bare GEMM


def test_a_packed_function_computes_what_the_original_does():
    import torch

    from pytest_gemmguard.ahead import travel

    offset = torch.tensor(2.0)

    def helper(x):
        return x + offset

    fn = lambda a, b, scale=3.0: helper(torch.relu(a @ b)) * scale
    payload, why = travel.pack(fn)
    assert why == "", why
    # torch (imported in this function) and helper (defined in it) are closure cells: a module, by name, and
    # a function pickle cannot name, by its code; helper's own cell, offset, by pickle.
    kinds = sorted(how for how, _ in payload["cells"])
    assert kinds == ["function", "module"], kinds
    rebuilt = travel.unpack(payload)
    a, b = torch.randn(4, 5), torch.randn(5, 3)
    assert torch.equal(rebuilt(a, b), fn(a, b)) and rebuilt is not fn
    assert travel.pack(fn)[0]["digest"] == payload["digest"]
    assert travel.pack(lambda a, b: a @ b)[0]["digest"] != payload["digest"]
    # A big tensor it closes over would be copied into every queued job: it stays home, saying why.
    weight = torch.zeros(1024, 1024)
    big, why = travel.pack(lambda a, b: a @ b + weight[: a.shape[0], : b.shape[1]])
    assert big is None and "MiB" in why, why


def test_a_test_that_ended_leaves_no_function_behind():
    pool = ahead.AheadPool(0)
    pool.attach("t", "aten", {"digest": "abc", "code": "x"})
    pool.attach("u", "aten", {"digest": "def", "code": "y"})
    pool.forget("t")
    assert list(pool._functions) == [("u", "aten")]


def _times(result, backend: str = "aten") -> tuple[float, ...]:
    """The results' time line of `backend`: (total, waiting, compiling, drawing and checking), the dynamic-shape
    check's seconds (shown apart where it ran) counted with the last."""
    times = re.compile(
        rf"{re.escape(backend)}: ([\d.]+) s in examples: ([\d.]+) s waiting for compile-ahead workers, ([\d.]+) s "
        r"compiling in the test process, (?:([\d.]+) s in the dynamic-shape check, )?([\d.]+) s drawing, checking and "
        r"confirming"
    )
    (found,) = [m for m in map(times.search, result.outlines) if m]
    total, wait, compiling, dynamic, rest = (float(x or 0) for x in found.groups())
    return total, wait, compiling, rest + dynamic


@pytest.mark.timing  # its assertion is a share of measured time: under -n 2 the other worker's load moved it
def test_a_compile_that_ends_unsupported_is_counted_as_compiling(pytester):
    """The results' time line says where examples went: the compile of a case that then turned out unsupported is
    compile time too (cpp's first example on the H200, 69 s, was counted as drawing and checking)."""
    pytester.makepyfile(
        """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(1, 1, 1)])
def test_tiny(gemm):
    gemm.check()
"""
    )
    result = pytester.runpytest_subprocess("--gemm-backends=cpp", "--gemm-compile-workers=0", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)  # every drawn case unsupported: no GEMM kernel of cpp ran
    total, wait, compiling, rest = _times(result, "cpp")
    assert wait == 0 and compiling > 0.5 * total, (total, compiling, rest)


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
    ("cores", "xdist", "expected"), [(2, 1, 0), (3, 1, 0), (4, 1, 2), (8, 1, 6), (16, 1, 14), (16, 4, 2), (64, 1, 62)]
)
def test_auto_workers_take_the_cores_but_two_for_gpu_backends(cores, xdist, expected):
    plenty = 1 << 40
    assert ahead_policy.auto_workers(cores, xdist, memory=plenty) == expected
    assert ahead_policy.auto_workers(cores, xdist, memory=None) == expected  # unknown memory bounds nothing


@pytest.mark.parametrize(
    ("cores", "xdist", "expected"), [(2, 1, 0), (4, 1, 0), (8, 1, 3), (16, 1, 7), (16, 4, 1), (64, 1, 8)]
)
def test_auto_workers_leave_a_cpu_backend_the_cores_its_kernels_run_on(cores, xdist, expected):
    assert ahead_policy.auto_workers(cores, xdist, cpu_backend=True, memory=1 << 40) == expected


@pytest.mark.parametrize(("gib", "xdist", "expected"), [(128, 1, 14), (20, 1, 6), (16, 2, 2), (2, 1, 0)])
def test_auto_workers_are_as_many_as_the_memory_holds(gib, xdist, expected):
    """A worker holds torch, a CUDA context, Inductor's compile pool and a build: on a runner with many cores
    and little memory, as many as fit (each pytest-xdist worker's pool gets its share of it)."""
    assert ahead_policy.auto_workers(16, xdist, memory=gib << 30) == expected


@pytest.mark.parametrize(
    ("gpu_gib", "xdist", "expected"), [(139, 1, 14), (24, 1, 14), (16, 1, 9), (4, 1, 1), (16, 2, 4)]
)
def test_auto_workers_leave_the_gpu_room_for_the_test_process(gpu_gib, xdist, expected):
    """Each worker holds a CUDA context and its autotuning's buffers on the one GPU (1.0 GiB a process in the
    H200 main job): a 16 GiB card takes fewer than the cores would, and the test process keeps a share."""
    assert ahead_policy.auto_workers(16, xdist, memory=None, gpu_memory=gpu_gib << 30) == expected
    assert ahead_policy.auto_workers(16, xdist, cpu_backend=True, memory=None, gpu_memory=gpu_gib << 30) == (
        7 if xdist == 1 else 3
    )


def test_available_memory_is_read_from_the_kernel():
    memory = ahead_policy.available_memory()
    assert memory is None or memory > 1 << 20
    if os.path.exists("/proc/meminfo"):
        assert memory is not None


@pytest.mark.parametrize(("cores", "workers", "expected"), [(16, 7, "2"), (16, 14, "1"), (2, 1, "1"), (64, 8, "7")])
def test_workers_share_the_cores_for_inductors_compile_pool(cores, workers, expected):
    """Each worker's Inductor would size its compile pool to the whole machine (14 processes on 16 cores:
    up to 224 compile subprocesses); a worker gets its share, and a setting of the user's is kept."""
    env = ahead_policy.worker_env(workers, cores, base={})
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == expected
    mine = ahead_policy.worker_env(workers, cores, base={"TORCHINDUCTOR_COMPILE_THREADS": "9"})
    assert mine["TORCHINDUCTOR_COMPILE_THREADS"] == "9"


def test_a_backends_outside_builds_get_threads_of_their_own_within_cores_and_memory(monkeypatch):
    """A CUTLASS autotuning builds each config with nvcc, one after another at a worker's one compile thread
    (two configs: 247-251 s a case on the H200); its worker gets a thread per build, no more than the cores,
    and above its share one per WORKER_MEMORY available."""
    gib = 1 << 30
    assert ahead_policy.job_threads(1, 2, cores=16, memory=64 * gib) == 2
    assert ahead_policy.job_threads(1, 1, cores=16, memory=64 * gib) == 1  # nothing outside: the share
    assert ahead_policy.job_threads(2, 1, cores=16, memory=64 * gib) == 2  # never below the share
    assert ahead_policy.job_threads(1, 8, cores=4, memory=64 * gib) == 4
    assert ahead_policy.job_threads(1, 8, cores=16, memory=2 * ahead_policy.WORKER_MEMORY) == 3
    assert ahead_policy.job_threads(1, 2, cores=16, memory=gib) == 1  # no room for a second build
    assert ahead_policy.job_threads(1, 2, cores=16, memory=None) == 2  # unknown memory bounds nothing
    from pytest_gemmguard.backends import aten, cutlass

    assert aten.BACKEND.parallel_builds() == 1
    assert cutlass.BACKEND.parallel_builds() == cutlass.DEFAULT_CONFIGS  # an nvcc build per profiled config
    monkeypatch.setenv("GEMMGUARD_CUTLASS_CONFIGS", "3")
    assert cutlass.BACKEND.parallel_builds() == 3


def test_worker_env_marks_the_threads_it_chose_and_only_those():
    assert ahead_policy.worker_env(14, 16, base={})[ahead_policy.SHARE_VAR] == "1"
    mine = ahead_policy.worker_env(14, 16, base={"TORCHINDUCTOR_COMPILE_THREADS": "9", ahead_policy.SHARE_VAR: "1"})
    assert ahead_policy.SHARE_VAR not in mine  # the user's count is every case's: job_threads leaves it


def test_a_worker_raises_its_compile_threads_for_a_backend_that_builds_outside_and_lowers_them_after(tmp_path):
    """Through a real worker and Inductor: the threads autotuning's precompile would use (what Inductor
    reads, select_algorithm.get_num_workers) for a backend of 3 outside builds, then for one of none."""
    from pytest_gemmguard.cases.case import GemmCase

    planted = (
        "from torch._inductor import select_algorithm; "
        'raise RuntimeError(f"compile threads: {select_algorithm.get_num_workers()}")'
    )
    (tmp_path / "many.py").write_text(in_workers_only("builds-three", planted, "parallel_builds = lambda self: 3"))
    (tmp_path / "one.py").write_text(in_workers_only("builds-one", planted))
    pool = ahead.AheadPool(1)
    try:
        raised = pool.vet("builds-three", GemmCase("mm", 3, 8, 8), "t", backend_file=str(tmp_path / "many.py"))
        share = int(ahead_policy.worker_env(1, base={})["TORCHINDUCTOR_COMPILE_THREADS"])
        expected = ahead_policy.job_threads(share, 3)
        assert raised is not None and f"compile threads: {expected}" in raised.detail, raised
        lowered = pool.vet("builds-one", GemmCase("mm", 5, 8, 8), "t", backend_file=str(tmp_path / "one.py"))
        assert lowered is not None and f"compile threads: {share}" in lowered.detail, lowered
    finally:
        pool.close()
    assert expected > share or ahead_policy.usable_cores() == 1  # the checks above could tell them apart


def test_no_worker_compiles_while_a_benchmark_times():
    """session.quiet() (held by gemm_benchmark while it autotunes and times) keeps queued jobs queued."""
    import time

    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(1)
    case = GemmCase("mm", 8, 8, 8)
    try:
        with pool.paused():
            pool.submit("aten", [case], "t")
            deadline = time.monotonic() + 60
            while pool._procs[0] is None and time.monotonic() < deadline:  # the worker starts meanwhile
                time.sleep(0.2)
            time.sleep(1.0)
            assert pool._procs[0] is not None and pool._jobs[("aten", case, "")].state == "queued"
        assert pool.vet("aten", case, "t").status == "ok"  # released: the job runs
    finally:
        pool.close()


# A compile nobody will wait for (an nvcc build of a case no test asks for): a worker busy at the session's end.
SLEEPS_IN_WORKERS = in_workers_only("sleeps-in-workers", "time.sleep(600)")


def test_closing_does_not_wait_for_compiles_nobody_will_use(tmp_path):
    """At the session's end every worker is told at once and killed, with what it started, after a short
    grace shared by all: workers busy with compiles no test will ask for (an nvcc build of a case no test
    reached) must not hold the session's end, one after the other."""
    import time

    from pytest_gemmguard.cases.case import GemmCase

    backend_file = tmp_path / "sleepy_backend.py"
    backend_file.write_text(SLEEPS_IN_WORKERS)
    pool = ahead.AheadPool(2)
    cases = [GemmCase("mm", m, 8, 8) for m in (3, 5)]
    try:
        pool.submit("sleeps-in-workers", cases, "t", backend_file=str(backend_file))
        deadline = time.monotonic() + 120
        while pool._running < 2 and time.monotonic() < deadline:  # both workers are inside the planted sleep
            time.sleep(0.2)
        time.sleep(3.0)
        assert pool._running == 2 and all(pool._jobs[("sleeps-in-workers", c, "")].state == "running" for c in cases)
        procs = [p for p in pool._procs if p is not None]
    finally:
        started = time.monotonic()
        pool.close()
        took = time.monotonic() - started
    assert took < 6.0, f"close() took {took:.1f} s"
    assert len(procs) == 2 and all(p.poll() is not None for p in procs)
    groups = {p.pid for p in procs}  # each worker leads its own group: nothing in them may live on
    deadline = time.monotonic() + 5
    while _live_members(groups) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _live_members(groups)


def _live_members(groups: set[int]) -> list[int]:
    """Processes of these process groups that are not zombies (a killed child waits a moment for init)."""
    import os

    live = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in groups:
            live.append(int(pid))
    return live


KILLED_SESSION = """
import sys
import time

from pytest_gemmguard.ahead.pool import AheadPool
from pytest_gemmguard.cases.case import GemmCase

pool = AheadPool(1)
pool.submit("sleeps-in-workers", [GemmCase("mm", 3, 8, 8)], "t", backend_file=sys.argv[1])
deadline = time.monotonic() + 120
while pool._running < 1 and time.monotonic() < deadline:
    time.sleep(0.2)
print(pool._procs[0].pid if pool._running else "no worker started", flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_test_process_killed_outright_takes_its_workers_with_it(tmp_path):
    """No pool.close() runs when the test process is killed (a CI timeout's SIGKILL): its busy workers, each in
    a process group of its own, must not go on compiling for nobody."""
    import os
    import signal
    import subprocess
    import time

    (tmp_path / "sleepy_backend.py").write_text(SLEEPS_IN_WORKERS)
    (tmp_path / "session.py").write_text(KILLED_SESSION)
    session = subprocess.Popen([sys.executable, str(tmp_path / "session.py"), str(tmp_path / "sleepy_backend.py")],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        told = session.stdout.readline()  # the session script gives up on its own after 120 s
        assert told.strip().isdigit(), told
        worker = int(told)
        time.sleep(1.0)
        os.kill(worker, 0)  # alive, inside the planted sleep
    finally:
        session.kill()
        session.wait()
    deadline = time.monotonic() + 10
    while _live_members({worker}) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _live_members({worker}):
        os.killpg(worker, signal.SIGKILL)
        pytest.fail(f"worker {worker} outlived its killed test process")


# A backend that, inside a worker, dies on M = 7 (the pool starts a new worker) and otherwise fails saying whether
# the module `planted_late` can be imported there.
DIES_OR_LOOKS = in_workers_only(
    "dies-or-looks",
    'import importlib.util, os; os._exit(1) if graph.find_nodes(op="placeholder")[0].meta["val"].shape[0] == 7 '
    'else None; seen = importlib.util.find_spec("planted_late") is not None; '
    'raise RuntimeError(f"planted_late importable: {seen}")',
)


def test_a_worker_started_late_imports_what_the_first_ones_did(tmp_path):
    """Inductor adds to the test process's sys.path while it runs (its CUTLASS backend appends a directory of
    stand-in modules, among them a `cuda` package without `cuda.bindings`). A worker started again after a
    case killed the last one must not inherit that: on the H200 such a worker could no longer import CuteDSL,
    and every cutedsl case it took was compiled again in the test process."""
    from pytest_gemmguard.cases.case import GemmCase

    (tmp_path / "looks_backend.py").write_text(DIES_OR_LOOKS)
    late = tmp_path / "late"
    late.mkdir()
    (late / "planted_late.py").write_text("")
    pool = ahead.AheadPool(1)
    job = {"backend_file": str(tmp_path / "looks_backend.py")}
    try:
        first = pool.vet("dies-or-looks", GemmCase("mm", 3, 8, 8), "t", **job)
        assert first is not None and "planted_late importable: False" in first.detail, first
        sys.path.append(str(late))  # what Inductor's CUTLASS backend does to the test process
        died = pool.vet("dies-or-looks", GemmCase("mm", 7, 8, 8), "t", **job)
        assert died is not None and died.status == "fatal", died
        again = pool.vet("dies-or-looks", GemmCase("mm", 5, 8, 8), "t", **job)  # a new worker takes it
        assert again is not None and "planted_late importable: False" in again.detail, again
    finally:
        if str(late) in sys.path:
            sys.path.remove(str(late))
        pool.close()


def test_collecting_only_starts_no_worker(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest_subprocess("--co", "--gemm-backends=aten", "--gemm-compile-workers=1", "-v")
    assert result.ret == 0 and "compile-ahead" not in result.stdout.str()


def test_a_case_needed_now_jumps_the_queue():
    """A case the test process waits for goes first, even when it was queued long before (jobs of a test
    that never ran, a skipped one, would otherwise sit in front of it)."""
    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(0)  # no workers: the queue alone
    cases = [GemmCase("mm", m, 8, 8) for m in (1, 2, 3)]
    pool.submit("aten", cases, "t")
    pool.submit("aten", [cases[2]], "t", first=True)
    assert [job.key[1] for job in pool._queue] == [cases[2], cases[0], cases[1]]
    pool.forget("t")
    assert not pool._queue


def test_a_tests_own_function_goes_with_its_queued_cases_only():
    import json

    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(0)  # no workers: the queue alone
    mine, other = [GemmCase("mm", m, 8, 8) for m in (1, 2)], GemmCase("mm", 3, 8, 8)
    pool.submit("aten", mine, "t")
    pool.submit("aten", [other], "u")
    pool.submit("cpp", mine[:1], "t")
    fn = {"digest": "abc", "code": "x"}
    pool.attach("t", "aten", fn)
    pool.submit("aten", [GemmCase("mm", 4, 8, 8)], "t")  # queued after: with the function too
    carried = {(job.tag, job.key[0], job.key[1].m): (job.key[2], json.loads(job.line)["fn"]) for job in pool._queue}
    assert carried == {
        ("t", "aten", 1): ("abc", fn),
        ("t", "aten", 2): ("abc", fn),
        ("t", "aten", 4): ("abc", fn),
        ("u", "aten", 3): ("", None),  # another test's case
        ("t", "cpp", 1): ("", None),  # the same test on another backend
    }
    assert set(pool._jobs) == {job.key for job in pool._queue}


def test_two_tests_with_one_function_share_a_job_and_end_apart():
    """Two tests checking the same function on the same case: the second one's re-keyed job is the first
    one's, queued once; the second test ending leaves the first one's job queued (the first ending drops
    it: the second's vet then queues it again)."""
    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(0)  # no workers: the queue alone
    case, fn = GemmCase("mm", 5, 8, 8), {"digest": "abc", "code": "x"}
    pool.attach("u", "aten", fn)
    pool.submit("aten", [case], "u")
    pool.submit("aten", [case], "t")  # queued before t says which function it checks
    pool.attach("t", "aten", fn)
    assert [(job.tag, job.key[2]) for job in pool._queue] == [("u", "abc")]
    pool.forget("t")
    assert ("aten", case, "abc") in pool._jobs and len(pool._queue) == 1


def test_a_worker_that_found_a_case_unsupported_spares_the_test_process_its_compile(pytester):
    """A compile that found no kernel of the backend is never cached, so compiling it again in the test
    process repeats it in full (cutlass's refusals took 111 s of the H200 main job): the worker's unsupported
    stands, with its reason, and the verdicts stay those of a run without workers."""
    pytester.makeconftest(CLAIMS_NOTHING)
    pytester.makepyfile(PASSING)
    args = ("--gemm-backends=claims-nothing", "--gemm-seed=5", "-v", "-p", "no:cacheprovider")
    alone = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=0")
    pooled = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=1")
    seen = _examples(pooled)
    assert seen == _examples(alone) and len(seen) == 11 and {v for _, v in seen} == {"unsupported"}, seen
    reasons = [[line for line in run.outlines if line.startswith("unsupported by")] for run in (alone, pooled)]
    assert reasons[0] == reasons[1] and len(reasons[0]) >= 2, reasons  # the reasons, word for word
    compiles = [int(re.search(r"compiles: (\d+) \(", run.stdout.str()).group(1)) for run in (alone, pooled)]
    assert compiles == [11, 0], compiles  # the test process compiled nothing: the worker had found it unsupported
    assert _times(pooled, "claims-nothing")[1] > 0  # it waited for the worker instead


def test_a_function_seen_late_goes_again_with_the_cases_a_worker_already_compiled_bare():
    """Cases queued at collection are compiled with the bare GEMM while earlier tests run; when the test
    starts and says which function it checks, every one of its cases is queued again with it, in order and
    ahead of later tests' cases, or the test would wait for each in turn (152 s of the H200 main job)."""
    import json

    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(0)  # no workers: the queue alone, a job taken as a worker would
    mine, later = [GemmCase("mm", m, 8, 8) for m in (1, 2, 3)], GemmCase("mm", 9, 8, 8)
    pool.submit("aten", mine, "t")
    pool.submit("aten", [later], "u")
    for _ in range(2):  # a worker compiled the first two with the bare GEMM
        job = pool._take()
        job.state, job.result = "done", Reply("ok")
        job.done.set()
    fn = {"digest": "abc", "code": "x"}
    pool.attach("t", "aten", fn)
    order = [(job.tag, job.key[1].m, job.key[2]) for job in pool._queue]
    assert order == [("t", 1, "abc"), ("t", 2, "abc"), ("t", 3, "abc"), ("u", 9, "")]
    lines = [json.loads(job.line) for job in pool._queue]
    assert [line["fn"] for line in lines[:3]] == [fn] * 3 and len({line["id"] for line in lines}) == 4
    assert pool._jobs[("aten", mine[0], "")].result == Reply("ok")  # what the bare compile learnt stays
    pool.attach("t", "aten", fn)  # said again: nothing more queued
    assert len(pool._queue) == 4


def test_a_case_whose_worker_compile_raised_says_so_and_is_checked_here(pytester):
    pytester.makeconftest(RAISES_IN_WORKERS)
    pytester.makepyfile(TWO_TESTS)
    result = pytester.runpytest_subprocess("--gemm-backends=worker-raises", "-v", "-p", "no:cacheprovider",
                                           "--gemm-compile-workers=1")  # fmt: skip
    result.assert_outcomes(passed=2)  # the verdicts are this process's own
    told = [line for line in result.outlines if "compiled here: its compile-ahead worker raised" in line]
    verified = [verdict for _, verdict in _examples(result) if verdict == "verified"]
    assert len(told) == len(verified) > 0, told  # every example, each checked and verified here
    assert all("planted: only a worker's compile fails" in line and ": verified (" in line for line in told), told


def test_only_a_settled_unsupported_from_a_worker_stands():
    """A worker's unsupported stands for a backend with no choice for the case at all (its own filter), not
    for one whose choices all failed to build or run (a busy machine can do that), and only where the worker
    compiled what the check compiles."""
    from dataclasses import replace

    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    from pytest_gemmguard._compat import inductor
    from pytest_gemmguard.run.check import worker_found_unsupported

    selector = AlgorithmSelectorCache()
    none_at_all = selector.create_no_valid_choices("mm", "No choices exist for backend.")
    all_failed = selector.create_no_valid_choices("mm", "All choices failed to compile for backend.")
    assert inductor.no_choice_existed([RuntimeError("wrapped"), none_at_all])
    assert not inductor.no_choice_existed([RuntimeError("wrapped"), all_failed])
    told = Reply("unsupported", "Inductor found no valid choice", settled=True, fn=False)
    own = lambda a, b: a @ b
    assert worker_found_unsupported(told, None)
    assert worker_found_unsupported(replace(told, fn=True), own)
    assert not worker_found_unsupported(replace(told, settled=False), None)  # it might build next time
    assert not worker_found_unsupported(told, own)  # the worker compiled the bare GEMM, not this function
    assert not worker_found_unsupported(replace(told, status="error"), None)
    assert not worker_found_unsupported(None, None)


def test_a_case_nobody_queued_is_told_apart_from_one_drawn_ahead():
    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(1)
    drawn, late = GemmCase("mm", 4, 8, 8, dtype="float32"), GemmCase("mm", 5, 8, 8, dtype="float32")
    try:
        pool.submit("aten", [drawn], "t")
        assert pool.vet("aten", drawn, "t").queued_ahead is True
        assert pool.vet("aten", late, "t").queued_ahead is False  # a worker started on it when asked
    finally:
        pool.close()


def _queue_of(pool: ahead.AheadPool, kinds: list[str]) -> None:
    jobs = [ahead.Job(("triton", i, ""), "t", "{}", i, kind=("triton", kind)) for i, kind in enumerate(kinds)]
    pool._queue.extend(jobs)


def test_a_slow_kind_of_case_starts_early_enough_to_be_ready_in_its_turn():
    """The H200 run of 2026-12-04 (o1): a float32 addmm took its worker 116 s and started in its turn, so the
    test waited 51.5 s for it while six workers compiled bfloat16 cases needed minutes later. Once float32
    is seen to take 40 s and bfloat16 1 s, the float32 case four places back starts first; one a hundred
    places back waits for its turn; and where every kind takes as long the order is the test's."""
    pool = ahead.AheadPool(2)  # never started: only its choice of the next job is under test
    _queue_of(pool, ["bfloat16"] * 4 + ["float32"])
    assert pool.order.next(pool._queue) == 0  # nothing known yet: the test's order
    pool.order.took[("triton", "bfloat16")] += [1.0, 1.2, 0.8]
    pool.order.took[("triton", "float32")] += [40.0]
    assert pool.order.next(pool._queue) == 4  # 4 x 1 s ahead of it on 2 workers: its turn in 2 s, 40 s to compile
    pool._queue.clear()
    _queue_of(pool, ["bfloat16"] * 100 + ["float32"])
    assert pool.order.next(pool._queue) == 0  # its turn in 50 s: time enough to start it later
    pool._queue.clear()
    _queue_of(pool, ["bfloat16"] * 5)
    assert pool.order.next(pool._queue) == 0
    pool._queue[3].wanted = True  # the test process waits for this one now
    pool._queue.append(ahead.Job(("triton", 9, ""), "t", "{}", 9, kind=("triton", "float32")))
    assert pool.order.next(pool._queue) == 3


def test_a_kind_never_seen_is_taken_as_typical():
    pool = ahead.AheadPool(1)
    pool.order.took[("triton", "bfloat16")] += [2.0, 2.0]
    _queue_of(pool, ["bfloat16", "float16", "bfloat16"])
    assert pool.order.next(pool._queue) == 0  # float16 counts as the 2 s every job took so far: no reason to reorder
    pool.order.took[("triton", "float16")] += [30.0]
    assert pool.order.next(pool._queue) == 1


def test_a_case_a_worker_compiles_already_waits_for_that_compile():
    """The test's own function becomes known when the test starts: its cases are queued again with it, also
    those a worker is compiling bare right then. Compiled beside it, the same autotuning is done twice (on the
    H200 a float32 case took 108 s in o5); after it, from the caches. So the second waits, even when the
    test process wants it now, and a worker takes other work meanwhile, or none."""
    pool = ahead.AheadPool(2)  # never started: only its choice of the next job is under test
    case, other = ("triton", "mm 513 float32"), ("triton", "mm 64 bfloat16")
    pool._queue.append(ahead.Job((*case, "fn"), "t", "{}", 0, kind=("triton", "float32"), wanted=True))
    pool._queue.append(ahead.Job((*other, ""), "t", "{}", 1, kind=("triton", "bfloat16")))
    assert pool.order.next(pool._queue) == 0
    pool.order.compiling[case] += 1  # the bare compile of the same case is running
    assert pool.order.next(pool._queue) == 1
    pool._queue.pop()
    assert pool.order.next(pool._queue) is None  # nothing else to do: the worker waits for the bare compile to end
    pool.order.compiling[case] -= 1
    assert pool.order.next(pool._queue) == 0


def test_the_same_case_queued_with_the_function_starts_after_its_bare_compile():
    """Real workers: the bare compile of a case is running when the test's function arrives. The case is
    queued again with it, and although a second worker is idle and the test process wants it, it starts only
    once the bare compile ended; its time, mostly cache hits, is not taken as its kind's."""
    import threading

    from pytest_gemmguard.ahead import travel
    from pytest_gemmguard.cases.case import GemmCase

    case = GemmCase("mm", 7, 9, 11, dtype="float32")
    pool = ahead.AheadPool(2)
    try:
        warm = [GemmCase("mm", m, 8, 8, dtype="bfloat16") for m in (2, 3)]  # both workers up and idle
        pool.submit("aten", warm, "w")
        assert all(pool._jobs[("aten", c, "")].done.wait(300) for c in warm)
        pool.submit("aten", [case], "t")
        bare = pool._jobs[("aten", case, "")]
        assert bare.started.wait(300)
        fn, why = travel.pack(lambda a, b: a @ b)
        assert fn is not None, why
        pool.attach("t", "aten", fn)
        again = pool._jobs[("aten", case, fn["digest"])]
        when_it_started: list[bool] = []  # was the bare compile done when the second one started?
        watcher = threading.Thread(
            target=lambda: when_it_started.append(again.started.wait(300) and bare.done.is_set())
        )
        watcher.start()
        assert not bare.done.is_set()  # attached while the bare compile ran
        seen = pool.vet("aten", case, "t")
        watcher.join()
        assert seen is not None and seen.status == "ok", seen
        assert when_it_started == [True] and again.again and not bare.again
        # only the bare compile taught the pool how long a float32 aten case takes
        assert len(pool.order.took[("aten", "float32")]) == 1
    finally:
        pool.close()


def test_a_wanted_case_is_marked_before_any_worker_can_choose():
    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(0)  # no workers: the queue alone
    case = GemmCase("mm", 3, 8, 8)
    pool.submit("aten", [case], "t", first=True, wanted=True)
    assert pool._queue[0].wanted
    later = GemmCase("mm", 4, 8, 8)
    pool.submit("aten", [later], "t")
    pool.submit("aten", [later], "t", first=True, wanted=True)  # queued before, wanted now
    assert pool._queue[0].key[1] == later and pool._queue[0].wanted


def test_a_function_compile_served_from_the_cache_reports_what_its_bare_compile_judged():
    """The twin rule has the bare compile autotune (and judge every candidate) first, and the compile with the
    test's function then finds the autotuning cached and judges nothing: the bare compile's judgement is what
    the test gets, marked as judged in the case's own GEMM (H200 2026-12-04: a wrong TMA candidate failed a
    case in one core split and was lost in the other, where only the bare compile had autotuned)."""
    from pytest_gemmguard.cases.case import GemmCase

    pool = ahead.AheadPool(0)  # no workers: the queue alone, each job taken as a worker would
    wrong = {"name": "planted", "wrong": True}
    case, other = GemmCase("mm", 1, 8, 8), GemmCase("mm", 2, 8, 8)
    pool.submit("aten", [case, other], "t")
    for _ in range(2):  # both compiled bare: the first judged a wrong candidate, the second nothing
        job = pool._take()
        judged = [wrong] if job.key[1] == case else []
        job.state, job.result = "done", Reply("ok", candidates=tuple(judged), fn=False)
        pool.order.finish(job, 1.0)
        job.done.set()
    pool.attach("t", "aten", {"digest": "abc", "code": "x"})
    for _ in range(2):  # with the function: cache hits, nothing judged
        job = pool._take()
        job.state, job.result = "done", Reply("ok", fn=True)
        pool.order.finish(job, 0.1)
        job.done.set()
    seen = pool.vet("aten", case, "t")
    assert seen.candidates == (wrong,) and seen.candidates_fn is False, seen
    assert pool.stats["candidates_from_bare_compile"] == 1
    seen = pool.vet("aten", other, "t")  # nothing judged anywhere: nothing to report
    assert seen.candidates == () and seen.candidates_fn is True, seen


# A backend (aten) whose mm selections get a second extern candidate that is wrong and reports itself slow, so
# it loses autotuning (tests/test_candidates.py's plant), in every process that imports it.
WRONG_CANDIDATE = """
import torch
from torch._inductor import select_algorithm

from pytest_gemmguard import backends
from pytest_gemmguard.backends.aten import AtenBackend


def slow_mm(a, b, out):
    torch.mm(a, b, out=out)
    out.mul_(1.01)


CHOICE = select_algorithm.ExternKernelChoice(slow_mm, name="gemmguard_test_twin_wrong_mm")


def plant(choices):
    nodes = choices[0].input_nodes if choices else ()
    if len(nodes) == 2 and all(len(n.get_size()) == 2 for n in nodes):
        caller = CHOICE.bind(nodes, choices[0].layout)
        measured = caller.benchmark
        caller.benchmark = lambda *args, out: measured(*args, out=out) + 1000.0
        return [*choices, caller]
    return choices


select_algorithm.add_preprocessing_fn(plant)


class WrongCandidate(AtenBackend):
    name = "twin-wrong"


backends.register(WrongCandidate())
"""


def test_real_workers_the_wrong_candidate_a_bare_compile_judged_reaches_the_function_check(tmp_path, monkeypatch):
    """Real workers and compiles: a case compiled bare (a wrong candidate lost its autotuning), then with the
    test's function, which the caches serve; vet hands the test the bare compile's judgement. Without it the
    test process sees no candidate judged and the case passes."""
    from pytest_gemmguard.ahead import travel
    from pytest_gemmguard.cases.case import GemmCase
    from pytest_gemmguard.compile.candidates import CandidateResult

    module = tmp_path / "twin_wrong_backend.py"
    module.write_text(WRONG_CANDIDATE)
    job = dict(backend_module="twin_wrong_backend", backend_file=str(module), all_choices=True)
    # Caches of their own (a worker's are the parent of this variable's): another test's compile of the same
    # case in this session would be a cache hit, autotuning nothing.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "caches" / "inductor"))
    case = GemmCase("mm", 5, 13, 17, dtype="float32")
    pool = ahead.AheadPool(1, log_dir=str(tmp_path))  # the worker's log, for a failure's report
    try:
        pool.submit("twin-wrong", [case], "t", **job)
        bare = pool._jobs[("twin-wrong", case, "")]
        assert bare.done.wait(300) and bare.result.status == "ok", bare.result
        assert any(CandidateResult.from_json(c).wrong for c in bare.result.candidates), bare.result
        fn, why = travel.pack(lambda a, b: a @ b)
        assert fn is not None, why
        pool.attach("t", "twin-wrong", fn)
        seen = pool.vet("twin-wrong", case, "t", **job)
        assert seen is not None and seen.status == "ok" and seen.fn, seen
        assert any(CandidateResult.from_json(c).wrong for c in seen.candidates), seen
        assert seen.candidates_fn is False
    finally:
        pool.close()


def _dynamic_check_case(taken: bool):
    """An aten mm case the dynamic-shape check takes (or, `taken` False, one it leaves out by its hash alone)."""
    from pytest_gemmguard import backends
    from pytest_gemmguard.cases.case import GemmCase
    from pytest_gemmguard.crosscheck import other_size

    drawn = (GemmCase("mm", m, m + 5, m + 9, dtype="float32", epilogue="relu") for m in range(3, 60))
    return next(case for case in drawn if other_size.takes(case, backends.get("aten")) == taken)


def test_a_worker_makes_the_dynamic_shape_compile_ahead_and_the_test_process_finds_it_cached(tmp_path, monkeypatch):
    """The dynamic-shape check (crosscheck/sizes.py) compiles in the test process, one case after another: on an H100
    that was 179 s of triton's 218 s of examples in README's main job. A worker compiles it ahead into the cache the
    two share, so the test process's compile of it is a cache hit; a case the check leaves out costs the worker
    nothing more."""
    import dataclasses

    import torch

    from pytest_gemmguard import backends
    from pytest_gemmguard.cases.case import GemmCase, build_inputs, case_function
    from pytest_gemmguard.cases.ops import OPS
    from pytest_gemmguard.cases.precision import math_precision
    from pytest_gemmguard.compile.compiler import Compiler, run_checked
    from pytest_gemmguard.crosscheck import other_size

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "caches" / "inductor"))
    aten = backends.get("aten")
    taken, left = _dynamic_check_case(True), _dynamic_check_case(False)
    pool = ahead.AheadPool(1, log_dir=str(tmp_path))
    try:
        pool.submit("aten", [taken, left], "t")
        for case in (taken, left):
            job = pool._jobs[("aten", case, "")]
            assert job.done.wait(300) and job.result.status == "ok", job.result
    finally:
        pool.close()

    compiler = Compiler(cache_dir=str(tmp_path / "caches"), timeout_s=0)  # the pool's caches, as a session's

    def cache_hits(case: GemmCase) -> int:
        before = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
        inputs = build_inputs(case, "cpu")
        fn = case_function(case.op, case.epilogue, case.dtype)
        with math_precision(case.dtype):  # as check() compiles: the math settings are part of the cache's key
            compiled = compiler.compile_fresh(aten, fn, inputs.flat, OPS[case.op].weight_positions, dynamic=True)
            run_checked(compiled, inputs.flat)
            other = build_inputs(dataclasses.replace(case, m=other_size.other_m(case.m)), "cpu")
            _, record = run_checked(compiled, other.flat)
        assert not record.compiled  # one compile served both sizes, as the check needs
        return torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] - before

    try:
        assert cache_hits(taken) == 1
        assert cache_hits(left) == 0  # the worker made no dynamic compile of a case the check leaves out
    finally:
        compiler.deactivate()  # this process's cache directories and backend, as they were


# A backend whose dynamic-shape compiles meet a CUDA error that poisons the process (its static ones are right).
POISONED_DYNAMIC = plants.planted_backend(
    "poisoned-dynamic",
    plants.graph_pass(
        "PoisonDynamic",
        """
        if any(isinstance(d, torch.SymInt) for n in graph.nodes for d in getattr(n.meta.get("val"), "shape", ())):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        """,
    ),
    imports="import torch\n",
)


def test_a_worker_whose_dynamic_compile_poisoned_it_retires_and_the_next_case_gets_a_new_one(tmp_path, monkeypatch):
    """The case's own compile was right, so its reply is ok; the dynamic compile after it met a CUDA error that
    leaves no usable context, so the worker says it retires and exits. The pool starts another for the next case,
    which a dead worker would otherwise have reported as killed ("fatal")."""
    from pytest_gemmguard.cases.case import GemmCase

    module = tmp_path / "poisoned_dynamic_backend.py"
    module.write_text(POISONED_DYNAMIC)
    job = dict(backend_module="poisoned_dynamic_backend", backend_file=str(module))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "caches" / "inductor"))
    taken = _dynamic_check_case(True)
    after = GemmCase("mm", 1, 7, 9, dtype="float32")  # M = 1: no dynamic compile of its own
    pool = ahead.AheadPool(1, log_dir=str(tmp_path))
    try:
        pool.submit("poisoned-dynamic", [taken, after], "t", **job)
        first, second = (pool._jobs[("poisoned-dynamic", case, "")] for case in (taken, after))
        assert first.done.wait(300) and second.done.wait(300)
        assert first.result.status == "ok" and first.result.retiring, first.result
        assert second.result.status == "ok" and not second.result.retiring, second.result
    finally:
        pool.close()


def test_the_order_replay_reads_a_run_and_a_clairvoyant_order_waits_least(tmp_path, monkeypatch):
    """scripts/replay_ahead_order.py, on a made-up run: one slow float32 case late in line, fast bfloat16 ones
    before it. Taken in run order the test waits for it; knowing its time, a worker starts it first."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "replay_ahead_order.py"
    spec = importlib.util.spec_from_file_location("replay_ahead_order", path)
    replay = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "replay_ahead_order", replay)  # its dataclass looks its module up there
    spec.loader.exec_module(replay)
    times = [2.0] * 8 + [60.0] + [2.0] * 3
    row = "    gemmguard [triton] {}/12 mm {}×8×8 {} contiguous epilogue=none: verified (0.2 s, compiled ahead in {} s)"
    lines = [row.format(i + 1, i + 1, "float32" if t > 2 else "bfloat16", t) for i, t in enumerate(times)]
    log = tmp_path / "run.txt"
    log.write_text("\n".join([*lines, "    gemmguard [triton] 13/12 mm 9×9×9 float32 contiguous epilogue=none: "
                              "unsupported (0.0 s; ETA 0 s)"]))  # fmt: skip
    jobs = replay.read(str(log))
    assert [j.seconds for j in jobs] == [*times, 1.0]
    in_order, _ = replay.replay(jobs, "run order", 2)
    seen, _ = replay.replay(jobs, "clairvoyant", 2)
    assert seen < in_order - 5, (seen, in_order)
    # told that float32 is slow before any float32 case compiled, the pool's order starts it first too
    told, _ = replay.replay(jobs, "Order, told each kind's mean", 2)
    assert told < in_order - 5, (told, in_order)


TWIN_TESTS = """
from pytest_gemmguard import gemm_case

SAME = dict(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(7, 9, 11)],
            max_examples=1)


@gemm_case(**SAME)
def test_bare(gemm):  # its compile of the case autotunes first, in a worker
    gemm.check()


@gemm_case(**SAME)
def test_own_function(gemm):  # the same case again with a function: served from the cache, nothing autotuned
    gemm.check(lambda a, b: a @ b)
"""


def test_a_wrong_candidate_fails_the_function_test_whose_compile_the_cache_served(pytester):
    """End to end, real workers: a wrong losing candidate (WRONG_CANDIDATE) fails both tests, the one whose
    worker autotuned the case and the one checking its own function, which only the bare compile's judgement
    can tell (it passed before that judgement was handed over)."""
    pytester.makeconftest(WRONG_CANDIDATE)
    pytester.makepyfile(TWIN_TESTS)
    result = pytester.runpytest_subprocess("--gemm-backends=twin-wrong", "--gemm-seed=1", "--gemm-compile-workers=1",
                                           "-p", "no:cacheprovider", "-v")  # fmt: skip
    out = result.stdout.str()
    result.assert_outcomes(failed=2)
    own = out[out.index("test_bare[twin-wrong] FAILED") :]  # the second test's lines
    assert "gemmguard_test_twin_wrong_mm compiled alone: wrong on the case's inputs" in own, out
    assert "test_own_function[twin-wrong] FAILED" in own, out


def test_the_session_sizes_the_pool_by_the_gpus_free_memory_once(monkeypatch):
    """What auto_workers is told of the GPU: its free memory when first asked (later, workers hold some), and
    nothing where CUDA cannot say (no bound from it)."""
    import torch

    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.run.session import GemmSession, Options

    asked = []

    def free(device):
        asked.append(device)
        return (4 << 30, 16 << 30)

    monkeypatch.setattr(torch.cuda, "mem_get_info", free)
    session = GemmSession(Compiler(), Options())
    assert session._free_gpu_memory("cuda") == 4 << 30
    assert session._free_gpu_memory("cuda") == 4 << 30 and len(asked) == 1
    assert ahead_policy.auto_workers(16, 1, memory=None, gpu_memory=session._free_gpu_memory("cuda")) == 1

    def broken(device):
        raise RuntimeError("no CUDA GPUs are available")

    monkeypatch.setattr(torch.cuda, "mem_get_info", broken)
    assert GemmSession(Compiler(), Options())._free_gpu_memory("cuda:0") is None
