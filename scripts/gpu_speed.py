"""Where a GPU correctness check spends its time, and what Inductor options or warm caches buy (issue 11).

    PYTHONPATH=$PWD python3 scripts/gpu_speed.py --backend triton --cases 16 --seed 5 \
        --variants base,no_epi_bench --warm 8 --profile 3 --out $OUT/speed --deadline 420

Draws the same `--cases` from the whole default case space (fixed seed) for every row and checks each
through gemmguard's own check path (compile, provenance, float64 oracle), every row in a fresh process
with a fresh Inductor cache:

  <variant>      serial compile+check, with the variant's Inductor options on top of the backend's own
  warm<P>        P processes first compile the cases in parallel into one cache directory, then a fresh
                 process checks them all serially on that warm cache (what compile-ahead can buy)

Prints one table row per mode: verified/unsupported/failed, wall, verified per minute, median compile s
and CPU seconds used (self + children; how many cores the compile really kept busy).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time

VARIANTS = {
    "base": {},
    "no_epi_bench": {"benchmark_epilogue_fusion": False},
    "no_tma": {"triton.enable_persistent_tma_matmul": False},
    "no_subproc": {"autotune_in_subproc": False},
    "precompile_only": {"benchmark_epilogue_fusion": False, "max_autotune_gemm_search_space": "DEFAULT"},
}


def draw(n: int, seed: int, device: str) -> list:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    from pytest_gemmguard.strategies import gemm_cases

    out: list = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(gemm_cases(device))
    def collect(case):
        if len(out) < n:
            out.append(case)

    collect()
    return out


def one(args) -> None:
    from pytest_gemmguard import backends
    from pytest_gemmguard.compile import Compiler
    from pytest_gemmguard.errors import GemmMismatch, Unsupported
    from pytest_gemmguard.gemm import Gemm
    from pytest_gemmguard.session import GemmSession, Options

    backend = backends.get(args.backend)
    extra = VARIANTS.get(args.variant, {})
    if extra:
        own = type(backend).inductor_options
        type(backend).inductor_options = lambda self: {**own(self), **extra}
    cases = draw(args.cases, args.seed, backend.device())
    if args.slice:
        i, k = map(int, args.slice.split("/"))
        cases = cases[i::k]
    compiler = Compiler(cache_dir=args.cache_dir)
    compiler.activate()
    session = GemmSession(compiler, Options())
    prof = cProfile.Profile() if args.profile else None
    rows = []
    started = time.perf_counter()
    for idx, case in enumerate(cases):
        t0 = time.perf_counter()
        before = compiler.stats["compile_s"]
        if prof is not None and idx < args.profile:
            prof.enable()
        try:
            Gemm(case, args.backend, session).check()
            verdict = "ok"
        except Unsupported as exc:
            verdict = f"unsupported: {str(exc)[:80]}"
        except GemmMismatch:
            verdict = "FAILED"
        except Exception as exc:
            verdict = f"error: {type(exc).__name__}: {str(exc)[:80]}"
        finally:
            if prof is not None:
                prof.disable()
        rows.append(dict(case=case.describe() if hasattr(case, "describe") else repr(case), verdict=verdict,
                         wall_s=round(time.perf_counter() - t0, 2),
                         compile_s=round(compiler.stats["compile_s"] - before, 2)))  # fmt: skip
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    wall = time.perf_counter() - started
    ru_self, ru_kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru_self.ru_utime + ru_self.ru_stime + ru_kids.ru_utime + ru_kids.ru_stime
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(45)
        with open(os.path.join(args.out, f"profile-{args.variant}.txt"), "w") as f:
            f.write(s.getvalue())
    compiler.deactivate() if args.cache_dir is None else None
    print(json.dumps(dict(rows=rows, wall_s=wall, cpu_s=cpu)))


def child(args, variant: str, **kw) -> dict:
    cmd = [sys.executable, __file__, "--one", "--backend", args.backend, "--cases", str(args.cases),
           "--seed", str(args.seed), "--variant", variant, "--out", args.out]  # fmt: skip
    for k, v in kw.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(args.out, "children.log"), "a") as f:
        f.write(f"### {' '.join(cmd)}\n{p.stderr[-20000:]}\n")
    if p.returncode != 0:
        return {"rows": [], "wall_s": 0.0, "cpu_s": 0.0, "error": p.stderr.strip().splitlines()[-1:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def summarise(name: str, res: dict, wall: float | None = None) -> str:
    rows = res["rows"]
    ok = sum(r["verdict"] == "ok" for r in rows)
    uns = sum(r["verdict"].startswith("unsupported") for r in rows)
    bad = len(rows) - ok - uns
    wall = res["wall_s"] if wall is None else wall
    comp = statistics.median([r["compile_s"] for r in rows]) if rows else 0.0
    rate = 60 * ok / wall if wall else 0.0
    return f"{name:16s} {ok:4d} {uns:4d} {bad:4d} {wall:8.1f} {rate:8.1f} {comp:8.2f} {res['cpu_s']:8.1f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="triton")
    p.add_argument("--cases", type=int, default=16)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--variants", default="base")
    p.add_argument("--warm", type=int, default=0, help="also measure compile-ahead with this many processes")
    p.add_argument("--profile", type=int, default=0, help="cProfile the first N cases of each row")
    p.add_argument("--out", default="/tmp/gpu-speed")
    p.add_argument("--deadline", type=float, default=1e9)
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="base", help=argparse.SUPPRESS)
    p.add_argument("--slice", default="", help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.one:
        one(args)
        return
    t_start = time.perf_counter()
    lines = []
    for v in args.variants.split(","):
        if time.perf_counter() - t_start > args.deadline:
            lines.append(f"{v:16s} skipped: deadline")
            continue
        print(f"[speed] {args.backend} {v}: {args.cases} cases ...", file=sys.stderr, flush=True)
        lines.append(summarise(v, child(args, v, profile=args.profile)))
    if args.warm and time.perf_counter() - t_start < args.deadline:
        cache = tempfile.mkdtemp(prefix="gemmguard-warm-")
        print(f"[speed] {args.backend} warm{args.warm}: compile ahead ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        cmds = []
        for i in range(args.warm):
            cmd = [sys.executable, __file__, "--one", "--backend", args.backend, "--cases", str(args.cases),
                   "--seed", str(args.seed), "--variant", "base", "--out", args.out, "--slice", f"{i}/{args.warm}",
                   "--cache-dir", cache]  # fmt: skip
            cmds.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for c in cmds:
            c.wait()
        ahead = time.perf_counter() - t0
        res = child(args, "base", cache_dir=cache)
        lines.append(summarise(f"warm{args.warm}-check", res))
        lines.append(summarise(f"warm{args.warm}-total", res, wall=ahead + res["wall_s"]))
        lines.append(f"{'':16s} (compile-ahead phase {ahead:.1f} s with {args.warm} processes)")
    head = ("ok", "uns", "bad", "wall_s", "ok/min", "comp_md", "cpu_s")
    print(f"{'mode':16s} " + " ".join(f"{h:>{4 if len(h) <= 3 else 8}s}" for h in head))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
