"""Operand strides -> gemmguard's storages (row, col, offset, strided, or what else they are) and the
(A, B) storage pair -> gemmguard's layout name. Reads only shapes and strides."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from ..cases.case import LAYOUTS

# The (A storage, B storage) pair -> gemmguard's layout name; both operands of a case share one storage
# kind, except for the transposes.
_LAYOUT_OF_PAIR = {pair: name for name, pair in LAYOUTS.items()}


def _packed(shape: Sequence[int], stride: Sequence[int]) -> bool:
    """Row-major with no gaps (size-1 dims may have any stride)."""
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride), strict=True):
        if size != 1 and st != expected:
            return False
        expected *= size
    return True


def storage_of(shape: Sequence[int], stride: Sequence[int], offset: int = 0) -> str:
    """gemmguard's storage for one GEMM operand (its last two dims are the matrix, any before them the
    batch): row, col, strided, offset or broadcast, as LAYOUTS uses them; or what it is when gemmguard has no
    such storage (a zero stride inside the matrix, padded rows or columns, column-major with a storage offset)."""
    shape, stride = list(shape), list(stride)
    if len(shape) == 1:  # a vector operand (a linear over a 1-D input): one row
        shape, stride = [1, *shape], [shape[0] * stride[0], *stride]
    zero = [i for i, (size, st) in enumerate(zip(shape, stride, strict=True)) if size > 1 and st == 0]
    if zero:  # gemmguard's "broadcast": one packed matrix shared across the batch
        shared = max(zero) < len(shape) - 2 and _packed(shape[-2:], stride[-2:]) and offset == 0
        return "broadcast" if shared else "a zero stride inside the matrix"
    if shape[-1] == 1 or stride[-1] == 1:
        if _packed(shape, stride):
            return "row" if offset == 0 else "offset"
        if shape[-2] != 1 or _packed(shape[:-2], stride[:-2]):
            # rows further apart than their length: a slice of a wider buffer (cuBLAS's "lda > K")
            return "padded rows"
    swapped_shape = [*shape[:-2], shape[-1], shape[-2]]
    swapped_stride = [*stride[:-2], stride[-1], stride[-2]]
    if shape[-2] == 1 or stride[-2] == 1:
        if _packed(swapped_shape, swapped_stride):
            return "col" if offset == 0 else "column-major with a storage offset"
        return "padded columns"
    # No unit stride in the matrix: every element apart from its neighbours (gemmguard's "strided").
    return "strided"


def flip(storage: str) -> str:
    """The storage of a transposed view."""
    return {"row": "col", "col": "row", "offset": "column-major with a storage offset"}.get(storage, storage)


def layout_of(a: str, b: str) -> str | None:
    """gemmguard's layout for operands stored as `a` and `b`, or None when it has none."""
    return _LAYOUT_OF_PAIR.get((a, b))


def storage(value: Any) -> str:
    """The storage of a traced tensor value."""
    return storage_of(tuple(value.shape), tuple(value.stride()), int(value.storage_offset()))


def rows_of(x: Any) -> str:
    """The storage of a linear's input as the (M, K) matrix the GEMM reads. Leading dims that cannot be
    merged into one without a copy are copied by the decomposition (reshape): the GEMM then reads rows."""
    shape, stride = list(x.shape), list(x.stride())
    if len(shape) <= 2:
        return storage(x)
    lead = [(s, t) for s, t in zip(shape[:-1], stride[:-1], strict=True) if s != 1]
    for (_, outer), (size, inner) in itertools.pairwise(lead):
        if outer != inner * size:
            return "row"  # reshape copies: the GEMM reads a contiguous copy
    m = math.prod(shape[:-1])
    row_stride = lead[-1][1] if lead else shape[-1] * stride[-1]
    return storage_of((m, shape[-1]), (row_stride, stride[-1]), int(x.storage_offset()))
