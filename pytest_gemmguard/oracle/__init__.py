"""The oracle: a float64 reference, a per-element tolerance, and the comparison. It never compiles.

Tolerance model (docs/explanation/oracle.md has the derivation). For every output element the
oracle carries a bound on the rounding error a *correct* implementation may make, propagated through
the case's computation in float64:

    GEMM    e = lam * eps_acc * sqrt(K) * (|A| @ |B|)   accumulation in fp32 (eps_acc = fp32 eps)
              + eps_in * (|A| @ |B|)                    operands rounded to the math precision (tf32)
              + eps_mma * (|A| @ |B|)                   float8 tensor cores' narrow accumulator
              + eps_out * |y|                           the product rounded to its storage dtype
    scaled  the same on the operands dequantized (each block of K's product times its block's scales), plus two
              fp32 roundings of each block's scaled partial sum
    step f  e = L_f * e + eps_out * |f(y)|  (+ 4 fp32 ulp of max(|y|, |f(y)|) for transcendental f:
              GELU and SiLU are y * g(y), and an absolute error in g (erf, sigmoid) scales with |y|)
              L_f is f's Lipschitz constant, so an error already present grows at most that much;
              every intermediate may be rounded once to the dtype it is stored in (eager does that).
    cast    eps_out becomes the new dtype's eps (plus a subnormal step of the old one: it may have underflowed).

    tol = e + tiny(out dtype)

eps is the dtype's machine epsilon (twice its unit roundoff, so every rounding term has a factor-2
margin); lam = 4 covers the random-walk growth of fp32 accumulation error with margin. A kernel that
accumulates in half precision makes errors near sqrt(K) * eps_half * |A||B|, which is K-fold beyond
this bound for K >= 8, so it fails; eager PyTorch's own error stays well inside it (the tests measure
both). NaN and Inf pass only where the reference, rounded to the output dtype, has them too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..cases.case import CaseInputs, GemmCase
from ..cases.ops import DTYPES, FP8, OPS, STEPS, gemm_out_dtype

LAMBDA_ACC = 4.0
TRANSCENDENTAL_ULPS = 4.0


def _eps(dtype: str) -> float:
    return torch.finfo(DTYPES[dtype]).eps


@dataclass(frozen=True)
class Mismatch:
    """Why an output was rejected: the worst element and how many elements failed."""

    kind: str  # "values", "shape", "dtype", "nonfinite", "unwritten"
    index: tuple[int, ...] = ()
    actual: float = float("nan")
    expected: float = float("nan")
    error: float = float("nan")
    tolerance: float = float("nan")
    bad: int = 0
    total: int = 0
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """The oracle's answer for one run: ok, or the mismatch; plus the worst error/tolerance seen."""

    ok: bool
    max_ratio: float  # max over elements of |error| / tolerance (<= 1 passes)
    max_error: float
    mismatch: Mismatch | None = None
    eager_ratio: float | None = None  # the same ratio for eager PyTorch in the same dtype

    def summary(self) -> str:
        text = f"max error {self.max_error:.3g} = {self.max_ratio:.3g}x tolerance"
        if self.eager_ratio is not None:
            text += f" (eager PyTorch in the same dtype: {self.eager_ratio:.3g}x)"
        return text


def upcast(inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().to(torch.float64) for t in inputs]


