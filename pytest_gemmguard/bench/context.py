"""Per-session state of the measuring half: its settings, the budget and baseline in force, the results,
and what is measured once per run (the peak, cold compiles)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..cases.ops import DTYPES
from .budget import Budget
from .gpu_lock import gpu_lock
from .measurement import Measurement
from .timing import TimingOptions


@dataclass
class Settings:
    cold_compile: bool = True
    compile_samples: int = 1  # cold compiles per case, each in a fresh process (>= 5 for a significance test)
    verify: bool = True
    reference: bool = True
    inconclusive: str = "fail"  # --gemm-inconclusive: fail | warn
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
        self._one_thread: dict[tuple[str, str], float] = {}  # the library's best on one CPU thread (_measure)
        self._cold: dict[str, dict] = {}

    def peak_tflops(
        self, device: str, dtype: str, achieved_tflops: float | None = None, remeasure: bool = False
    ) -> float:
        """The denominator of % of peak: this machine's best library GEMM throughput, measured once per run
        and (device, dtype) by `peak.library_peak` with this run's timing options, so it is timed exactly
        like the kernels; on a CPU running several threads, the library on one thread too (`_measure`), so
        the peak bounds what the library reaches under the load the kernels meet. A kernel faster than it
        (`achieved_tflops`, when the caller passes its own) keeps its honest % above 100, and a warning says
        so: the measured peak is then too low, not the kernel faster than the hardware. `remeasure`: measure
        again and keep the higher (a peak measured under load is too low)."""
        key = (device, dtype)
        if key not in self._peaks or remeasure:
            self._measure(device, dtype)
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

    def ceiling_tflops(self, device: str, dtype: str) -> tuple[float, str]:
        """The most a kernel timed like the case's can do on this machine, measured now, and how it was found:
        what refuses a timing as impossible (measure.py). The peak is measured again (one measured under load
        is too low); on a CPU running n threads, n times the library's best on one thread bounds it too, since
        n threads do at most n times what one does, and a load that stalls multi-threaded calls only slows a
        single thread down (2 cores, one kept busy: 0.02 TFLOP/s fp32 at best on 2 threads, 0.17 on one)."""
        peak = self.peak_tflops(device, dtype, remeasure=True)
        threads, one = _cpu_threads(device), self._one_thread.get((device, dtype), 0.0)
        if threads <= 1 or not one:
            return peak, f"{peak:.4g} TFLOP/s measured for the library GEMM"
        ceiling = max(peak, threads * one)
        how = f"the library GEMM measured {peak:.4g} TFLOP/s, and {one:.4g} on one thread"
        return ceiling, f"{how}: at most {ceiling:.4g} on {threads} threads"

    def _measure(self, device: str, dtype: str) -> None:
        """Measure the library GEMM in `dtype` on `device` (peak.library_peak), keeping the best of the run: at
        this run's threads, and on a CPU running several threads on one thread too (a load stalls a call whose
        threads wait for a busy core: with one of 2 cores kept busy the fastest 2-thread sample, 512^3 or
        1024^3 fp32, ran at 0.02 TFLOP/s and one thread at 0.17, so several threads alone bound nothing)."""
        from .peak import CPU_ONE_THREAD_SHAPES

        key = (device, dtype)
        best = self._library(device, dtype, self.settings.timing)
        if _cpu_threads(device) > 1:
            one = self._library(device, dtype, replace(self.settings.timing, cpu_threads=1), CPU_ONE_THREAD_SHAPES)
            self._one_thread[key] = max(one, self._one_thread.get(key, 0.0))
            best = max(best, one)
        self._peaks[key] = max(best, self._peaks.get(key, 0.0))

    def _library(self, device: str, dtype: str, timing: TimingOptions, shapes: tuple | None = None) -> float:
        """The library GEMM's best throughput in `dtype` on `device`, timed with `timing` (peak.library_peak)."""
        import torch

        from .peak import library_peak

        with gpu_lock(device), torch.no_grad():
            tflops = library_peak(device, DTYPES[dtype], timing, shapes).tflops
            if dtype.startswith("float8") and not str(device).startswith("cuda"):
                # A CPU has no float8 units: a float8 GEMM there upcasts, and Inductor's compile beat the
                # library's own CPU _scaled_mm 66x on a 64^3 case (2026-12-05). float32's mm bounds it.
                tflops = max(tflops, library_peak(device, DTYPES["float32"], timing, shapes).tflops)
        return tflops

    def cold(self, job: dict, progress: Callable[[str], None] | None = None) -> dict:
        from . import coldcompile

        key = repr(sorted(job.items()))
        if key not in self._cold:
            self._cold[key] = coldcompile.measure_repeated(job, self.settings.compile_samples, progress)
        return self._cold[key]


def _cpu_threads(device: str) -> int:
    """The threads a CPU kernel timed now may run on (torch's count, at most the cores this process may use);
    1 on a GPU, whose kernels no host thread count bounds."""
    if str(device).startswith("cuda"):
        return 1
    import os

    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(torch.get_num_threads(), cores))
