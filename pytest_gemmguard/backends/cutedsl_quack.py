"""cutedsl[quack]: gemmguard's own CuteDSL route, for GEMMs Inductor has no CuteDSL kernel for.

Inductor compiles the graph as usual; one post-grad graph pass swaps each GEMM node that quack's
CuteDSL GEMM can take (fp16/bf16 mm, addmm with a vector bias, bmm; 16-byte aligned operands with one
unit stride, N a multiple of 8) for the custom op `gemmguard::cutedsl_quack_gemm`, which calls
`quack.gemm_interface.gemm` at run time. Everything around the GEMM (epilogues, casts, copies) stays
Inductor's. A GEMM the pass leaves alone falls to ATen, which provenance reports as another backend's
kernel: the case is unsupported by this route, never silently passed.

The `cutedsl` backend turns to this route, case by case, when Inductor's own CuteDSL backend (NVGEMM)
has no valid choice; `--gemm-backends=cutedsl[quack]` asks for it alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .base import Backend, Probe, cuda_probe, gpu_detail, missing_module
from .provenance import KernelLaunch

if TYPE_CHECKING:
    import torch

OP_NAME = "cutedsl_quack_gemm"
_kernel: Callable[..., Any] | None = None  # the implementation behind the custom op (quack, or a test's plant)

# cutlass-dsl 4.8 moved names out of `cutlass.utils` and warns on each use of the old spelling; quack 0.6
# still uses it, at import and while it JIT-compiles a kernel (17 DeprecationWarnings in one GPU run of
# README's main job). A user can do nothing about quack's source, so these notices are silenced while
# gemmguard calls quack, and only then: a user's own use of the old names still warns.
CUTLASS_RENAMED = r"cutlass\.utils\.[\w.]+ is deprecated"


def _quack_gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    from quack.gemm_interface import gemm

    # tuned=False: quack's heuristic config, so a first call costs one JIT compile, not an autotune sweep.
    return gemm(a, b, bias=bias, tuned=False)


def set_kernel(kernel: Callable[..., Any] | None) -> None:
    """Replace what the custom op runs (tests plant a wrong kernel here to prove the guard catches it)."""
    global _kernel
    _kernel = kernel


def _define_op() -> None:
    import torch

    if hasattr(torch.ops.gemmguard, OP_NAME):
        return

    schema = "(Tensor a, Tensor b, Tensor? bias) -> Tensor"

    @torch.library.custom_op(f"gemmguard::{OP_NAME}", mutates_args=(), schema=schema)
    def cutedsl_quack_gemm(a, b, bias):
        # The graph pass judged FakeTensors, which do not always carry a graph input's storage offset:
        # check the real operands against quack's contract before handing them over.
        for name, t in (("A", a), ("B", b), ("bias", bias)):
            if t is not None and not _aligned(t):
                why = f"operand {name} is not 16-byte aligned with a unit stride (strides {t.stride()}, "
                raise Unsupported(BACKEND.name, why + f"storage offset {t.storage_offset()}): quack cannot take it")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=CUTLASS_RENAMED, category=DeprecationWarning)
            return (_kernel or _quack_gemm)(a, b, bias)

    @cutedsl_quack_gemm.register_fake
    def _(a, b, bias):
        return a.new_empty((*a.shape[:-1], b.shape[-1]))


def _aligned(t: torch.Tensor, elements: int = 8) -> bool:
    """16-byte aligned for a 16-bit dtype: one of the last two strides is 1, every other stride and the
    storage offset are multiples of 8 elements (quack compiles its kernels assuming exactly this)."""
    sizes, strides = list(t.shape), list(t.stride())
    if not all(isinstance(x, int) for x in [*sizes, *strides, t.storage_offset()]):
        return False  # symbolic sizes (dynamic=True): decide nothing we cannot prove
    if 1 not in strides[-2:]:
        return False
    unit = strides.index(1, len(strides) - 2)
    others = [s for i, s in enumerate(strides) if i != unit]
    return t.storage_offset() % elements == 0 and all(s % elements == 0 for s in others)


def takes(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor) -> bool:
    """Whether quack's SM90 GEMM can run this GEMM as it stands (FakeTensors of the graph's values)."""
    import torch

    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype or out.dtype != a.dtype:
        return False
    n = out.shape[-1]
    # quack reads a bias of exactly N elements; a broadcast one (shape (1,)) would be read out of bounds.
    if bias is not None and (bias.shape != (n,) or bias.dtype != a.dtype or not _aligned(bias)):
        return False
    return isinstance(n, int) and n % 8 == 0 and _aligned(a) and _aligned(b)


def _plain_addmm(node: Any) -> bool:
    """bias + a @ b exactly: quack's bias epilogue has no alpha or beta."""
    return node.kwargs.get("beta", 1) == 1 and node.kwargs.get("alpha", 1) == 1


