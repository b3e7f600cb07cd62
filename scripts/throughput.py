"""Verified GEMM cases per minute, per backend: naive (one cold compile per case) vs gemmguard.

    python scripts/throughput.py --cases 24 --backends aten,cpp

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


def draw(n: int, seed: int) -> list:
    from hypothesis import HealthCheck, given, seed as hseed, settings

    from pytest_gemmguard.strategies import gemm_cases

    out = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(gemm_cases("cpu"))
    def collect(case):
        if len(out) < n:
            out.append(case)

    collect()
    return out


def run_mode(mode: str, backend: str, n: int, seed: int) -> dict:
    import torch

    from pytest_gemmguard.compile import Compiler
    from pytest_gemmguard.errors import Unsupported
    from pytest_gemmguard.runner import Gemm, GemmMismatch, GemmSession, Options

    cases = draw(n, seed)
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
    return dict(mode=mode, backend=backend, cases=n, verified=verified, unsupported=unsupported,
                failed=failed, wall_s=round(wall, 1), verified_per_min=round(60 * verified / wall, 1),
                compiles=compiler.stats["compiles"])  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=24)
    p.add_argument("--backends", default="aten,cpp")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--one", nargs=2, metavar=("MODE", "BACKEND"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(run_mode(args.one[0], args.one[1], args.cases, args.seed)))
        return
    rows = []
    for backend in args.backends.split(","):
        for mode in ("naive", "static", "dynamic"):
            cmd = [
                sys.executable,
                __file__,
                "--cases",
                str(args.cases),
                "--seed",
                str(args.seed),
                "--one",
                mode,
                backend,
            ]
            print(f"[throughput] {backend} {mode}: {args.cases} cases ...", file=sys.stderr, flush=True)
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            rows.append(json.loads(out))
    print(f"{'backend':8s} {'mode':8s} {'verified':>8s} {'unsup':>5s} {'failed':>6s} {'wall s':>7s} {'cases/min':>9s}")
    for r in rows:
        print(f"{r['backend']:8s} {r['mode']:8s} {r['verified']:8d} {r['unsupported']:5d} {r['failed']:6d} "
              f"{r['wall_s']:7.1f} {r['verified_per_min']:9.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
