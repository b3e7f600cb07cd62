"""Timing a callable: CPU wall clock, or CUDA events on the GPU. Samples are seconds per call.

Both timers warm up first, then take samples in batches until the confidence interval of the median is
within `rel_ci` of it (default ±1%) or `max_time_s` is spent, whichever comes first, and never fewer than
`min_samples`. An optional `reference` callable is measured in the same loop, one batch of each in turn,
so slow drift of the machine (clocks, thermal state, neighbours) lands on both and cancels in their ratio.

GPU: every sample is bracketed by a pair of CUDA events on the current stream; before each sample a buffer
larger than L2 is overwritten so the GEMM reads its operands from HBM, as it would inside a model (the flush
runs outside the events). With `cuda_graph=True`, or "auto" when the call is launch-bound (the host takes at
least half as long to issue it as the GPU takes to run it), `graph_calls` calls are captured in one CUDA
graph and each sample is one replay divided by `graph_calls`: no host time in the samples, and operands
stay in L2 between those calls. torch.cuda is imported only in the GPU path.

`library_peak` measures the denominator of "% of peak" with these same timers and options: the best
median throughput of the library GEMM (torch.mm) over a few large shapes.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .stats import Summary, summarize

if TYPE_CHECKING:
    import torch


@dataclass
class Timing:
    """Samples (seconds per call) of the target and, if one was given, of the reference."""

    samples: list[float]
    ref_samples: list[float] = field(default_factory=list)
    method: str = "cpu"  # "cpu" | "cuda-events" | "cuda-graph"
    elapsed_s: float = 0.0
    stopped: str = ""  # "converged" | "time cap" | "sample cap"

    @property
    def summary(self) -> Summary:
        return summarize(self.samples)

    @property
    def ref_summary(self) -> Summary | None:
        return summarize(self.ref_samples) if self.ref_samples else None


@dataclass(frozen=True)
class TimingOptions:
    warmup_s: float = 0.05
    min_samples: int = 10
    max_samples: int = 2000
    rel_ci: float = 0.01
    max_time_s: float = 2.0
    min_sample_s: float = 1e-4  # CPU: repeat short calls inside one sample until it lasts this long
    batch: int = 10
    cuda_graph: bool | str = "auto"
    graph_calls: int = 20
    flush_l2: bool = True
    # CPU: torch intra-op threads while timing (None: leave as is). On a loaded or shared machine, OpenMP
    # threads that wait for a busy core stall for milliseconds; 1 thread makes timings repeatable.
    cpu_threads: int | None = None


def _converged(samples: list[float], opts: TimingOptions) -> bool:
    return len(samples) >= opts.min_samples and summarize(samples).rel_halfwidth <= opts.rel_ci


def _loop(sample_target, sample_ref, opts: TimingOptions, started: float) -> tuple[list, list, str]:
    samples: list[float] = []
    refs: list[float] = []
    while True:
        samples += sample_target(opts.batch)
        if sample_ref is not None:
            refs += sample_ref(opts.batch)
        if _converged(samples, opts) and (sample_ref is None or _converged(refs, opts)):
            return samples, refs, "converged"
        if len(samples) >= opts.max_samples:
            return samples, refs, "sample cap"
        if time.perf_counter() - started > opts.max_time_s and len(samples) >= opts.min_samples:
            return samples, refs, "time cap"


# ---------------------------------------------------------------- CPU


def _cpu_sampler(fn: Callable[[], object], opts: TimingOptions):
    # Warm up, and learn how many calls make one sample long enough for the timer.
    clock = time.perf_counter_ns
    deadline = time.perf_counter() + opts.warmup_s
    single = math.inf
    while True:
        t0 = clock()
        fn()
        single = min(single, (clock() - t0) * 1e-9)
        if time.perf_counter() >= deadline:
            break
    calls = max(1, math.ceil(opts.min_sample_s / max(single, 1e-9)))

    def take(count: int) -> list[float]:
        out = []
        enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(count):
                t0 = clock()
                for _ in range(calls):
                    fn()
                out.append((clock() - t0) * 1e-9 / calls)
        finally:
            if enabled:
                gc.enable()
        return out

    return take, calls


def time_cpu(
    fn: Callable[[], object], reference: Callable[[], object] | None = None, opts: TimingOptions | None = None
) -> Timing:
    opts = opts or TimingOptions()
    started = time.perf_counter()
    with _threads(opts.cpu_threads):
        take, _ = _cpu_sampler(fn, opts)
        take_ref = _cpu_sampler(reference, opts)[0] if reference is not None else None
        samples, refs, why = _loop(take, take_ref, opts, started)
    return Timing(samples, refs, "cpu", time.perf_counter() - started, why)


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    if count is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


# ---------------------------------------------------------------- GPU

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current L2 (H100/H200: 50 MB, B200: 126 MB)


class _Flusher:
    def __init__(self, device) -> None:
        import torch

        self.buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def _gpu_sampler(fn: Callable[[], object], opts: TimingOptions, flush: _Flusher | None, use_graph):
    import torch

    stream = torch.cuda.current_stream()
    # Warm-up (also settles allocator and lazy initialisation), and an estimate of one call.
    fn()
    torch.cuda.synchronize()
    deadline = time.perf_counter() + opts.warmup_s
    while time.perf_counter() < deadline:
        fn()
    torch.cuda.synchronize()

    if use_graph == "auto":
        gpu_s, host_s = _per_call(fn, stream)
        # Launch-bound: the host needs about as long to issue a call as the GPU needs to run it, so
        # events would time the host. Measured on the H200: 1024^3 and 256^3 bf16 GEMMs through Inductor.
        use_graph = host_s >= 0.5 * gpu_s
    graph = None
    calls = 1
    if use_graph:
        graph, calls = _capture(fn, opts.graph_calls)

    def take(count: int) -> list[float]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]
        for s, e in events:
            if flush is not None and graph is None:
                flush()
            s.record(stream)
            if graph is not None:
                graph.replay()
            else:
                fn()
            e.record(stream)
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e-3 / calls for s, e in events]

    return take, ("cuda-graph" if graph is not None else "cuda-events"), calls


def _per_call(fn: Callable[[], object], stream, calls: int = 10) -> tuple[float, float]:
    """(GPU seconds, host seconds) per call. A sleep kernel queued first keeps the GPU busy while the host
    issues the calls, so the events see the calls back to back, without host gaps."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    torch.cuda._sleep(10_000_000)  # several ms at any clock: longer than issuing `calls` calls
    start.record(stream)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls
    end.record(stream)
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e-3 / calls, host


