"""The oracle must pass every correct kernel (eager PyTorch, in the same dtype) and fail real bugs."""

import math
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gemmguard import known, oracle
from pytest_gemmguard.cases.case import CaseInputs, GemmCase, build_inputs, case_function
from pytest_gemmguard.cases.ops import DTYPES, OPS, apply_chain
from pytest_gemmguard.cases.strategies import gemm_cases
from pytest_gemmguard.oracle import function as fn_tolerance


def _eager(case):
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    fn = case_function(case.op, case.epilogue, case.dtype)
    return inputs, expected, tol, fn(*inputs.flat)


def _eager_gelu_of_inf_is_nan(dtype: torch.dtype) -> bool:
    return bool(torch.isnan(torch.nn.functional.gelu(torch.full((64,), math.inf, dtype=dtype))).any())


_GELU = torch.nn.functional.gelu


def _gelu_right_at_inf(x, approximate="none"):
    return torch.where(torch.isposinf(x), x, _GELU(x, approximate=approximate))


def _eager_with_gelu_fixed(case):
    """`_eager`, with torch's GELU of +inf put right where this torch has pytorch#185770: its eager CPU GELU gives NaN
    for +inf in float32, bfloat16 and float16 (float64 gives +inf, as does Inductor's compiled code, which is what
    gemmguard judges). The steps after a GELU then see what a right GELU gives them."""
    if "gelu" not in case.steps or not _eager_gelu_of_inf_is_nan(torch.float32):
        return _eager(case)
    with mock.patch.object(torch.nn.functional, "gelu", _gelu_right_at_inf):
        return _eager(case)


# ATen on this machine's CPU against gemmguard's shipped entries: what eager's GEMM is known to get wrong here.
_SHIPPED_ATEN = known.KnownTracker(known.load_shipped(), "aten")


@settings(max_examples=150, deadline=None)
@given(gemm_cases("cpu"))
def test_eager_pytorch_is_well_inside_the_tolerance(case):
    """Loose enough: eager PyTorch in the same dtype never uses more than half the tolerance (apart from eager's own
    GELU of +inf, pytorch#185770: see the test after this one)."""
    _inputs, expected, tol, out = _eager_with_gelu_fixed(case)
    verdict = oracle.judge(out, expected, tol, DTYPES[case.out_dtype])
    if not verdict.ok and _SHIPPED_ATEN.note_failure(case, "wrong-result") is not None:
        return  # eager's GEMM is ATen's: a bug of it a shipped entry describes (the NaN leak of oneDNN's AMX bf16)
    assert verdict.ok, verdict.mismatch
    assert verdict.max_ratio < 0.5


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_eager_gelu_of_inf_is_nan_where_the_compiled_code_is_right_and_the_oracle_tells_them_apart(dtype):
    """Hypothesis met it (mm 2×2×1 float32 gelu values=inf, a seed of the suite): an +inf row of the result through a
    GELU is NaN in eager on the CPU (pytorch#185770), +inf in float64 and in Inductor's compiled code. The oracle fails
    eager's result there and passes the compiled one, so putting eager's GELU right above hides nothing gemmguard
    judges."""
    case = GemmCase("mm", 2, 2, 1, dtype=dtype, epilogue="gelu", values="inf")
    inputs, expected, tol, out = _eager(case)
    assert bool((expected == math.inf).any()), "the case must put +inf into the GELU"
    fn = case_function(case.op, case.epilogue, case.dtype)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="inductor")(*inputs.flat)
    assert oracle.judge(compiled, expected, tol, DTYPES[case.out_dtype]).ok
    eager = oracle.judge(out, expected, tol, DTYPES[case.out_dtype])
    if _eager_gelu_of_inf_is_nan(out.dtype):
        assert not eager.ok and eager.mismatch.kind == "nonfinite" and eager.mismatch.expected == math.inf
        assert oracle.judge(_eager_with_gelu_fixed(case)[3], expected, tol, out.dtype).ok
    else:  # a torch with pytorch#185770 fixed: eager is right too
        assert eager.ok


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_eager_at_large_k_uses_little_of_the_tolerance(dtype):
    case = GemmCase("mm", 64, 64, 4096, dtype=dtype)
    _inputs, expected, tol, out = _eager(case)
    assert oracle.judge(out, expected, tol, DTYPES[dtype]).max_ratio < 0.5


