"""TRITON: Inductor's Triton GEMM templates (mm, persistent/TMA on SM90), fused with epilogues."""

from __future__ import annotations

from ..provenance import KernelLaunch
from .base import Backend, Probe, cuda_probe, gpu_detail, missing_module


class TritonBackend(Backend):
    name = "triton"
    inductor_name = "TRITON"
    summary = "Inductor's Triton GEMM templates (incl. persistent TMA on SM90)"

    def probe(self) -> Probe:
        problem = cuda_probe((7, 0)) or missing_module("triton", "triton")
        if problem:
            return problem
        import triton

        return Probe(True, detail=f"{gpu_detail()}, triton {triton.__version__}")

    def claims(self, launch: KernelLaunch) -> bool:
        # Template kernels are named triton_tem_*; triton_poi/red/per kernels are pointwise or
        # reductions (an epilogue, or a GEMM rewritten as multiply+sum, which is not a GEMM kernel).
        return launch.kind == "triton" and launch.name.startswith("triton_tem_")


BACKEND = TritonBackend()
