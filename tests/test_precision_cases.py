"""float8 (torch._scaled_mm) and tf32 cases through real Inductor compiles on the CPU."""

import pytest
import torch

from pytest_gemmguard.cases import GemmCase
from pytest_gemmguard.compile import Compiler
from pytest_gemmguard.errors import Unsupported
from pytest_gemmguard.ops import math_precision
from pytest_gemmguard.runner import Gemm, GemmSession, Options


@pytest.fixture
def session(tmp_path):
    return GemmSession(Compiler(), Options(repro_dir=str(tmp_path)))


@pytest.mark.parametrize("op", ["scaled_mm", "scaled_mm_rowwise"])
def test_float8_cases_compile_and_verify_through_aten(session, op):
    case = GemmCase(op, 24, 32, 48, dtype="float8_e4m3fn", layout="transposed_b", epilogue="relu")
    result = Gemm(case, "aten", session).check()
    assert result.verdict.ok and result.output.dtype == torch.bfloat16
    assert ("_scaled_mm", "aten") in [o for g in result.record.graphs for o in g.owners]


def test_float8_without_a_kernel_of_the_backend_is_unsupported(session):
    case = GemmCase("scaled_mm", 24, 32, 48, dtype="float8_e4m3fn", layout="transposed_b")
    with pytest.raises(Unsupported, match="no valid choice"):
        Gemm(case, "cpp", session).check()


def test_tf32_is_unsupported_on_the_cpu_with_the_reason(session):
    with pytest.raises(Unsupported, match="tf32 is a CUDA tensor-core precision"):
        Gemm(GemmCase("mm", 8, 8, 8, dtype="tf32"), "aten", session).check()
    assert session.tally.counts[("aten", "unsupported")] == 1


def test_the_case_decides_tf32_and_the_users_setting_comes_back():
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    with math_precision("tf32"):
        # Both views agree (torch 2.11's Inductor reads the legacy switch, 2.13's the new API).
        assert matmul.fp32_precision == "tf32" and matmul.allow_tf32
    with math_precision("float32"):
        assert matmul.fp32_precision == "ieee" and not matmul.allow_tf32
    assert matmul.allow_tf32 == before


def test_a_user_on_the_new_tf32_api_is_not_broken():
    # Reading the legacy switch after the new API was written raises in torch: stay on the new API.
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from pytest_gemmguard.ops import math_precision\n"
        "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"
        "with math_precision('float32'):\n"
        "    assert torch.backends.cuda.matmul.fp32_precision == 'ieee'\n"
        "assert torch.backends.cuda.matmul.fp32_precision == 'tf32'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
