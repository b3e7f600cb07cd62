"""Issue 14's performance table: gemmguard's own kernels beside cuBLAS, Inductor's Triton template and quack,
timed by gemmguard's own benchmark fixture in one run (each sample interleaved with an eager cuBLAS sample).

    python -m pytest -p no:cacheprovider -s scripts/gpu_bench_kernels.py \
        --gemm-backends='aten,triton,triton[kernels],cutedsl[quack],cutedsl[kernels]' --gemm-allow-unavailable

Each measurement prints one line: backend, shape, median ms, TFLOP/s, the in-run cuBLAS reference's share
(ref_ms / ms: 1.0 = as fast as eager cuBLAS), the cold compile (fresh process, empty caches) and the kernels.
"""

import pytest

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096)]


@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_bf16(gemm_benchmark, shape):
    m = gemm_benchmark(shape=shape, dtype="bfloat16")
    share = m.ref_median_s / m.median_s if m.ref_median_s else float("nan")
    cold = f"{m.cold_compile_s:.1f}" if m.cold_compile_s is not None else "-"
    print(
        f"\nKERNELS {m.backend:18s} {'x'.join(map(str, shape)):16s} {m.median_s * 1e3:9.4f} ms "
        f"{m.flops / m.median_s / 1e12:7.1f} TFLOP/s  cuBLAS/this {share:5.3f}  cold {cold} s  "
        f"n={m.n} {m.method}  {','.join(m.kernels)[:80]}"
    )
    assert m.kernels
