"""Compile ahead: while the test process checks one case, worker processes compile the next ones.

A GPU correctness check is almost all compile (Inductor's max-autotune: codegen, Triton builds of every
candidate config, benchmarking them), and a compile keeps one CPU core busy while the GPU sits idle. So the
test process hands the cases it is about to check to a pool of worker processes. Each worker compiles and
runs its case once through the same backend, into the session's own Inductor and Triton cache directories.
When the test process reaches the case, its own compile finds the work done (the FX graph cache; for cpp,
which freezes weights with that cache off, the built C++ kernels), and it then checks the case as before:
compile, provenance, the float64 oracle. The verdict on the winner is always the test process's own, so
nothing a worker does can turn a failure into a pass.

What a worker learns is used in three ways:
- A case whose compile or run killed the worker (a segfault, an abort) or poisoned its CUDA context (an
  illegal memory access, a device-side assert) is never run in the test process: it fails with that
  reason, and the rest of the suite goes on (`CaseKilledProcess`).
- An unsupported that every compile of the case would find (errors.Unsupported.settled) stands as is;
  anything else a worker raised tells nothing for sure, and the test process compiles that case itself.
- The autotune candidates its compile judged (candidates.py): the test process autotunes nothing on a
  cache hit, so a wrong losing candidate is known only from the worker, and fails the case there.

A test's own function (`gemm.check(fn)`) is not known until its first example runs; from then on its queued
cases carry it (travel.py: a lambda's code and the values it reads), so a worker compiles what the test checks.
Before that, or for a function that cannot travel, the worker compiles the case's own GEMM: a function
computing the same GEMM still finds the autotuning results and kernels cached.

Workers take the queued cases in the test's order, with two exceptions. A kind of case (backend and dtype)
seen to compile slowly starts early, as soon as waiting for its turn would leave the test waiting for it.
On the H200 a float32 Triton max-autotune compile takes 30-120 s where a bfloat16 one takes 2-20 s
(BENCHMARKS.md); started in its turn, the one slow case had the test wait while the other workers ran ahead
on cases needed minutes later. And no case is compiled in two workers at once: a case queued again with the
test's function while a worker compiles its bare GEMM waits for that compile, then finds its autotuning and
kernels cached. A case the test process waits for now goes next, unless it waits so.

Autotuning in several processes shares the GPU, so the winning config can differ from a serial run (the
verdict cannot: every case is still checked); benchmarks never use the pool. Each worker gets a share of
the cores for Inductor's own compile pool (`worker_env`).

The worker side is `python -m pytest_gemmguard.ahead_worker` (ahead_worker.py): one JSON job per line on
stdin, one JSON result per line on its stdout.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

CLOSE_GRACE_S = 2.0  # at the session's end, how long idle workers get to exit before all are killed
PARENT_VAR = "GEMMGUARD_AHEAD_PARENT"  # the test process's pid: a worker outliving it exits (ahead_worker.py)


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


def job_args(backend: Any, compiler: Any, all_choices: bool = True) -> dict:
    """What a worker needs besides the case to compile it as the test process would."""
    import inspect

    try:
        where = inspect.getfile(type(backend))
    except (TypeError, OSError):
        where = ""
    return dict(dynamic=compiler.dynamic, backend_module=type(backend).__module__, backend_file=where,
                timeout_s=compiler.timeout_s, all_choices=all_choices)  # fmt: skip


@dataclass
class Job:
    key: tuple  # (backend, GemmCase, the digest of the test's own function that travels, or "")
    tag: str  # the test it belongs to: its queued jobs are dropped when the test ends
    line: str
    seq: int = 0  # submission order: the order the test will run its cases
    kind: tuple = ()  # (backend, dtype): the cases whose compile times predict this one's
    state: str = "queued"  # queued -> running -> done
    wanted: bool = False  # the test process waits for it now: next, unless its case is compiling elsewhere
    again: bool = False  # its case was compiled (or started) by an earlier job: the caches serve most of it
    result: dict = field(default_factory=dict)
    started: threading.Event = field(default_factory=threading.Event)  # a worker took it (or the pool closed)
    done: threading.Event = field(default_factory=threading.Event)


class AheadPool:
    """Worker processes that compile queued cases into the session's caches, in the order submitted unless
    a slow kind of case must start early to be ready in its turn, never one case in two workers at once
    (`_next`)."""

    def __init__(self, workers: int, progress: Callable[[str], None] | None = None, log_dir: str | None = None):
        self.workers = workers
        self._progress = progress or (lambda line: None)
        self._log_dir = log_dir
        # Every worker's import path, also after a crash: before Inductor adds to it (CUTLASS's stand-in `cuda`)
        self._path = list(sys.path)
        self._lock = threading.Condition()
        self._queue: collections.deque[Job] = collections.deque()
        self._jobs: dict[tuple, Job] = {}
        self._threads: list[threading.Thread] = []
        self._procs: list[subprocess.Popen | None] = [None] * workers
        self._closing = False
        self._paused = 0  # while > 0 no new job starts (a benchmark is timing)
        self._running = 0
        self._next_id = 0
        self._functions: dict[tuple[str, str], dict] = {}  # (tag, backend) -> the test's own function
        self._took: dict[tuple, list[float]] = collections.defaultdict(list)  # Job.kind -> seconds per job
        self._compiling: collections.Counter = collections.Counter()  # (backend, case) -> workers on it now
        self._started_cases: set[tuple] = set()  # (backend, case) of every job a worker took
        self.stats = collections.Counter()

    # ------------------------------------------------------------------ the test process's side
    def submit(self, backend: str, cases: list, tag: str, dynamic: bool = False, backend_module: str = "",
               timeout_s: float = 0.0, first: bool = False, backend_file: str = "",
               all_choices: bool = True, wanted: bool = False) -> None:  # fmt: skip
        """Queue `cases` for compiling ahead through `backend` (a case already queued or done is skipped);
        `first`: ahead of everything queued; `wanted`: the test process waits for them now (set before any
        worker can look). The test's own function goes with them once `attach` has it."""
        with self._lock:
            fn = self._functions.get((tag, backend))
            for case in reversed(cases) if first else cases:
                key = (backend, case, fn["digest"] if fn else "")
                if key in self._jobs:
                    known = self._jobs[key]
                    known.wanted = known.wanted or wanted
                    if first and known.state == "queued":  # needed now: ahead of whatever was queued before it
                        self._queue.remove(known)
                        self._queue.appendleft(known)
                    continue
                self._next_id += 1
                line = json.dumps({"id": self._next_id, "backend": backend, "case": dataclasses.asdict(case),
                                   "dynamic": dynamic, "backend_module": backend_module,
                                   "backend_file": backend_file, "timeout_s": timeout_s,
                                   "all_choices": all_choices, "fn": fn})  # fmt: skip
                job = Job(key, tag, line, self._next_id, kind=(backend, case.dtype), wanted=wanted)
                self._jobs[key] = job
                if first:
                    self._queue.appendleft(job)
                else:
                    self._queue.append(job)
                self.stats["submitted"] += 1
            self._lock.notify_all()
        self._start()

    def attach(self, tag: str, backend: str, fn: dict) -> None:
        """The test `tag` checks its own function `fn` (travel.pack): its cases are compiled with it instead
        of the case's own GEMM, first in line (the test runs now). Those still queued are re-keyed; those a
        worker already compiled with the bare GEMM (queued at collection, long before the test started) are
        queued again with the function, or the test would wait for each of them in turn."""
        with self._lock:
            if self._functions.get((tag, backend)) == fn:
                return
            self._functions[(tag, backend)] = fn
            mine: list[Job] = []
            rest: collections.deque[Job] = collections.deque()
            for job in self._queue:
                if job.tag == tag and job.key[0] == backend:
                    self._drop(job)
                    job.key = (*job.key[:2], fn["digest"])
                    if job.key in self._jobs:  # the same case with this function is queued or done already
                        continue
                    job.line = json.dumps({**json.loads(job.line), "fn": fn})
                    self._jobs[job.key] = job
                    mine.append(job)
                else:
                    rest.append(job)
            for job in list(self._jobs.values()):
                if job.tag != tag or job.key[0] != backend or job.key[2] or job.state == "queued":
                    continue
                key = (*job.key[:2], fn["digest"])
                if key in self._jobs:
                    continue
                self._next_id += 1
                line = json.dumps({**json.loads(job.line), "fn": fn, "id": self._next_id})
                again = Job(key, tag, line, job.seq, kind=job.kind)
                self._jobs[key] = again
                mine.append(again)
                self.stats["requeued_with_function"] += 1
            self._queue = collections.deque(sorted(mine, key=lambda job: job.seq)) + rest
            self._lock.notify_all()

    def _drop(self, job: Job) -> None:
        # Only this job's own entry: after a re-key another job may hold the same key.
        if self._jobs.get(job.key) is job:
            del self._jobs[job.key]

    def vet(self, backend: str, case: Any, tag: str, **job: Any) -> dict | None:
        """What a worker learnt compiling and running `case` (queued now, first in line, if it was not), or
        None when the pool cannot tell (it stopped; the wait outlasted the compile timeout): then the
        caller compiles it itself. The test process runs no case a worker has not run first, so a case that
        kills its process kills a worker, not the test session."""
        with self._lock:
            if self._closing:
                return None
            fn = self._functions.get((tag, backend))
            key = (backend, case, fn["digest"] if fn else "")
            queued = key in self._jobs  # drawn ahead (or asked for before); False: a worker starts on it now
        self.submit(backend, [case], tag, first=True, wanted=True, **job)
        with self._lock:
            found = self._jobs[key]
        started = time.perf_counter()
        limit = job.get("timeout_s") or None
        bound = limit + 60 if limit else None
        # Two bounds: until a worker takes it (it may wait for the same case's compile in another worker,
        # which has the same timeout), then its own compile.
        if not found.started.wait(bound) or not found.done.wait(bound):
            self.stats["waited_out"] += 1
            return None
        self.stats["waited_s"] += time.perf_counter() - started
        return {**found.result, "queued_ahead": queued} if found.result else None

    def forget(self, tag: str) -> None:
        """The test `tag` ended: drop its jobs no worker has started (a later test may queue them again)."""
        with self._lock:
            keep: collections.deque[Job] = collections.deque()
            for job in self._queue:
                if job.tag == tag:
                    self._drop(job)
                    self.stats["dropped"] += 1
                else:
                    keep.append(job)
            self._queue = keep
            for key in [k for k in self._functions if k[0] == tag]:
                del self._functions[key]

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No worker compiles while this is held (jobs that are running finish first): a benchmark times its
        kernel on a GPU and CPU nobody else is using."""
        with self._lock:
            self._paused += 1
            while self._running:
                self._lock.wait()
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1
                self._lock.notify_all()

    def close(self) -> None:
        """End of session: nothing a worker does now will be used. All are told at once; those still busy after
        a short grace, shared by all, are killed with whatever they started (an nvcc build, Inductor's compile
        pool). Up to 10 s for each in turn, as before, could hold a session's end over a minute."""
        self._shut()
        procs = [proc for proc in self._procs if proc is not None]
        self._procs = [None] * self.workers
        for proc in procs:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()  # an idle worker reads its end of input and exits
        deadline = time.monotonic() + CLOSE_GRACE_S
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for proc in procs:  # the busy ones, and what any of them left behind, all at once
            _kill_group(proc)
        for proc in procs:
            _reap(proc)

    # ------------------------------------------------------------------ the dispatchers
    def _start(self) -> None:
        if self._threads or self.workers < 1:
            return
        for slot in range(self.workers):
            t = threading.Thread(target=self._serve, args=(slot,), name=f"gemmguard-ahead-{slot}", daemon=True)
            t.start()
            self._threads.append(t)
        self._progress(f"compile-ahead: {self.workers} worker processes")

    def _take(self) -> Job | None:
        with self._lock:
            i = None
            while not self._closing:
                i = self._next() if self._queue and not self._paused else None
                if i is not None:
                    break
                self._lock.wait()
            if i is None:  # the pool is closing
                return None
            job = self._queue[i]
            del self._queue[i]
            if i:
                self.stats["out_of_order"] += 1
            job.state = "running"
            job.again = job.key[:2] in self._started_cases
            self._started_cases.add(job.key[:2])
            self._running += 1
            self._compiling[job.key[:2]] += 1
            job.started.set()
            return job

    def _next(self) -> int | None:
        """Where in the queue the next job to start is (the lock held), or None when no queued job may start
        now. A job whose case a worker is compiling already (the bare GEMM, queued before the test's own
        function was known) waits for that compile: it then finds its autotuning and kernels in the session's
        caches instead of doing the same work beside it. Of the others: one the test process waits for, else
        the one with the least slack, the time until its turn comes less the time it takes, both estimated
        from the first compiles of each kind's cases so far (a case compiled before counts as a cache hit,
        no time). Its turn comes once the jobs ahead of it are done, `workers` at a time. Where every kind
        takes as long (or nothing is known yet) that is the first free one in line."""
        free = [i for i, job in enumerate(self._queue) if not self._compiling[job.key[:2]]]
        if not free:
            return None
        for i in free:
            if self._queue[i].wanted:
                return i
        done = [s for times in self._took.values() for s in times]
        if not done:
            return free[0]
        typical = sum(done) / len(done)
        eligible = set(free)
        best, least, ahead = free[0], float("inf"), 0.0
        for i, job in enumerate(self._queue):
            times = self._took.get(job.kind)
            took = 0.0 if job.key[:2] in self._started_cases else sum(times) / len(times) if times else typical
            slack = ahead / self.workers - took
            if slack < least and i in eligible:
                best, least = i, slack
            ahead += took
        return best

    def _shut(self) -> None:
        with self._lock:
            self._closing = True
            self._lock.notify_all()
            for job in self._queue:  # nobody will compile them: release whoever waits
                job.started.set()
                job.done.set()
            self._queue.clear()

    def _serve(self, slot: int) -> None:
        # Workers this thread starts die with it (ahead_worker.die_with_parent): it returns only on closing.
        while True:
            proc = self._worker(slot)
            if proc is None:
                if self._closing:
                    return
                continue  # a worker that failed to start: try again (_worker gives up after three)
            job = self._take()
            if job is None:
                return
            started = time.perf_counter()
            result: dict = {"status": "error", "detail": "the compile-ahead pool lost this job"}
            try:
                result = self._run(slot, proc, job)
            finally:  # whatever went wrong here, whoever waits for the job is released
                result["ahead_s"] = round(time.perf_counter() - started, 3)
                self.stats[result.get("status", "?")] += 1
                with self._lock:
                    if not job.again:  # a case compiled before is mostly a cache hit: it says little of its kind
                        self._took[job.kind].append(result["ahead_s"])
                job.result = result
                job.state = "done"
                job.done.set()
                with self._lock:
                    self._running -= 1
                    self._compiling[job.key[:2]] -= 1
                    if self._compiling[job.key[:2]] <= 0:
                        del self._compiling[job.key[:2]]
                    self._lock.notify_all()

    def _run(self, slot: int, proc: subprocess.Popen, job: Job) -> dict:
        try:
            proc.stdin.write(job.line + "\n")
            proc.stdin.flush()
            reply = proc.stdout.readline()
        except (OSError, ValueError):  # ValueError: close() closed the pipe meanwhile
            reply = ""
        if not reply:  # the worker died on this job (or the pool is closing)
            self._procs[slot] = None
            return {"status": "fatal", "detail": _death(proc)}
        try:
            result = json.loads(reply)
        except ValueError:
            return {"status": "error", "detail": f"an unreadable reply from its worker: {reply[:200]!r}"}
        if result.get("status") == "fatal":
            self._procs[slot] = None  # a poisoned CUDA context: that worker exits; start a new one
        return result

    def _worker(self, slot: int) -> subprocess.Popen | None:
        proc = self._procs[slot]
        if proc is not None and proc.poll() is None:
            return proc
        if self._closing:
            return None
        env = {**worker_env(self.workers, path=self._path), PARENT_VAR: str(os.getpid())}
        try:
            log = open(os.path.join(self._log_dir, f"ahead-worker-{slot}.log"), "a") if self._log_dir else None
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest_gemmguard.ahead_worker"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL, env=env,
                    text=True, bufsize=1,
                    start_new_session=True,  # its own process group: close() kills it with what it started
                )  # fmt: skip
            finally:
                if log is not None:
                    log.close()
        except OSError:
            proc = None
        if proc is not None:
            self._procs[slot] = proc  # close() now sees it, even while it starts
            # Until the worker has imported torch it can do nothing: the test process compiles meanwhile.
            if proc.stdout.readline().strip() == '{"ready": true}' and not self._closing:
                return proc
            self._procs[slot] = None
            _kill_group(proc)
            _reap(proc)
            if self._closing:
                return None
        self.stats["failed_starts"] += 1
        if self.stats["failed_starts"] >= 3:
            self._progress("compile-ahead: workers fail to start; compiling in the test process only")
            self._shut()
        return None


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker's process group: the worker (its leader) and whatever it started, nvcc and Inductor's
    compile pool included, also where the worker itself already exited."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        if proc.poll() is None:
            proc.kill()


def _reap(proc: subprocess.Popen) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)  # one stuck in the driver may outlive SIGKILL a while: the session does not wait


def _death(proc: subprocess.Popen) -> str:
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"the process compiling and running it died with {name}"
    return f"the process compiling and running it exited with status {rc}"
