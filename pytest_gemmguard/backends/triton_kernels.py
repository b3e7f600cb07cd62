"""triton[kernels]: gemmguard's own Triton GEMM (kernels/triton_gemm.py), with its epilogue fused in.

Inductor compiles the graph as usual; a post-grad pass (kernel_swap.py) swaps each GEMM it can, with the
pointwise steps that follow it, for the custom op `gemmguard::kernels_triton_gemm`, which launches the
kernel. A GEMM the pass leaves alone falls to ATen and provenance calls the case unsupported.

It is the worked example of guarding your own kernel (README, "Your own kernels"): a backend is one file.
Not part of `auto`: name it (`--gemm-backends=triton[kernels]`).

On a machine without a GPU, `TRITON_INTERPRET=1` runs it on the CPU through Triton's interpreter (slow, and
float16/float32 only: the interpreter misreads bfloat16), which is how the CPU suite checks the kernel.
"""

from __future__ import annotations

from typing import Any

from .. import kernel_swap
from ..provenance import KernelLaunch
from .base import Backend, Probe, cuda_probe, gpu_detail, missing_module

OP_NAME = "kernels_triton_gemm"


def _kernels() -> Any:
    return kernel_swap.load_kernels("triton_gemm")


def _swap_pass() -> Any:
    return kernel_swap.swap_pass(OP_NAME, BACKEND.name, _kernels, "gemmguard-kernels-triton-v1")


class TritonKernelsBackend(Backend):
    name = "triton[kernels]"
    inductor_name = "ATEN"  # what the pass leaves alone goes to ATen, which provenance names as not ours
    route = "kernels"
    in_auto = False

    def device(self) -> str:
        return "cpu" if _interpreting() else "cuda"

    def probe(self) -> Probe:
        # The GPU first, as the other GPU backends do: on a CPU machine the fix is a GPU, not triton.
        problem = (None if _interpreting() else cuda_probe((8, 0))) or missing_module("triton", "triton")
        if problem:
            return problem
        try:
            module = _kernels()
        except Exception as exc:  # a kernel file that does not import is this backend's reason, not a crash
            return Probe(False, f"kernels/triton_gemm.py does not import: {type(exc).__name__}: {exc}")
        import triton

        where = "the CPU, through Triton's interpreter" if _interpreting() else gpu_detail()
        return Probe(True, detail=f"{where}, triton {triton.__version__}, {module.__name__}")

    def prepare(self) -> None:
        # Compiled code calls the op, also when Inductor's cache serves it without running the pass.
        kernel_swap.define_op(OP_NAME, self.name, _kernels)
        return None

    def inductor_options(self) -> dict[str, Any]:
        return {**super().inductor_options(), "post_grad_custom_post_pass": _swap_pass()}

    def repro_option_sources(self) -> dict[str, tuple[str, str]]:
        return {"post_grad_custom_post_pass": (__name__, "_swap_pass()")}

    def claims(self, launch: KernelLaunch) -> bool:
        return launch.kind == "custom" and launch.name == OP_NAME

    def refusals(self) -> list[str]:
        return kernel_swap.refusals(OP_NAME)

    def forget_refusals(self) -> None:
        kernel_swap.forget_refusals(OP_NAME)

    def describe_kernel(self, launch: KernelLaunch) -> str:
        return f"{launch.name} (kernels/triton_gemm.py)" if self.claims(launch) else launch.name


def _interpreting() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


BACKEND = TritonKernelsBackend()
