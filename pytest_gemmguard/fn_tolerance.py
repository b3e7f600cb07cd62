"""The tolerance for a test's own function, `gemm.check(fn)`: a forward error analysis of fn, run by torch.

`fn` need not compute what the drawn case computes: `torch.matmul(a, b)` is checked on a case drawn with
epilogue `sigmoid+tanh`, `gelu(x @ w.t() + b)` on one drawn with none. The case's own bound then describes
another computation. On the H200 `mm 24×40×1 tf32 sigmoid+tanh` checked with `fn = torch.matmul` failed at
3.17x: the case's bound had passed through sigmoid's slope of 1/4, and fn's output never does.

So the bound follows fn itself. fn runs in float64 (the reference) under a function mode that sees every
torch call it makes. Each call that computes a new floating tensor is a site where a correct kernel may
err, by the oracle's own terms (oracle.py's docstring):
  - a GEMM (matmul and `@`, mm, bmm, addmm, baddbmm, linear, _scaled_mm) by the GEMM bound of a case of
    the same dtype, then one rounding to the dtype it is stored in (two with a bias);
  - any other call by one rounding of its result plus 2 * TRANSCENDENTAL_ULPS float32 ulps of the larger
    of its inputs and its result (an error in erf or sigmoid scales with |y| in GELU and SiLU);
  - a view or an in-place call by nothing.
fn then runs twice more per site, that site's result moved up and down by its bound; the farther of the
two moves of fn's output is that site's share, and the shares add up. That is first-order error
propagation, exact for the elementwise work that follows a GEMM in practice: an activation steepens or
flattens an error as its slope does, a bias or residual carries it unchanged, and errors of two GEMMs
subtracted add, never cancel. Two roundings of the result come on top, as the case's bound had them for
fn. A function with more than MAX_SITES sites runs 2 * MAX_SITES times, neighbouring sites moved together.

A function whose GEMM this mode cannot see (einsum, a custom op, a kernel of its own) keeps the case's
bound plus those two roundings, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import oracle
from .ops import DTYPES, gemm_out_dtype

# Each GEMM entry point and how to read its operands: (a, b as a (..., K, N) matrix, bias present, alpha).
_Operands = tuple[torch.Tensor, torch.Tensor, bool, float]


def _plain(args: tuple, kwargs: dict) -> _Operands:
    return args[0], args[1], False, 1.0


def _swapped(args: tuple, kwargs: dict) -> _Operands:  # b.__rmatmul__(a) is a @ b
    return args[1], args[0], False, 1.0


def _with_input(args: tuple, kwargs: dict) -> _Operands:  # addmm(input, a, b, beta=, alpha=)
    return args[1], args[2], True, float(kwargs.get("alpha", args[4] if len(args) > 4 else 1.0))


def _linear(args: tuple, kwargs: dict) -> _Operands:  # linear(x, w, bias=None) is x @ w.T + bias
    bias = kwargs.get("bias", args[2] if len(args) > 2 else None)
    return args[0], args[1].mT, bias is not None, 1.0


_GEMMS: dict[Any, Callable[[tuple, dict], _Operands]] = {
    torch.matmul: _plain,
    torch.Tensor.matmul: _plain,
    torch.Tensor.__matmul__: _plain,
    torch.Tensor.__rmatmul__: _swapped,
    torch.mm: _plain,
    torch.Tensor.mm: _plain,
    torch.bmm: _plain,
    torch.Tensor.bmm: _plain,
    torch.addmm: _with_input,
    torch.Tensor.addmm: _with_input,
    torch.baddbmm: _with_input,
    torch.Tensor.baddbmm: _with_input,
    torch.nn.functional.linear: _linear,
    torch._scaled_mm: _plain,
}


def _scales(args: tuple, kwargs: dict) -> torch.Tensor:
    scale_a = kwargs.get("scale_a", args[2] if len(args) > 2 else 1.0)
    scale_b = kwargs.get("scale_b", args[3] if len(args) > 3 else 1.0)
    return scale_a.double() * scale_b.double()


MAX_SITES = 16


class _Sites(torch.overrides.TorchFunctionMode):
    """Sees every torch call fn makes: counts the sites (calls that compute a new floating tensor), bounds
    each, and returns a site's result moved by `moves[index]` times its bound. A GEMM whose operands are
    the reference run's own is not recomputed (`memo`)."""

    def __init__(self, dtype: str, moves: Callable[[int], float], memo: dict[int, tuple]) -> None:
        super().__init__()
        self.dtype, self.moves, self.memo = dtype, moves, memo
        self.sites = self.gemms = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        gemm = func in _GEMMS
        if gemm:
            key = tuple(_identity(t) for t in args if isinstance(t, torch.Tensor))
            memo = self.memo.get(self.sites)
            if memo is not None and memo[0] == key:
                out, error = memo[1].clone(), memo[2]  # a copy: fn may update its result in place
            else:
                out = func(*args, **kwargs)
                error = self._gemm_error(func, args, kwargs, out)
                # The operands stay referenced here, so no later tensor can take their memory and their key.
                self.memo[self.sites] = (key, out.clone(), error, args)
            self.gemms += 1
        else:
            out = func(*args, **kwargs)
            if not _is_new_float(out, args):
                return out
            error = self._step_error(args, out)
        index, self.sites = self.sites, self.sites + 1
        move = self.moves(index)
        return out if move == 0 else out + move * error

    def _stored_eps(self, out: torch.Tensor) -> float:
        # fn's own casts round as written in the reference; a float64 result stands for the case's dtype.
        stored = out.dtype if out.dtype != torch.float64 else DTYPES[gemm_out_dtype(self.dtype)]
        return torch.finfo(stored).eps

    def _gemm_error(self, func: Any, args: tuple, kwargs: dict, y: torch.Tensor) -> torch.Tensor:
        """The oracle's GEMM bound for this call: the product's error, scaled as the call scales the product,
        then one rounding to the dtype it is stored in (two with a bias added; float32's two dequantizing
        multiplies for _scaled_mm)."""
        a, b, biased, alpha = _GEMMS[func](args, kwargs)
        product = oracle.error_coefficient(a.shape[-1], self.dtype) * torch.matmul(a.abs().double(), b.abs().double())
        e = product * abs(alpha)
        if func is torch._scaled_mm:
            e = e * _scales(args, kwargs) + 2 * torch.finfo(torch.float32).eps * y.abs()
        return e + (2 if biased else 1) * self._stored_eps(y) * y.abs()

    def _step_error(self, args: tuple, out: torch.Tensor) -> torch.Tensor:
        """One rounding of the result, plus a few float32 ulps of the largest input it broadcasts with."""
        largest = out.abs().double()
        for t in _tensors(args):
            if t.is_floating_point() and t.numel() and _broadcasts(t.shape, out.shape):
                largest = torch.maximum(largest, t.abs().double().broadcast_to(out.shape))
        # Twice the case's ulps: the case's bound carries earlier errors at a Lipschitz constant, a worst case
        # with room to spare, while this one carries them at the actual slope, which is nearly flat in GELU's
        # tail; there torch 2.13's CPU GELU errs by 2 float32 ulps of |y| (tests/test_fn_tolerance.py), and
        # this term alone must keep the factor-2 margin every other term has.
        transcendental = 2 * oracle.TRANSCENDENTAL_ULPS * torch.finfo(torch.float32).eps
        return self._stored_eps(out) * out.abs().double() + transcendental * largest


