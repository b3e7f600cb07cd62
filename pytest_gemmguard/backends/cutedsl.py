"""CUTEDSL: GEMMs written in NVIDIA's CuteDSL, through the best route this machine has.

Routes, in the order the probe tries them:

* `inductor-cutedsl`: Inductor's CUTEDSL backend, a grouped GEMM for Blackwell (SM100+) only; on
  Hopper and older it is reported, never used.
* `nvgemm`: Inductor's NVGEMM backend (NVIDIA Universal GEMM). torch >= 2.14 takes it from
  `cutlass.operators` (pip nvidia-cutlass-operators); torch 2.11 to 2.13 from the preview `cutlass_api`
  package, which has no wheel (it installs from the `python/cutlass_api` folder of NVIDIA/cutlass). On
  SM90 with torch 2.11 only its SM80 tensor-op GEMM qualifies: fp16/bf16, no epilogue fusion.

* `quack` (backends/cutedsl_quack.py): where Inductor has no CuteDSL GEMM for a case, the runner tries
  gemmguard's own route, which swaps the GEMM for quack's CuteDSL kernel inside Inductor's graph.

The probe's detail names the route; `describe_kernel` names the CuteDSL kernel class that ran, so a
result reads as cutedsl[nvgemm] or cutedsl[quack] with the kernel behind it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .._compat import inductor
from .base import GPU_INSTALL, Backend, Probe, cuda_probe, gpu_detail, missing_module
from .provenance import KernelLaunch
from .settings import backend_env

_KERNEL_CLASS = re.compile(r"\b(Sm\d+\w*(?:Gemm|Kernel)\w*)")
_KERNEL_BY_NAME = re.compile(r"get_kernel_by_name\(\s*['\"]([^'\"]+)['\"]")


def _torch_at_least(major: int, minor: int) -> bool:
    import torch

    parts = torch.__version__.split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


class CuteDslBackend(Backend):
    """CuteDSL GEMMs: Inductor NVGEMM (CUTEDSL on Blackwell), else gemmguard's quack route."""

    name = "cutedsl"
    quack_route = "cutedsl[quack]"
    _route: str | None = None  # set to pin a route (tests); otherwise the cached probe's

    @property
    def route(self) -> str:
        """The route this machine resolves to (read from the cached probe; the probe itself changes nothing)."""
        from . import probe

        return self._route or probe(self.name).route or "nvgemm"

    @route.setter
    def route(self, value: str) -> None:
        self._route = value

    @property
    def inductor_name(self) -> str:  # type: ignore[override]
        return {"inductor-cutedsl": "CUTEDSL", "quack": "ATEN"}.get(self.route, "NVGEMM")

    @property
    def fallback(self) -> str | None:  # type: ignore[override]
        """Where NVGEMM has no kernel for a case, the quack route; none when cutedsl already is that route."""
        return None if self.route == "quack" else self.quack_route

    def probe(self) -> Probe:
        problem = cuda_probe((8, 0)) or missing_module("cutlass", "nvidia-cutlass-dsl")
        if problem:
            return problem
        import torch

        dsl = f"nvidia-cutlass-dsl {_version('nvidia-cutlass-dsl')}"
        if torch.cuda.get_device_capability() >= (10, 0):
            route = "inductor-cutedsl"
            return Probe(True, detail=f"{gpu_detail()}, {dsl}, route cutedsl[{route}]", route=route)
        if _torch_at_least(2, 14):
            problem = missing_module("cutlass.operators", "nvidia-cutlass-operators")
            provider = f"cutlass.operators {_version('nvidia-cutlass-operators')}"
        else:
            problem = missing_module(
                "cutlass_api",
                "cutlass_api",
                f"torch {torch.__version__} needs NVIDIA's preview cutlass_api ({GPU_INSTALL})",
            )
            provider = "cutlass_api (preview, from NVIDIA/cutlass)"
        if problem:
            return self._quack_only(problem)
        return Probe(
            True,
            detail=f"{gpu_detail()}, {dsl}, route cutedsl[nvgemm] via {provider}; "
            "Inductor CUTEDSL skipped (Blackwell-only grouped GEMM)",
            route="nvgemm",
        )

    def _quack_only(self, nvgemm_problem: Probe) -> Probe:
        """Without an NVGEMM provider, cutedsl is gemmguard's quack route alone (if that can run here)."""
        from . import probe

        quack = probe(self.quack_route)
        if not quack.available:
            return nvgemm_problem
        detail = f"{quack.detail}; Inductor NVGEMM unavailable ({nvgemm_problem.reason})"
        return Probe(True, detail=detail, route="quack")

    @property
    def _delegate(self) -> Backend | None:
        """The quack route's backend, when cutedsl resolved to it alone."""
        from . import get

        return get(self.quack_route) if self.route == "quack" else None

    def prepare(self):
        return self._delegate.prepare() if self._delegate is not None else None

    def warm_up(self) -> Callable[[], None] | None:
        # The NVGEMM route's first compile in a process lists cutlass_api's kernels (Python only): 20.7 s of the
        # first example's 45.2 s on the H200 (torch 2.11, profiled with cProfile on 2026-12-03).
        return inductor.build_nvgemm_kernel_list if self.inductor_name == "NVGEMM" else None

    def inductor_options(self) -> dict[str, Any]:
        if self._delegate is not None:
            return self._delegate.inductor_options()
        options = super().inductor_options()
        options["max_autotune_gemm_backends"] = self.inductor_name
        if self.inductor_name == "NVGEMM" and inductor.has_config("nvgemm_max_profiling_configs"):
            options["nvgemm_max_profiling_configs"] = backend_env("GEMMGUARD_NVGEMM_CONFIGS", 3)
        return options

    def repro_option_sources(self) -> dict[str, tuple[str, str]]:
        return self._delegate.repro_option_sources() if self._delegate is not None else {}

    def claims(self, launch: KernelLaunch) -> bool:
        if self._delegate is not None:
            return self._delegate.claims(launch)
        if launch.kind in ("extern", "custom"):  # library calls; the quack route's op is its own backend's
            return False
        return "nv_universal_gemm" in launch.name or launch.name.startswith("cutedsl")

    def describe_kernel(self, launch: KernelLaunch) -> str:
        if self._delegate is not None:
            return self._delegate.describe_kernel(launch)
        if not self.claims(launch):
            return launch.name
        named = _KERNEL_BY_NAME.search(launch.source)
        found = named.group(1) if named else next(iter(_KERNEL_CLASS.findall(launch.source)), "")
        route = f"cutedsl[{self.route}]"
        return f"{launch.name} ({route}{', ' + found if found else ''})"


BACKEND = CuteDslBackend()
