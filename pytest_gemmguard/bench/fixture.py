"""What `gemm_benchmark(...)` does: verify, compile with provenance, time, compare, record.

One call measures one case through the test's backend:
  1. check the case like `gemm.check` (float64 oracle, provenance: the backend's own GEMM kernel ran);
  2. time the compiled callable (timing.py) side by side with an in-run reference, the eager op at the
     same shape and dtype (ATen: cuBLAS or oneDNN/MKL), so run-to-run drift cancels in the ratio;
  3. cold and warm compile time in a fresh subprocess (coldcompile.py), once per case per session, as
     `compile_samples` samples (each its own process and empty cache) for a significance test;
  4. TFLOP/s and the fraction of this machine's peak, measured once per run with a large library GEMM;
  5. budgets and the baseline (budget.py, stats.py); a broken one fails the test with its numbers.
The `Measurement` is returned, kept for the reports and the baseline, and handed to pytest-benchmark.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .. import backends
from ..cases import GemmCase, case_function
from ..ops import DTYPES, OPS, math_precision
from .budget import Budget, check
from .timing import Timing, TimingOptions, time_callable

SAMPLES_KEPT = 2000  # samples stored per measurement (baseline files stay small enough to diff)


class GemmBudgetError(AssertionError):
    """A budget was broken or a regression is real; the message holds the numbers."""


@dataclass
class Measurement:
    key: str
    test: str
    backend: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    epilogue: str
    layout: str
    device: str
    fn: str  # "case" for the case's own op + epilogue, else the function's qualified name
    median_s: float
    ci_low_s: float
    ci_high_s: float
    n: int
    method: str
    stopped: str
    samples: list[float]
    ref_median_s: float | None
    flops: float
    peak_tflops: float | None
    compile_s: float  # compile time in this session (0 when an earlier compile was reused)
    cold_compile_s: float | None = None  # median of cold_compile_samples
    warm_compile_s: float | None = None
    cold_compile_samples: list[float] = field(default_factory=list)  # one per fresh process
    warm_compile_samples: list[float] = field(default_factory=list)
    cold_phases: dict = field(default_factory=dict)
    cold_error: str | None = None
    kernels: list[str] = field(default_factory=list)
    status: str = "measured"  # measured | ok | no baseline | failed
    broken: list[str] = field(default_factory=list)
    compared: dict = field(default_factory=dict)
    when: str = ""

    @property
    def tflops(self) -> float:
        return self.flops / self.median_s / 1e12 if self.median_s > 0 else 0.0

    @property
    def pct_peak(self) -> float | None:
        return 100 * self.tflops / self.peak_tflops if self.peak_tflops else None

    @property
    def ref_ratio(self) -> float | None:
        return self.median_s / self.ref_median_s if self.ref_median_s else None

    @property
    def case_id(self) -> str:
        dims = "x".join(map(str, self.shape))
        return f"{self.op}-{dims}-{self.dtype}-{self.layout}-{self.epilogue}" + (
            "" if self.fn == "case" else f"-{self.fn}"
        )

    def compile_for_budget(self) -> tuple[float | None, str]:
        if self.cold_compile_s is not None:
            return self.cold_compile_s, "cold"
        return (self.compile_s, "session") if self.compile_s > 0 else (None, "none")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        """Inverse of `as_dict` (its derived numbers are dropped; unknown keys are ignored)."""
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in d.items() if k in names}
        kept["shape"] = tuple(kept["shape"])
        return cls(**kept)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["shape"] = list(self.shape)
        out.update(tflops=self.tflops, pct_peak=self.pct_peak, ref_ratio=self.ref_ratio)
        return out

    def extra_info(self) -> dict[str, Any]:
        """The numbers pytest-benchmark stores next to its stats."""
        keys = (
            "backend",
            "op",
            "dtype",
            "epilogue",
            "layout",
            "device",
            "fn",
            "method",
            "ref_median_s",
            "compile_s",
            "cold_compile_s",
            "warm_compile_s",
            "status",
        )
        info = {f"gemm_{k}": getattr(self, k) for k in keys}
        info.update(
            gemm_shape=list(self.shape),
            gemm_tflops=round(self.tflops, 3),
            gemm_pct_peak=self.pct_peak,
            gemm_kernels=self.kernels,
        )
        return info


@dataclass
class Settings:
    cold_compile: bool = True
    compile_samples: int = 1  # cold compiles per case, each in a fresh process (>= 5 for a significance test)
    verify: bool = True
    reference: bool = True
    timing: TimingOptions = field(default_factory=TimingOptions)


class BenchContext:
    """Per-session state of the measuring half: settings, baseline, results and once-per-run numbers."""

    def __init__(self, session: Any, settings: Settings, budget: Budget, baseline: Any = None) -> None:
        self.session = session  # runner.GemmSession
        self.settings = settings
        self.budget = budget
        self.baseline = baseline  # baseline.Baseline or None
        self.results: list[Measurement] = []
        self._peaks: dict[tuple[str, str], float] = {}
        self._cold: dict[str, dict] = {}

    def peak_tflops(self, device: str, dtype: str, achieved_tflops: float | None = None) -> float:
        """The denominator of % of peak: this machine's best library GEMM throughput, measured once per run
        and (device, dtype) by `timing.library_peak` with this run's timing options, so it is timed exactly
        like the kernels. A kernel faster than it (`achieved_tflops`, when the caller passes its own) keeps
        its honest % above 100, and a warning says so: the measured peak is then too low, not the kernel
        faster than the hardware."""
        from .timing import library_peak

        key = (device, dtype)
        if key not in self._peaks:
            import torch

            with _gpu_lock(device), torch.no_grad():
                self._peaks[key] = library_peak(device, DTYPES[dtype], self.settings.timing).tflops
        peak = self._peaks[key]
        if achieved_tflops is not None and achieved_tflops > peak:
            import warnings

            warnings.warn(
                f"gemmguard: a {dtype} kernel on {device} ran at {achieved_tflops:.4g} TFLOP/s, "
                f"{100 * achieved_tflops / peak:.1f}% of the library peak measured in this run ({peak:.4g} TFLOP/s)",
                RuntimeWarning,
                stacklevel=2,
            )
        return peak

    def cold(self, spec: dict, progress: Callable[[str], None] | None = None) -> dict:
        from . import coldcompile

        key = repr(sorted(spec.items()))
        if key not in self._cold:
            self._cold[key] = coldcompile.measure_repeated(spec, self.settings.compile_samples, progress)
        return self._cold[key]


# ---------------------------------------------------------------- the fixture object


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
        from ..runner import require_backend

        __tracebackhide__ = True  # a broken budget shows the test's line and the numbers, not our frames

        require_backend(self.backend)
        case = make_case(op, shape, dtype or default_dtype(backends.get(self.backend).device()), epilogue, layout)
        m = measure(self.ctx, self.backend, case, fn, self.test_id, self.instrument)
        base = None
        if self.ctx.baseline is not None:
            base = self.ctx.baseline.entries.get(m.key)
        m.broken, m.compared = check(m, base, self.budget)
        m.status = "failed" if m.broken else ("ok" if base is not None else "no baseline")
        self.ctx.results.append(m)
        if self.publish is not None:
            self.publish(m)
        from . import pytest_benchmark_bridge

        pytest_benchmark_bridge.record(self._pb, m, first=not self.measurements)
        self.measurements.append(m)
        if m.broken:
            raise GemmBudgetError(budget_report(m))
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
    from ..errors import GemmUsageError

    if op not in OPS:
        raise GemmUsageError(f"gemm_benchmark(op={op!r}): unknown op; valid: {', '.join(OPS)}")
    if dtype not in DTYPES:
        raise GemmUsageError(f"gemm_benchmark(dtype={dtype!r}): valid: {', '.join(DTYPES)}")
    dims = tuple(int(d) for d in shape)
    batched = OPS[op].batched
    if len(dims) != (4 if batched else 3) or any(d < 1 for d in dims):
        want = "(B, M, N, K)" if batched else "(M, N, K)"
        raise GemmUsageError(f"gemm_benchmark(shape={shape!r}): {op} needs {want} of sizes >= 1")
    b, (m, n, k) = (dims[0], dims[1:]) if batched else (0, dims)
    return GemmCase(op, m, n, k, batch=b, dtype=dtype, layout=layout, epilogue=epilogue)


def _fn_name(fn: Callable[..., Any] | None) -> str:
    return "case" if fn is None else getattr(fn, "__qualname__", type(fn).__name__)


def _importable(fn: Callable[..., Any] | None) -> str | None:
    """'module:qualname' when a fresh process could import `fn` (no closures or lambdas)."""
    if fn is None:
        return None
    qual = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", "")
    if not module or not qual or "<" in qual or module == "__main__":
        return None
    return f"{module}:{qual}"


@contextlib.contextmanager
def _gpu_lock(device: str) -> Iterator[None]:
    """Timing owns the GPU: one timer per device across processes (pytest-xdist workers) at a time."""
    if not str(device).startswith("cuda"):
        yield
        return
    import fcntl

    index = str(device).partition(":")[2] or os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    path = os.path.join(tempfile.gettempdir(), f"gemmguard-gpu-{index}.lock")
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def measure(
    ctx: BenchContext,
    backend_name: str,
    case: GemmCase,
    fn: Callable[..., Any] | None,
    test_id: str,
    instrument: Callable | None = None,
) -> Measurement:
    """Verify, compile, time. On the CPU with `cpu_threads` set, the compile happens under that thread
    count too: Dynamo guards on it, so changing it only for timing would time a recompile."""
    from .timing import _threads

    on_cpu = not backends.get(backend_name).device().startswith("cuda")
    # The case decides TF32 vs IEEE float32 for the check, the timed compile and the reference alike.
    with _threads(ctx.settings.timing.cpu_threads if on_cpu else None), math_precision(case.dtype):
        from ..compile import run_checked
        from ..runner import Gemm

        session = ctx.session
        backend = backends.get(backend_name)
        device = backend.device()
        gemm = Gemm(case, backend_name, session, test_id)
        label = f"[{backend_name}] benchmark {case.describe()}"
        if ctx.settings.verify:
            session.progress(f"{label}: compiling and verifying")
            result = gemm.check(fn)  # raises GemmMismatch, or Unsupported (the test ends as unsupported)
            record = result.record
        target, flat = (
            (case_function(case.op, case.epilogue, case.dtype), gemm.inputs.flat) if fn is None else (fn, gemm.args)
        )
        compiled = session.compiler.compile(backend, target, flat, OPS[case.op].weight_positions)
        if not ctx.settings.verify:
            _, record = run_checked(compiled, flat)
        kernels = [k for g in record.graphs for k in g.gemm_kernels(backend_name)]
        session.progress(f"{label}: timing (with eager ATen as the in-run reference)")
        timing = _time(ctx, compiled, flat, target, device, instrument)
        s = timing.summary
        flops = 2.0 * math.prod(case.shape)
        m = Measurement(
            key=f"{test_id} | {_fn_name(fn)} | {case.describe()}",
            test=test_id,
            backend=backend_name,
            op=case.op,
            shape=case.shape,
            dtype=case.dtype,
            epilogue=case.epilogue,
            layout=case.layout,
            device=device,
            fn=_fn_name(fn),
            median_s=s.median,
            ci_low_s=s.low,
            ci_high_s=s.high,
            n=s.n,
            method=timing.method,
            stopped=timing.stopped,
            samples=timing.samples[:SAMPLES_KEPT],
            ref_median_s=timing.ref_summary.median if timing.ref_summary else None,
            flops=flops,
            peak_tflops=None,  # set below, from the measurement's own TFLOP/s
            compile_s=record.compile_s,
            kernels=kernels,
            when=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        )
        m.peak_tflops = ctx.peak_tflops(device, case.dtype, achieved_tflops=m.tflops)
        if ctx.settings.cold_compile:
            fn_ref = _importable(fn)
            if fn is not None and fn_ref is None:
                m.cold_error = (
                    "fn is not importable by a fresh process (a lambda or closure): cold compile not measured"
                )
            else:
                dynamic = session.compiler.dynamic
                spec_ = {
                    "backend": backend_name,
                    "backend_module": type(backend).__module__,  # a conftest-registered backend, in the child
                    "case": asdict(case),
                    "fn": fn_ref,
                    "dynamic": dynamic,
                }
                cold = ctx.cold(spec_, lambda line: session.progress(f"{label}: {line}"))
                m.cold_error = cold.get("error")
                m.cold_compile_s, m.warm_compile_s = cold.get("cold_s"), cold.get("warm_s")
                m.cold_compile_samples = cold.get("cold_samples", [])
                m.warm_compile_samples = cold.get("warm_samples", [])
                m.cold_phases = cold.get("cold_phases", {})
        return m


def _time(
    ctx: BenchContext, compiled: Any, flat: tuple, target: Callable, device: str, instrument: Callable | None
) -> Timing:
    with compiled.hot(flat) as hot, _gpu_lock(device):
        timed = instrument(hot) if instrument is not None else hot
        reference = (lambda: target(*flat)) if ctx.settings.reference else None
        return time_callable(timed, device, reference, ctx.settings.timing)


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.4g} ms"


def budget_report(m: Measurement) -> str:
    lines = [
        f"gemmguard: {m.backend} broke its performance budget",
        f"  case:     {m.op} {'x'.join(map(str, m.shape))} {m.dtype} {m.layout} epilogue={m.epilogue} fn={m.fn}",
    ]
    lines += [f"  broken:   {b}" for b in m.broken]
    lines.append(
        f"  measured: median {_ms(m.median_s)} (95% CI {_ms(m.ci_low_s)}..{_ms(m.ci_high_s)}, n={m.n}, {m.method}), "
        f"{m.tflops:.3g} TFLOP/s, reference {_ms(m.ref_median_s)}"
    )
    if m.cold_compile_samples:
        lines.append(
            f"  compile:  cold median {m.cold_compile_s:.2f} s over {len(m.cold_compile_samples)} fresh process(es), "
            f"warm {m.warm_compile_s:.2f} s; this session {m.compile_s:.2f} s"
        )
    return "\n".join(lines)
