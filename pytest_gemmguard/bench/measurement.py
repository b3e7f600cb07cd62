"""`Measurement`: one benchmarked case, as plain data (what the baseline stores, the reports show and
pytest-benchmark receives), and the budget report of one that broke its budget."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

SAMPLES_KEPT = 2000  # samples stored per measurement (baseline files stay small enough to diff)


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
    status: str = "measured"  # measured | ok | no baseline | inconclusive | failed
    broken: list[str] = field(default_factory=list)
    compared: dict = field(default_factory=dict)
    when: str = ""
    timing_note: str = ""  # how the timing was made believable, when the first method missed the kernel
    # Issue 13: the reference's samples, pair by pair with `samples` (timed interleaved), and the estimate
    # the verdict judges: the median paired ratio with its 95% interval, and its noise (verdict.py).
    ref_samples: list[float] = field(default_factory=list)
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    ratio_n: int = 0
    noise: float | None = None  # log half-width of the estimate's 95% interval (about +-noise relative)
    # Issue 16: which GPU timed it ({index in nvidia-smi -L, uuid, name}; {} on the CPU). The name also keys
    # the baseline entry on a box of mixed GPUs (baseline.py).
    gpu: dict = field(default_factory=dict)

    @property
    def tflops(self) -> float:
        return self.flops / self.median_s / 1e12 if self.median_s > 0 else 0.0

    @property
    def pct_peak(self) -> float | None:
        return 100 * self.tflops / self.peak_tflops if self.peak_tflops else None

    @property
    def ref_ratio(self) -> float | None:
        """Kernel / reference: the median paired ratio when the two were timed in pairs."""
        if self.ratio is not None:
            return self.ratio
        return self.median_s / self.ref_median_s if self.ref_median_s else None

    @property
    def detect(self) -> float | None:
        """The smallest slowdown this measurement could detect against a baseline as quiet as itself."""
        from .verdict import detectable

        return detectable(self.noise) if self.noise is not None else None

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
            "gpu",
        )
        info = {f"gemm_{k}": getattr(self, k) for k in keys}
        info.update(
            gemm_shape=list(self.shape),
            gemm_tflops=round(self.tflops, 3),
            gemm_pct_peak=self.pct_peak,
            gemm_kernels=self.kernels,
        )
        return info


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


def inconclusive_report(m: Measurement) -> str:
    """Why a runtime comparison could not tell: the change, both sides' noise, the smallest change it could
    have detected, whose noise is to blame, and what to do. Not a regression."""
    rt = m.compared.get("runtime", {})
    return "\n".join(
        [
            f"gemmguard: {m.backend} benchmark inconclusive (not a regression: too noisy to tell)",
            f"  case:     {m.op} {'x'.join(map(str, m.shape))} {m.dtype} {m.layout} epilogue={m.epilogue} fn={m.fn}",
            f"  runtime:  {rt.get('describe', '?')}",
            f"  measured: median {_ms(m.median_s)}, n={m.n} pairs, {m.method}, stopped at {m.stopped}",
            "  to decide: rerun on a quieter machine, raise --gemm-bench-time or the runtime_regression threshold; "
            "--gemm-inconclusive=warn lets it pass with a warning",
        ]
    )
