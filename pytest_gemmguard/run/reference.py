"""A check's reference: what it compiles, and the float64 result and bound a correct one keeps to (the case's own,
or the bound of the test's own function, oracle/function.py). A case with a tensor past `memory.CHUNK_ELEMENTS`
elements (the big profile) holds no whole reference: its winner is judged in row chunks (oracle/chunks.py), and the
checks that need a whole reference (the autotune candidates, the cross-checks of crosscheck/, the test's own
function) do not run for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .. import oracle
from ..cases import memory
from ..cases.case import case_function, row_dims
from ..cases.ops import DTYPES, OPS
from ..errors import Unsupported, UserCodeError
from ..oracle import chunks
from ..oracle.function import bound as fn_bound

if TYPE_CHECKING:
    from .example import Example

CHUNKED_FN = (
    "gemm.check(fn) on a case with a tensor past 2**26 elements: a function's bound needs its whole float64 result, "
    "so only gemm.check() (the case's own GEMM, judged in row chunks) runs at this size"
)

CHUNKED_BLOCKS = (
    "a blockwise case with a tensor past 2**26 elements whose A scales span 128 rows each: its reference is judged "
    "in row chunks, and a chunk's rows need not start a block"
)


@dataclass(frozen=True)
class Reference:
    """What a check compiles and what a correct result is: the function and its arguments, the float64 reference,
    the per-element bound, and the dtype the result is stored in; or, for a case judged in row chunks, no whole
    reference (`expected` and `tol` None) and its `chunked` one."""

    target: Callable[..., Any]
    args: tuple
    expected: torch.Tensor | None
    tol: torch.Tensor | None
    dtype: torch.dtype
    chunked: chunks.Chunked | None = None

    @property
    def judged(self) -> tuple | None:
        """(expected, bound, dtype): what the cross-checks judge another compile's result by; None for a case
        judged in row chunks (the cross-checks do not run for it)."""
        return None if self.chunked is not None else (self.expected, self.tol, self.dtype)

    @property
    def like(self) -> torch.Tensor:
        """An empty tensor shaped and typed as a correct result, on the inputs' device (the NaN-poisoned blocks)."""
        shape = self.chunked.shape if self.chunked is not None else self.expected.shape
        device = self.chunked.inputs.args[0].device if self.chunked is not None else self.expected.device
        return torch.empty(shape, dtype=self.dtype, device=device)

    def judge(self, out: Any) -> oracle.Verdict:
        if self.chunked is not None:
            return self.chunked.judge(out, self.dtype)
        return oracle.judge(out, self.expected, self.tol, self.dtype)

    def eager_ratio(self) -> float:
        """How much of the bound eager PyTorch itself uses on the same inputs in the same dtype."""
        if self.chunked is not None:
            with torch.no_grad():
                return self.chunked.eager_ratio(self.target(*self.args))
        return oracle.eager_ratio(self.target, self.args, self.expected, self.tol)


def references(example: Example, fn: Callable[..., Any] | None, backend: str) -> tuple[Reference, Reference]:
    """The case's own reference, and the one this check judges by: the same, or for the test's own function its
    bound (oracle/function.py: the function need not compute the case's epilogue)."""
    case, inputs = example.case, example.inputs
    own_fn = case_function(case.op, case.epilogue, case.dtype)
    if memory.chunked(case):
        if fn is not None:
            raise Unsupported(backend, CHUNKED_FN)
        if OPS[case.op].scale_blocks and "scale_a" not in row_dims(case):  # A's scales per 128 rows
            raise Unsupported(backend, CHUNKED_BLOCKS)
        own = Reference(own_fn, inputs.flat, None, None, DTYPES[case.out_dtype], chunks.Chunked(case, inputs))
        return own, own
    expected, tol = oracle.case_reference(case, inputs)
    own = Reference(own_fn, inputs.flat, expected, tol, DTYPES[case.out_dtype])
    if fn is None:
        return own, own
    dtype = user_eager(fn, inputs.args).dtype
    fn_expected, fn_tol = fn_bound(fn, inputs.args, case.dtype, dtype, lambda: tol)
    specials = case.values != "normal"
    _comparable(fn_expected, dtype, specials=specials)
    if specials:
        # NaN or inf in the operands: the function's bound is derived for finite numbers, and a row-wise step after
        # the GEMM (a softmax over a row holding -inf: eager float16 at 1.1x of it) carries a special into its
        # neighbours' rounding. Such a case holds each NaN and inf to the same special and every other element to
        # being finite; its values are held to the bound by the cases of ordinary numbers.
        fn_tol = torch.where(torch.isfinite(fn_expected), torch.full_like(fn_tol, float("inf")), fn_tol)
    return own, Reference(fn, inputs.args, fn_expected, fn_tol, dtype)


def user_eager(fn: Callable[..., Any], flat: tuple) -> Any:
    """Run the test's own function eagerly first: what goes wrong here is the test's, not the backend's."""
    try:
        with torch.no_grad():
            out = fn(*flat)
    except Exception as exc:
        raise UserCodeError(
            f"gemm.check(fn): your function raised {type(exc).__name__} when run eagerly on the case's inputs "
            f"(before any compile): {exc}"
        ) from exc
    if not isinstance(out, torch.Tensor):
        raise UserCodeError(
            f"gemm.check(fn): your function returned {type(out).__name__}; it must return one tensor "
            "(the GEMM's result) so the oracle can compare it"
        )
    return out


def _comparable(expected: Any, dtype: torch.dtype, specials: bool = False) -> None:
    """The test's own function must give the oracle something to compare: a result that is NaN or infinite in
    every element (its float64 value, stored as its dtype) passes wherever the backend's is too, so it would
    verify nothing. Unless the operands held NaN or inf (`specials`): then keeping them is what is verified (a
    softmax of rows that each meet a NaN column is NaN everywhere, and must be)."""
    if not isinstance(expected, torch.Tensor) or not (expected.is_floating_point() or expected.is_complex()):
        return
    if expected.numel() and (specials or bool(torch.isfinite(expected.to(dtype)).any())):
        return
    raise UserCodeError(
        "gemm.check(fn): your function's result is NaN or infinite in every element, so nothing could be compared"
        if expected.numel()
        else "gemm.check(fn): your function's result is empty, so nothing could be compared"
    )
