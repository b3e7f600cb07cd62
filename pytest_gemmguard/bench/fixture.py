"""The `gemm_benchmark` fixture object: validate the arguments, measure (measure.py), judge the budgets
and the baseline (budget.py), record the result for the reports, the baseline and pytest-benchmark."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import backends
from ..cases.case import GemmCase
from ..errors import GemmBudgetError, GemmInconclusive, GemmUsageError
from .budget import Budget, check
from .context import BenchContext
from .measure import measure
from .measurement import Measurement, budget_report, inconclusive_report
from .verdict import noise_target


class GemmBenchmark:
    """`gemm_benchmark(fn=None, *, op="mm", shape=(M, N, K), dtype=None, epilogue="none",
    layout="contiguous")`: measure one case through the test's backend; returns a Measurement.

    `fn` is called with the op's inputs in the op's argument order (as `gemm.args`); without it the
    op plus epilogue is measured. Set `instrument` to a function that takes the timed callable and
    returns the one to time instead: tests of the harness use it to plant a slowdown."""

    def __init__(self, ctx: BenchContext, backend: str, test_id: str, budget: Budget, pb_fixture: Any) -> None:
        self.ctx, self.backend, self.test_id, self.budget = ctx, backend, test_id, budget
        self._pb = pb_fixture
        self.instrument: Callable[[Callable[[], Any]], Callable[[], Any]] | None = None
        self.measurements: list[Measurement] = []
        # Called with each measurement before its verdict is raised (pytest-xdist: sends it to the controller).
        self.publish: Callable[[Measurement], None] | None = None

    def __call__(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        op: str = "mm",
        shape: tuple[int, ...] = (512, 512, 512),
        dtype: str | None = None,
        epilogue: str = "none",
        layout: str = "contiguous",
    ) -> Measurement:
        from ..run.session import require_backend

        __tracebackhide__ = True  # a broken budget shows the test's line and the numbers, not our frames

        require_backend(self.backend)
        dtype = dtype or default_dtype(backends.get(self.backend).device())
        case = make_case(op, shape, dtype, epilogue, layout)
        # Sample until the noise allows judging this budget's threshold (or the time cap says it cannot).
        target = noise_target(self.budget.runtime_regression, self.budget.alpha)
        m = measure(self.ctx, self.backend, case, fn, self.test_id, self.instrument, target)
        base = None
        if self.ctx.baseline is not None:
            base = self.ctx.baseline.entry(m.key, m.gpu.get("name"))
        m.broken, m.compared = check(m, base, self.budget)
        inconclusive = m.compared.get("runtime", {}).get("verdict") == "inconclusive"
        if m.broken:
            m.status = "failed"
        else:
            m.status = "inconclusive" if inconclusive else ("ok" if base is not None else "no baseline")
        self.ctx.results.append(m)
        if self.publish is not None:
            self.publish(m)
        from .._compat import pytest_benchmark

        pytest_benchmark.record(self._pb, m, first=not self.measurements)
        self.measurements.append(m)
        if m.broken:
            raise GemmBudgetError(budget_report(m))
        if inconclusive:
            if self.ctx.settings.inconclusive == "fail":
                raise GemmInconclusive(inconclusive_report(m))
            import warnings

            warnings.warn(inconclusive_report(m), RuntimeWarning, stacklevel=2)
        return m


def default_dtype(device: str) -> str:
    """bfloat16 where the hardware computes in it (GPUs; CPUs with AVX512-BF16/AMX), else float32: on a
    CPU without it, bfloat16 GEMMs run a slow emulation that measures the emulation, not the GEMM."""
    if device.startswith("cuda"):
        return "bfloat16"
    import torch

    try:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        native = False
    return "bfloat16" if native else "float32"


def make_case(op: str, shape: tuple[int, ...], dtype: str, epilogue: str, layout: str) -> GemmCase:
    """The one case `gemm_benchmark` measures, validated by the same path as `@gemm_case` (one line naming
    the argument: `gemm_benchmark(layout='foo'): unknown value 'foo'; valid: ...`)."""
    from ..cases.ops import OPS
    from ..cases.space import case_space

    where = "gemm_benchmark"
    if not isinstance(op, str) or op.strip().lower() not in OPS:
        raise GemmUsageError(f"{where}(op={op!r}): unknown op; valid: {', '.join(OPS)}")
    op = op.strip().lower()
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    want = 4 if OPS[op].batched else 3
    if len(dims) != want or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims):
        need = "(B, M, N, K)" if want == 4 else "(M, N, K)"
        raise GemmUsageError(f"{where}(shape={shape!r}): {op} needs {need} of sizes >= 1")
    for arg, value in (("dtype", dtype), ("layout", layout), ("epilogue", epilogue)):
        if not isinstance(value, str):
            raise GemmUsageError(f"{where}({arg}={value!r}): expected a name")
    space = case_space(
        where, singular=True, ops=[op], dtypes=[dtype], layouts=[layout], epilogues=[epilogue], shapes=[dims]
    )
    assert space.ops and space.dtypes and space.layouts and space.epilogues  # case_space refused anything else
    b, (m, n, k) = (dims[0], dims[1:]) if want == 4 else (0, dims)
    return GemmCase(op, m, n, k, batch=b, dtype=space.dtypes[0], layout=space.layouts[0], epilogue=space.epilogues[0])
