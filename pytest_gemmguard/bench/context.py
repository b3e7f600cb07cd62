"""Per-session state of the measuring half: its settings, the budget and baseline in force, the results,
and what is measured once per run (the peak, cold compiles)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..ops import DTYPES
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
        self._cold: dict[str, dict] = {}

    def peak_tflops(
        self, device: str, dtype: str, achieved_tflops: float | None = None, remeasure: bool = False
    ) -> float:
        """The denominator of % of peak: this machine's best library GEMM throughput, measured once per run
        and (device, dtype) by `peak.library_peak` with this run's timing options, so it is timed exactly
        like the kernels. A kernel faster than it (`achieved_tflops`, when the caller passes its own) keeps
        its honest % above 100, and a warning says so: the measured peak is then too low, not the kernel
        faster than the hardware. `remeasure`: measure again and keep the higher (a peak measured under load
        is too low)."""
        from .peak import library_peak

        key = (device, dtype)
        if key not in self._peaks or remeasure:
            import torch

            with gpu_lock(device), torch.no_grad():
                tflops = library_peak(device, DTYPES[dtype], self.settings.timing).tflops
                if dtype.startswith("float8") and not str(device).startswith("cuda"):
                    # A CPU has no float8 units: a float8 GEMM there upcasts, and Inductor's compile beat the
                    # library's own CPU _scaled_mm 66x on a 64^3 case (2026-12-05). float32's mm bounds it.
                    tflops = max(tflops, library_peak(device, DTYPES["float32"], self.settings.timing).tflops)
            self._peaks[key] = max(tflops, self._peaks.get(key, 0.0))
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

    def cold(self, job: dict, progress: Callable[[str], None] | None = None) -> dict:
        from . import coldcompile

        key = repr(sorted(job.items()))
        if key not in self._cold:
            self._cold[key] = coldcompile.measure_repeated(job, self.settings.compile_samples, progress)
        return self._cold[key]
