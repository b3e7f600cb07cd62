"""float8 and tf32 cases on every selected GPU backend, and the cutedsl[quack] route with real quack.

Each case goes through `GemmSession.check`, exactly as a `@gemm_case` test does (the case decides
TF32 vs IEEE; cutedsl may fall back to its quack route). A backend may verify a case or report it
unsupported; a wrong result is never acceptable. The log keeps each verdict's share of the tolerance
and eager PyTorch's, which is how the float8 and tf32 bounds were calibrated on the H200.
"""

from __future__ import annotations

import pytest
from gpu_selection import GPU_BACKENDS, kernels_launched, skip_unless_selected

from pytest_gemmguard import GemmCase, Unsupported, backends, oracle
from pytest_gemmguard.backends import cutedsl_quack
from pytest_gemmguard.cases.case import case_function
from pytest_gemmguard.cases.precision import math_precision
from pytest_gemmguard.compile.compiler import Compiler
from pytest_gemmguard.errors import GemmMismatch
from pytest_gemmguard.run.gemm import Gemm
from pytest_gemmguard.run.session import GemmSession, Options

FP8 = "float8_e4m3fn"
CASES = [
    GemmCase("scaled_mm", 512, 1024, 2048, dtype=FP8, layout="transposed_b", seed=1),
    GemmCase("scaled_mm", 64, 256, 8192, dtype=FP8, layout="transposed_b", seed=2),
    GemmCase("scaled_mm_rowwise", 256, 512, 4096, dtype=FP8, layout="transposed_b", seed=3, epilogue="gelu"),
    GemmCase("mm", 512, 512, 2048, dtype="tf32", seed=4),
    GemmCase("addmm", 96, 200, 4096, dtype="tf32", layout="transposed_a", seed=5, epilogue="relu"),
]
# Where each backend is expected to have a kernel (torch 2.11, SM90); elsewhere unsupported is fine.
MUST_VERIFY = {"aten": {"scaled_mm", "scaled_mm_rowwise", "mm", "addmm"}, "triton": {"scaled_mm", "mm"}}


@pytest.fixture
def session(tmp_path):
    compiler = Compiler(cache_dir=str(tmp_path / "inductor"), timeout_s=600)
    compiler.activate()
    yield GemmSession(compiler, Options(repro_dir=str(tmp_path / "repro")))
    compiler.deactivate()


def _eager_ratios(case, gemm) -> dict[str, float]:
    """How much of the tolerance eager PyTorch uses (and, for float8, cuBLASLt's fast accumulation)."""
    import torch

    inputs = gemm.inputs
    expected, tol = oracle.case_reference(case, inputs)
    with math_precision(case.dtype):
        fn = case_function(case.op, case.epilogue, case.dtype)
        out = {"eager": oracle.eager_ratio(fn, inputs.flat, expected, tol)}
        if case.op.startswith("scaled"):
            bare = GemmCase(case.op, case.m, case.n, case.k, dtype=FP8, layout=case.layout, seed=case.seed)
            e2, t2 = oracle.case_reference(bare, inputs)
            y = torch._scaled_mm(*inputs.args, out_dtype=torch.bfloat16, use_fast_accum=True)
            out["eager_fast_accum"] = float(((y.double() - e2).abs() / t2).max())
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.op}-{c.dtype}-{c.m}x{c.n}x{c.k}")
def test_float8_and_tf32_cases(gemm_backend, session, gpu_log, request, case):
    if gemm_backend not in GPU_BACKENDS:
        pytest.skip(f"{gemm_backend} is not a GPU GEMM backend")
    skip_unless_selected(request, gemm_backend)
    if gemm_backend == "cutlass" and case.dtype == FP8 and case is not CASES[0]:
        pytest.skip("each CUTLASS float8 compile is an nvcc build of minutes: one float8 case for cutlass")
    gemm = Gemm(case, gemm_backend, session, request.node.nodeid)
    ratios = _eager_ratios(case, gemm)
    try:
        result = gemm.check()
    except Unsupported as exc:
        gpu_log.write(test=request.node.nodeid, backend=gemm_backend, case=case.describe(), verdict="unsupported",
                      reason=exc.reason, **ratios)  # fmt: skip
        assert case.op not in MUST_VERIFY.get(gemm_backend, set()), f"{gemm_backend} should run {case.describe()}"
        return
    kernels = kernels_launched(result.record)
    gpu_log.write(test=request.node.nodeid, backend=gemm_backend, case=case.describe(), verdict="verified",
                  max_ratio=result.verdict.max_ratio, kernels=kernels, **ratios)  # fmt: skip
    assert result.verdict.ok
    # Loose enough, measured: eager (cuBLAS/cuBLASLt) keeps well inside the bound.
    assert ratios["eager"] < 0.5, ratios