def _tensors(args: Any) -> list[torch.Tensor]:
    if isinstance(args, torch.Tensor):
        return [args]
    if isinstance(args, (list, tuple)):
        return [t for a in args for t in _tensors(a)]
    return []


def _broadcasts(shape: torch.Size, to: torch.Size) -> bool:
    try:
        return torch.broadcast_shapes(shape, to) == to
    except RuntimeError:
        return False


def _is_new_float(out: Any, args: tuple) -> bool:
    """A result that can carry a new error: a floating tensor, not a view or an in-place update of an input."""
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
        return False
    storage = out.untyped_storage().data_ptr()
    return all(t.untyped_storage().data_ptr() != storage for t in _tensors(args))


def _identity(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t._version)


def bound(
    fn: Callable[..., torch.Tensor],
    inputs: Sequence[torch.Tensor],
    dtype: str,
    out_dtype: torch.dtype,
    case_tol: Callable[[], torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """fn's float64 result on `inputs` (a case of `dtype`) and the per-element bound on a correct kernel's
    error, for an output stored as `out_dtype`. `case_tol` gives the case's own bound, for a function
    whose GEMMs this module cannot see."""
    upcast = oracle.upcast(inputs)
    memo: dict[int, tuple] = {}

    def run(moves: Callable[[int], float]) -> tuple[Any, _Sites]:
        mode = _Sites(dtype, moves, memo)
        with torch.no_grad(), oracle.Float64ScaledMM(), mode:
            out = fn(*upcast)
        return out, mode

    expected, seen = run(lambda i: 0)
    if not isinstance(expected, torch.Tensor):
        return expected, torch.zeros(())  # judge() reports what fn returned
    rounding = _roundings(expected, out_dtype)
    if seen.gemms == 0:
        tol = case_tol()
        return expected, (tol if tol.shape == expected.shape else torch.zeros_like(expected)) + rounding

    def moved(moves: Callable[[int], float]) -> torch.Tensor:
        out, _ = run(moves)
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
            return torch.zeros_like(expected)
        return (out.to(expected.dtype) - expected).abs()

    def either_way(moves: Callable[[int], float]) -> torch.Tensor:
        # Both ways: next to an extremum (GELU's minimum) one way moves fn's output by almost nothing. Where a
        # move leaves fn's domain (NaN), the other way decides.
        up, down = moved(moves), moved(lambda i: -moves(i))
        return torch.maximum(up.nan_to_num(nan=0.0), down.nan_to_num(nan=0.0))

    # One run per site; past MAX_SITES, neighbouring sites share a run (moved the same way).
    groups = min(seen.sites, MAX_SITES)

    def group(g: int) -> Callable[[int], float]:
        return lambda i: float(i * groups // seen.sites == g)

    return expected, sum((either_way(group(g)) for g in range(groups)), rounding)


def _roundings(expected: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    if not out_dtype.is_floating_point:
        return torch.zeros_like(expected)
    finfo = torch.finfo(out_dtype)
    return 2 * finfo.eps * expected.abs() + finfo.tiny
