"""Which cases does torch 2.13's CPP GEMM template get wrong when a frozen weight has a storage offset?

Runs a grid of GemmCases through the `cpp` backend with gemmguard's own machinery (GemmSession.check:
compile with frozen weights, provenance, float64 oracle) and writes one JSON line per case:

    python scripts/cpp_offset_sweep.py --grid ops --out sweep.jsonl
    python scripts/cpp_offset_sweep.py --grid layouts --out sweep.jsonl
    python scripts/cpp_offset_sweep.py --grid sizes --out sweep.jsonl
    python scripts/cpp_offset_sweep.py --grid more --out sweep.jsonl

The four grids of torch 2.13.0+cpu on an AVX-512 AMD EPYC are in tests/data/cpp_offset_sweep.jsonl (one line
per case, duplicates across grids dropped); the grids ops, more and layouts of torch 2.13.0+cpu on an AVX2-only AMD
EPYC in tests/data/cpp_offset_sweep_avx2.jsonl. tests/test_known.py checks the shipped entries against both.
`--out` is appended to and cases already in it are skipped, so an interrupted sweep resumes. Each line:
{"case": {...GemmCase fields...}, "verdict": "verified" | "failed" | "unsupported" | "raised", "max_ratio",
"detail", "torch", "isa"}. The grids, and why each exists:

  ops      every CPP op x float32/bfloat16/float16 x {offset, contiguous} at shapes Hypothesis shrank
           to (5x6x130, 10x1x1, 1x1x1) and one aligned 16x16x16: is it linear-only? float32-only?
  layouts  linear and mm, float32, every layout and a few epilogues: is it the offset alone?
  sizes    linear and mm, float32 and bfloat16, offset: do sizes matter (M, N or K = 1, large K)?
  more     float16 and bfloat16 beyond the first grids: float16 over sizes for every op, bfloat16 bmm
           over sizes, bfloat16 mm/addmm/linear with epilogues and other seeds (bfloat16 passed above)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import sys
import tempfile
import time

CPP_OPS = ("mm", "addmm", "bmm", "linear")  # the CPP template has no baddbmm
FLOATS = ("float32", "bfloat16", "float16")
SEED = 20261129


def _case(op: str, m: int, n: int, k: int, dtype: str, layout: str, epilogue: str = "none", seed: int = SEED):
    from pytest_gemmguard.cases.case import GemmCase

    return GemmCase(op, m, n, k, 2 if op in ("bmm", "baddbmm") else 0, dtype, layout, epilogue, seed)


def grid(name: str) -> list:
    if name == "ops":
        shapes = ((5, 6, 130), (10, 1, 1), (1, 1, 1), (16, 16, 16))
        return [_case(op, *s, dt, lay) for op, dt, s, lay in itertools.product(
            CPP_OPS, FLOATS, shapes, ("offset", "contiguous"))]  # fmt: skip
    if name == "layouts":
        from pytest_gemmguard.cases.case import LAYOUTS

        # 5x6 cannot take an aliased B (N = M): the recorded sweep's layouts, the same shape for each
        out = [_case(op, 5, 6, 130, "float32", lay) for op in ("linear", "mm") for lay in LAYOUTS if lay != "aliased"]
        out += [_case("linear", 5, 6, 130, "float32", lay, epi) for lay in ("offset", "contiguous")
                for epi in ("gelu", "bias+relu", "residual+cast")]  # fmt: skip
        return out
    if name == "sizes":
        sizes = [(1, 6, 130), (5, 1, 130), (5, 6, 1), (2, 2, 2), (7, 3, 5), (33, 17, 65), (64, 64, 64),
                 (96, 96, 160), (3, 96, 160)]  # fmt: skip
        return [_case(op, *s, dt, "offset") for op in ("linear", "mm") for dt in ("float32", "bfloat16")
                for s in sizes]  # fmt: skip
    if name == "more":
        sizes = [(1, 6, 130), (5, 1, 130), (2, 2, 2), (7, 3, 5), (33, 17, 65), (96, 96, 160)]
        out = [_case(op, *s, "float16", "offset") for op in CPP_OPS for s in sizes]
        out += [_case("bmm", *s, "bfloat16", "offset") for s in sizes]
        out += [_case(op, 10, 1, 1, "bfloat16", "offset", seed=seed) for op in ("mm", "linear") for seed in (0, 1, 11)]
        out += [_case(op, 17, 24, 31, "bfloat16", "offset", epi) for op in ("mm", "addmm", "linear")
                for epi in ("bias+relu", "gelu", "cast", "residual+cast")]  # fmt: skip
        return out
    raise SystemExit(f"unknown grid {name!r}; valid: ops, layouts, sizes, more")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", required=True, choices=("ops", "layouts", "sizes", "more"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import torch
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import GemmMismatch, Unsupported
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    isa = str(pick_vec_isa())  # the vector ISA Inductor generates for (it picks the CPP micro-GEMM)
    done = set()
    if os.path.exists(args.out):
        with open(args.out) as fh:
            done = {json.dumps(json.loads(line)["case"], sort_keys=True) for line in fh if line.strip()}
    compiler = Compiler()
    compiler.activate()
    session = GemmSession(compiler, Options(repro_dir=tempfile.mkdtemp(prefix="cpp-sweep-repro-")))
    try:
        for case in grid(args.grid):
            key = json.dumps(dataclasses.asdict(case), sort_keys=True)
            if key in done:
                continue
            started = time.perf_counter()
            row = {"case": dataclasses.asdict(case), "torch": torch.__version__, "isa": isa}
            try:
                result = Gemm(case, "cpp", session).check()
                row.update(verdict="verified", max_ratio=result.verdict.max_ratio)
            except GemmMismatch as exc:
                worst = next((ln for ln in str(exc).splitlines() if "worst:" in ln), "")
                row.update(verdict="failed", detail=worst.strip())
            except Unsupported as exc:
                row.update(verdict="unsupported", detail=exc.reason)
            except Exception as exc:  # a compile or run that raised: a different kind of failure
                row.update(verdict="raised", detail=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            row["seconds"] = round(time.perf_counter() - started, 2)
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(f"{case.describe():55s} {row['verdict']:12s} {row.get('detail', '')[:90]}", flush=True)
    finally:
        compiler.deactivate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
