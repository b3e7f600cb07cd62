"""How compile-ahead (ahead.py) spends the machine: how many worker processes, the cores each gets for
Inductor's compile threads, and which queued case a free worker takes next (the pool asks, holding its lock).

Workers take the cases in the test's order, with two exceptions. A kind of case (backend and dtype) seen to
compile slowly starts early, as soon as waiting for its turn would leave the test waiting for it: on the
H200 a large float32 Triton max-autotune compile took 30-118 s in its worker where bfloat16 ones took 1-26 s
(BENCHMARKS.md), and started in its turn the one slow case had the test wait while the other workers ran
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


def worker_env(workers: int, cpu_count: int | None = None, base: dict | None = None, path: list | None = None) -> dict:
    """The session's environment (its cache directories), `path` (else this sys.path) as PYTHONPATH, and a
    core share for Inductor's compile pool, sized to the machine otherwise (8 processes on 16 cores: up to 128)."""
    env = {**(os.environ if base is None else base), "PYTHONPATH": os.pathsep.join(p for p in path or sys.path if p)}
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, cores // (workers + 1))))
    return env


def auto_workers(cpu_count: int | None = None, xdist_workers: int | None = None, cpu_backend: bool = False) -> int:
    """Workers for `--gemm-compile-workers=auto`: half the cores, less one for the test process, shared among
    pytest-xdist workers; at most 8 (more processes autotune on one GPU at once than pays); none below 4 cores,
    where the test process keeps them busy, and for a CPU backend none below 8 (its kernels' own threads share
    the cores; one worker on 2 cores made the cpp run no faster: BENCHMARKS.md)."""
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    share = max(1, xdist_workers or int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    if cores < (8 if cpu_backend else 4):
        return 0
    return max(0, min(8, cores // (2 * share) - 1))


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
