"""Issue 11's rate for `cutedsl` where its routes have kernels: fp16/bf16 `mm`, `addmm` and `bmm` with every size a
multiple of 16 (TMA's 16-byte alignment for both dtypes), the four plain layouts, drawn epilogues:

python3 -m pytest scripts/speed_cutedsl_tests.py --gemm-backends=cutedsl --gemm-seed=11 -v
"""

from pytest_gemmguard import gemm_case

HALF = ["float16", "bfloat16"]
LAYOUTS = ["contiguous", "transposed_a", "transposed_b", "transposed_ab"]
# decode, prefill and square sizes, all aligned; K up to 4096 (a 16x4096 decode row is a model's shape)
SIZES = [(16, 4096, 4096), (64, 1024, 256), (128, 256, 1024), (256, 512, 512), (1024, 1024, 1024),
         (32, 4096, 1024), (512, 128, 2048), (2048, 256, 64), (16, 64, 4096), (384, 768, 256)]  # fmt: skip


@gemm_case(ops=["mm", "addmm"], dtypes=HALF, layouts=LAYOUTS, shapes=SIZES)
def test_cutedsl_2d(gemm):
    gemm.check()


@gemm_case(
    ops=["bmm"],
    dtypes=HALF,
    layouts=LAYOUTS,
    shapes=[(b, *s) for b, s in zip([2, 4, 8, 3, 2], SIZES[1:6], strict=True)],
)
def test_cutedsl_batched(gemm):
    gemm.check()
