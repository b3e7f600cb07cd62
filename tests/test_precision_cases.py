"""float8 (torch._scaled_mm) and tf32 cases through real Inductor compiles on the CPU."""

import pytest
import torch
from actrun import plants

from pytest_gemmguard.cases.case import GemmCase
from pytest_gemmguard.cases.precision import math_precision
from pytest_gemmguard.cases.space import CaseSpace
from pytest_gemmguard.cases.strategies import regime_tour
from pytest_gemmguard.cases.support import default_ops
from pytest_gemmguard.compile.compiler import Compiler
from pytest_gemmguard.errors import Unsupported
from pytest_gemmguard.run.gemm import Gemm
from pytest_gemmguard.run.session import GemmSession, Options


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


@pytest.mark.parametrize("op", ["scaled_mm_block_1x128_128x128", "scaled_mm_block_128x128_1x128"])
def test_a_blockwise_op_eager_refuses_is_unsupported_before_any_compile_and_left_out_of_the_default_space(session, op):
    # torch 2.13's CPU build takes no blockwise _scaled_mm ("Invalid scaling configuration"): not valid input here, so
    # no backend is blamed for it, and a test that names no ops never draws it on this device (cases/support.py).
    case = GemmCase(op, 256, 256, 512, dtype="float8_e4m3fn", layout="transposed_b")
    with pytest.raises(Unsupported, match=f"takes no {op} on cpu \\(eager refused it"):
        Gemm(case, "aten", session).check()
    counts = session.tally.of("aten")
    assert counts.unsupported == 1 and counts.verified == 0 and counts.compile_s == 0 and counts.check_s == 0
    assert op not in default_ops("cpu") and {"scaled_mm", "scaled_mm_rowwise"} <= set(default_ops("cpu"))
    assert op not in {c.op for c in regime_tour(CaseSpace(), "cpu")}
    assert op in {c.op for c in regime_tour(CaseSpace(ops=(op,)), "cpu")}  # named, it runs: as unsupported


def test_tf32_is_unsupported_on_the_cpu_with_the_reason(session):
    with pytest.raises(Unsupported, match="tf32 is a CUDA tensor-core precision"):
        Gemm(GemmCase("mm", 8, 8, 8, dtype="tf32"), "aten", session).check()
    assert session.tally.of("aten").unsupported == 1


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
        "from pytest_gemmguard.cases.precision import math_precision\n"
        "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"
        "with math_precision('float32'):\n"
        "    assert torch.backends.cuda.matmul.fp32_precision == 'ieee'\n"
        "assert torch.backends.cuda.matmul.fp32_precision == 'tf32'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_case_switches_reduced_precision_reductions_off_and_restores_them():
    matmul = torch.backends.cuda.matmul
    before = (matmul.allow_fp16_reduced_precision_reduction, matmul.allow_bf16_reduced_precision_reduction)
    matmul.allow_fp16_reduced_precision_reduction = True
    matmul.allow_bf16_reduced_precision_reduction = True
    try:
        with math_precision("float16"):
            assert not matmul.allow_fp16_reduced_precision_reduction
            assert not matmul.allow_bf16_reduced_precision_reduction
        assert matmul.allow_fp16_reduced_precision_reduction and matmul.allow_bf16_reduced_precision_reduction
    finally:
        matmul.allow_fp16_reduced_precision_reduction, matmul.allow_bf16_reduced_precision_reduction = before


# What cuBLAS does with reduced-precision reductions allowed: split K in four, store each partial product in the
# half-precision output dtype, add the partials (a real graph pass, real compiles).
HALF_SPLIT_K = plants.planted_backend(
    "half-split-k",
    plants.graph_pass(
        "HalfSplitK",
        """
        for node in list(graph.nodes):
            if node.target is not torch.ops.aten.mm.default or node.meta["val"].dtype == torch.float32:
                continue
            a, b = node.args
            k = a.meta["val"].shape[1]
            bounds = [k * i // 4 for i in range(5)]
            with graph.inserting_before(node):
                total = None
                for lo, hi in zip(bounds, bounds[1:]):
                    if hi == lo:
                        continue
                    sa = graph.call_function(torch.ops.aten.slice.Tensor, (a, 1, lo, hi))
                    sb = graph.call_function(torch.ops.aten.slice.Tensor, (b, 0, lo, hi))
                    part = graph.call_function(torch.ops.aten.mm.default, (sa, sb))
                    total = part if total is None else graph.call_function(torch.ops.aten.add.Tensor, (total, part))
            node.replace_all_uses_with(total)
            graph.erase_node(node)
        """,
    ),
)

SPLIT_K_TEST = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float16", "bfloat16"], epilogues=["none"], shapes=[(24, 40, 160), (16, 33, 128)])
def test_half_mm(gemm):
    gemm.check()
"""


def test_a_kernel_that_reduces_split_k_partials_in_half_precision_fails(pytester):
    """gemmguard switched reduced-precision reductions off for the case, so a kernel that still adds split-K
    partials in fp16/bf16 breaks the contract: the oracle must catch it, while plain ATen passes."""
    pytester.makeconftest(HALF_SPLIT_K)
    pytester.makepyfile(SPLIT_K_TEST)
    common = ("--gemm-max-examples=4", "-p", "no:cacheprovider")
    planted = pytester.runpytest_inprocess("--gemm-backends=half-split-k", *common)
    planted.assert_outcomes(failed=1)
    out = planted.stdout.str()
    assert "half-split-k produced a wrong result" in out
    assert "flags:    TF32 off; fp16/bf16 reduced-precision reductions off" in out
    clean = pytester.runpytest_inprocess("--gemm-backends=aten", *common)
    clean.assert_outcomes(passed=1)