class Float64ScaledMM(torch.overrides.TorchFunctionMode):
    """Evaluates torch._scaled_mm exactly on float64 operands (torch has no float64 kernel for it): the product of the
    dequantized operands (`product`: scales per tensor, per row and column, or per block) (* scale_result) + bias,
    left in float64 whatever out_dtype says. The repro scripts carry this class's source."""

    @staticmethod
    def expanded(scale: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        """A scale over the operand it scales (A as M x K, B as K x N), each value over what it covers: along each
        dimension a scale has the operand's size (one per row or column), 1 (one for all) or ceil(size / 128) (one
        per block of 128: the blockwise recipes)."""
        scale = scale.double()
        if scale.dim() == 0:
            return scale
        for dim in (-2, -1):
            size, given = shape[dim], scale.shape[dim]
            if given not in (size, 1):
                if given != -(-size // 128):
                    shapes = f"a scale of shape {tuple(scale.shape)} for an operand of shape {tuple(shape)}"
                    raise ValueError(f"{shapes}: no scaling recipe fits it")
                scale = scale.repeat_interleave(128, dim=dim).narrow(dim, 0, size)
        return scale

    @staticmethod
    def dequantized(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """An operand times its scales (`expanded`)."""
        return x * Float64ScaledMM.expanded(scale, tuple(x.shape))

    @staticmethod
    def product(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
        """The dequantized operands' product in float64, as a kernel forms it: each block of K's product of the
        float8 values (exact in float64), times that block's scales (K is one block unless a scale varies along it).
        Exact products make the result independent of how a matmul orders its sums, so a row chunk's reference is
        the whole's (oracle/chunks.py)."""
        k = a.shape[-1]
        sa = Float64ScaledMM.expanded(scale_a, (a.shape[-2], k)).expand(a.shape[-2], k)
        sb = Float64ScaledMM.expanded(scale_b, (k, b.shape[-1])).expand(k, b.shape[-1])
        step = 128 if sa.stride(-1) or sb.stride(-2) else k  # a stride of 0: one scale along all of K
        y = None
        for k0 in range(0, k, step):
            part = (a[..., k0 : k0 + step] @ b[..., k0 : k0 + step, :]) * sa[:, k0 : k0 + 1] * sb[k0 : k0 + 1, :]
            y = part if y is None else y + part
        return y

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is not torch._scaled_mm or args[0].dtype != torch.float64:
            return func(*args, **kwargs)
        names = ("a", "b", "scale_a", "scale_b", "bias", "scale_result", "out_dtype", "use_fast_accum")
        given = {**dict(zip(names, args, strict=False)), **kwargs}
        if given.get("scale_result") is not None and given.get("bias") is not None:
            # Whether the output scale applies before or after the bias is the library's business: refuse to guess.
            raise NotImplementedError("gemmguard: no float64 reference for _scaled_mm with both bias and scale_result")
        y = self.product(given["a"], given["b"], given["scale_a"], given["scale_b"])
        if given.get("scale_result") is not None:
            y = y * given["scale_result"].double()
        return y if given.get("bias") is None else y + given["bias"].double()


def case_reference(case: GemmCase, inputs: CaseInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The case's exact float64 result and its per-element tolerance, computed side by side."""
    op_spec = OPS[case.op]
    args = dict(zip(op_spec.arg_names, upcast(inputs.args), strict=True))
    extras = dict(zip(inputs.extras, upcast(inputs.extras.values()), strict=True))
    a, k = args["a"], case.k
    b = args["w"].t() if "w" in args else args["b"]
    with torch.no_grad():
        if op_spec.scaled:
            y, e = scaled_product_bound(a, b, args["scale_a"], args["scale_b"], case.dtype)
        else:
            y, e = product_bound(a, b, k, case.dtype)
        store = gemm_out_dtype(case.dtype)
        e = e + _eps(store) * y.abs()
        if op_spec.has_bias:
            y = y + args["bias"]
            e = e + _eps(store) * y.abs()
        for name in case.steps:
            if name == "cast":
                # What was stored before the cast may have underflowed there: half a subnormal step of that dtype
                # (float16 keeps 2^-24 at best), far above the new dtype's tiny (bmm 2x22x2x1 float16 cast).
                e = e + _eps(store) * torch.finfo(DTYPES[store]).tiny
                store = case.out_dtype
                e = e + _eps(store) * y.abs()
                continue
            step = STEPS[name]
            before, y = y, step.apply(y, extras)
            e = step.lipschitz * e + _eps(store) * y.abs()
            if step.transcendental:
                # Relative to the larger of input and output: GELU's tail (y = -2.6, gelu = -0.012) comes out of
                # torch 2.13's vectorized CPU kernel 285 ulp of the *output* off (3.4e-5 relative), an absolute
                # error of ~3 fp32 ulp in erf times |y|: the implementation is right, the old bound was not.
                e = e + TRANSCENDENTAL_ULPS * _eps("float32") * torch.maximum(y.abs(), before.abs())
        e = e + torch.finfo(DTYPES[store]).tiny
    return y, e


def product_bound(a: torch.Tensor, b: torch.Tensor, k: int, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    """`a @ b` in float64 (upcast operands) and the bound on a correct kernel's error before it stores the
    product, for a case of `dtype` (the GEMM line of the module docstring). compile/candidates.py shares it."""
    return torch.matmul(a, b), error_coefficient(k, dtype) * torch.matmul(a.abs(), b.abs())


def error_coefficient(k: int, dtype: str) -> float:
    """A correct kernel's error on a product of length `k`, relative to sum |a_i * b_i| (function.py
    bounds the GEMMs of a test's own function with it too)."""
    acc = LAMBDA_ACC * _eps("float32") * (k**0.5) + ACCUMULATION_EPS.get(dtype, 0.0)
    return acc + OPERAND_EPS.get(dtype, 0.0)


def scaled_product_bound(
    a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, dtype: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """`product_bound` of a scaled GEMM (float64 operands, their scales of any recipe): the product of the dequantized
    operands, exact in float64, and its bound, plus the kernel's two float32 multiplies by the scales. Those round
    the partial sum they scale (the whole product, or one block of K's), which sum |products| bounds."""
    k = a.shape[-1]
    y = Float64ScaledMM.product(a, b, scale_a, scale_b)
    sizes = Float64ScaledMM.product(a.abs(), b.abs(), scale_a.abs(), scale_b.abs())
    return y, (error_coefficient(k, dtype) + 2 * _eps("float32")) * sizes


# Operands rounded to the math precision before the products: TF32 keeps 10 mantissa bits. Triton
# truncates rather than rounds, so each operand may lose up to 2^-10 relative, and a product 2 * 2^-10.
OPERAND_EPS = {"tf32": 2 * 2.0**-10}
# float8 products are exact in float32, but Hopper's FP8 tensor cores add them into an accumulator that
# keeps about 14 mantissa bits, truncating, until the kernel promotes the partial sum to float32 (every
# 128 elements of K or fewer in cuBLASLt without fast accumulation and in Inductor's Triton template,
# which adds each block's tl.dot into a float32 accumulator). At most four truncating 2^-13 steps per
# promoted block give 4 * 2^-13 relative to the block's sum of |products|.
ACCUMULATION_EPS = {FP8: 4 * 2.0**-13}


def judge(actual: Any, expected: torch.Tensor, tol: torch.Tensor, expected_dtype: torch.dtype) -> Verdict:
    """Check `actual` against the float64 `expected` within the per-element `tol`."""
    if not isinstance(actual, torch.Tensor):
        return Verdict(False, float("inf"), float("inf"), Mismatch("shape", detail=f"got {type(actual).__name__}"))
    if tuple(actual.shape) != tuple(expected.shape):
        detail = f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        return Verdict(False, float("inf"), float("inf"), Mismatch("shape", detail=detail))
    if actual.dtype != expected_dtype:
        detail = f"dtype {actual.dtype}, expected {expected_dtype}"
        return Verdict(False, float("inf"), float("inf"), Mismatch("dtype", detail=detail))
    got = actual.detach().to(device=expected.device, dtype=torch.float64)
    # What a perfect kernel would store: the exact result rounded to the output dtype. Overflow there
    # is a legitimate Inf; NaN/Inf anywhere else is a failure, never a pass.
    rounded = expected.to(expected_dtype).to(torch.float64)
    special = ~torch.isfinite(rounded)
    same_special = special & ((got == rounded) | (torch.isnan(got) & torch.isnan(rounded)))
    err = (got - expected).abs()
    ratio = torch.where(special, torch.zeros_like(err), err / tol)
    ratio = torch.where(torch.isfinite(got) | special, ratio, torch.full_like(err, float("inf")))
    ratio = torch.where(special & ~same_special, torch.full_like(err, float("inf")), ratio)
    bad = ratio > 1.0
    n_bad = int(bad.sum())
    finite_err = torch.where(special, torch.zeros_like(err), err)
    max_ratio = float(ratio.max()) if ratio.numel() else 0.0
    max_error = float(finite_err.nan_to_num(nan=float("inf")).max()) if err.numel() else 0.0
    if n_bad == 0:
        return Verdict(True, max_ratio, max_error)
    flat = int(torch.argmax(torch.where(torch.isnan(ratio), torch.full_like(ratio, float("inf")), ratio)))
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(ratio.shape)))
    value = float(got[index])
    # A NaN where the reference is finite reads as an element never written (the output was NaN-poisoned), unless
    # the operands held NaN themselves: then it may as well have leaked from them.
    unwritten = value != value and not bool(torch.isnan(expected).any())
    kind = "unwritten" if unwritten else ("nonfinite" if not torch.isfinite(got[index]) else "values")
    mismatch = Mismatch(
        kind, index, value, float(expected[index]), float(err[index]), float(tol[index]), n_bad, ratio.numel()
    )
    return Verdict(False, max_ratio, max_error, mismatch)


def eager_ratio(fn: Callable, inputs: Sequence[torch.Tensor], expected: torch.Tensor, tol: torch.Tensor) -> float:
    """How much of the tolerance eager PyTorch itself uses on the same inputs in the same dtype."""
    with torch.no_grad():
        out = fn(*inputs)
    err = (out.detach().to(torch.float64) - expected).abs()
    finite = torch.isfinite(expected.to(out.dtype).to(torch.float64))
    return float(torch.where(finite, err / tol, torch.zeros_like(err)).max()) if err.numel() else 0.0


def poison_allocator(like: torch.Tensor | None, count: int = 4) -> None:
    """Release NaN-filled blocks of the output's size to the allocator just before a run, so an
    output buffer the kernel forgets to write reads NaN (and fails) instead of stale good values."""
    if like is None:
        return
    blocks = [torch.full_like(like, float("nan")) for _ in range(count)]
    del blocks
