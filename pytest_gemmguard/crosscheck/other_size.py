"""Which verified cases the dynamic-shape check (sizes.py) takes, the other M it runs them at, and its compile made
ahead by a compile-ahead worker. Apart from sizes.py, which judges and reports, so a worker imports no report."""

from __future__ import annotations

import dataclasses
import zlib
from typing import TYPE_CHECKING

from ..cases.case import build_inputs, case_function
from ..cases.memory import chunked
from ..cases.ops import OPS
from ..compile.compiler import run_checked
from ..errors import Unsupported

if TYPE_CHECKING:
    from ..backends import Backend
    from ..cases.case import GemmCase
    from ..compile.compiler import Compiler

# One verified case in this many, of those another M keeps whole (takes), is also compiled with dynamic shapes and run
# at another M: one compile more each. About one drawn case in thirteen (7.5% of 400 CPU draws; the rest are M = 1,
# share M with another size, or scaled). A compile-ahead worker makes its compile ahead (compile_ahead, below).
SHARE = 4


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
