"""How compile-ahead (pool.py) spends the machine: how many worker processes, the cores each gets for
Inductor's compile threads, and which queued case a free worker takes next (the pool asks, holding its lock).

Workers take the cases in the test's order, with two exceptions. A kind of case (backend and dtype) seen to
compile slowly starts early, as soon as waiting for its turn would leave the test waiting for it: on the
H200 a large float32 Triton max-autotune compile took 30-118 s in its worker where bfloat16 ones took 1-26 s
(torch 2.11, 2026-12-03), and started in its turn the one slow case had the test wait while the other workers ran
ahead on cases needed minutes later. And no case is compiled in two workers at once: a case queued again with the test's
own function while a worker compiles its bare GEMM waits for that compile, then finds its autotuning and
kernels in the session's caches. A case the test process waits for now goes next, unless it waits so.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Sequence
from typing import Any


def usable_cores() -> int:
    """The cores this process may run on (a container's or taskset's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def worker_env(workers: int, cpu_count: int | None = None, base: dict | None = None, path: list | None = None) -> dict:
    """The session's environment (its cache directories), `path` (else this sys.path) as PYTHONPATH, and a
    core share for Inductor's compile pool, sized to the machine otherwise (14 processes on 16 cores: up to
    224). A worker spends most of its time in single-threaded Python (lowering, codegen), so on a machine the
    workers fill each gets one: on the H200, 14 workers of 1 compile thread checked the triton user file in
    121.5 s where 14 of 2 took 157.8 s (docs/validation/speed.md)."""
    env = {**(os.environ if base is None else base), "PYTHONPATH": os.pathsep.join(p for p in path or sys.path if p)}
    cores = cpu_count if cpu_count is not None else usable_cores()
    if "TORCHINDUCTOR_COMPILE_THREADS" not in env:  # the user's count stands for every case; ours may grow
        env["TORCHINDUCTOR_COMPILE_THREADS"] = env[SHARE_VAR] = str(max(1, cores // (workers + 1)))
    else:
        env.pop(SHARE_VAR, None)  # one inherited from elsewhere must not let a worker raise the user's count
    return env


# Set by worker_env where it chose the worker's compile threads (the user set none): job_threads may raise them.
SHARE_VAR = "GEMMGUARD_AHEAD_THREADS"


def job_threads(share: int, builds: int, cores: int | None = None, memory: int | None = -1) -> int:
    """A worker's compile threads for one case whose backend runs `builds` outside builds per autotuning
    (Backend.parallel_builds): its `share` of the cores, raised to `builds` so they run side by side, within
    the cores and, above the share, one build per WORKER_MEMORY of available memory (`memory`: bytes, None
    for unknown, -1: read it now). A thread waiting on nvcc costs no core; its nvcc does, and the workers'
    Python keeps about half the H200's cores busy (9.2 of 16 in README's main job at 14 workers, 2026-12-04)."""
    if builds <= share:
        return share
    cores = cores if cores is not None else usable_cores()
    if memory == -1:
        memory = available_memory()
    extra = builds - share if memory is None else min(builds - share, memory // WORKER_MEMORY)
    return max(share, min(share + extra, cores))


# Memory a worker may hold at its peak: torch, a CUDA context, Inductor's compile pool, an nvcc or g++ build.
# On the H200 the busiest sample of 14 workers and the test process held 28.1 GiB (the triton user file) and
# 32.1 GiB (the README main job, cutlass and cpp included): at most 2.2 GiB a process; and 14.6 GiB of GPU
# memory in the main job: 1.0 GiB a process (2026-12-04).
WORKER_MEMORY = 3 << 30
WORKER_GPU_MEMORY = 3 << 29  # 1.5 GiB


def available_memory() -> int | None:
    """Bytes of memory available now (Linux's MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def auto_workers(cpu_count: int | None = None, xdist_workers: int | None = None, cpu_backend: bool = False,
                 memory: int | None = -1, gpu_memory: int | None = None) -> int:  # fmt: skip
    """Workers for `--gemm-compile-workers=auto`, the cores shared among pytest-xdist workers: for a GPU
    backend all the cores less two (the test process, and room to spare), no more than the available memory
    holds at WORKER_MEMORY each (`memory`: bytes, None for unknown, -1: read it now) nor the GPU's free memory
    (`gpu_memory`) at WORKER_GPU_MEMORY each, keeping one share for the test process; none below 4 cores,
    where the test process keeps them busy. A worker is mostly single-threaded Python: on the H200's 16 cores
    7 workers kept 7-9 cores busy through the README main job, and 14 checked the triton user file in 121.5 s
    where 7 took 207.8 s (docs/validation/speed.md). For a CPU backend, whose kernels run on the cores
    themselves, half the cores less one, at most 8, none below 8 cores (one worker on 2 cores made the cpp
    run no faster: docs/validation/speed.md)."""
    cores = cpu_count if cpu_count is not None else usable_cores()
    share = max(1, xdist_workers or int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    if cpu_backend:
        return 0 if cores < 8 else max(0, min(8, cores // (2 * share) - 1))
    if cores < 4:
        return 0
    workers = max(0, cores // share - 2)
    if memory == -1:
        memory = available_memory()
    if memory is not None:
        workers = min(workers, memory // share // WORKER_MEMORY)
    if gpu_memory is not None:  # the test process's own checks need room there too: one worker's share
        workers = min(workers, max(0, gpu_memory // share // WORKER_GPU_MEMORY - 1))
    return workers


class Order:
    """What the pool has learnt about its jobs' compile times, and the choice of the next job from it.

    A job here is anything with `key` ((backend, case, function digest)), `kind` ((backend, dtype)), `wanted`
    and `again` (ahead.Job)."""

    def __init__(self, workers: int):
        self.workers = workers
        self.took: dict[tuple, list[float]] = collections.defaultdict(list)  # kind -> seconds of first compiles
        self.compiling: collections.Counter = collections.Counter()  # (backend, case) -> workers on it now
        self.started: set[tuple] = set()  # (backend, case) of every job a worker took

    def next(self, queue: Sequence[Any]) -> int | None:
        """Where in `queue` the job to start now is, or None when none may start (each waits for its own case
        compiling in another worker). Of the others: one the test process waits for, else the one with the
        least slack, the time until its turn comes less the time it takes, both estimated from the first
        compiles of each kind's cases so far (a case compiled before counts as a cache hit, no time). Its
        turn comes once the jobs ahead of it are done, `workers` at a time. Where every kind takes as long
        (or nothing is known yet) that is the first free one in line."""
        free = [i for i, job in enumerate(queue) if not self.compiling[job.key[:2]]]
        if not free:
            return None
        for i in free:
            if queue[i].wanted:
                return i
        done = [s for times in self.took.values() for s in times]
        if not done:
            return free[0]
        typical = sum(done) / len(done)
        mean = {kind: sum(times) / len(times) for kind, times in self.took.items() if times}
        eligible = set(free)
        best, least, ahead = free[0], float("inf"), 0.0
        for i, job in enumerate(queue):
            took = 0.0 if job.key[:2] in self.started else mean.get(job.kind, typical)
            slack = ahead / max(self.workers, 1) - took
            if slack < least and i in eligible:
                best, least = i, slack
            ahead += took
        return best

    def start(self, job: Any) -> None:
        """A worker took `job`."""
        job.again = job.key[:2] in self.started
        self.started.add(job.key[:2])
        self.compiling[job.key[:2]] += 1

    def finish(self, job: Any, seconds: float) -> None:
        """`job` ended after `seconds` in its worker."""
        if not job.again:  # a case compiled before is mostly a cache hit: it says little of its kind
            self.took[job.kind].append(seconds)
        self.compiling[job.key[:2]] -= 1
        if self.compiling[job.key[:2]] <= 0:
            del self.compiling[job.key[:2]]