def _half_accumulating_mm(a, b, chunk=16):
    """A planted bug: partial sums kept in the operands' half precision instead of float32."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
    for start in range(0, a.shape[1], chunk):
        part = a[:, start : start + chunk].float() @ b[start : start + chunk, :].float()
        acc = (acc.float() + part).to(a.dtype)
    return acc


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("k", [256, 4096])
def test_half_precision_accumulation_is_caught(dtype, k):
    """Tight enough: accumulating in half precision fails clearly, more so as K grows."""
    case = GemmCase("mm", 32, 32, k, dtype=dtype)
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    verdict = oracle.judge(_half_accumulating_mm(*inputs.args), expected, tol, DTYPES[dtype])
    assert not verdict.ok
    assert verdict.max_ratio > 3


def test_float32_error_of_one_ulp_per_term_is_caught():
    """A float32 GEMM that rounds its operands to bfloat16 (a silent precision drop) is caught."""
    case = GemmCase("mm", 32, 48, 512, dtype="float32")
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    a, b = inputs.args
    wrong = (a.bfloat16() @ b.bfloat16()).float()
    assert not oracle.judge(wrong, expected, tol, torch.float32).ok


def _simple():
    case = GemmCase("mm", 8, 6, 16)
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    return expected, tol, case_function("mm", "none", "float32")(*inputs.flat)


def test_unwritten_element_fails_as_unwritten():
    expected, tol, out = _simple()
    out[2, 3] = float("nan")
    verdict = oracle.judge(out, expected, tol, torch.float32)
    assert not verdict.ok and verdict.mismatch.kind == "unwritten" and verdict.mismatch.index == (2, 3)
    assert verdict.mismatch.bad == 1


def test_inf_never_passes_where_the_reference_is_finite():
    expected, tol, out = _simple()
    out[0, 0] = float("inf")
    verdict = oracle.judge(out, expected, tol, torch.float32)
    assert not verdict.ok and verdict.mismatch.kind == "nonfinite"


def test_overflow_inf_passes_only_where_the_reference_overflows_too():
    expected = torch.tensor([[1e6, 1.0]], dtype=torch.float64)  # 1e6 overflows float16
    tol = torch.full_like(expected, 1e-3)
    good = torch.tensor([[math.inf, 1.0]], dtype=torch.float16)
    assert oracle.judge(good, expected, tol, torch.float16).ok
    wrong_sign = torch.tensor([[-math.inf, 1.0]], dtype=torch.float16)
    assert not oracle.judge(wrong_sign, expected, tol, torch.float16).ok


def test_wrong_shape_and_dtype_are_reported():
    expected, tol, out = _simple()
    assert oracle.judge(out[:-1], expected, tol, torch.float32).mismatch.kind == "shape"
    assert oracle.judge(out.double(), expected, tol, torch.float32).mismatch.kind == "dtype"


@given(st.sampled_from(["none", "bias+relu", "gelu+scale", "residual+cast", "silu+tanh+sigmoid"]))
@settings(max_examples=10, deadline=None)
def test_any_faithful_rounding_passes_and_ten_percent_off_fails(epilogue):
    """Both output-dtype neighbours of the exact result pass; a 10% error does not."""
    case = GemmCase("addmm", 16, 24, 64, dtype="bfloat16", epilogue=epilogue)
    _inputs, expected, tol, out = _eager(case)
    dtype = DTYPES[case.out_dtype]
    nearest = expected.to(dtype)
    toward = torch.where(nearest.double() > expected, -math.inf, math.inf).to(dtype)
    other = torch.nextafter(nearest, toward)
    assert oracle.judge(nearest, expected, tol, dtype).ok
    assert oracle.judge(other, expected, tol, dtype).ok
    assert not oracle.judge((out.double() * 1.1 + 0.1).to(dtype), expected, tol, dtype).ok


# ---------------------------------------------------------------- float8 and tf32


def _tf32_truncate(x):
    """What TF32 tensor cores read of a float32 operand, at worst: the low 13 mantissa bits dropped."""
    return (x.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("k", [7, 256, 4096])
def test_a_tf32_kernel_that_truncates_its_operands_passes(k):
    """Loose enough: the worst legitimate TF32 kernel (truncating, not rounding) stays inside."""
    case = GemmCase("mm", 24, 40, k, dtype="tf32")
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    a, b = inputs.args
    verdict = oracle.judge(_tf32_truncate(a) @ _tf32_truncate(b), expected, tol, torch.float32)
    assert verdict.ok and verdict.max_ratio < 0.7, verdict.summary()


def test_tf32_math_in_a_float32_case_is_caught():
    """Why a float32 case runs with TF32 switched off: TF32 arithmetic fails the float32 bound."""
    case = GemmCase("mm", 24, 40, 256, dtype="float32")
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    a, b = inputs.args
    assert not oracle.judge(_tf32_truncate(a) @ _tf32_truncate(b), expected, tol, torch.float32).ok


def test_a_tf32_kernel_that_drops_a_slice_of_k_is_caught():
    case = GemmCase("mm", 24, 40, 256, dtype="tf32")
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    a, b = inputs.args
    assert not oracle.judge(a[:, :-8] @ b[:-8], expected, tol, torch.float32).ok


def _narrow_accumulator_scaled_mm(a, b, scale_a, scale_b, block=128, step=32):
    """A faithful model of the least precise correct Hopper FP8 GEMM: within each block of K the
    running sum is truncated to 14 mantissa bits after every 32-wide MMA, then added to float32."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32)
    for start in range(0, a.shape[1], block):
        part = torch.zeros_like(acc)
        for s in range(start, min(start + block, a.shape[1]), step):
            part = part + a[:, s : s + step].float() @ b[s : s + step].float()
            part = (part.view(torch.int32) & ~0x1FF).view(torch.float32)  # keep 14 of 23 bits
        acc = acc + part
    return (acc * scale_a * scale_b).to(torch.bfloat16)


