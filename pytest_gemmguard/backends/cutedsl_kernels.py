"""cutedsl[kernels]: gemmguard's own CuteDSL GEMM (kernels/cute_gemm.py: SM90 TMA + WGMMA, persistent),
with its epilogue fused in, for the GEMMs neither Inductor nor a library has a CuteDSL kernel for.

The wiring is triton[kernels]'s (kernel_swap.py): a post-grad pass swaps each GEMM the kernel takes, with
the pointwise steps after it, for the custom op `gemmguard::kernels_cute_gemm`; what it leaves alone falls
to ATen, and provenance calls that case unsupported. Not part of `auto`: `--gemm-backends=cutedsl[kernels]`.
"""

from __future__ import annotations

from typing import Any

from .. import kernel_swap
from ..provenance import KernelLaunch
from .base import Backend, Probe, cuda_probe, gpu_detail, missing_module

OP_NAME = "kernels_cute_gemm"


def _kernels() -> Any:
    return kernel_swap.load_kernels("cute_gemm")


def _swap_pass() -> Any:
    return kernel_swap.swap_pass(OP_NAME, BACKEND.name, _kernels, "gemmguard-kernels-cute-v1")


class CuteDslKernelsBackend(Backend):
    name = "cutedsl[kernels]"
    inductor_name = "ATEN"
    route = "kernels"
    in_auto = False

    def probe(self) -> Probe:
        problem = cuda_probe((9, 0)) or missing_module("cutlass", "nvidia-cutlass-dsl")
        if problem:
            return problem
        try:
            _kernels()
        except Exception as exc:  # a kernel file that does not import is this backend's reason, not a crash
            return Probe(False, f"kernels/cute_gemm.py does not import: {type(exc).__name__}: {exc}")
        from importlib.metadata import version

        return Probe(True, detail=f"{gpu_detail()}, nvidia-cutlass-dsl {version('nvidia-cutlass-dsl')}")

    def prepare(self) -> None:
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
        return f"{launch.name} (kernels/cute_gemm.py)" if self.claims(launch) else launch.name


BACKEND = CuteDslKernelsBackend()
