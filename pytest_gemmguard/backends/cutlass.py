"""CUTLASS: Inductor's CUTLASS C++ templates, generated as CUDA C++ and built with nvcc."""

from __future__ import annotations

import shutil

from ..provenance import KernelLaunch
from .base import Backend, Probe, cuda_probe, gpu_detail, missing_module


class CutlassBackend(Backend):
    name = "cutlass"
    inductor_name = "CUTLASS"
    summary = "Inductor's CUTLASS C++ templates (nvcc-built)"

    def probe(self) -> Probe:
        problem = cuda_probe((8, 0)) or missing_module("cutlass_library", "nvidia-cutlass")
        if problem:
            return problem
        if shutil.which("nvcc") is None and not shutil.os.path.exists("/usr/local/cuda/bin/nvcc"):
            return Probe(False, "nvcc not found", "install the CUDA toolkit and put nvcc on PATH")
        return Probe(True, detail=gpu_detail())

    def claims(self, launch: KernelLaunch) -> bool:
        return launch.kind == "cuda" or "cutlass" in launch.name


BACKEND = CutlassBackend()
