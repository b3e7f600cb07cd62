"""TRITON: Inductor's Triton GEMM templates (mm, persistent/TMA on SM90), fused with epilogues.

What counts as a triton GEMM kernel: a `triton_tem_*` kernel, i.e. one generated from one of
Inductor's Triton GEMM templates (mm, bmm, persistent TMA mm, scaled mm, ...). Pointwise and reduction
kernels (`triton_poi_*`, `triton_red_*`, `triton_per_*`) are not GEMM kernels: a GEMM that Inductor
rewrote into multiply+sum runs no GEMM kernel at all and provenance reports it as unsupported.

On SM90 the persistent TMA template is switched on (Inductor leaves it off by default) so it competes
with the plain mm template in autotuning; `describe_kernel` reads from a kernel's source which template
won and with which block sizes.

Decompose-K: with TRITON alone, Inductor may pick its `decompose_k` subgraph choice for a K-heavy mm
(a batched GEMM over K slices, then a sum). gemmguard's policy is the same as for any other kernel: the
case counts as triton exactly when a Triton *template* kernel (`triton_tem_*`, here a bmm template)
did the GEMM work; `is_decompose_k` recognises that shape of graph. When the slices end up in
pointwise or reduction kernels instead (seen on the H200 with torch 2.11: a 16x64x4096 fp32 mm ran as
`triton_poi_fused_mm_0` launches, no template), the case is reported unsupported, with those kernels
named in the reason. tests/gpu checks that the verdict follows this policy whichever choice wins.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..provenance import KernelLaunch
from .base import Backend, Probe, cuda_probe, gpu_detail, missing_module

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
    summary = "Inductor's Triton GEMM templates (incl. persistent TMA on SM90)"

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
        import torch._inductor.config as config

        if hasattr(config.triton, "enable_persistent_tma_matmul"):
            options["triton.enable_persistent_tma_matmul"] = os.environ.get("GEMMGUARD_TRITON_TMA", "1") != "0"
        return options

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
    """True when a graph ran a Triton bmm template kernel followed by a reduction: for a graph whose
    only GEMM is an mm, that is Inductor's decompose-K choice (bmm over K slices, then a sum)."""
    names = [launch.name for launch in graph.launches]
    bmm_tem = [n for n in names if n.startswith("triton_tem_") and "bmm" in n.split("_")]
    reduction = [n for n in names if n.startswith(("triton_red_", "triton_per_"))]
    return bool(bmm_tem and reduction)


BACKEND = TritonBackend()
