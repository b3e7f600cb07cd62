"""The CPU's threads: a verified case's compiled code run again with every OpenMP parallel region on one thread.

A CPU kernel's split of the work is often fixed when it compiles (Inductor's CPP template writes its thread count
into the C++). One that counts on getting every thread it was built for skips work when fewer come: a caller
already inside a parallel region, OpenMP told to give fewer (OMP_DYNAMIC on a busy machine), another library that
lowered its limits (pytorch#168965: skipped tiles). Lowering torch's own count would not show it: Dynamo guards on
that count and recompiles for the new one, so the kernel built for the old count never runs at it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .. import oracle
from .._compat import openmp
from ..cases.precision import describe
from ..compile.compiler import run_checked
from ..errors import GemmMismatch
from ..known.entries import FEWER_THREADS
from ..report import repro
from ..report.failure import failure_report

if TYPE_CHECKING:
    from ..backends import Backend
    from ..run.example import Example
    from ..run.session import GemmSession


def judge_with_one_thread_teams(
    session: GemmSession,
    example: Example,
    fn: Callable[..., Any] | None,
    backend: Backend,
    compiled: Any,
    args: tuple,
    judged: tuple,
) -> None:
    """After a right result on the CPU: the compiled code again on `args` with one thread per OpenMP team, into
    NaN-poisoned memory, judged by `judged` (expected, bound, dtype: the check's reference). Which backends, by
    --gemm-fewer-threads; a wrong result raises GemmMismatch of kind wrong-with-fewer-threads."""
    usual = torch.get_num_threads()
    wanted = session.options.fewer_threads
    if example.device != "cpu" or usual < 2 or wanted == "off":  # one thread: every team has one already
        return
    if wanted == "auto" and not getattr(backend, "writes_cpu_kernels", False):
        return
    expected, tol, dtype = judged
    oracle.poison_allocator(torch.empty(expected.shape, dtype=dtype, device=expected.device))
    with openmp.one_thread_teams() as switched:
        if not switched:  # no OpenMP runtime here (or no /proc to find one in)
            return
        out, record = run_checked(compiled, args)
    verdict = oracle.judge(out, expected, tol, dtype)
    if verdict.ok:
        example.also_judged.add(FEWER_THREADS)
        return
    session.tally.of(example.backend).failed += 1
    dynamic = session.compiler.dynamic
    path = repro.write(session.options.repro_dir, example, fn, backend, verdict, dynamic, one_thread_teams=True)
    threads = f"right with {usual} OpenMP threads, wrong with one thread per parallel region"
    flags = f"{describe(example.case.dtype)}; {threads}"
    raise GemmMismatch(failure_report(example, verdict, record, path, backend.name, flags), kind=FEWER_THREADS)
