"""The shipped example suite: what a user's own gemmguard tests look like."""

import torch

from pytest_gemmguard import gemm_case


@gemm_case()
def test_any_gemm(gemm):
    """Every op, dtype, layout and epilogue chain gemmguard knows, drawn by Hypothesis."""
    gemm.check()


@gemm_case(ops=["linear"], epilogues=["none", "bias+relu", "gelu", "residual+cast"])
def test_linear_layers(gemm):
    gemm.check()


@gemm_case(ops=["mm"], dtypes=["bfloat16", "float16"])
def test_user_function(gemm):
    """check(fn) compiles your own code: here a matmul written as x @ w plus a tanh."""
    gemm.check(lambda a, b: torch.tanh(a @ b))


@gemm_case(ops=["bmm", "baddbmm"], shapes=[(3, 1, 17, 33), (4, 31, 1, 64), (5, 33, 65, 129)])
def test_batched_edges(gemm):
    gemm.check()