def _capture(fn: Callable[[], object], calls: int):
    """A CUDA graph of `calls` back-to-back calls, or (None, 1) when the callable cannot be captured."""
    import torch

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        graph.replay()
        torch.cuda.synchronize()
        return graph, calls
    except Exception:  # not capturable (host sync, CPU work): fall back to plain events
        torch.cuda.synchronize()
        return None, 1


def time_cuda(
    fn: Callable[[], object],
    reference: Callable[[], object] | None = None,
    opts: TimingOptions | None = None,
    device=None,
) -> Timing:
    import torch

    opts = opts or TimingOptions()
    started = time.perf_counter()
    flush = _Flusher(device or torch.cuda.current_device()) if opts.flush_l2 else None
    take, method, _ = _gpu_sampler(fn, opts, flush, opts.cuda_graph)
    take_ref = None
    if reference is not None:
        # The reference is timed the same way as the target, so their ratio compares like with like.
        take_ref = _gpu_sampler(reference, opts, flush, method == "cuda-graph")[0]
    samples, refs, why = _loop(take, take_ref, opts, started)
    return Timing(samples, refs, method, time.perf_counter() - started, why)


def time_callable(
    fn: Callable[[], object],
    device: str,
    reference: Callable[[], object] | None = None,
    opts: TimingOptions | None = None,
) -> Timing:
    """Time `fn` on `device` ("cpu" or "cuda[:i]") with the matching timer."""
    if str(device).startswith("cuda"):
        return time_cuda(fn, reference, opts)
    return time_cpu(fn, reference, opts)