@pytest.mark.parametrize("op", ["scaled_mm", "scaled_mm_rowwise"])
@pytest.mark.parametrize("k", [32, 4096])
def test_float8_eager_and_a_narrow_accumulator_pass(op, k):
    case = GemmCase(op, 48, 64, k, dtype="float8_e4m3fn", layout="transposed_b")
    inputs, expected, tol, out = _eager(case)
    assert oracle.judge(out, expected, tol, torch.bfloat16).max_ratio < 0.5
    narrow = _narrow_accumulator_scaled_mm(*inputs.args)
    assert oracle.judge(narrow, expected, tol, torch.bfloat16).ok


@pytest.mark.parametrize("k", [32, 4096])
def test_float8_defects_are_caught(k):
    """Tight enough: a scale dropped, row scales applied to the wrong rows, or a slice of K lost."""
    case = GemmCase("scaled_mm_rowwise", 48, 64, k, dtype="float8_e4m3fn", layout="transposed_b")
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    a, b, sa, sb = inputs.args
    bf16 = torch.bfloat16
    no_scale_b = torch._scaled_mm(a, b, sa, torch.ones_like(sb), out_dtype=bf16)
    flipped_rows = torch._scaled_mm(a, b, sa.flip(0), sb, out_dtype=bf16)
    lost_tail = torch._scaled_mm(a[:, :-16].contiguous(), b[:-16], sa, sb, out_dtype=bf16)
    for wrong in (no_scale_b, flipped_rows, lost_tail):
        assert not oracle.judge(wrong, expected, tol, bf16).ok


def test_the_float64_reference_evaluates_scaled_mm_exactly():
    case = GemmCase("scaled_mm", 8, 16, 32, dtype="float8_e4m3fn", layout="transposed_b")
    inputs = build_inputs(case, "cpu")
    a, b, sa, sb = (t.double() for t in inputs.args)
    fn = lambda a, b, sa, sb: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    got, tol = fn_tolerance.bound(fn, inputs.args, case.dtype, torch.bfloat16, lambda: None)
    assert got.dtype == torch.float64 and torch.equal(got, (a @ b) * sa * sb)
    # The bound of a case's own scaled_mm, by the same terms.
    assert torch.allclose(tol, oracle.case_reference(case, inputs)[1] + 2 * 2**-7 * got.abs(), rtol=1e-6)


