"""Verified GEMM cases per minute, per backend: naive (one cold compile per case) vs gemmguard.

    python scripts/throughput.py --cases 24 --backends aten,cpp --space wide
    python scripts/throughput.py --cases 24 --backends aten,cpp --space narrow

Spaces: `wide` is the whole case space (what `@gemm_case()` draws); `narrow` is one layer type with
drawn shapes (`@gemm_case(ops=["linear"], dtypes=["bfloat16"], epilogues=["bias+gelu"],
layouts=["contiguous"])`), the usual shape of a user's test for their own model.

Draws the same cases (fixed seed) for every mode, so the modes are compared on identical work:
  naive    every case: torch._dynamo.reset() and a fresh, empty Inductor cache dir, then compile+check
  static   gemmguard's default: one session cache, Dynamo's guarded reuse, one static compile per shape
  dynamic  gemmguard --gemm-dynamic: one dynamic compile serves many sizes of the same structure
Each mode runs in its own fresh process, so none inherits another's warm caches.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

NARROW = dict(ops=["linear"], dtypes=["bfloat16"], epilogues=["bias+gelu"], layouts=["contiguous"])


def draw(n: int, seed: int, space: str = "wide") -> list:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    from pytest_gemmguard.cases.strategies import gemm_cases

    out = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(gemm_cases("cpu", **(NARROW if space == "narrow" else {})))
    def collect(case):
        if len(out) < n:
            out.append(case)

    collect()
    return out


def run_mode(mode: str, backend: str, n: int, seed: int, space: str) -> dict:
    import torch

    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import GemmMismatch, Unsupported
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    cases = draw(n, seed, space)
    compiler = Compiler(dynamic=(mode == "dynamic"))
    compiler.activate()
    session = GemmSession(compiler, Options())
    verified = unsupported = failed = 0
    started = time.perf_counter()
    for case in cases:
        if mode == "naive":
            torch._dynamo.reset()
            compiler.deactivate()
            compiler = session.compiler = Compiler(cache_dir=tempfile.mkdtemp(prefix="naive-"))
            compiler.activate()
        try:
            Gemm(case, backend, session).check()
            verified += 1
        except Unsupported:
            unsupported += 1
        except GemmMismatch:
            failed += 1
    wall = time.perf_counter() - started
    compiler.deactivate()
    return dict(space=space, mode=mode, backend=backend, cases=n, verified=verified, unsupported=unsupported,
                failed=failed, wall_s=round(wall, 1), verified_per_min=round(60 * verified / wall, 1),
                compiles=compiler.stats["compiles"])  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=24)
    p.add_argument("--backends", default="aten,cpp")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--space", choices=["wide", "narrow"], default="wide")
    p.add_argument("--one", nargs=2, metavar=("MODE", "BACKEND"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(run_mode(args.one[0], args.one[1], args.cases, args.seed, args.space)))
        return
    rows = []
    for backend in args.backends.split(","):
        for mode in ("naive", "static", "dynamic"):
            cmd = [sys.executable, __file__, "--cases", str(args.cases), "--seed", str(args.seed)]
            cmd += ["--space", args.space, "--one", mode, backend]
            print(f"[throughput] {args.space} {backend} {mode}: {args.cases} cases ...", file=sys.stderr, flush=True)
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            rows.append(json.loads(out))
    columns = ("space", "backend", "mode", "verified", "unsupported", "failed", "wall_s", "verified_per_min")
    print(" ".join(f"{c:>10s}" for c in columns))
    for r in rows:
        print(" ".join(f"{r[c]!s:>10s}" for c in columns))


if __name__ == "__main__":
    main()
