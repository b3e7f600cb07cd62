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
- The autotune candidates its compile judged (compile/candidates.py): the test process autotunes nothing on a
  cache hit, so a wrong losing candidate is known only from the worker, and fails the case there.

A test's own function (`gemm.check(fn)`) is not known until its first example runs; from then on its queued
cases carry it (travel.py: a lambda's code and the values it reads), so a worker compiles what the test checks.
Before that, or for a function that cannot travel, the worker compiles the case's own GEMM: a function
computing the same GEMM still finds the autotuning results and kernels cached.

Workers take the queued cases in the test's order, except that a kind of case seen to compile slowly starts
early enough to be ready in its turn and no case is compiled in two workers at once (policy.py).

Autotuning in several processes shares the GPU, so the winning config can differ from a serial run (the
verdict cannot: every case is still checked); benchmarks never use the pool. Each worker gets a share of
the cores for Inductor's own compile pool (`policy.worker_env`).

The worker side is `python -m pytest_gemmguard.ahead.worker` (worker.py): one JSON job per line on
stdin, one JSON result per line on its stdout.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import worker
from .policy import Order, worker_env
from .reply import Reply

CLOSE_GRACE_S = 2.0  # at the session's end, how long idle workers get to exit before all are killed
PARENT_VAR = "GEMMGUARD_AHEAD_PARENT"  # the test process's pid: a worker outliving it exits (worker.py)


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
    result: Reply | None = None  # what the worker learnt (done)
    started: threading.Event = field(default_factory=threading.Event)  # a worker took it (or the pool closed)
    done: threading.Event = field(default_factory=threading.Event)


class AheadPool:
    """Worker processes that compile queued cases into the session's caches, in the order submitted unless
    a slow kind of case must start early to be ready in its turn, never one case in two workers at once
    (policy.Order)."""

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
        self.order = Order(workers)  # which queued job a free worker takes (under the lock)
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

    def vet(self, backend: str, case: Any, tag: str, **job: Any) -> Reply | None:
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
        if found.result is None:
            return None
        return self._twin_candidates(found, dataclasses.replace(found.result, queued_ahead=queued))

    def _twin_candidates(self, job: Job, reply: Reply) -> Reply:
        """The autotune candidates judged for `job`'s case: its own, else, for a compile with the test's function
        that found the autotuning cached, those its case's bare compile judged (it ran first: ahead_policy), or
        a wrong candidate found there would reach no test. `candidates_fn`: judged in the test's function."""
        own = dataclasses.replace(reply, candidates_fn=reply.fn)
        if reply.candidates or not job.key[2] or reply.status != "ok":
            return own
        with self._lock:
            twin = self._jobs.get((*job.key[:2], ""))
        if twin is None or not twin.done.is_set() or twin.result is None or not twin.result.candidates:
            return own
        self.stats["candidates_from_bare_compile"] += 1
        return dataclasses.replace(reply, candidates=twin.result.candidates, candidates_fn=False)

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
            worker.kill_group(proc)
        for proc in procs:
            worker.reap(proc)

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
                i = self.order.next(self._queue) if self._queue and not self._paused else None
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
            self.order.start(job)
            self._running += 1
            job.started.set()
            return job

    def _shut(self) -> None:
        with self._lock:
            self._closing = True
            self._lock.notify_all()
            for job in self._queue:  # nobody will compile them: release whoever waits
                job.started.set()
                job.done.set()
            self._queue.clear()

    def _serve(self, slot: int) -> None:
        # Workers this thread starts die with it (worker.die_with_parent): it returns only on closing.
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
            result = Reply("error", "the compile-ahead pool lost this job")
            try:
                result = self._run(slot, proc, job)
            finally:  # whatever went wrong here, whoever waits for the job is released
                result = dataclasses.replace(result, ahead_s=round(time.perf_counter() - started, 3))
                self.stats[result.status] += 1
                job.result = result
                job.state = "done"
                job.done.set()
                with self._lock:
                    self._running -= 1
                    self.order.finish(job, result.ahead_s)
                    self._lock.notify_all()

    def _run(self, slot: int, proc: subprocess.Popen, job: Job) -> Reply:
        try:
            proc.stdin.write(job.line + "\n")
            proc.stdin.flush()
            reply = proc.stdout.readline()
        except (OSError, ValueError):  # ValueError: close() closed the pipe meanwhile
            reply = ""
        if not reply:  # the worker died on this job (or the pool is closing)
            self._procs[slot] = None
            return Reply("fatal", worker.death(proc))
        try:
            result = Reply.from_json(json.loads(reply))
        except ValueError:
            return Reply("error", f"an unreadable reply from its worker: {reply[:200]!r}")
        if result.status == "fatal" or result.retiring:
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
                    [sys.executable, "-m", "pytest_gemmguard.ahead.worker"],
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
            worker.kill_group(proc)
            worker.reap(proc)
            if self._closing:
                return None
        self.stats["failed_starts"] += 1
        if self.stats["failed_starts"] >= 3:
            self._progress("compile-ahead: workers fail to start; compiling in the test process only")
            self._shut()
        return None