def _blockwise_kernel(a, b, sa, sb, a_scale_row_stride=None):
    """A blockwise float8 GEMM as a kernel computes it: each 128-wide block of K's partial sum in float32 times its
    two scales, summed in float32. `a_scale_row_stride`: read a (M/128, K/128) scale of A at that row stride
    instead of its own, as cuBLASLt reads it at a stride padded to 4 blocks (pytorch#166752)."""
    if a_scale_row_stride is not None:
        store = torch.cat([sa.contiguous().flatten(), torch.ones(4 * sa.shape[0])])
        sa = torch.as_strided(store, sa.shape, (a_scale_row_stride, 1))
    m, k = a.shape
    rows = torch.arange(m) // 128 if sa.shape[0] != m else torch.arange(m)
    cols = torch.arange(b.shape[1]) // 128 if sb.shape[1] != b.shape[1] else torch.arange(b.shape[1])
    out = torch.zeros(m, b.shape[1])
    for block in range(k // 128):
        part = a[:, block * 128 : (block + 1) * 128].float() @ b[block * 128 : (block + 1) * 128].float()
        out += part * sa[rows, block][:, None] * sb[block, cols][None, :]
    return out.bfloat16()


@pytest.mark.parametrize("op", ["scaled_mm_block_1x128_128x128", "scaled_mm_block_128x128_1x128"])
def test_a_blockwise_case_is_judged_against_its_operands_dequantized_block_by_block(op):
    # torch 2.13's CPU build refuses every blockwise _scaled_mm, so the kernel here is written out (_blockwise_kernel);
    # the GPU runs torch's own (tests/gpu). K/128 = 3 blocks, M = 200: two row blocks.
    case = GemmCase(op, 200, 272, 384, dtype="float8_e4m3fn", layout="transposed_b", seed=3)
    inputs = build_inputs(case, "cpu")
    expected, tol = oracle.case_reference(case, inputs)
    a, b, sa, sb = inputs.args
    assert oracle.judge(_blockwise_kernel(a, b, sa, sb), expected, tol, torch.bfloat16).ok
    with oracle.Float64ScaledMM():  # the repro script's reference: the same numbers
        assert torch.equal(OPS[op].call(*oracle.upcast(inputs.args)), expected)
    # One scale of one block wrong by 1/64 fails: a product is dequantized with its own block's scales.
    sb_off = sb.clone()
    sb_off[1, -1] *= 1 + 2**-6
    assert not oracle.judge(_blockwise_kernel(a, b, sa, sb_off), expected, tol, torch.bfloat16).ok
    if op == "scaled_mm_block_128x128_1x128":
        # pytorch#166752's class: A's scales read at a row stride padded to 4 blocks of K. Rows of the first block are
        # right; every later row is wrong, and eager computing it the same way would agree with the kernel.
        verdict = oracle.judge(_blockwise_kernel(a, b, sa, sb, a_scale_row_stride=4), expected, tol, torch.bfloat16)
        assert not verdict.ok and verdict.mismatch.index[0] >= 128


def test_the_float64_reference_refuses_to_guess_bias_with_an_output_scale():
    a = torch.ones(16, 16).to(torch.float8_e4m3fn)
    one = torch.ones(())
    with pytest.raises(NotImplementedError, match="both bias and scale_result"):
        fn_tolerance.bound(
            lambda a, b: torch._scaled_mm(a, b, one, one, bias=torch.zeros(16), scale_result=one),
            (a, a.t()),
            "float8_e4m3fn",
            torch.bfloat16,
            lambda: None,
        )


def test_the_vectorized_gelu_tail_is_inside_the_tolerance():
    """Found by a random draw: eager GELU on the CPU at y = -2.6 (output -0.012) is 285 ulp of its output
    off, an absolute erf error times |y|. A correct library must pass, with room (the half-tolerance rule)."""
    case = GemmCase("mm", 3, 48, 1, dtype="float32", epilogue="residual+gelu")
    _inputs, expected, tol, out = _eager(case)
    assert oracle.judge(out, expected, tol, torch.float32).max_ratio < 0.5


def test_a_product_that_underflows_before_a_cast_passes():
    """bmm 2x22x2x1 float16 then cast to float32: a product of 1.3e-5 is a float16 subnormal, stored with an
    absolute error of up to 2^-25, while the float32 output's own tiny allows none of it (eager used 0.98x)."""
    case = GemmCase("bmm", 22, 2, 1, batch=2, dtype="float16", epilogue="cast", seed=0)
    _inputs, expected, tol, out = _eager(case)
    assert oracle.judge(out, expected, tol, DTYPES[case.out_dtype]).max_ratio < 0.5
    wrong = out.clone()
    wrong[0, 0, 0] += 1e-3 * (1 + wrong[0, 0, 0].abs())
    assert oracle.judge(wrong, expected, tol, DTYPES[case.out_dtype]).max_ratio > 1


@pytest.mark.parametrize("op", ["addmm", "linear", "baddbmm"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("epilogue", ["none", "relu", "gelu"])
def test_a_kernel_storing_the_product_before_its_bias_passes_the_case_s_bound(op, dtype, epilogue):
    """The case's bound rounds the product by eps * |a @ b| before the bias is added (not by the result, which a
    cancelling bias makes small): a kernel that stores the product in the dtype first (Inductor's addmm -> mm +
    add, a bias epilogue reading the stored product) passes where the bias cancels the product."""
    case = GemmCase(op, 9, 24, 64, batch=3 if op == "baddbmm" else 0, dtype=dtype, epilogue=epilogue, seed=3)
    args = dict(zip(OPS[op].arg_names, build_inputs(case, "cpu").args, strict=True))
    product = args["a"].float() @ (args["w"].t() if "w" in args else args["b"]).float()
    noise = 1 + 2.0**-6 * torch.randn(product.shape, generator=torch.Generator().manual_seed(1))
    cancelling = -(product * noise)
    args["bias"] = (cancelling if op == "baddbmm" else cancelling[0]).to(DTYPES[dtype])
    inputs = CaseInputs(tuple(args[r] for r in OPS[op].arg_names))
    expected, tol = oracle.case_reference(case, inputs)
    stored = product.to(DTYPES[dtype])
    in_dtype = apply_chain(stored + args["bias"], case.steps, {}, None)
    float32_epilogue = apply_chain(stored.float() + args["bias"].float(), case.steps, {}, None).to(DTYPES[dtype])
    for out in (in_dtype, float32_epilogue):
        assert oracle.judge(out, expected, tol, DTYPES[dtype]).max_ratio < 1
    eager = case_function(case.op, case.epilogue, case.dtype)(*inputs.flat)
    assert oracle.judge(eager, expected, tol, DTYPES[dtype]).max_ratio < 0.5


def test_special_values_are_held_to_the_same_special_and_a_leaked_nan_is_not_called_unwritten():
    """Where the operands hold NaN or inf the reference has them along a row and a column: a kernel that keeps them
    passes, one that turns them into finite numbers fails, and a NaN that leaked into a clean element fails as
    non-finite (it may have come from an operand), not as an element never written."""
    case_reference, judge = oracle.case_reference, oracle.judge
    case = GemmCase("mm", 6, 7, 9, seed=2, values="nan")
    inputs = build_inputs(case, "cpu")
    expected, tol = case_reference(case, inputs)
    right = inputs.args[0] @ inputs.args[1]
    assert judge(right, expected, tol, torch.float32).ok
    dropped = right.nan_to_num(0.0)
    verdict = judge(dropped, expected, tol, torch.float32)
    assert not verdict.ok and verdict.mismatch.kind == "values"
    leaked = right.clone()
    clean = torch.isfinite(expected).nonzero()[0]
    leaked[tuple(clean)] = float("nan")
    verdict = judge(leaked, expected, tol, torch.float32)
    assert not verdict.ok and verdict.mismatch.kind == "nonfinite" and verdict.mismatch.index == tuple(clean.tolist())
    inf_case = GemmCase("mm", 6, 7, 9, seed=2, values="inf")
    inputs = build_inputs(inf_case, "cpu")
    expected, tol = case_reference(inf_case, inputs)
    right = inputs.args[0] @ inputs.args[1]
    assert judge(right, expected, tol, torch.float32).ok
    flipped = torch.where(torch.isinf(right), torch.full_like(right, float("nan")), right)  # inf x finite -> NaN
    assert not judge(flipped, expected, tol, torch.float32).ok
