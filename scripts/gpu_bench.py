"""Cold compile seconds and TFLOP/s per GEMM backend, through gemmguard's own compile path.

    python scripts/gpu_bench.py OUT.jsonl aten triton cutlass cutedsl

One process; per backend: a fresh Inductor cache directory and a Dynamo reset, so the first call's
compile is cold for that backend (Python imports already paid). Each case is checked (provenance and
the float64 oracle) before it is timed; timing is `triton.testing.do_bench` median of the compiled
callable. Writes one JSON object per (backend, case) line.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback

CASES = [
    ("mm", 4096, 4096, 4096, "bfloat16", "none"),
    ("addmm", 4096, 4096, 4096, "bfloat16", "relu"),
    ("scaled_mm", 4096, 4096, 4096, "float8_e4m3fn", "none"),
]
# nvcc builds are slow: only the plain mm for cutlass. NVGEMM and quack have no float8 route here.
SKIP = {("cutlass", "addmm"), ("cutlass", "scaled_mm"), ("cutedsl", "scaled_mm"), ("cutedsl[quack]", "scaled_mm")}


def bench_one(backend_name: str, case_row) -> dict:
    import torch
    import triton.testing

    from pytest_gemmguard import GemmCase, backends, oracle
    from pytest_gemmguard.cases import build_inputs, case_function
    from pytest_gemmguard.compile import Compiler, run_checked
    from pytest_gemmguard.ops import DTYPES

    op, m, n, k, dtype, epilogue = case_row
    layout = "transposed_b" if op.startswith("scaled") else "contiguous"
    case = GemmCase(op, m, n, k, dtype=dtype, layout=layout, epilogue=epilogue, seed=1)
    row: dict = {"backend": backend_name, "case": case.describe(), "m": m, "n": n, "k": k}
    backend = backends.get(backend_name)
    probe = backends.probe(backend_name)
    row["probe"] = probe.line()
    if not probe.available:
        row["status"] = "unavailable"
        return row
    inputs = build_inputs(case, "cuda")
    fn = case_function(op, epilogue, dtype)
    torch._dynamo.reset()
    compiler = Compiler(cache_dir=tempfile.mkdtemp(prefix=f"gg-bench-{backend_name}-"), timeout_s=400)
    compiler.activate()
    nvcc0 = _nvcc()
    try:
        compiled = compiler.compile(backend, fn, inputs.flat)
        started = time.perf_counter()
        try:
            out, record = run_checked(compiled, inputs.flat)
        except Exception as exc:  # Unsupported, timeouts, compile errors: recorded, not fatal
            row["status"] = "unsupported" if type(exc).__name__ == "Unsupported" else "error"
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            return row
        torch.cuda.synchronize()
        row["cold_compile_s"] = round(time.perf_counter() - started, 2)
        row["inductor_compile_s"] = round(record.compile_s, 2)
        nvcc1 = _nvcc()
        if nvcc1[1] > nvcc0[1]:
            row["nvcc_s"] = round(nvcc1[0] - nvcc0[0], 2)
            row["nvcc_builds"] = nvcc1[1] - nvcc0[1]
        expected, tol = oracle.case_reference(case, inputs)
        verdict = oracle.judge(out, expected, tol, DTYPES[case.out_dtype])
        row["correct"] = verdict.ok
        row["max_err_ratio"] = round(verdict.max_ratio, 4)
        kernels = []
        for graph in record.graphs:
            owners = dict(graph.owners)
            for launch in graph.launches:
                owner = owners.get(launch.name)
                what = backends.get(owner).describe_kernel(launch) if owner in backends.names() else launch.name
                kernels.append(what)
        row["kernels"] = kernels
        call = compiled._call
        flat = list(inputs.flat)
        with torch.no_grad():
            ms = triton.testing.do_bench(lambda: call(*flat), warmup=50, rep=300)
            eager_ms = triton.testing.do_bench(lambda: fn(*flat), warmup=50, rep=300)
        flops = 2.0 * m * n * k
        row["ms"] = round(ms, 4)
        row["tflops"] = round(flops / ms / 1e9, 1)
        row["eager_ms"] = round(eager_ms, 4)
        row["eager_tflops"] = round(flops / eager_ms / 1e9, 1)
        row["status"] = "ok" if verdict.ok else "wrong"
        return row
    finally:
        compiler.deactivate()


def _nvcc() -> tuple[float, int]:
    from pytest_gemmguard.backends.cutlass import nvcc_seconds

    return nvcc_seconds()


def main() -> None:
    out_path, names = sys.argv[1], sys.argv[2:]
    import torch
    import torch._inductor.compile_fx  # noqa: F401

    with open(out_path, "a") as out:
        for name in names:
            for row in CASES:
                if (name, row[0]) in SKIP:
                    continue
                try:
                    result = bench_one(name, row)
                except Exception as exc:
                    result = {"backend": name, "case": str(row), "status": "error", "error": repr(exc)[:300]}
                    traceback.print_exc()
                print(json.dumps(result), flush=True)
                out.write(json.dumps(result) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
