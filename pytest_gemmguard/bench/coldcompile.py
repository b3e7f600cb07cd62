"""Cold and warm compile time of one case, measured in a fresh Python process.

A compile in the test process is warm in ways that hide work: torch, Inductor and the backend's modules
are already imported, C++/Triton toolchains are already probed, and caches may hold the answer. So the
parent starts `python -m pytest_gemmguard.bench.coldcompile '<json>'` with its Inductor, Triton and CuteDSL caches
pointed at a new empty directory. The child imports torch, compiles and runs the case once through the
backend (with provenance: the backend's own kernel must run), which is the *cold* compile; then it clears
Dynamo's in-memory state and compiles again with the same on-disk caches, which is the *warm* compile. It
prints one JSON line. Phases come from torch's own compile timers (`torch._dynamo.utils.
compilation_time_metrics`); they are nested (autotuning happens inside lowering), not a partition.

`measure_repeated` takes several such samples, each in its own fresh process and empty cache, so a
compile-time regression can be tested for significance like a runtime one (stats.compare). A backend
registered at run time (a conftest calling `backends.register`) is not known to a fresh interpreter, so
the job names the module that defines it (`backend_module`) and the child imports that module first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ..ahead.worker import resolve_backend

# torch timer names -> the phase they measure (values are summed per phase).
PHASES = {
    "dynamo": ("bytecode_tracing", "build_guards"),
    "aot": ("create_aot_dispatcher_function",),
    "inductor": ("compile_fx_inner",),
    "lowering": ("GraphLowering.run",),
    "codegen": ("GraphLowering.codegen",),
    "backend_jit": ("PyCodeCache.load_by_key_path",),  # C++/Triton/nvcc builds and module loads
}
AUTOTUNE_SUFFIXES = ("_template_autotuning", "_template_precompiling")
# Where each compiler keeps its on-disk cache, under the fresh root (Compiler.activate sets all but CuteDSL's own).
CACHE_ENV = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "CUTE_DSL_CACHE_DIR": "cutedsl",
             "GEMMGUARD_CUTE_CACHE_DIR": "cute_gemm"}  # fmt: skip
ROOT_ENV = "GEMMGUARD_COLD_ROOT"


def _timers() -> dict[str, float]:
    from torch._dynamo.utils import compilation_time_metrics

    return {k: float(sum(v)) for k, v in compilation_time_metrics.items()}


def _phases(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    out = {phase: sum(delta.get(n, 0.0) for n in names) for phase, names in PHASES.items()}
    out["autotune"] = sum(v for k, v in delta.items() if k.endswith(AUTOTUNE_SUFFIXES))
    return {k: round(v, 4) for k, v in out.items()}


def _resolve_fn(job: dict) -> Any:
    if not job.get("fn"):
        return None
    import importlib

    module, _, qualname = job["fn"].partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _compile_once(job: dict, cache_dir: str) -> tuple[float, dict[str, float], list[str]]:
    import torch

    from ..cases.case import GemmCase, build_inputs, case_function
    from ..cases.ops import OPS
    from ..cases.precision import math_precision
    from ..compile.compiler import Compiler, run_checked

    case = GemmCase(**job["case"])
    backend = resolve_backend(job)
    inputs = build_inputs(case, backend.device())
    fn = _resolve_fn(job)
    target, flat = (case_function(case.op, case.epilogue, case.dtype), inputs.flat) if fn is None else (fn, inputs.args)
    weights = OPS[case.op].weight_positions
    compiler = Compiler(cache_dir=cache_dir, dynamic=job.get("dynamic", False), timeout_s=0)
    compiler.activate()  # the same directories the parent pointed the environment at
    before = _timers()
    if backend.device().startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    # Inductor bakes the TF32 setting into the kernels it generates: the child must compile what the parent
    # verified and timed, TF32 only for a tf32 case.
    with math_precision(case.dtype):
        _, record = run_checked(compiler.compile(backend, target, flat, weights), flat)
    if backend.device().startswith("cuda"):
        torch.cuda.synchronize()
    wall = time.perf_counter() - started
    kernels = [k for g in record.graphs for k in g.gemm_kernels(backend.name)]
    return wall, _phases(before, _timers()), kernels


def child(job: dict) -> dict:
    cache_dir = os.environ[ROOT_ENV]
    cold_s, cold_phases, kernels = _compile_once(job, cache_dir)
    import torch._dynamo

    torch._dynamo.reset()
    warm_s, warm_phases, _ = _compile_once(job, cache_dir)
    return {
        "cold_s": round(cold_s, 4),
        "warm_s": round(warm_s, 4),
        "cold_phases": cold_phases,
        "warm_phases": warm_phases,
        "kernels": kernels,
    }


def measure(job: dict, timeout_s: float = 900.0) -> dict:
    """Run the child for `job` ({"backend", "case": GemmCase fields, "fn": "module:qualname" or None,
    "dynamic"}); its result, or {"error": one line} when it could not measure."""
    root = tempfile.mkdtemp(prefix="gemmguard-cold-")
    env = dict(os.environ)
    for var, sub in CACHE_ENV.items():
        env[var] = os.path.join(root, sub)
    env[ROOT_ENV] = root
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest_gemmguard.bench.coldcompile", json.dumps(job)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"cold compile took more than {timeout_s:g} s"}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"cold compile subprocess failed (rc {proc.returncode}): {tail[:300]}"}
    result = json.loads(lines[-1])
    result["process_s"] = round(time.perf_counter() - started, 3)  # interpreter start, imports, both compiles
    return result


def measure_repeated(
    job: dict, samples: int = 1, progress: Callable[[str], None] | None = None, timeout_s: float = 900.0
) -> dict:
    """`samples` cold compiles of `job`, each by `measure` (its own fresh process and empty caches).

    Returns the median sample's numbers (cold_s, warm_s, phases) plus every sample (`cold_samples`,
    `warm_samples`), or {"error": one line} as soon as one sample fails: a child that cannot compile once
    will not compile on the next tries either, and each try costs a whole interpreter start."""
    runs: list[dict] = []
    for i in range(samples):
        if progress is not None:
            progress(f"cold compile {i + 1}/{samples} in a fresh process with empty caches")
        result = measure(job, timeout_s)
        if "error" in result:
            return {"error": result["error"] + (f" (sample {i + 1} of {samples})" if samples > 1 else "")}
        runs.append(result)
    cold = [r["cold_s"] for r in runs]
    by_cold = sorted(runs, key=lambda r: r["cold_s"])
    typical = by_cold[(len(by_cold) - 1) // 2]  # a real sample (lower median), so its phases add up
    from .stats import median

    return {
        **typical,
        "cold_s": round(median(cold), 4),
        "warm_s": round(median([r["warm_s"] for r in runs]), 4),
        "cold_samples": cold,
        "warm_samples": [r["warm_s"] for r in runs],
    }


def main(argv: list[str]) -> int:
    job = json.loads(argv[1])
    try:
        result = child(job)
    except Exception as exc:  # reported to the parent as one line
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    sys.stdout.flush()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
