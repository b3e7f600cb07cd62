"""CUTEDSL: GEMMs written in NVIDIA's CuteDSL, through the best route this machine has.

Routes, in order: Inductor NVGEMM (`cutlass.operators` on torch >= 2.14, the preview `cutlass_api`
before), Inductor's CUTEDSL backend (a Blackwell grouped GEMM), and otherwise none. The probe names
the route it found; results carry it as cutedsl[nvgemm] and so on.
"""

from __future__ import annotations

from ..provenance import KernelLaunch
from .base import Backend, Probe, cuda_probe, gpu_detail, missing_module


def _torch_at_least(major: int, minor: int) -> bool:
    import torch

    parts = torch.__version__.split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


class CuteDslBackend(Backend):
    name = "cutedsl"
    inductor_name = "NVGEMM"
    summary = "CuteDSL GEMMs: Inductor NVGEMM, or Inductor CUTEDSL on Blackwell"
    route = "nvgemm"

    def probe(self) -> Probe:
        problem = cuda_probe((8, 0)) or missing_module("cutlass", "nvidia-cutlass-dsl")
        if problem:
            return problem
        import torch

        if torch.cuda.get_device_capability() >= (10, 0):
            self.inductor_name, self.route = "CUTEDSL", "inductor-cutedsl"
            return Probe(True, detail=f"{gpu_detail()}, route {self.route}")
        if _torch_at_least(2, 14):
            problem = missing_module("cutlass.operators", "nvidia-cutlass-operators")
        else:
            problem = missing_module("cutlass_api", "the python/cutlass_api folder of NVIDIA/cutlass")
        if problem:
            return problem
        return Probe(True, detail=f"{gpu_detail()}, route {self.route}")

    def claims(self, launch: KernelLaunch) -> bool:
        return "nv_universal_gemm" in launch.name or launch.name.startswith("cutedsl")


BACKEND = CuteDslBackend()
