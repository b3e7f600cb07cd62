"""The compile-ahead worker (pool.py starts it as `python -m pytest_gemmguard.ahead.worker`): one JSON
job per line on stdin, one JSON result per line on a private copy of stdout (the real stdout goes to stderr: a
compiler's prints cannot corrupt it). Each job is compiled and run once, as the test process would, and the
result says what happened: ok (with the autotune candidates judged), unsupported, timeout, error, or fatal (a
CUDA error that poisons the context: then this process exits and the pool starts another).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

# What a CUDA error that poisons the context says: after one of these the process cannot use the GPU again.
FATAL_CUDA = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "device-side assert",
    "illegal instruction",
    "an illegal memory access",
)


def compile_case(job: dict, cache_dir: str | None) -> Any:
    """Compile and run `job`'s case once through its backend, as the test process would (same function,
    inputs, options and math precision, every autotune candidate judged when `all_choices`); returns the
    CallRecord."""
    from ..cases.case import GemmCase, build_inputs, case_function
    from ..cases.memory import chunked, guard
    from ..cases.ops import OPS
    from ..cases.precision import math_precision
    from ..compile import candidates
    from ..compile.compiler import Compiler, run_checked
    from . import travel

    case = GemmCase(**job["case"])
    backend = resolve_backend(job)
    # A case too large for what is free is not allocated here either (an error: the test process applies the
    # user's --gemm-memory-limit itself, and compiles the case there if that allows it).
    guard(case, backend.device(), "auto", bool(job.get("all_choices")))
    inputs = build_inputs(case, backend.device())
    target, flat = case_function(case.op, case.epilogue, case.dtype), inputs.flat
    if job.get("fn"):  # the test's own function, called as check(fn) calls it
        target, flat = travel.unpack(job["fn"]), inputs.args
    compiler = job.get("compiler") or Compiler(cache_dir=cache_dir, dynamic=job.get("dynamic", False), timeout_s=0)
    compiler.activate()
    judged = case.dtype if job.get("all_choices") and not chunked(case) else None  # run/reference.py
    with math_precision(case.dtype), candidates.judging(judged, repr(case)):
        _, record = run_checked(compiler.compile(backend, target, flat, OPS[case.op].weight_positions), flat)
    return record


def compile_dynamic_ahead(job: dict, compiler: Any) -> bool:
    """The dynamic-shape compile of the case's check (crosscheck/sizes.py), made here so the test process finds it in
    the shared cache. Whatever goes wrong in it is the test process's to meet and report, with the case, when it
    compiles it there: False only where a CUDA error poisoned this process's context."""
    from ..cases.case import GemmCase
    from ..cases.precision import math_precision
    from ..crosscheck import other_size

    case = GemmCase(**job["case"])
    try:
        with math_precision(case.dtype):
            other_size.compile_ahead(compiler, case, resolve_backend(job))
    except Exception as exc:
        return not fatal_cuda(exc)
    return True


def resolve_backend(job: dict) -> Any:
    """The job's backend; one registered at run time (a conftest calling `backends.register`) is not known to
    a fresh interpreter, so the module that defines it is imported first: by name, else from its file (a
    `conftest` module name can find another project's conftest first on sys.path)."""
    import importlib
    import importlib.util

    from .. import backends

    if job["backend"] not in backends.names() and job.get("backend_module"):
        try:
            importlib.import_module(job["backend_module"])
        except ImportError:
            pass
    if job["backend"] not in backends.names() and job.get("backend_file"):
        spec = importlib.util.spec_from_file_location(f"gemmguard_backend_{job['backend']}", job["backend_file"])
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return backends.get(job["backend"])