def _swap_pass() -> Any:
    import torch
    from torch._inductor.custom_graph_pass import CustomGraphPass

    aten = torch.ops.aten

    class SwapInQuack(CustomGraphPass):
        """Post-grad pass: each GEMM node quack can take becomes a call of the CuteDSL custom op."""

        def __call__(self, graph) -> None:
            _define_op()
            op = getattr(torch.ops.gemmguard, OP_NAME).default
            for node in list(graph.nodes):
                if node.target in (aten.mm.default, aten.bmm.default):
                    (a, b), bias = node.args[:2], None
                elif node.target is aten.addmm.default and _plain_addmm(node):
                    bias, a, b = node.args[:3]
                else:
                    continue
                metas = [x.meta.get("val") if x is not None else None for x in (a, b, bias)]
                if any(m is None for m in metas[:2]) or not takes(*metas, node.meta["val"]):
                    continue
                with graph.inserting_before(node):
                    swapped = graph.call_function(op, (a, b, bias))
                swapped.meta.update(node.meta)
                node.replace_all_uses_with(swapped)
                graph.erase_node(node)

        def uuid(self) -> str:
            return "gemmguard-cutedsl-quack-swap-v1"

    return SwapInQuack()


class CuteDslQuackBackend(Backend):
    name = "cutedsl[quack]"
    # GEMMs the pass leaves alone go to ATen: provenance then names them as another backend's kernel.
    inductor_name = "ATEN"
    route = "quack"

    def probe(self) -> Probe:
        problem = (
            cuda_probe((9, 0))
            or missing_module("cutlass", "nvidia-cutlass-dsl")
            or missing_module("quack", "quack-kernels")
        )
        if problem:
            return problem
        from importlib.metadata import version

        return Probe(True, detail=f"{gpu_detail()}, quack-kernels {version('quack-kernels')}, route cutedsl[quack]")

    def prepare(self) -> None:
        # The compiled code calls the custom op, also when Inductor's cache serves it without running the pass.
        # torch has no way to remove a library op again; defining it twice is a no-op.
        _define_op()
        return None

    def inductor_options(self) -> dict[str, Any]:
        return {**super().inductor_options(), "post_grad_custom_post_pass": _swap_pass()}

    def repro_option_sources(self) -> dict[str, tuple[str, str]]:
        return {"post_grad_custom_post_pass": (__name__, "_swap_pass()")}

    def claims(self, launch: KernelLaunch) -> bool:
        return launch.kind == "custom" and launch.name == OP_NAME

    def refuses(self, case: Any) -> str | None:
        # The swap pass takes a GEMM only in float16/bfloat16 (`takes`), and a case's own GEMM runs in its
        # dtype: for any other the compile would only run ATen (on the H200 a float32 cutedsl example, whose
        # path includes this fallback's compile in the test process, took 44 s to end unsupported).
        if case.dtype not in ("float16", "bfloat16"):
            return f"quack takes float16/bfloat16 GEMMs only; this case's GEMM is {case.dtype} (no compile)"
        return None

    def describe_kernel(self, launch: KernelLaunch) -> str:
        return f"{launch.name} (cutedsl[quack])" if self.claims(launch) else launch.name


BACKEND = CuteDslQuackBackend()
