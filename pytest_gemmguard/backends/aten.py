"""ATen: Inductor calls the vendor library (cuBLAS on the GPU, oneDNN/MKL or ATen's own on the CPU)."""

from __future__ import annotations

from typing import Any

from .base import Backend, Probe, float_gemm
from .provenance import LIBRARY_GEMMS, KernelLaunch


class AtenBackend(Backend):
    name = "aten"
    inductor_name = "ATEN"

    def device(self) -> str:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def probe(self) -> Probe:
        import torch

        return Probe(True, detail=f"{self.device()}, torch {torch.__version__}")

    def takes(self, case: Any) -> str | None:
        # Inductor always offers the extern ATen call as a choice for a float GEMM it lowers.
        if float_gemm(case):
            return "Inductor offers ATen's call for every float mm, addmm, bmm, baddbmm"
        return None

    def claims(self, launch: KernelLaunch) -> bool:
        if launch.kind == "vendor":
            return True
        return launch.kind == "extern" and launch.name in LIBRARY_GEMMS


BACKEND = AtenBackend()
