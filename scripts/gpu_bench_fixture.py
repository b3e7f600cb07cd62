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