def fatal_cuda(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    return "cuda error" in text and any(m in text for m in FATAL_CUDA)


def die_with_parent() -> None:
    """A worker leads a process group of its own (so the pool can kill it with what it started), so a test
    process killed outright (SIGKILL, SIGTERM: no pool.close) takes no worker with it by itself: on Linux the
    kernel is asked to kill this one when it dies. Best effort elsewhere: end of input ends a worker between
    jobs."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    parent = os.environ.get("GEMMGUARD_AHEAD_PARENT")
    if parent and os.getppid() != int(parent):  # it died before the request was made
        os._exit(0)


def worker_main() -> int:
    die_with_parent()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever Inductor, Triton or nvcc print goes to the log, never into the protocol
    import torch  # the slow part: only then is the worker ready

    from .._compat.inductor import set_compile_threads
    from ..cases.case import GemmCase
    from ..compile import candidates
    from ..compile.compiler import Compiler
    from ..errors import CompileTimeout, Unsupported
    from .policy import SHARE_VAR, job_threads
    from .reply import Reply

    compiler = Compiler(cache_dir=os.environ.get("TORCHINDUCTOR_CACHE_DIR", "").rsplit(os.sep, 1)[0] or None,
                        timeout_s=0)  # fmt: skip
    share = int(os.environ.get(SHARE_VAR) or 0)  # 0: the user set the compile threads, for every case
    threads = share
    print(json.dumps({"ready": True}), file=proto)
    for line in sys.stdin:
        job = json.loads(line)
        compiler.dynamic = bool(job.get("dynamic", False))
        compiler.timeout_s = float(job.get("timeout_s") or 0)
        started = time.perf_counter()
        status, detail, judged, settled, no_choice = "ok", "", (), False, False
        poisoned = False  # the dynamic compile's CUDA context is gone: reply, then end (the pool starts another)
        try:
            if share:  # the pool chose this worker's compile threads: a backend may need more
                wanted = job_threads(share, resolve_backend(job).parallel_builds())
                if wanted != threads:
                    set_compile_threads(wanted)
                    threads = wanted
            record = compile_case({**job, "compiler": compiler}, None)
            if torch.cuda.is_initialized():
                # CUDA reports a kernel's fault asynchronously: wait for it here, so it is this case's.
                torch.cuda.synchronize()
            # What this compile's autotuning judged: the test process's cache-hit compile takes these.
            judged = tuple(c.to_json() for c in candidates.judged_for(record, repr(GemmCase(**job["case"]))))
            if not job.get("fn"):
                poisoned = not compile_dynamic_ahead(job, compiler)
        except Unsupported as exc:
            status, detail, settled, no_choice = "unsupported", exc.reason, exc.settled, exc.no_choice
        except CompileTimeout as exc:
            status, detail = "timeout", str(exc)
        except Exception as exc:
            status = "fatal" if fatal_cuda(exc) else "error"
            detail = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:500]
        took = round(time.perf_counter() - started, 3)
        fn = bool(job.get("fn"))
        reply = Reply(
            status, detail, judged, fn=fn, settled=settled, no_choice=no_choice, compile_s=took, retiring=poisoned
        )
        print(json.dumps(reply.to_json()), file=proto)
        if status == "fatal" or poisoned:
            return 3  # this process's CUDA context is gone; the pool starts a new worker
    return 0


# ---------------------------------------------------------------- the pool's side: ending a worker process
def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker's process group: the worker (its leader) and whatever it started, nvcc and Inductor's
    compile pool included, also where the worker itself already exited."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        if proc.poll() is None:
            proc.kill()


def reap(proc: subprocess.Popen) -> None:
    """Wait briefly for a killed worker to go, and close this end of its pipes."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)  # one stuck in the driver may outlive SIGKILL a while: the session does not wait
    close_pipes(proc)


def close_pipes(proc: subprocess.Popen) -> None:
    """Close the test process's end of a gone worker's pipes: one left to the garbage collector is a
    ResourceWarning ("unclosed file") at the session's end under python -W default."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError, ValueError):
                pipe.close()


def death(proc: subprocess.Popen) -> str:
    """How a worker that stopped answering ended, in words for the failure of the case it was running."""
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    close_pipes(proc)
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"the process compiling and running it died with {name}"
    return f"the process compiling and running it exited with status {rc}"


if __name__ == "__main__":
    sys.exit(worker_main())
