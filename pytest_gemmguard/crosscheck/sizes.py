"""A compile reused at another size: a verified case compiled again with dynamic shapes, autotuned at its own M, then
run at another M without recompiling, and judged at both.

A static compile serves one size, so the default run never meets the bug class of a kernel chosen (or specialised)
for one M and reused for another (pytorch#185773: autotuned at one M, wrong at another), which is how a model with a
varying batch or sequence length runs under `torch.compile(dynamic=True)` or after a recompile marks a dimension
dynamic. One verified case in other_size.SHARE (chosen by the case itself, so a replay checks it again) gets this
check; the rest of the budget stays static. Under --gemm-dynamic every compile is dynamic already and reused across
the cases drawn, so the check is left out. Where compile-ahead runs, a worker has made this compile already
(other_size.compile_ahead), and the one here is served by the cache they share.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import torch

from .. import oracle
from ..cases.case import build_inputs, case_function
from ..cases.ops import DTYPES, OPS
from ..cases.precision import describe
from ..compile.compiler import run_checked
from ..errors import BackendCrashed, GemmMismatch, Unsupported
from ..known.entries import DYNAMIC
from ..report import repro
from ..report.failure import failure_report
from .other_size import other_m, takes

if TYPE_CHECKING:
    from ..backends import Backend
    from ..cases.case import GemmCase
    from ..run.example import Example
    from ..run.session import GemmSession

NOTE = "raised in the compile with dynamic shapes that runs a verified case at another M (crosscheck/sizes.py)"


def judge_at_another_size(session: GemmSession, example: Example, backend: Backend, judged: tuple) -> None:
    """After a right result of the case's own GEMM: one compile with dynamic shapes, run at the case's M (where it
    autotunes; judged by `judged`, the check's own expected, bound and dtype) and then at other_m without
    recompiling (judged against its own float64 reference). A wrong result
    raises GemmMismatch of kind wrong-when-reused-across-sizes about the size it was wrong at; a compile that runs
    no kernel of the backend, or that recompiles for the second size, judges nothing (no reuse happened)."""
    case = example.case
    if session.compiler.dynamic or not takes(case, backend):
        return
    started = time.perf_counter()
    try:
        _judge(session, example, backend, judged)
    finally:  # its cost shows apart in the results table: a compile the workers' cache did not serve is felt here
        session.tally.of(example.backend).dynamic_s += time.perf_counter() - started


def _judge(session: GemmSession, example: Example, backend: Backend, judged: tuple) -> None:
    case = example.case
    other = dataclasses.replace(case, m=other_m(case.m))
    fn = case_function(case.op, case.epilogue, case.dtype)
    first_inputs, other_inputs = example.inputs, build_inputs(other, example.device)
    weights = OPS[case.op].weight_positions
    compiled = session.compiler.compile_fresh(backend, fn, first_inputs.flat, weights, dynamic=True)
    session.tally.of(example.backend).dynamic_compiles += 1
    runs = []
    for at, inputs in ((case, first_inputs), (other, other_inputs)):
        expected, tol, dtype = judged if at is case else (*oracle.case_reference(at, inputs), DTYPES[at.out_dtype])
        oracle.poison_allocator(torch.empty(expected.shape, dtype=dtype, device=expected.device))
        try:
            out, record = run_checked(compiled, inputs.flat)
        except Unsupported:  # the dynamic compile left the GEMM to another backend: nothing of this one to judge
            return
        except BackendCrashed as exc:
            exc.add_note(f"gemmguard: {NOTE} (M={case.m}, then M={other.m}); the case's static compile ran right")
            raise
        if at is other and record.compiled:  # Dynamo compiled again for the new M: no compile was reused
            return
        runs.append((at, oracle.judge(out, expected, tol, dtype), record))
    for at, verdict, record in runs:
        if not verdict.ok:
            _raise(session, example, backend, at, verdict, record)
    example.also_judged.add(DYNAMIC)
    session.tally.of(example.backend).dynamic_judged += 1


def _raise(session: GemmSession, example: Example, backend: Backend, at: GemmCase, verdict, record) -> None:
    session.tally.of(example.backend).failed += 1
    first = example.case
    shown = dataclasses.replace(example, case=at, _inputs=None)
    path = repro.write(session.options.repro_dir, shown, None, backend, verdict, True, first_case=first)
    how = (
        f"one compile with dynamic shapes, autotuned at M={first.m} and run at M={at.m} without recompiling"
        if at != first
        else f"a compile with dynamic shapes at this M={at.m}"
    )
    flags = f"{describe(at.dtype)}; right as compiled for M={first.m} alone, wrong from {how}"
    report = failure_report(shown, verdict, record, path, backend.name, flags)
    raise GemmMismatch(report, kind=DYNAMIC)
