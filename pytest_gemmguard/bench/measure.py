"""What one `gemm_benchmark(...)` call does: verify, compile with provenance, time, record.

One call measures one case through the test's backend:
  1. check the case like `gemm.check` (float64 oracle, provenance: the backend's own GEMM kernel ran);
  2. time the compiled callable (timing.py) side by side with an in-run reference, the eager op at the
     same shape and dtype (ATen: cuBLAS or oneDNN/MKL), so run-to-run drift cancels in the ratio;
  3. cold and warm compile time in a fresh subprocess (coldcompile.py), once per case per session, as
     `compile_samples` samples (each its own process and empty cache) for a significance test;
  4. TFLOP/s and the fraction of this machine's peak, measured once per run with a large library GEMM.
Budgets and the baseline are judged by the fixture (fixture.py), from the Measurement returned here.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from .. import backends
from ..cases.case import GemmCase, case_function
from ..cases.ops import OPS
from ..cases.precision import math_precision
from ..errors import MeasurementError
from ..gpus import timing_gpu
from .context import BenchContext
from .gpu_lock import gpu_lock
from .measurement import SAMPLES_KEPT, Measurement
from .timing import Timing, TimingOptions, time_callable


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


def measure(
    ctx: BenchContext,
    backend_name: str,
    case: GemmCase,
    fn: Callable[..., Any] | None,
    test_id: str,
    instrument: Callable | None = None,
    noise_target: float | None = None,
) -> Measurement:
    """Verify, compile, time. On the CPU with `cpu_threads` set, the compile happens under that thread
    count too: Dynamo guards on it, so changing it only for timing would time a recompile. `noise_target`:
    the noise the verdict's threshold needs (verdict.noise_target); the timer samples longer to reach it."""
    from .timing import _threads

    on_cpu = not backends.get(backend_name).device().startswith("cuda")
    # The case decides TF32 vs IEEE float32 for the check, the timed compile and the reference alike; no
    # compile-ahead worker runs while the benchmark autotunes and times (session.quiet).
    threads = ctx.settings.timing.cpu_threads if on_cpu else None
    with ctx.session.quiet(), _threads(threads), math_precision(case.dtype):
        from ..compile.compiler import run_checked
        from ..run.gemm import Gemm, example_of

        session = ctx.session
        backend = backends.get(backend_name)
        device = backend.device()
        gemm = Gemm(case, backend_name, session, test_id)
        example_of(gemm).use_ahead = False
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
        session.progress(f"{label}: timing (interleaved with eager ATen, the in-run reference)")
        flops = 2.0 * math.prod(case.shape)
        opts = replace(ctx.settings.timing, noise_target=noise_target)
        timing, timing_note = _time_believably(ctx, compiled, flat, target, device, instrument, case, flops, opts)
        s = timing.summary
        est = timing.estimate
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
            ref_samples=timing.ref_samples[:SAMPLES_KEPT],
            ratio=est.value if est.paired else None,
            ratio_low=est.low if est.paired else None,
            ratio_high=est.high if est.paired else None,
            ratio_n=est.n,
            noise=est.noise if math.isfinite(est.noise) else None,
            flops=flops,
            peak_tflops=None,  # set below, from the measurement's own TFLOP/s
            compile_s=record.compile_s,
            kernels=kernels,
            gpu=timing_gpu(device),
            when=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        )
        m.peak_tflops = ctx.peak_tflops(device, case.dtype, achieved_tflops=m.tflops)
        m.timing_note = timing_note
        if ctx.settings.cold_compile:
            fn_ref = _importable(fn)
            if fn is not None and fn_ref is None:
                m.cold_error = (
                    "fn is not importable by a fresh process (a lambda or closure): cold compile not measured"
                )
            else:
                dynamic = session.compiler.dynamic
                job = {
                    "backend": backend_name,
                    "backend_module": type(backend).__module__,  # a conftest-registered backend, in the child
                    "case": asdict(case),
                    "fn": fn_ref,
                    "dynamic": dynamic,
                }
                cold = ctx.cold(job, lambda line: session.progress(f"{label}: {line}"))
                m.cold_error = cold.get("error")
                m.cold_compile_s, m.warm_compile_s = cold.get("cold_s"), cold.get("warm_s")
                m.cold_compile_samples = cold.get("cold_samples", [])
                m.warm_compile_samples = cold.get("warm_samples", [])
                m.cold_phases = cold.get("cold_phases", {})
        return m


