"""A compile reused at another size: a verified case compiled again with dynamic shapes, autotuned at its own M, then
run at another M without recompiling, and judged at both.

A static compile serves one size, so the default run never meets the bug class of a kernel chosen (or specialised)
for one M and reused for another (pytorch#185773: autotuned at one M, wrong at another), which is how a model with a
varying batch or sequence length runs under `torch.compile(dynamic=True)` or after a recompile marks a dimension
dynamic. One verified case in SHARE (chosen by the case itself, so a replay checks it again) gets this check; the
rest of the budget stays static. Under --gemm-dynamic every compile is dynamic already and reused across the cases
drawn, so the check is left out.
"""

from __future__ import annotations

import dataclasses
import time
import zlib
from typing import TYPE_CHECKING

import torch

from .. import oracle
from ..cases.case import build_inputs, case_function
from ..cases.memory import chunked
from ..cases.ops import DTYPES, OPS
from ..cases.precision import describe
from ..compile.compiler import run_checked
from ..errors import BackendCrashed, GemmMismatch, Unsupported
from ..known.entries import DYNAMIC
from ..report import repro
from ..report.failure import failure_report

if TYPE_CHECKING:
    from ..backends import Backend
    from ..cases.case import GemmCase
    from ..compile.compiler import Compiler
    from ..run.example import Example
    from ..run.session import GemmSession

# One verified case in this many, of those another M keeps whole (takes), is also compiled with dynamic shapes and run
# at another M: one compile more each. About one drawn case in thirteen (7.5% of 400 CPU draws; the rest are M = 1,
# share M with another size, or scaled); on the CPU no cost showed beside the draws' own (docs/validation/speed.md).
SHARE = 4
NOTE = "raised in the compile with dynamic shapes that runs a verified case at another M (crosscheck/sizes.py)"


def other_m(m: int) -> int:
    """The M a dynamic compile autotuned at `m` is run at too: past the next tiles for a small M, about half of a
    large one (a decode step after a prefill). Never 1: Dynamo compiles sizes 0 and 1 apart (specialised)."""
    return 2 * m + 3 if m <= 64 else m // 2 + 1


def takes(case: GemmCase, backend: Backend) -> bool:
    """Whether the case gets the check: one case in SHARE, by the case's own hash, where another M keeps the case
    whole: M >= 2 (Dynamo specialises M = 1) and unlike N, K and the batch (Dynamo gives equal sizes one symbol, so
    a new M would recompile: no reuse), not an aliased B (it needs N = M), not a scaled op (its row-wise scales are
    sized by M), and not a batched bias frozen into the graph (cpp's baddbmm: its bias is sized by M)."""
    if case.m < 2 or case.m in (case.n, case.k, case.batch) or case.layout == "aliased" or OPS[case.op].scaled:
        return False
    if getattr(backend, "freezes_weights", False) and "bias" in OPS[case.op].weight_args and OPS[case.op].batched:
        return False
    return zlib.crc32(repr(case).encode()) % SHARE == 0


def compile_ahead(compiler: Compiler, case: GemmCase, backend: Backend) -> None:
    """In a compile-ahead worker, after the case's static compile: the dynamic compile judge_at_another_size will
    make, run at the case's M (where it autotunes) and at other_m, so that the test process's compile of it is
    served by the Inductor cache the two share instead of autotuning again there, one case after another (on an H100
    that took 179 s of triton's 218 s of examples in README's main job). Judges nothing: the test process does."""
    if compiler.dynamic or not takes(case, backend) or chunked(case):
        return
    fn = case_function(case.op, case.epilogue, case.dtype)
    first = build_inputs(case, backend.device())
    compiled = compiler.compile_fresh(backend, fn, first.flat, OPS[case.op].weight_positions, dynamic=True)
    for inputs in (first, build_inputs(dataclasses.replace(case, m=other_m(case.m)), backend.device())):
        try:
            run_checked(compiled, inputs.flat)
        except Unsupported:  # the dynamic compile left the GEMM to another backend: the check will say so
            return


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
    finally:  # its cost shows in the results table: one compile more, in the test process, not ahead
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
