"""The three-test user file of issue 11's speed measurements (a plain user's first gemmguard file):

python3 -m pytest scripts/speed_user_tests.py --gemm-backends=triton --gemm-max-examples=10 --gemm-seed=11
"""

import torch

from pytest_gemmguard import gemm_case


@gemm_case()
def test_any(gemm):
    gemm.check()


@gemm_case(ops=["mm"])
def test_matmul_function(gemm):
    gemm.check(lambda a, b: torch.matmul(a, b))


@gemm_case(ops=["addmm"], epilogues=["relu"])
def test_addmm_relu(gemm):
    gemm.check()
