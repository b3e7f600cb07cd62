"""Replay a calibration group (one structure, its cases in the order they ran) through one backend with
dynamic-shape compiles, then each case that failed there with a static compile of its own: does the wrong
result belong to the dynamic-shape compile, or to the kernel at that shape?

    python3 scripts/gpu_dynamic_repro.py calibration.jsonl "addmm" "float16 transposed_b epilogue=none"
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def parse(text: str):
    from pytest_gemmguard.cases.case import GemmCase

    op, dims, dtype, layout, epi = text.split()
    sizes = [int(x) for x in dims.split("×")]
    batch, (m, n, k) = (sizes[0], sizes[1:]) if len(sizes) == 4 else (0, sizes)
    return GemmCase(
        op=op, m=m, n=n, k=k, batch=batch, dtype=dtype, layout=layout, epilogue=epi.split("=", 1)[1], seed=5001
    )


def check(case, dynamic: bool, backend: str, compiler=None) -> str:
    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import GemmMismatch, Unsupported
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    own = compiler is None
    compiler = compiler or Compiler(dynamic=dynamic, timeout_s=120)
    options = Options()
    options.compile_workers = 0
    try:
        result = Gemm(case, backend, GemmSession(compiler, options), "repro").check()
        return f"ok {result.verdict.max_ratio:.3g}"
    except GemmMismatch as exc:
        return "WRONG " + " | ".join(str(exc).splitlines()[1:4])[:400]
    except Unsupported as exc:
        return f"unsupported {exc.reason[:120]}"
    except Exception as exc:
        return f"error {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        if own:
            compiler.deactivate()


def main() -> int:
    path, op, rest = sys.argv[1:4]
    backend = sys.argv[4] if len(sys.argv) > 4 else "triton"
    from pytest_gemmguard.compile.compiler import Compiler

    rows = [json.loads(line) for line in open(path)]
    group = [r["case"] for r in rows if r["case"].split()[0] == op and r["case"].endswith(rest)]
    compiler = Compiler(dynamic=True, timeout_s=120)
    failed = []
    for text in group:
        verdict = check(parse(text), True, backend, compiler)
        print(f"dynamic  {text:55s} {verdict}", flush=True)
        if not verdict.startswith(("ok", "unsupported")):
            failed.append(text)
    compiler.deactivate()
    for text in failed:
        print(f"static   {text:55s} {check(parse(text), False, backend)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