# ---------------------------------------------------------------- peak throughput

# Large enough to be compute-bound, several sizes because the fastest one differs by card and dtype: on the
# H200 a single 8192^3 bf16 GEMM measured 650 TFLOP/s while cuBLAS at 4096^3 reached 669 in the same run
# (a long GEMM draws more power and clocks lower), so one size put kernels at 103% of "peak".
GPU_PEAK_SHAPES = ((4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192))
CPU_PEAK_SHAPES = ((512, 512, 512), (1024, 1024, 1024))


@dataclass(frozen=True)
class Peak:
    """The best library GEMM throughput measured here: `tflops` at `shape`, and every median measured."""

    tflops: float
    shape: tuple[int, int, int]
    per_shape: dict[str, float]  # "MxNxK" -> best median TFLOP/s over the passes
    method: str
    elapsed_s: float


def _library_gemm(m: int, n: int, k: int, device: str, dtype: torch.dtype) -> Callable[[], object]:
    """The library GEMM a peak is measured with: torch.mm, or for float8 torch._scaled_mm (what a float8
    case calls; B column-major as it requires)."""
    import torch

    a = torch.randn(m, k, device=device).to(dtype)
    if dtype == torch.float8_e4m3fn:
        b = torch.randn(n, k, device=device).to(dtype).t()
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)
    b = torch.randn(k, n, device=device).to(dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    return lambda: torch.mm(a, b, out=out)


def library_peak(
    device: str,
    dtype: torch.dtype,
    opts: TimingOptions | None = None,
    shapes: tuple[tuple[int, int, int], ...] | None = None,
    time_per_shape_s: float = 0.25,
    passes: int | None = None,
    budget_s: float = 3.0,
) -> Peak:
    """Best median throughput of torch.mm (cuBLAS, oneDNN/MKL) over `shapes`, timed by `time_callable`
    with the caller's options (L2 flush, CUDA-graph rule, CPU threads), so a kernel and its peak are timed
    alike. On the GPU the shapes are measured in two interleaved passes and the best median kept: the first
    measurement of a run can catch the clocks still ramping up from idle. Inputs are randn, like the cases'
    (a GEMM's power draw, hence its clock, depends on the values it multiplies). Shapes go small to large
    and none is started after `budget_s`: a dtype the CPU only emulates (bf16 without AVX512-BF16) takes
    seconds per 1024^3 call, and the peak must stay cheap."""
    import torch

    gpu = str(device).startswith("cuda")
    shapes = shapes or (GPU_PEAK_SHAPES if gpu else CPU_PEAK_SHAPES)
    passes = passes or (2 if gpu else 1)
    base = opts or TimingOptions()
    # A tighter CI than the default: the peak divides every % of peak of the run.
    opts = replace(
        base,
        max_time_s=time_per_shape_s,
        rel_ci=min(base.rel_ci, 0.005),
        warmup_s=max(base.warmup_s, 0.1),
        min_samples=min(base.min_samples, 5),
    )
    started = time.perf_counter()
    best: dict[str, float] = {}
    method = ""
    for _ in range(passes):
        for m, n, k in shapes:
            if best:  # its first batch of samples, at the best throughput so far
                # What a shape costs at least: its warm-up, then sampling until the CI or the time cap.
                gemm_s = 2 * m * n * k / (max(best.values()) * 1e12)
                cost = opts.warmup_s + max(opts.max_time_s, gemm_s * max(opts.batch, opts.min_samples))
                if time.perf_counter() - started + cost > budget_s:
                    continue
            gemm = _library_gemm(m, n, k, device, dtype)
            with torch.no_grad():
                t = time_callable(gemm, str(device), opts=opts)
            key = f"{m}x{n}x{k}"
            best[key] = max(best.get(key, 0.0), 2 * m * n * k / t.summary.median / 1e12)
            method = t.method
            del gemm  # frees its operands before the next, larger shape
    top = max(best, key=best.__getitem__)
    shape = tuple(int(d) for d in top.split("x"))
    return Peak(best[top], (shape[0], shape[1], shape[2]), best, method, time.perf_counter() - started)
