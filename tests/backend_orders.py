"""Driver for tests/test_backend_orders.py: run a fixed case set through backends in the order given, in this
one process, and print one JSON line: each backend's verdict per case, and what the process still differs
in (isolation.changes) after switching away from it.

    python tests/backend_orders.py cutlass,cutedsl[quack]

Each compiler owns a temporary Inductor cache, unless GEMMGUARD_ORDERS_CACHE names a shared one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from pytest_gemmguard import backends
from pytest_gemmguard.cases.case import GemmCase
from pytest_gemmguard.compile import isolation
from pytest_gemmguard.compile.compiler import Compiler
from pytest_gemmguard.errors import BackendCrashed, CompileTimeout, GemmMismatch, Unsupported
from pytest_gemmguard.run.gemm import Gemm
from pytest_gemmguard.run.session import GemmSession, Options

# Cases every backend of the device has a kernel for: CPP needs a frozen weight (linear, mm); the GPU
# backends need fp16/bf16 with 16-byte aligned operands and N a multiple of 8 (CUTLASS, CuteDSL).
CASES = {
    "cpu": [GemmCase("linear", 8, 16, 32), GemmCase("mm", 5, 7, 9)],
    # One GPU case: each CUTLASS compile is an nvcc build, and there are 20 ordered pairs.
    "cuda": [GemmCase("mm", 256, 512, 1024, dtype="bfloat16")],
}


def verdict(session: GemmSession, case: GemmCase, backend: str) -> str:
    try:
        Gemm(case, backend, session).check()
        return "verified"
    except Unsupported:
        return "unsupported"
    except GemmMismatch:
        return "failed"
    except (BackendCrashed, CompileTimeout) as exc:
        return f"crashed: {str(exc).splitlines()[0][:300]}"


def main(order: list[str]) -> dict:
    work = tempfile.mkdtemp(prefix="gemmguard-orders-")
    # GEMMGUARD_ORDERS_CACHE=DIR: one Inductor cache for every driver process (Inductor's cache takes
    # concurrent processes), so each CUTLASS kernel is built by nvcc once, not once per order.
    cache = os.environ.get("GEMMGUARD_ORDERS_CACHE") or f"{work}/cache"
    compiler = Compiler(cache_dir=cache, timeout_s=540)
    session = GemmSession(compiler, Options(repro_dir=f"{work}/repro"))
    compiler.activate()
    before = isolation.take()
    runs = []
    for name in order:
        device = backends.get(name).device()
        verdicts = {case.describe(): verdict(session, case, name) for case in CASES[device]}
        compiler.use(None)  # switch away from it: its undo, and its footprint taken out
        runs.append({"backend": name, "verdicts": verdicts, "changes": isolation.changes(before, isolation.take())})
    compiler.deactivate()
    return {"order": order, "runs": runs}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1].split(","))))
