"""Timing a callable: CPU wall clock, or CUDA events on the GPU. Samples are seconds per call.

Both timers warm up first, then take samples in batches. An optional `reference` callable is measured in
the same loop, *interleaved*: sample i of the target and sample i of the reference are taken back to back,
in a random order per pair, so a burst of contention (a neighbour, a clock change) that slows one slows the
other too and cancels in their ratio (issue 13: on a 2-core CPU with one core kept busy, separate blocks of
samples gave per-run intervals of 29-107%). The estimate that matters is then the median of those paired
ratios (verdict.py); without a reference, the median of the samples.

Stopping rule (after nvbench's: sample until the noise of the estimate is below a target or a time cap):
stop when the estimate's noise (log half-width of its 95% interval) is within `rel_ci` (default 1%) and
there are `min_samples`; or at `max_time_s` if the noise is within `noise_target` (what the verdict needs
for its threshold, set by the fixture; None: no such need); else keep sampling until the noise gets there or
`NOISE_TIME_FACTOR` x `max_time_s` is spent ("time cap, noisy": the verdict will then say inconclusive
rather than guess). `max_samples` caps the count.

GPU: every sample is bracketed by a pair of CUDA events on the current stream; before each sample a buffer
larger than L2 is overwritten so the GEMM reads its operands from HBM, as it would inside a model (the flush
runs outside the events). With `cuda_graph=True`, or "auto" when the call is launch-bound (the host takes at
least half as long to issue it as the GPU takes to run it), `graph_calls` calls are captured in one CUDA
graph and each sample is one replay divided by `graph_calls`: no host time in the samples, and operands
stay in L2 between those calls. torch.cuda is imported only in the GPU path.

The denominator of "% of peak" is measured with these same timers and options (peak.py).
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .stats import Summary, summarize
from .verdict import Estimate, estimate


@dataclass
class Timing:
    """Samples (seconds per call) of the target and, if one was given, of the reference."""

    samples: list[float]
    ref_samples: list[float] = field(default_factory=list)
    method: str = "cpu"  # "cpu" | "cuda-events" | "cuda-graph"
    elapsed_s: float = 0.0
    stopped: str = ""  # "converged" | "time cap" | "time cap, noisy" | "sample cap"

    @property
    def summary(self) -> Summary:
        return summarize(self.samples)

    @property
    def ref_summary(self) -> Summary | None:
        return summarize(self.ref_samples) if self.ref_samples else None

    @property
    def estimate(self) -> Estimate:
        """The median paired ratio to the reference (samples[i] / ref_samples[i]), or without a reference
        the median of the samples, with its interval: what the verdict judges."""
        return estimate(self.samples, self.ref_samples)


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
    noise_target: float | None = None  # past max_time_s, keep sampling while the noise is above this
    seed: int = 0  # of the random order within pairs: reproducible, and no fixed slot for periodic noise


# How much longer than max_time_s a measurement may sample while its noise is too high for the verdict.
NOISE_TIME_FACTOR = 3.0


def _stop(samples: list[float], refs: list[float], opts: TimingOptions, elapsed: float) -> str:
    """Why to stop now ('' to go on): the stopping rule of the module doc."""
    n = len(samples)
    enough = n >= opts.min_samples
    noise = estimate(samples, refs).noise if enough else math.inf
    if enough and noise <= opts.rel_ci:
        return "converged"
    if n >= opts.max_samples:
        return "sample cap"
    if enough and elapsed > opts.max_time_s:
        if opts.noise_target is None or noise <= opts.noise_target:
            return "time cap"
        if elapsed > opts.max_time_s * NOISE_TIME_FACTOR:
            return "time cap, noisy"
    return ""


def _loop(one_target, one_ref, settle, opts: TimingOptions, started: float) -> tuple[list, list, str]:
    """Batches of samples; with a reference, pairs in a random order. `one_*()` starts one sample and
    returns a function giving its seconds once `settle()` has run (the GPU reads its events after one
    synchronize per batch)."""
    rng = random.Random(opts.seed)
    samples: list[float] = []
    refs: list[float] = []
    while True:
        pending_t, pending_r = [], []
        enabled = gc.isenabled()
        gc.disable()  # a collection inside one sample of a pair would land on one side only
        try:
            for _ in range(opts.batch):
                if one_ref is None:
                    pending_t.append(one_target())
                elif rng.random() < 0.5:
                    pending_t.append(one_target())
                    pending_r.append(one_ref())
                else:
                    pending_r.append(one_ref())
                    pending_t.append(one_target())
            settle()
        finally:
            if enabled:
                gc.enable()
        samples += [p() for p in pending_t]
        refs += [p() for p in pending_r]
        why = _stop(samples, refs, opts, time.perf_counter() - started)
        if why:
            return samples, refs, why


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

    def one() -> Callable[[], float]:
        t0 = clock()
        for _ in range(calls):
            fn()
        value = (clock() - t0) * 1e-9 / calls
        return lambda: value

    return one, calls


def time_cpu(
    fn: Callable[[], object], reference: Callable[[], object] | None = None, opts: TimingOptions | None = None
) -> Timing:
    opts = opts or TimingOptions()
    started = time.perf_counter()
    with _threads(opts.cpu_threads):
        one, _ = _cpu_sampler(fn, opts)
        one_ref = _cpu_sampler(reference, opts)[0] if reference is not None else None
        samples, refs, why = _loop(one, one_ref, lambda: None, opts, started)
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

    def one() -> Callable[[], float]:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if flush is not None and graph is None:
            flush()
        s.record(stream)
        if graph is not None:
            graph.replay()
        else:
            fn()
        e.record(stream)
        return lambda: s.elapsed_time(e) * 1e-3 / calls  # read after the batch's synchronize

    return one, ("cuda-graph" if graph is not None else "cuda-events"), calls


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
    one, method, _ = _gpu_sampler(fn, opts, flush, opts.cuda_graph)
    one_ref = None
    if reference is not None:
        # The reference is timed the same way as the target, so their ratio compares like with like.
        one_ref = _gpu_sampler(reference, opts, flush, method == "cuda-graph")[0]
    samples, refs, why = _loop(one, one_ref, torch.cuda.synchronize, opts, started)
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
