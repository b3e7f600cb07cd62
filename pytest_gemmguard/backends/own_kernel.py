"""What every backend over one of gemmguard's own kernels (pytest_gemmguard/kernels/) shares: the swap pass
that hands it each GEMM with its epilogue chain (kernel_swap.py), the custom op it runs as, and the claim on
that op.
A backend file says which kernel file and op, and how to probe its machine (triton_kernels.py,
cutedsl_kernels.py). Not itself a backend: it has no BACKEND."""

from __future__ import annotations

from typing import Any

from . import kernel_swap
from .base import Backend, Probe
from .provenance import KernelLaunch


class OwnKernelBackend(Backend):
    inductor_name = "ATEN"  # what the pass leaves alone goes to ATen, which provenance names as not ours
    route = "kernels"
    in_auto = False  # named, never implied: `auto` means Inductor's backends
    op_name: str = ""  # the custom op, gemmguard::<op_name>
    kernel_file: str = ""  # pytest_gemmguard/kernels/<kernel_file>.py
    pass_uuid: str = ""  # the swap pass's name in Inductor's cache key (the sources' hash is added)

    def kernels(self) -> Any:
        return kernel_swap.load_kernels(self.kernel_file)

    def swap_pass(self) -> Any:
        return kernel_swap.swap_pass(self.op_name, self.name, self.kernels, self.pass_uuid)

    def kernel_file_missing(self) -> Probe | None:
        """None when this install has the kernel file (asked first: no GPU would hide a broken install)."""
        if kernel_swap.kernel_path(self.kernel_file) is not None:
            return None
        where = f"pytest_gemmguard/kernels/{self.kernel_file}.py"
        return Probe(False, f"{where} is missing from this install", "reinstall pytest-gemmguard")

    def kernel_file_problem(self) -> Probe | None:
        """None when the kernel file imports; else the probe that says why not (never a crash of the run)."""
        try:
            self.kernels()
        except Exception as exc:
            where = f"pytest_gemmguard/kernels/{self.kernel_file}.py"
            return Probe(False, f"{where} does not import: {type(exc).__name__}: {exc}")
        return None

    def prepare(self) -> None:
        # Compiled code calls the op, also when Inductor's cache serves it without running the pass.
        kernel_swap.define_op(self.op_name, self.name, self.kernels)
        return None

    def inductor_options(self) -> dict[str, Any]:
        return {**super().inductor_options(), "post_grad_custom_post_pass": self.swap_pass()}

    def repro_option_sources(self) -> dict[str, tuple[str, str]]:
        return {"post_grad_custom_post_pass": (type(self).__module__, "BACKEND.swap_pass()")}

    def claims(self, launch: KernelLaunch) -> bool:
        return launch.kind == "custom" and launch.name == self.op_name

    def refusals(self) -> list[str]:
        return kernel_swap.refusals(self.op_name)

    def forget_refusals(self) -> None:
        kernel_swap.forget_refusals(self.op_name)

    def describe_kernel(self, launch: KernelLaunch) -> str:
        return f"{launch.name} (kernels/{self.kernel_file}.py)" if self.claims(launch) else launch.name
