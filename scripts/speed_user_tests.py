"""A plain user's first gemmguard file: the whole case space, their own mm function, and a fused linear of their
own (bias, matmul, relu) checked with check(fn). The speed measurements run it, and scripts/gpu_seeds.sh runs it
in a project of its own over fresh seeds (a clean library must give no red):

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
    gemm.check(lambda bias, a, b: torch.relu(torch.addmm(bias, a, b)))