QUACK = "cutedsl[quack]"


def test_quack_route_runs_quacks_kernel_and_is_judged(session, gpu_log, request):
    skip_unless_selected(request, QUACK)
    verified = []
    for case in [
        GemmCase("mm", 1024, 1024, 1024, dtype="bfloat16", seed=1),
        GemmCase("linear", 200, 512, 768, dtype="float16", seed=2, epilogue="bias+gelu"),
        GemmCase("bmm", 128, 256, 512, 3, dtype="bfloat16", layout="transposed_b", seed=3),
    ]:
        result = Gemm(case, QUACK, session).check()
        kernels = kernels_launched(result.record)
        ratio, compile_s = result.verdict.max_ratio, result.record.compile_s
        gpu_log.write(test=request.node.nodeid, backend=QUACK, case=case.describe(), verdict="verified",
                      max_ratio=ratio, compile_s=compile_s, kernels=kernels)  # fmt: skip
        assert any(k["owner"] == QUACK and "cutedsl[quack]" in k["what"] for k in kernels), kernels
        verified.append(case)
    # What quack cannot take (float32, a misaligned N) is unsupported, never passed.
    for case in [GemmCase("mm", 256, 256, 256, dtype="float32"), GemmCase("mm", 256, 250, 256, dtype="bfloat16")]:
        with pytest.raises(Unsupported):
            Gemm(case, QUACK, session).check()


def test_quack_route_planted_wrong_kernel_is_caught(session, request):
    skip_unless_selected(request, QUACK)
    import torch

    real = cutedsl_quack._quack_gemm
    cutedsl_quack.set_kernel(lambda a, b, bias: real(a, b, bias) * torch.tensor(1.0625, dtype=a.dtype, device=a.device))
    try:
        with pytest.raises(GemmMismatch, match="cutedsl_quack_gemm"):
            Gemm(GemmCase("mm", 512, 512, 512, dtype="bfloat16", seed=9), QUACK, session).check()
    finally:
        cutedsl_quack.set_kernel(None)


def test_cutedsl_falls_back_to_quack_where_nvgemm_has_no_kernel(session, gpu_log, request):
    """cutedsl tries Inductor's NVGEMM first; the log shows which route ran for each case."""
    skip_unless_selected(request, "cutedsl")
    if not backends.probe(QUACK).available:
        pytest.skip(f"{QUACK} unavailable: {backends.probe(QUACK).line()}")
    for case in [
        GemmCase("mm", 1024, 1024, 1024, dtype="bfloat16", seed=1),
        GemmCase("bmm", 128, 256, 512, 3, dtype="bfloat16", seed=3),
        GemmCase("addmm", 256, 512, 768, dtype="bfloat16", seed=4, epilogue="relu"),
    ]:
        try:
            result = Gemm(case, "cutedsl", session).check()
        except Unsupported as exc:
            gpu_log.write(test=request.node.nodeid, backend="cutedsl", case=case.describe(), verdict="unsupported",
                          reason=exc.reason)  # fmt: skip
            continue
        kernels = kernels_launched(result.record)
        routes = sorted({k["owner"] for k in kernels if k["owner"]})
        gpu_log.write(test=request.node.nodeid, backend="cutedsl", case=case.describe(), verdict="verified",
                      routes=routes, kernels=kernels)  # fmt: skip
        assert routes in (["cutedsl"], [QUACK]), kernels
