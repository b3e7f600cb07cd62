"""One cpp case for the kernel-cache measurement (docs/validation/speed.md): run it twice with and without
--gemm-kernel-cache and compare the second run's in-process compile seconds (the results' time line)."""

from pytest_gemmguard import gemm_case


@gemm_case(
    ops=["linear"],
    dtypes=["float32"],
    epilogues=["bias+relu"],
    layouts=["contiguous"],
    shapes=[(64, 48, 96)],
    max_examples=1,
)
def test_linear(gemm):
    gemm.check()
