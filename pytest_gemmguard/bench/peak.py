"""The denominator of "% of peak": the best throughput of the library GEMM (torch.mm, or torch._scaled_mm
for float8) over a few large shapes (GPU: best median; CPU: fastest sample, see `library_peak`), timed by
`timing.time_callable` with the run's own options, so a kernel and its peak are timed alike. Moved out of
timing.py when the interleaved sampling (issue 13) made that module too long to read."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .timing import TimingOptions, time_callable

if TYPE_CHECKING:
    import torch

# Large enough to be compute-bound, several sizes because the fastest one differs by card and dtype: on the
# H200 a single 8192^3 bf16 GEMM measured 650 TFLOP/s while cuBLAS at 4096^3 reached 669 in the same run
# (a long GEMM draws more power and clocks lower), so one size put kernels at 103% of "peak".
GPU_PEAK_SHAPES = ((4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192))
CPU_PEAK_SHAPES = ((512, 512, 512), (1024, 1024, 1024))
# The library on one CPU thread (BenchContext bounds a loaded CPU by it): one thread reaches its best early
# (fp32, 1 thread: 0.168 TFLOP/s at 256^3, 0.174 at 512^3, 0.167 at 1024^3), so the large shape is left out.
CPU_ONE_THREAD_SHAPES = ((256, 256, 256), (512, 512, 512))


@dataclass(frozen=True)
class Peak:
    """The best library GEMM throughput measured here: `tflops` at `shape`, and every median measured."""

    tflops: float
    shape: tuple[int, int, int]
    per_shape: dict[str, float]  # "MxNxK" -> best TFLOP/s over the passes (GPU: of medians; CPU: of samples)
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
    seconds per 1024^3 call, and the peak must stay cheap.

    On the CPU a shape's throughput is its fastest sample's, not the median's: the peak must bound what the
    library reaches, and on a loaded CPU a multi-threaded call whose thread waits for a busy core stalls for
    milliseconds (2 cores shared with other work: 512^3 fp32 on 2 threads had a median of 0.012 TFLOP/s and
    a fastest sample of 0.28), so the median of a stalled run is far below what the same library does
    between stalls. A load only ever slows a CPU sample down, so the fastest one is what the library really
    reached (with one core kept busy even that can stall: BenchContext bounds a CPU kernel by one thread's)."""
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
            seconds = t.summary.median if gpu else min(t.samples)
            best[key] = max(best.get(key, 0.0), 2 * m * n * k / seconds / 1e12)
            method = t.method
            del gemm  # frees its operands before the next, larger shape
    top = max(best, key=best.__getitem__)
    shape = tuple(int(d) for d in top.split("x"))
    return Peak(best[top], (shape[0], shape[1], shape[2]), best, method, time.perf_counter() - started)
