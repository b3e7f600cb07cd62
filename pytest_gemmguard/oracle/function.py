"""The tolerance for a test's own function, `gemm.check(fn)`: a forward error analysis of fn, run by torch.

`fn` need not compute what the drawn case computes: `torch.matmul(a, b)` is checked on a case drawn with
epilogue `sigmoid+tanh`, `gelu(x @ w.t() + b)` on one drawn with none. The case's own bound then describes
another computation. On the H200 `mm 24×40×1 tf32 sigmoid+tanh` checked with `fn = torch.matmul` failed at
3.17x: the case's bound had passed through sigmoid's slope of 1/4, and fn's output never does.

So the bound follows fn itself. fn runs in float64 (the reference) under a function mode that sees every
torch call it makes. Each call that computes new floating values is a site where a correct kernel may err,
by the oracle's own terms (oracle/__init__.py's docstring):
  - a GEMM (`@`, matmul, mm, bmm, mv, dot, addmm, baddbmm and their in-place forms, linear, _scaled_mm,
    einsum) by the GEMM bound of a case of the same dtype, then one rounding of the product to the dtype it
    is stored in, eps * |alpha * a @ b|, sized by the product and not by the result: a correct kernel may
    store the product before it adds a bias (Inductor rewrites addmm into mm plus a pointwise add; cuBLASLt's
    bias epilogues), and where the bias cancels the product that rounding is far above eps * |y|. A bias adds
    one rounding of the result, eps * |y|; a product scaled by alpha after it is stored, or beta * bias, one
    more each. (Sized by |y| alone, with a bias, the bound failed `relu(addmm(bias, a, b))` in bfloat16 on the
    clean aten backend at 1.3-3.6x on the H100 (torch 2.11), and CPU models of such kernels at up to 32x in
    tests/test_fn_tolerance.py.) Without a bias the product is the result;
  - any other call, in place or not, by one rounding of its result plus 2 * TRANSCENDENTAL_ULPS float32 ulps
    of the larger of its inputs and its result (an error in erf or sigmoid scales with |y| in GELU and SiLU);
  - a view by nothing.
Each site's error is then carried through the rest of fn by running fn again with that site's result moved
by its bound: up, down, toward zero and away from it (a truncating kernel errs on all elements that way),
and, where the first such run shows fn mixes the site's elements (differences, a mean, softmax,
layer_norm), with signs that alternate by each bit of the element's index along the last two dimensions,
so that every two elements are moved opposite ways by some run. The farthest move of fn's output is the
site's share, and the shares add up; two roundings of the result come on top, as the case's bound had
them for fn. That is first-order error propagation: exact for the elementwise work that follows a GEMM
(an activation steepens or flattens an error as its slope does, a bias or residual carries it unchanged),
and two GEMMs are never moved together, so their errors add. Other sites past MAX_SITES share runs.
fn's inputs are fresh copies for each run where fn updates them in place.

A function that calls a GEMM this mode cannot bound (tensordot, multi_dot, bilinear, attention, an einsum
with `...`) or that a move makes raise keeps at least the case's bound plus those two roundings; one that
calls none keeps that bound, as before (a custom op or a kernel of its own is not seen).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import oracle
from ..cases.ops import DTYPES, gemm_out_dtype

# Each GEMM entry point and how to read its operands: (a, b as a (..., K, N) matrix, whether a bias is added,
# alpha, beta).
_Operands = tuple[torch.Tensor, torch.Tensor, bool, float, float]


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _two(first: str, second: str) -> Callable[[tuple, dict], _Operands]:
    return lambda args, kwargs: (_arg(args, kwargs, 0, first), _arg(args, kwargs, 1, second), False, 1.0, 1.0)


def _swapped(args: tuple, kwargs: dict) -> _Operands:  # b.__rmatmul__(a) is a @ b
    return args[1], args[0], False, 1.0, 1.0


def _with_input(first: str, second: str) -> Callable[[tuple, dict], _Operands]:  # addmm(input, a, b, beta, alpha)
    def read(args: tuple, kwargs: dict) -> _Operands:
        beta, alpha = _arg(args, kwargs, 3, "beta", 1.0), _arg(args, kwargs, 4, "alpha", 1.0)
        return _arg(args, kwargs, 1, first), _arg(args, kwargs, 2, second), True, float(alpha), float(beta)

    return read


def _linear(args: tuple, kwargs: dict) -> _Operands:  # linear(x, w, bias=None) is x @ w.T + bias
    w, biased = _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 2, "bias") is not None
    return _arg(args, kwargs, 0, "input"), w.mT if w.dim() > 1 else w, biased, 1.0, 1.0


def _scaled(args: tuple, kwargs: dict) -> _Operands:
    """The operands dequantized (each times its scales, of any recipe: oracle.Float64ScaledMM.dequantized)."""
    biased = _arg(args, kwargs, 4, "bias") is not None
    a, b = _arg(args, kwargs, 0, "self").double(), _arg(args, kwargs, 1, "mat2").double()
    a = oracle.Float64ScaledMM.dequantized(a, _arg(args, kwargs, 2, "scale_a"))
    return a, oracle.Float64ScaledMM.dequantized(b, _arg(args, kwargs, 3, "scale_b")), biased, 1.0, 1.0


_GEMMS: dict[Any, Callable[[tuple, dict], _Operands]] = {
    **dict.fromkeys((torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.linalg.matmul),
                    _two("input", "other")),
    torch.Tensor.__rmatmul__: _swapped,
    **dict.fromkeys((torch.mm, torch.Tensor.mm, torch.bmm, torch.Tensor.bmm), _two("input", "mat2")),
    **dict.fromkeys((torch.mv, torch.Tensor.mv), _two("input", "vec")),
    **dict.fromkeys((torch.dot, torch.Tensor.dot), _two("input", "tensor")),
    **dict.fromkeys((torch.addmm, torch.Tensor.addmm, torch.Tensor.addmm_), _with_input("mat1", "mat2")),
    **dict.fromkeys((torch.baddbmm, torch.Tensor.baddbmm, torch.Tensor.baddbmm_), _with_input("batch1", "batch2")),
    torch.nn.functional.linear: _linear,
    torch._scaled_mm: _scaled,
}  # fmt: skip
# GEMMs this module cannot bound: a function calling one keeps at least the case's bound (module docstring).
_UNSEEN = {torch.tensordot, torch.linalg.multi_dot, torch.chain_matmul, torch.nn.functional.bilinear,
           torch.nn.functional.scaled_dot_product_attention}  # fmt: skip


def _einsum_operands(args: tuple) -> tuple[str, list[torch.Tensor], int] | None:
    """The equation, operands and contracted length K of an einsum call, or None where it cannot tell."""
    equation = str(args[0]).replace(" ", "")
    operands = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    if "..." in equation or not all(isinstance(t, torch.Tensor) for t in operands):
        return None
    inputs, arrow, output = equation.partition("->")
    letters = inputs.replace(",", "")
    if not arrow:  # implicit form: the letters seen once, in order
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    sizes: dict[str, int] = {}
    for spec, t in zip(inputs.split(","), operands, strict=False):
        sizes.update(zip(spec, t.shape, strict=False))
    k = 1
    for letter, size in sizes.items():
        k *= size if letter not in output else 1
    return equation, operands, k


class _Sites(torch.overrides.TorchFunctionMode):
    """Sees every torch call fn makes: counts the sites (calls that compute new floating values), bounds
    each, and moves a site's result by what `moves(index, error)` returns. A GEMM whose operands are the
    reference run's own is not recomputed (`memo`)."""

    def __init__(self, dtype: str, moves: Callable[..., Any], memo: dict[int, tuple]) -> None:
        super().__init__()
        self.dtype, self.moves, self.memo = dtype, moves, memo
        self.sites, self.gemm_sites, self.unseen = 0, [], 0
        self.shapes: dict[int, torch.Size] = {}  # each site's shape, for the moves that tell its elements apart

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        readable = func is torch.einsum and _einsum_operands(args) is not None
        if func in _UNSEEN or (func is torch.einsum and not readable):
            self.unseen += 1
        if func in _GEMMS or readable:
            out, error = self._gemm(func, args, kwargs)
            self.gemm_sites.append(self.sites)
        else:
            out = func(*args, **kwargs)
            if not _is_new_float(out, func, args, kwargs):
                return out
            error = self._step_error(args, out)
        index, self.sites = self.sites, self.sites + 1
        self.shapes[index] = error.shape
        move = self.moves(index, error, out)
        if move is None:
            return out
        move = move.to(out.dtype)
        if _writes_in_place(out, func, args, kwargs):
            return out.add_(move)  # fn goes on with this very tensor (an in-place update, an out= buffer)
        return out + move

    def _gemm(self, func: Any, args: tuple, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        tensors = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
        key = tuple(_identity(t) for t in tensors)
        memo = self.memo.get(self.sites)
        if memo is not None and memo[0] == key and "out" not in kwargs and not func.__name__.endswith("_"):
            return memo[1].clone(), memo[2]  # a copy: fn may update its result in place
        out = func(*args, **kwargs)
        error = self._gemm_error(func, args, kwargs, out)
        # The operands stay referenced here, so no later tensor can take their memory and their key.
        self.memo[self.sites] = (key, out.clone(), error, tensors)
        return out, error

    def _stored_eps(self, out: torch.Tensor) -> float:
        # fn's own casts round as written in the reference; a float64 result stands for the case's dtype.
        stored = out.dtype if out.dtype != torch.float64 else DTYPES[gemm_out_dtype(self.dtype)]
        return torch.finfo(stored).eps

    def _gemm_error(self, func: Any, args: tuple, kwargs: dict, y: torch.Tensor) -> torch.Tensor:
        """The oracle's GEMM bound for this call: the product's error, scaled as the call scales the product,
        then one rounding of the product to the dtype it is stored in, sized by the product itself, and with a
        bias one more of the result (module docstring); float32's two dequantizing multiplies for _scaled_mm."""
        eps = self._stored_eps(y)
        if func is torch.einsum:
            equation, operands, k = _einsum_operands(args)
            e = oracle.error_coefficient(k, self.dtype) * torch.einsum(equation, *[t.abs().double() for t in operands])
            return e + eps * y.abs()
        a, b, biased, alpha, beta = _GEMMS[func](args, kwargs)
        sizes = torch.matmul(a.abs().double(), b.abs().double())
        e = oracle.error_coefficient(a.shape[-1], self.dtype) * sizes * abs(alpha)
        # The scaled product alone: y itself without a bias; with one, computed apart (an in-place addmm_ has
        # overwritten its bias with y by now), and beta * bias is what y holds beside it.
        product = y.double() if not biased else alpha * torch.matmul(a.double(), b.double())
        if func is torch._scaled_mm:
            # The operands came dequantized (_scaled); the kernel's float32 multiplies by the scales round the partial
            # sums they scale (the product, or one block of K's), which `sizes` bounds; an output scale scales it all.
            result = _arg(args, kwargs, 5, "scale_result")
            factor = 1.0 if result is None else result.double()
            e = (e + 2 * torch.finfo(torch.float32).eps * sizes) * factor
            product = product if not biased else product * factor
        # A kernel may store the product before it adds the bias (Inductor's addmm -> mm + add, cuBLASLt's bias
        # epilogues): that rounding errs by eps * |alpha * a @ b|, which a bias cancelling the product leaves far
        # above eps * |y|. A product scaled by alpha after it was stored rounds once more, as does beta * bias.
        e = e + (1 if alpha == 1 else 2) * eps * product.abs()
        if biased:
            e = e + eps * y.abs() + (0 if beta in (0, 1) else eps * (y.double() - product).abs())
        return e

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


def _storage(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except (NotImplementedError, RuntimeError):  # sparse and other tensors without one storage
        return None


def _writes_in_place(out: Any, func: Any, args: tuple, kwargs: dict) -> bool:
    """An in-place update (`add_`, `__iadd__`) or a call writing into `out=`: new values in an old tensor."""
    name = getattr(func, "__name__", "")
    in_place = (name.endswith("_") and not name.endswith("__")) or name.startswith("__i")
    return isinstance(out, torch.Tensor) and (in_place or kwargs.get("out") is out)


def _is_new_float(out: Any, func: Any, args: tuple, kwargs: dict) -> bool:
    """A result that can carry a new error: floating values computed by this call, not a view of an input."""
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
        return False
    if _writes_in_place(out, func, args, kwargs):
        return True
    storage = _storage(out)
    return storage is None or all(_storage(t) != storage for t in _tensors(args))


def _identity(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t._version)


MAX_SITES = 16


def _bit_signs(error: torch.Tensor, dim: int, bit: int) -> torch.Tensor:
    """+1 or -1 by bit `bit` of each element's index along `dim`, broadcast over the rest: over bits 0, 1, ...
    any two indices along `dim` are pushed opposite ways by one of these moves."""
    if error.dim() < -dim:
        return torch.ones((), dtype=torch.float64, device=error.device)
    index = torch.arange(error.shape[dim], device=error.device)
    signs = 1.0 - 2.0 * ((index >> bit) & 1).double()
    return signs.view(-1, *([1] * (-dim - 1)))


def _elementwise(run: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> bool:
    """Whether each output element moved exactly as under the move up or the move down: fn did not mix the
    site's elements (or not along the dimension the run alternated)."""
    same = torch.isclose(run, up, rtol=1e-9, atol=0.0) | torch.isclose(run, down, rtol=1e-9, atol=0.0)
    return bool(same.all())


def _groups(gemm_sites: list[int], sites: int) -> list[set[int]]:
    """The sites moved together, one group a run: each GEMM alone, so two GEMMs' errors never cancel; the
    other sites in at most MAX_SITES groups of neighbours."""
    others = [i for i in range(sites) if i not in gemm_sites]
    count = min(len(others), MAX_SITES)
    return [{i} for i in gemm_sites] + [
        {i for n, i in enumerate(others) if n * count // len(others) == g} for g in range(count)
    ]


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
    versions = [t._version for t in upcast]
    memo: dict[int, tuple] = {}

    def run(moves: Callable[..., Any]) -> tuple[Any, _Sites]:
        mode = _Sites(dtype, moves, memo)
        # A function that updates its inputs in place gets fresh copies each run.
        given = oracle.upcast(inputs) if mutated else upcast
        with torch.no_grad(), oracle.Float64ScaledMM(), mode:
            out = fn(*given)
        return out, mode

    mutated = False
    expected, seen = run(lambda i, e, y: None)
    mutated = any(t._version != v for t, v in zip(upcast, versions, strict=True))
    if not isinstance(expected, torch.Tensor) or not expected.is_floating_point():
        return expected, torch.zeros(getattr(expected, "shape", ()), dtype=torch.float64)  # judged exactly
    rounding = _roundings(expected, out_dtype)
    if not seen.gemm_sites:
        tol = case_tol()
        return expected, (tol if tol.shape == expected.shape else torch.zeros_like(expected)) + rounding

    def moved(moves: Callable[..., Any]) -> torch.Tensor | None:
        try:
            out, _ = run(moves)
        except Exception:  # a move fn cannot take says nothing of the kernel: the case's bound stands in
            return None
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
            return None
        return (out.to(expected.dtype) - expected).abs().nan_to_num(nan=0.0)

    def share(sites: set[int]) -> torch.Tensor | None:
        """How far moving `sites` by their bounds moves fn's output, whichever way each element's error goes."""

        def pattern(signs: Callable[[torch.Tensor, torch.Tensor], Any]) -> Callable[..., Any]:
            return lambda i, e, y: (e * signs(e, y)) if i in sites else None

        # Both ways: next to an extremum (GELU's minimum) one way moves fn's output by almost nothing.
        up, down = moved(pattern(lambda e, y: 1.0)), moved(pattern(lambda e, y: -1.0))
        if up is None or down is None:
            return None
        # Every element toward zero, and away from it: the way a kernel that truncates (TF32 operands, a
        # round-toward-zero conversion) errs on all elements at once, which a mean or softmax does not cancel.
        runs = [up, down] + [moved(pattern(lambda e, y, s=s: s * torch.sign(y).double())) for s in (1.0, -1.0)]
        # Where fn mixes a site's elements (differences, a mean, softmax, layer_norm), moving them all one way
        # cancels, as a correct kernel's errors need not: then moves that tell every two elements apart along
        # the last two dimensions, one per bit of their index (an elementwise fn is seen at the first and pays
        # no more).
        for dim in (-1, -2):
            length = max((seen.shapes[i][dim] for i in sites if len(seen.shapes[i]) >= -dim), default=1)
            for bit in range(max(length - 1, 0).bit_length()):
                run = moved(pattern(lambda e, y, dim=dim, bit=bit: _bit_signs(e, dim, bit)))
                if run is None:
                    break
                runs.append(run)
                if bit == 0 and _elementwise(run, up, down):
                    break
        return torch.stack([r for r in runs if r is not None]).amax(0)

    shares = [share(g) for g in _groups(seen.gemm_sites, seen.sites)]
    total = sum((s for s in shares if s is not None), rounding)
    if seen.unseen or any(s is None for s in shares):
        tol = case_tol()
        total = torch.maximum(total, tol + rounding) if tol.shape == expected.shape else total
    return expected, total


def _roundings(expected: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    if not out_dtype.is_floating_point:
        return torch.zeros_like(expected)
    finfo = torch.finfo(out_dtype)
    return 2 * finfo.eps * expected.abs() + finfo.tiny
