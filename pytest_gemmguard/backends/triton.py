"""TRITON: Inductor's Triton GEMM templates (mm, persistent/TMA on SM90), fused with epilogues.

What counts as a triton GEMM kernel: a `triton_tem_*` kernel, i.e. one generated from one of
Inductor's Triton GEMM templates (mm, bmm, persistent TMA mm, scaled mm, ...). Pointwise and reduction
kernels (`triton_poi_*`, `triton_red_*`, `triton_per_*`) are not GEMM kernels: a GEMM that Inductor
rewrote into multiply+sum runs no GEMM kernel at all and provenance reports it as unsupported.

On SM90 the persistent TMA template is switched on (Inductor leaves it off by default) so it competes
with the plain mm template in autotuning; `describe_kernel` reads from a kernel's source which template
won and with which block sizes.

Decompose-K: with TRITON alone, Inductor may pick its `decompose_k` subgraph choice for a K-heavy mm
(a batched GEMM over K slices, then a sum), inlined into the graph as a `decompose_k_mm_<k>_split_<i>`
function. gemmguard's policy is the one for any kernel: the case counts as triton exactly when a Triton
*template* kernel (`triton_tem_*`) did the GEMM work. Seen on the H200 (torch 2.11, 16x64x4096 fp32):
decompose-K won and its batched GEMM ran as ATen's `extern_kernels.bmm_dtype` (cuBLAS), although only
TRITON was allowed, with a Triton reduction for the sum. gemmguard reports that case unsupported:
"another backend's GEMM kernel: bmm_dtype (aten)". tests/gpu checks that the verdict follows the
policy whichever choice wins; `is_decompose_k` says whether it did.
"""

from __future__ import annotations

import re
from typing import Any

from .._compat import inductor
from .base import Backend, Probe, cuda_probe, float_gemm, gpu_detail, missing_module
from .provenance import KernelLaunch
from .settings import backend_env

_CONFIG_ARG = re.compile(r"'(BLOCK_M|BLOCK_N|BLOCK_K|GROUP_M|NUM_SMS)': (\d+)")
_NUM = re.compile(r"\b'?(num_warps|num_stages)'?(?:=|: )(\d+)")


def template_of(source: str, name: str) -> str:
    """Which Inductor Triton template a `triton_tem_*` kernel came from, read from its source."""
    tma = any(m in source for m in ("make_tensor_descriptor", "tensormap_create", "descriptor_load", "TMA_SIZE"))
    persistent = "NUM_SMS" in source and "tile_id" in source
    if "scaled_mm" in name:
        base = "scaled_mm"
    elif "bmm" in name.split("_"):
        base = "bmm"
    else:
        base = "mm"
    if tma and persistent:
        return f"{base}_persistent_tma"
    if persistent:
        return f"{base}_persistent"
    if tma:
        return f"{base}_tma"
    return base


def config_of(source: str) -> str:
    """The winning config's block sizes (and warps/stages when the source names them)."""
    found = dict(_CONFIG_ARG.findall(source))
    found.update(_NUM.findall(source))
    keys = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")
    parts = [f"{k}={found[k]}" for k in keys if k in found]
    return " ".join(parts)


class TritonBackend(Backend):
    name = "triton"
    inductor_name = "TRITON"

    def probe(self) -> Probe:
        problem = cuda_probe((7, 0)) or missing_module("triton", "triton")
        if problem:
            return problem
        import triton

        return Probe(True, detail=f"{gpu_detail()}, triton {triton.__version__}")

    def inductor_options(self) -> dict[str, Any]:
        options = super().inductor_options()
        # Inductor offers its persistent TMA mm template only when asked; let it compete with the plain
        # mm template (autotuning picks; describe_kernel says which won). GEMMGUARD_TRITON_TMA=0: off.
        if inductor.has_config("triton.enable_persistent_tma_matmul"):
            options["triton.enable_persistent_tma_matmul"] = backend_env("GEMMGUARD_TRITON_TMA", True)
        return options

    def takes(self, case: Any) -> str | None:
        # Inductor's mm/bmm templates handle every float16, bfloat16 and float32 GEMM on a GPU, with any strides, and
        # addmm, baddbmm and linear go through them (torch 2.11-2.13, kernel/mm.py, bmm.py). Where Inductor leaves them
        # out and offers nothing else (the decompose-K-only regime: docs/findings.md), the refusal is the finding. Not
        # where a tensor spans more than 2**31 elements (the big profile): Inductor keeps its templates from sizes
        # their 32-bit indexing cannot reach, on purpose.
        if float_gemm(case) and case.elements <= 2**31:  # cases/big.py INT32_ELEMENTS
            return "Inductor's Triton templates take every float16, bfloat16 and float32 mm, addmm, bmm, baddbmm"
        return None

    def claims(self, launch: KernelLaunch) -> bool:
        # Template kernels are named triton_tem_*; triton_poi/red/per kernels are pointwise or
        # reductions (an epilogue, or a GEMM rewritten as multiply+sum, which is not a GEMM kernel).
        return launch.kind == "triton" and launch.name.startswith("triton_tem_")

    def describe_kernel(self, launch: KernelLaunch) -> str:
        if not self.claims(launch):
            return launch.name
        template = template_of(launch.source, launch.name)
        fused = [p for p in launch.name.split("_")[3:-1] if p not in ("mm", "bmm", "addmm", "baddbmm")]
        parts = [f"template {template}"]
        if fused:
            parts.append(f"fused epilogue: {'+'.join(fused)}")
        config = config_of(launch.source)
        if config:
            parts.append(config)
        return f"{launch.name} ({'; '.join(parts)})"


def is_decompose_k(graph) -> bool:
    """True when Inductor's decompose-K choice won for this graph (its inlined subgraph is in the code)."""
    return "decompose_k_mm_" in graph.code


BACKEND = TritonBackend()
