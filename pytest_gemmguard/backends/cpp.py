"""CPP: Inductor's C++ GEMM template (micro-kernel code generated and built with the host compiler)."""

from __future__ import annotations

import shutil

from .base import Backend, Probe
from .provenance import KernelLaunch


class CppBackend(Backend):
    name = "cpp"
    inductor_name = "CPP"
    freezes_weights = True
    writes_cpu_kernels = True

    def device(self) -> str:
        return "cpu"

    def probe(self) -> Probe:
        import torch

        compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
        if compiler is None:
            return Probe(False, "no C++ compiler on PATH", "install g++ (apt-get install g++)")
        cpu = torch.backends.cpu.get_cpu_capability()
        return Probe(True, detail=f"cpu ({cpu}), {compiler}, weights frozen")

    def inductor_options(self) -> dict:
        # The template applies only when the weight is a graph constant: freeze parameters. Inductor's FX
        # graph cache is off: it served a graph compiled for a weight with a storage offset (wrong, a torch
        # 2.13 bug) to the same values stored compactly, so the bug showed up on a contiguous case whose
        # own compile is right. gemmguard reuses frozen compiles itself, keyed by the weight's content and
        # layout (compile/compiler.py), which is all the reuse that is sound here.
        return {**super().inductor_options(), "freezing": True, "fx_graph_cache": False}

    def claims(self, launch: KernelLaunch) -> bool:
        # The template's kernels carry its micro-GEMM; plain C++ pointwise/reduction kernels do not.
        return launch.kind.startswith("cpp") and "micro_gemm" in launch.source


BACKEND = CppBackend()
