"""The oracle in row chunks, for a case one of whose tensors spans more than `CHUNK_ELEMENTS` elements
(cases/memory.py sets it and says which case is `chunked`; the big profile's cases, cases/big.py, cross 2**31).
Whole, its float64 reference, bound and comparison would hold about nine float64 arrays of the result's size:
150 GiB for an mm whose result is just past 2**31 elements. Every GEMM of the case space, and every epilogue step,
computes a row of its result from the same row of its row-wise inputs (A, a residual, a baddbmm bias, a row-wise
scale: cases.case.row_dims) and the whole of the others, so the reference of rows [r0, r1) is the reference of the
case on those rows: each chunk is judged by the oracle as it is, then the verdicts are merged.

What the chunks hold at once: the float64 copies of the inputs used whole (B, a bias of N) and one chunk of every
array (cases/memory.py counts it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..cases.case import CaseInputs, GemmCase, row_dims
from ..cases.memory import rows_per_chunk
from ..cases.ops import OPS


def row_ranges(case: GemmCase) -> list[tuple[int, int]]:
    """[r0, r1) row chunks covering M (cases/memory.py sizes them)."""
    rows = rows_per_chunk(case)
    return [(r0, min(r0 + rows, case.m)) for r0 in range(0, case.m, rows)]


@dataclass
class Chunked:
    """The reference of a case judged in row chunks: its inputs, with the ones used whole already in float64."""

    case: GemmCase
    inputs: CaseInputs

    def __post_init__(self) -> None:
        self._dims, self._roles = row_dims(self.case), OPS[self.case.op].arg_names
        named = {**dict(zip(self._roles, self.inputs.args, strict=True)), **self.inputs.extras}
        self._whole = {r: t.detach().to(torch.float64) for r, t in named.items() if r not in self._dims}

    @property
    def shape(self) -> tuple[int, ...]:
        lead = (self.case.batch,) if OPS[self.case.op].batched else ()
        return (*lead, self.case.m, self.case.n)

    def rows(self, r0: int, r1: int) -> CaseInputs:
        """The case's inputs for rows [r0, r1): the row-wise ones sliced, the rest whole (in float64)."""

        def take(role: str, t: torch.Tensor) -> torch.Tensor:
            if role not in self._dims:
                return self._whole[role]
            return t.narrow(self._dims[role] % t.dim(), r0, r1 - r0)

        args = tuple(take(r, t) for r, t in zip(self._roles, self.inputs.args, strict=True))
        return CaseInputs(args, {r: take(r, t) for r, t in self.inputs.extras.items()})

    def judge(self, actual: Any, expected_dtype: torch.dtype) -> Any:
        """The oracle's verdict on `actual`, chunk by chunk: the worst chunk's mismatch (its index in the whole
        result), every chunk's failing elements counted."""
        from . import Mismatch, Verdict, case_reference, judge

        if not isinstance(actual, torch.Tensor) or tuple(actual.shape) != self.shape or actual.dtype != expected_dtype:
            # A wrong type, shape or dtype is judged before any value: a reference without values will do.
            empty = torch.empty(self.shape, dtype=torch.float64, device="meta")
            return judge(actual, empty, empty, expected_dtype)
        worst, worst_r0, max_error, bad, total = None, 0, 0.0, 0, 0
        for r0, r1 in row_ranges(self.case):
            expected, tol = case_reference(self.case, self.rows(r0, r1))
            verdict = judge(actual.narrow(-2, r0, r1 - r0), expected, tol, expected_dtype)
            max_error, total = max(max_error, verdict.max_error), total + expected.numel()
            bad += verdict.mismatch.bad if verdict.mismatch is not None else 0
            if worst is None or (not verdict.ok, verdict.max_ratio) > (not worst.ok, worst.max_ratio):
                worst, worst_r0 = verdict, r0
            del expected, tol
        if worst.ok:
            return Verdict(True, worst.max_ratio, max_error)
        m = worst.mismatch
        index = (*m.index[:-2], m.index[-2] + worst_r0, m.index[-1])
        mismatch = Mismatch(m.kind, index, m.actual, m.expected, m.error, m.tolerance, bad, total, m.detail)
        return Verdict(False, worst.max_ratio, max_error, mismatch)

    def eager_ratio(self, eager: torch.Tensor) -> float:
        """How much of the bound eager PyTorch's own result (`eager`, computed whole) uses, chunk by chunk."""
        from . import case_reference

        worst = 0.0
        for r0, r1 in row_ranges(self.case):
            expected, tol = case_reference(self.case, self.rows(r0, r1))
            err = (eager.narrow(-2, r0, r1 - r0).to(torch.float64) - expected).abs()
            finite = torch.isfinite(expected.to(eager.dtype).to(torch.float64))
            if err.numel():
                worst = max(worst, float(torch.where(finite, err / tol, torch.zeros_like(err)).max()))
        return worst
