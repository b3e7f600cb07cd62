"""What every backend file provides: a probe, Inductor options, and a claim on its own kernels."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .provenance import KernelLaunch

# Where the one GPU install path is written down; every GPU probe's fix points there.
GPU_INSTALL = "README, GPU install"
# The extra of this package (pyproject.toml [project.optional-dependencies]) that installs each optional
# module a probe looks for; tests/test_gpu_install.py checks each against pyproject.toml.
EXTRAS = {
    "triton": ("gpu", "triton"),
    "cutlass_library": ("cutlass", "nvidia-cutlass"),
    "cutlass": ("cutedsl", "nvidia-cutlass-dsl"),
    "quack": ("cutedsl", "quack-kernels"),
    "cutlass.operators": ("cutedsl", "nvidia-cutlass-operators"),
}


@dataclass(frozen=True)
class Probe:
    """Whether a backend can run here; if not, the exact reason and the fix."""

    available: bool
    reason: str = ""
    fix: str = ""
    detail: str = ""  # what it will use when available: device, versions, route
    route: str = ""  # for a backend with several routes (cutedsl): the one this machine resolves to

    def line(self) -> str:
        if self.available:
            return f"ok ({self.detail})" if self.detail else "ok"
        return f"unavailable: {self.reason}" + (f"; fix: {self.fix}" if self.fix else "")


class Backend:
    """One Inductor GEMM backend. Subclasses set the class attributes and override what differs."""

    name: str = ""
    inductor_name: str = ""  # its value in Inductor's max_autotune_gemm_backends
    # Inductor's CPP GEMM template only fires for a constant second operand: such backends compile
    # cases with the op's weight operands frozen into the graph (nn.Linear style, under no_grad).
    freezes_weights: bool = False
    # Another registered backend to try, case by case, where this one runs no kernel of its own.
    fallback: str | None = None
    # Whether --gemm-backends=auto includes it where it can run (gemmguard's own kernels are named instead).
    in_auto: bool = True
    # Its CPU kernels are code Inductor writes with the thread count fixed at compile time (the CPP template):
    # --gemm-fewer-threads=auto runs them again with fewer OpenMP threads (crosscheck/threads.py).
    writes_cpu_kernels: bool = False

    def probe(self) -> Probe:
        """Whether this backend can run here. Free of side effects: it reports, it changes nothing."""
        raise NotImplementedError

    def prepare(self) -> Callable[[], None] | None:
        """Set up what the process needs before compiling through this backend (an environment variable, a
        timing hook); returns the undo, which the compiler calls whenever it switches to another backend and
        when the session ends (and prepares again when this backend runs again), so the backend leaves the
        process as it found it. What compiles change besides is the compiler's to take out (compile/isolation.py)."""
        return None

    def warm_up(self) -> Callable[[], None] | None:
        """Optional: one-time setup each process would pay at its first compile through this backend (a kernel
        library listing its kernels), or None. The test process runs it in a thread while it waits for the
        first case's compile-ahead worker, with this backend in use (compile.Compiler.warm). It runs in the
        test process before any worker tried the backend, so it must be setup that cannot crash the process
        (a kernel compile belongs in the worker); a failure is left to the compile, which meets it again."""
        return None

    def device(self) -> str:
        return "cuda"

    def parallel_builds(self) -> int:
        """How many of one autotuning's builds run in an outside compiler (nvcc: a process each, the
        Python thread that started it waiting), and so side by side where Inductor has as many compile
        threads. A compile-ahead worker gets that many for this backend's cases (ahead/policy.py's job_threads)."""
        return 1

    def inductor_options(self) -> dict[str, Any]:
        """Inductor config for a compile through this backend alone, under max-autotune."""
        return {
            "max_autotune": True,
            "max_autotune_gemm": True,
            "max_autotune_gemm_backends": self.inductor_name,
            # Coordinate descent may rewrite an M == 1 or N == 1 GEMM into a reduction; keep it off so
            # what runs is the backend's template (a rewrite is still caught by provenance).
            "coordinate_descent_tuning": False,
        }

    def claims(self, launch: KernelLaunch) -> bool:
        """True when `launch` is a GEMM kernel of this backend."""
        raise NotImplementedError

    def refuses(self, case: Any) -> str | None:
        """Optional: why no GEMM of the case's own function (a GemmCase, not a user's function) can be this
        backend's, decided from the case alone where the backend's own rule says so exactly; None: compile and
        see. The case is then unsupported without a compile (never a pass: no kernel of it ran)."""
        return None

    def takes(self, case: Any) -> str | None:
        """Optional: when every GEMM like the case's (a GemmCase) is one this backend has kernels for, the rule
        that says so, in a few words (Inductor's Triton templates take every float mm); else None. A case it
        takes that Inductor then finds no valid choice for is a finding (errors.BackendRefused), not
        "unsupported". Name only what the backend takes at every size and layout: a rule too wide turns a
        legitimate refusal into a false red."""
        return None

    def refusals(self) -> list[str]:
        """Optional: why this backend's own route left GEMMs to another backend in the compiles since
        `forget_refusals` (a route that swaps in a kernel of its own knows; Inductor's backends do not)."""
        return []

    def forget_refusals(self) -> None:
        """Called before each run, so `refusals` speaks of that run's compiles only."""

    def repro_option_sources(self) -> dict[str, tuple[str, str]]:
        """For Inductor options whose values are objects (a graph pass): option -> (module, expression) that
        rebuilds the value in a standalone repro script."""
        return {}

    def describe_kernel(self, launch: KernelLaunch) -> str:
        """Optional: which of this backend's templates or kernels `launch` is (for reports)."""
        return launch.name


FLOAT_GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "linear")
FLOAT_GEMM_DTYPES = ("float32", "tf32", "float16", "bfloat16")


def float_gemm(case: Any) -> bool:
    """Whether the case is a plain float GEMM (mm, addmm, bmm, baddbmm, linear in float32, TF32, float16 or
    bfloat16), not a scaled fp8 one: what Inductor's ATen call and Triton templates take at every size (takes)."""
    return case.op in FLOAT_GEMM_OPS and case.dtype in FLOAT_GEMM_DTYPES


def cuda_probe(min_capability: tuple[int, int] = (7, 0)) -> Probe | None:
    """None when a CUDA device of at least `min_capability` is present; else why not."""
    import torch

    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return Probe(
                False,
                f"torch {torch.__version__} is a CPU-only build",
                f"install a CUDA build of torch ({GPU_INSTALL})",
            )
        return Probe(False, "no CUDA device visible", "run on a machine with an NVIDIA GPU")
    cap = torch.cuda.get_device_capability()
    if cap < min_capability:
        need = ".".join(map(str, min_capability))
        return Probe(False, f"compute capability {cap[0]}.{cap[1]} < {need}", f"use a GPU with SM >= {need}")
    return None


def missing_module(module: str, pip_name: str, fix: str | None = None) -> Probe | None:
    """None when `module` imports; else a probe whose fix names this package's extra that provides it (or
    `fix`, for a module no extra can install)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    if fix is None and module in EXTRAS:
        extra, dist = EXTRAS[module]
        fix = f"pip install 'pytest-gemmguard[{extra}]' (brings {dist}; {GPU_INSTALL})"
    return Probe(False, f"Python module {module!r} is not installed", fix or f"pip install {pip_name}")


def gpu_detail() -> str:
    import torch

    cap = torch.cuda.get_device_capability()
    return f"{torch.cuda.get_device_name()}, SM{cap[0]}{cap[1]}, torch {torch.__version__}"
