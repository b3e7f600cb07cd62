"""cutedsl[kernels]: gemmguard's own CuteDSL GEMM (pytest_gemmguard/kernels/cute_gemm.py: SM90 TMA + WGMMA,
persistent; an SM80-class mma.sync path on 8.x GPUs), with its epilogue fused in, for the GEMMs neither
Inductor nor a library has a CuteDSL kernel for.

The wiring is triton[kernels]'s (kernel_swap.py): a post-grad pass swaps each GEMM the kernel takes, with
the pointwise steps after it, for the custom op `gemmguard::kernels_cute_gemm`; what it leaves alone falls
to ATen, and provenance calls that case unsupported. Not part of `auto`: `--gemm-backends=cutedsl[kernels]`.
"""

from __future__ import annotations

from .base import Probe, cuda_probe, gpu_detail, missing_module
from .own_kernel import OwnKernelBackend


class CuteDslKernelsBackend(OwnKernelBackend):
    name = "cutedsl[kernels]"
    op_name = "kernels_cute_gemm"
    kernel_file = "cute_gemm"
    pass_uuid = "gemmguard-kernels-cute-v1"

    def probe(self) -> Probe:
        gpu = cuda_probe((8, 0))
        problem = self.kernel_file_missing() or gpu or missing_module("cutlass", "nvidia-cutlass-dsl")
        if problem or (problem := self.kernel_file_problem()):
            return problem
        from importlib.metadata import version

        return Probe(True, detail=f"{gpu_detail()}, nvidia-cutlass-dsl {version('nvidia-cutlass-dsl')}")


BACKEND = CuteDslKernelsBackend()
