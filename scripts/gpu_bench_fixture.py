"""gemm_benchmark end to end on a GPU (issue 4): run by hand or by scripts/timing_check.py's caller.

    python -m pytest -p no:cacheprovider scripts/gpu_bench_fixture.py --gemm-backends=aten,triton \
        --gemm-save-baseline=B.json          # then again with --gemm-baseline=B.json (an A/A rerun)
"""


def test_large(gemm_benchmark):
    m = gemm_benchmark(shape=(4096, 4096, 4096), dtype="bfloat16")
    assert m.method.startswith("cuda") and m.kernels


def test_small_with_epilogue(gemm_benchmark):
    m = gemm_benchmark(op="addmm", shape=(256, 256, 256), dtype="bfloat16", epilogue="relu")
    assert m.method.startswith("cuda") and m.kernels


def test_fp8_against_a_scaled_mm_peak(gemm_benchmark):
    m = gemm_benchmark(op="scaled_mm", shape=(4096, 4096, 4096), dtype="float8_e4m3fn", layout="transposed_b")
    print(f"\nFP8 {m.tflops:.1f} TFLOP/s, peak {m.peak_tflops:.1f}, {m.pct_peak:.1f}% ({m.kernels})")
    assert m.method.startswith("cuda") and m.kernels and m.pct_peak < 110


def test_tf32_runs_as_tf32(gemm_benchmark):
    m = gemm_benchmark(shape=(4096, 4096, 4096), dtype="tf32")
    print(f"\nTF32 {m.tflops:.1f} TFLOP/s, peak {m.peak_tflops:.1f}, {m.pct_peak:.1f}% ({m.kernels})")
    assert m.method.startswith("cuda") and m.kernels and m.pct_peak < 110