def _time(
    ctx: BenchContext,
    compiled: Any,
    flat: tuple,
    target: Callable,
    device: str,
    instrument: Callable | None,
    opts: TimingOptions,
) -> Timing:
    with compiled.hot(flat) as hot, gpu_lock(device):
        timed = instrument(hot) if instrument is not None else hot
        reference = (lambda: target(*flat)) if ctx.settings.reference else None
        return time_callable(timed, device, reference, opts)


# A kernel this much faster than the best library GEMM measured on this machine in this run (on a CPU, than
# one thread's best times the threads: context.ceiling_tflops) did not run inside the timer: the timer missed
# it. Seen on the H200 (2026-12-01): NVGEMM's CuteDSL kernel is not captured into a CUDA graph, so graph
# replays timed nothing (0.18 us for a 4096x1024x4096 bf16 mm, "26770% of peak"); CUDA events around the same
# calls measured 383 TFLOP/s.
IMPOSSIBLE_FRACTION_OF_PEAK = 1.5


def _time_believably(
    ctx: BenchContext,
    compiled: Any,
    flat: tuple,
    target: Callable,
    device: str,
    instrument: Callable | None,
    case: GemmCase,
    flops: float,
    opts: TimingOptions,
) -> tuple[Timing, str]:
    """Time, and refuse a result no GEMM could reach: a CUDA-graph timing is retaken with events, and a
    timing that is still impossible is a MeasurementError (never a fast number in a report or baseline)."""
    timing = _time(ctx, compiled, flat, target, device, instrument, opts)
    peak = ctx.peak_tflops(device, case.dtype)

    def tflops(t: Timing) -> float:
        median = t.summary.median
        return flops / median / 1e12 if median > 0 else float("inf")

    if tflops(timing) <= IMPOSSIBLE_FRACTION_OF_PEAK * peak:
        return timing, ""
    # A peak measured while the machine was busy is too low (on the 2-core CPU with one core kept busy, the
    # library's 512^3 mm took 6.7 ms instead of 2.7 ms, and a correct 128^3 mm was refused 3 times in 8):
    # before blaming the timer, compare with the most this machine can do, measured now (on a CPU, a bound
    # that no load lowers: one thread's best times the threads; context.ceiling_tflops).
    ceiling, how = ctx.ceiling_tflops(device, case.dtype)
    if tflops(timing) <= IMPOSSIBLE_FRACTION_OF_PEAK * ceiling:
        return timing, ""
    first = f"{timing.method} timing gave {tflops(timing):.4g} TFLOP/s, {tflops(timing) / ceiling:.1f}x the most"
    first += " this machine can do"
    # Time the kernel again, right after its peak: a CUDA graph that did not capture the kernel is retaken
    # with events; any other timing is retaken as it was, since on a busy machine the kernel's samples and
    # the peak's can meet different loads (a timer that never sees the kernel is impossible both times).
    graph = timing.method == "cuda-graph"
    retimed = _time(ctx, compiled, flat, target, device, instrument, replace(opts, cuda_graph=False) if graph else opts)
    if tflops(retimed) <= IMPOSSIBLE_FRACTION_OF_PEAK * ceiling:
        if graph:
            return retimed, f"{first}: the graph did not capture the kernel; timed with CUDA events instead"
        return retimed, f"{first} (the machine's load changed?); timed again: {tflops(retimed):.4g} TFLOP/s"
    first += f"; {'CUDA events' if graph else 'timed again, it'} then gave {tflops(retimed):.4g} TFLOP/s"
    raise MeasurementError(
        f"gemmguard: {compiled.backend.name} {case.describe()}: {first} ({how}): the timer cannot have seen the "
        "kernel run, so this measurement is refused"
    )
