"""Check one case through one backend in a fresh process, under environment variants, and say which kernel
(template, config) ran: to tell a backend's bug from gemmguard's, and to narrow it down.

    PYTHONPATH=$PWD python3 scripts/gpu_case.py triton \
        "GemmCase(op='mm', m=1, n=1, k=1, dtype='float32', layout='noncontiguous', seed=11)" \
        --variant base --variant GEMMGUARD_TRITON_TMA=0

Each variant runs in its own process with an empty Inductor cache and no compile-ahead workers (the
plain in-process path), and prints one line: variant, verdict, max |error|/tolerance, kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def one(backend: str, case_text: str) -> dict:
    from pytest_gemmguard import backends
    from pytest_gemmguard.cases.case import GemmCase
    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import GemmMismatch, Unsupported
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    case = eval(case_text, {"GemmCase": GemmCase})  # a repr printed by a failure report
    listed = _candidates(backend, case)
    compiler = Compiler()
    session = GemmSession(compiler, Options())
    spec = backends.get(backend)
    try:
        result = Gemm(case, backend, session).check()
        verdict, ratio, record = "ok", result.verdict.max_ratio, result.record
    except GemmMismatch as exc:
        text = str(exc)
        lines = " | ".join(ln.strip() for ln in text.splitlines()[1:8])
        return {"verdict": "WRONG", "detail": lines, "candidates": listed}
    except Unsupported as exc:
        return {"verdict": "unsupported", "detail": exc.reason, "candidates": listed}
    finally:
        compiler.deactivate()
    kernels = [spec.describe_kernel(k) for g in record.graphs for k in g.launches if spec.claims(k)]
    # Candidates that looked wrong in autotuning but were right compiled alone (crosscheck/confirm.py): not failures.
    unconfirmed = session.tally.of(backend).candidates_unconfirmed
    return {"verdict": verdict, "ratio": round(ratio, 4), "unconfirmed": unconfirmed, "kernels": kernels,
            "candidates": listed}  # fmt: skip


def _candidates(backend: str, case) -> list[str]:
    """Every autotune candidate of a first compile of the case (own cache, nothing reused), judged on the
    case's inputs: one line each (compile/candidates.py)."""
    import dataclasses
    import tempfile

    import torch._dynamo

    from pytest_gemmguard.ahead import worker as ahead_worker
    from pytest_gemmguard.compile import candidates
    from pytest_gemmguard.errors import GemmguardError

    try:
        record = ahead_worker.compile_case({"backend": backend, "case": dataclasses.asdict(case), "all_choices": True},
                                    tempfile.mkdtemp(prefix="gemmguard-case-"))  # fmt: skip
    except GemmguardError as exc:
        return [f"(no candidates: {exc})"]
    finally:
        torch._dynamo.reset()
    return [c.line() for c in candidates.judged_for(record, repr(case))]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("backend")
    p.add_argument("case")
    p.add_argument("--variant", action="append", default=[], help="'base' or VAR=VALUE[,VAR=VALUE]")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.backend, args.case)))
        return
    for variant in args.variant or ["base"]:
        env = dict(os.environ)
        if variant != "base":
            env.update(dict(kv.split("=", 1) for kv in variant.split(",")))
        # GPU_CASE_STDERR=1 lets the child's stderr through (with TORCH_LOGS: Inductor's reasons for each choice)
        keep = subprocess.PIPE if os.environ.get("GPU_CASE_STDERR") != "1" else None
        proc = subprocess.run([sys.executable, __file__, args.backend, args.case, "--one"], env=env,
                              stdout=subprocess.PIPE, stderr=keep, text=True)  # fmt: skip
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        out = json.loads(lines[-1]) if lines else {"verdict": f"error rc={proc.returncode}",
                                                   "detail": (proc.stderr or "").strip().splitlines()[-1:]}  # fmt: skip
        print(f"{variant:28s} {json.dumps(out)}", flush=True)


if __name__ == "__main__":
    main()
