"""triton[kernels]: gemmguard's own Triton GEMM (pytest_gemmguard/kernels/triton_gemm.py), with its
epilogue fused in.

Inductor compiles the graph as usual; a post-grad pass (kernel_swap.py) swaps each GEMM it can, with the
pointwise steps that follow it, for the custom op `gemmguard::kernels_triton_gemm`, which launches the
kernel. A GEMM the pass leaves alone falls to ATen and provenance calls the case unsupported.

It is the worked example of guarding your own kernel (docs/how-to/own-kernel.md): a backend is one file.
Not part of `auto`: name it (`--gemm-backends=triton[kernels]`).

On a machine without a GPU, `TRITON_INTERPRET=1` runs it on the CPU through Triton's interpreter (slow, and
float16/float32 only: the interpreter misreads bfloat16), which is how the CPU suite checks the kernel.
"""

from __future__ import annotations

import os

from .base import Probe, cuda_probe, gpu_detail, missing_module
from .own_kernel import OwnKernelBackend


class TritonKernelsBackend(OwnKernelBackend):
    name = "triton[kernels]"
    op_name = "kernels_triton_gemm"
    kernel_file = "triton_gemm"
    pass_uuid = "gemmguard-kernels-triton-v1"

    def device(self) -> str:
        return "cpu" if _interpreting() else "cuda"

    def probe(self) -> Probe:
        # The kernel file, then the GPU, as the other GPU backends do: on a CPU machine the fix is a GPU, not
        # triton, unless the install itself lacks the kernel.
        gpu = None if _interpreting() else cuda_probe((8, 0))
        problem = self.kernel_file_missing() or gpu or missing_module("triton", "triton")
        if problem or (problem := self.kernel_file_problem()):
            return problem
        import triton

        where = "the CPU, through Triton's interpreter" if _interpreting() else gpu_detail()
        return Probe(True, detail=f"{where}, triton {triton.__version__}, {self.kernels().__name__}")


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


BACKEND = TritonKernelsBackend()
