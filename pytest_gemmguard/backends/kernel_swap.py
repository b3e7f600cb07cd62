"""Run a GEMM kernel of our own inside Inductor's graph, with the epilogue steps that follow it fused in.

A post-grad graph pass finds each GEMM node (mm, bmm; addmm and baddbmm with alpha = beta = 1) and walks the
chain of pointwise nodes that consume it alone: relu, gelu (exact), silu, sigmoid, tanh, a multiply by a
number, up to two adds of a tensor that broadcasts to the output, and a dtype conversion. The GEMM and that
chain become one call of a custom op, `gemmguard::<name>`, whose implementation is the kernel. What the pass
does not take (another op, a second multiply, an operand the kernel refuses) stays Inductor's: a GEMM left
alone falls to ATen, which provenance reports as another backend's kernel, so a case the kernel cannot run
is unsupported, never silently passed.

The kernel is any callable with the signature of `kernels/triton_gemm.py`'s `gemm` and a `takes` that
answers from shapes, strides and dtypes alone (the pass asks it about FakeTensors).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported

# gemmguard's own GEMMs: the kernels package beside backends/ (in the wheel).
KERNELS = __package__.rpartition(".")[0] + ".kernels"

if TYPE_CHECKING:
    import torch

# The step names kernels take (as ops.STEPS names them); a tensor add is "bias" when it adds a length-N
# vector, "residual" otherwise (see _next_step), each at most once.
_UNARY = ("relu", "gelu", "silu", "sigmoid", "tanh")
_planted: dict[str, Callable[..., Any]] = {}  # op name -> a test's wrong kernel
# op name -> why the pass left GEMMs alone in the graphs it saw since the last `forget_refusals` (the
# unsupported verdict then says why the kernel did not run, not only that ATen did).
_refusals: dict[str, list[str]] = {}


def refusals(op_name: str) -> list[str]:
    return list(dict.fromkeys(_refusals.get(op_name, [])))


def forget_refusals(op_name: str) -> None:
    _refusals.pop(op_name, None)


def load_kernels(module: str) -> Any:
    """`pytest_gemmguard/kernels/<module>.py`, imported on first use: it imports its GPU library (triton,
    cutlass) at its top, which a backend's probe asks for before it loads the kernel."""
    return importlib.import_module(f"{KERNELS}.{module}")


def kernel_path(module: str) -> Path | None:
    """Where `pytest_gemmguard/kernels/<module>.py` is, found without running it (running it needs the GPU
    library), or None where this install lacks it: a probe tells a missing file from a missing GPU."""
    try:
        spec = importlib.util.find_spec(f"{KERNELS}.{module}")
    except ModuleNotFoundError:  # the kernels package itself is missing
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def plant(op_name: str, kernel: Callable[..., Any] | None) -> None:
    """Replace what the op runs (tests plant a wrong kernel to prove the guard catches it); None undoes."""
    if kernel is None:
        _planted.pop(op_name, None)
    else:
        _planted[op_name] = kernel


def define_op(op_name: str, backend: str, kernels: Callable[[], Any]) -> Any:
    """The custom op `gemmguard::<op_name>` (defined once per process; torch cannot remove a library op)."""
    import torch

    existing = getattr(torch.ops.gemmguard, op_name, None) if hasattr(torch.ops, "gemmguard") else None
    if existing is not None:
        return existing.default
    schema = (
        "(Tensor a, Tensor b, Tensor? bias, Tensor? epi_bias, Tensor? residual, str steps, float scale, "
        "ScalarType? out_dtype) -> Tensor"
    )

    @torch.library.custom_op(f"gemmguard::{op_name}", mutates_args=(), schema=schema)
    def op(a, b, bias, epi_bias, residual, steps, scale, out_dtype):
        chain = tuple(s for s in steps.split("+") if s)
        module = kernels()
        # The pass judged FakeTensors, which do not always carry a graph input's storage offset or alignment:
        # the real operands are asked again.
        why = module.takes(a, b, bias=bias, steps=chain, epi_bias=epi_bias, residual=residual, out_dtype=out_dtype)
        if why:
            raise Unsupported(backend, why)
        run = _planted.get(op_name, module.gemm)
        return run(a, b, bias=bias, steps=chain, epi_bias=epi_bias, residual=residual, scale=scale, out_dtype=out_dtype)

    @op.register_fake
    def _(a, b, bias, epi_bias, residual, steps, scale, out_dtype):
        return a.new_empty((*a.shape[:-1], b.shape[-1]), dtype=out_dtype or a.dtype)

    return getattr(torch.ops.gemmguard, op_name).default


def _source_hash(module: Any) -> str:
    import hashlib

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _val(node: Any) -> Any:
    import torch

    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _gemm_operands(node: Any) -> tuple[Any, Any, Any] | None:
    """(a, b, bias) of a GEMM node the kernels take as a plain product (alpha = beta = 1), else None."""
    import torch

    aten = torch.ops.aten
    if node.target in (aten.mm.default, aten.bmm.default):
        return node.args[0], node.args[1], None
    if node.target in (aten.addmm.default, aten.baddbmm.default):
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            return None
        return node.args[1], node.args[2], node.args[0]
    return None


def _scaled_products() -> tuple[Any, ...]:
    import torch

    return (torch.ops.aten.addmm.default, torch.ops.aten.baddbmm.default)


def _only(node: Any, target: Any) -> Any:
    """The single user of `node` when it is a call of `target`, else None."""

    users = list(node.users)
    return users[0] if len(users) == 1 and users[0].target is target else None


def _decomposed(produced: Any) -> tuple[str, Any] | None:
    """silu and exact gelu as Inductor's decompositions leave them in the post-grad graph (the value read twice):
    silu: x / (exp(-x) + 1); gelu: (x * 0.5) * (erf(x * 0.7071...) + 1). Returns (step, the node that ends it)."""
    import torch

    aten = torch.ops.aten
    users = list(produced.users)
    if len(users) != 2:
        return None
    by = {u.target: u for u in users}
    if set(by) == {aten.neg.default, aten.div.Tensor}:
        add = (e := _only(by[aten.neg.default], aten.exp.default)) is not None and _only(e, aten.add.Tensor)
        div = by[aten.div.Tensor]
        if add and add.args[1:] == (1,) and div.args == (produced, add):
            return "silu", div
    if len(by) == 1 and aten.mul.Tensor in by:
        half = next((u for u in users if u.args[1:] == (0.5,)), None)
        inner = next((u for u in users if u.args[1:] == (0.7071067811865476,)), None)
        erf = _only(inner, aten.erf.default) if inner is not None else None
        add = _only(erf, aten.add.Tensor) if erf is not None else None
        if half is not None and add is not None and add.args[1:] == (1,):
            out = _only(half, aten.mul.Tensor)
            if out is not None and set(out.args) == {half, add} and list(add.users) == [out]:
                return "gelu", out
    return None


def _next_step(node: Any, produced: Any, seen: list[str]) -> tuple[str, Any] | None:
    """What the single consumer `node` of `produced` adds to the chain (whose steps so far are `seen`):
    (step, argument), or None to stop."""
    import torch

    aten, prims = torch.ops.aten, torch.ops.prims
    t = node.target
    if not node.args or (node.args[0] is not produced and t not in (aten.add.Tensor, aten.mul.Tensor)):
        return None
    others = [x for x in node.args if x is not produced]
    if t is aten.relu.default:
        return "relu", None
    if t is aten.gelu.default and node.kwargs.get("approximate", "none") == "none" and len(node.args) == 1:
        return "gelu", None
    if t is aten.silu.default:
        return "silu", None
    if t is aten.sigmoid.default:
        return "sigmoid", None
    if t is aten.tanh.default:
        return "tanh", None
    if t is aten.mul.Tensor and len(node.args) == 2 and len(others) == 1 and isinstance(others[0], (int, float)):
        return "scale", float(others[0])
    if t is aten.add.Tensor and len(node.args) == 2 and len(others) == 1 and node.kwargs.get("alpha", 1) == 1:
        extra, out = _val(others[0]), _val(produced)
        if extra is None or not isinstance(extra, torch.Tensor) or not _broadcasts(extra, out):
            return None
        # A tensor added is named by its shape, not by its place in the chain: a kernel may take only a per-column
        # vector as its epilogue bias (the CuteDSL kernel does), so a whole-output residual named "bias" because
        # nothing was added before it would be refused, and the chain cut there.
        vector = extra.dim() == 1 and extra.shape[0] == out.shape[-1]
        for step in ("bias", "residual") if vector else ("residual", "bias"):
            if step not in seen:
                return step, others[0]
        return None
    if t is prims.convert_element_type.default and len(node.args) == 2:
        return "cast", node.args[1]
    return None


def _broadcasts(extra: torch.Tensor, out: torch.Tensor) -> bool:

    if extra.dim() > out.dim():
        return False
    return all(e == 1 or e == o for e, o in zip(reversed(extra.shape), reversed(out.shape), strict=False))


def swap_pass(op_name: str, backend: str, kernels: Callable[[], Any], uuid: str) -> Any:
    """The post-grad pass that swaps each GEMM (and the chain it feeds alone) for `gemmguard::<op_name>`."""

    from torch._inductor.custom_graph_pass import CustomGraphPass

    # Defined now, not when the pass first runs: Inductor's FX graph cache may serve code that calls the op
    # without running the pass at all (a warm cache, another process's compile).
    define_op(op_name, backend, kernels)

    class SwapInKernel(CustomGraphPass):
        def __call__(self, graph) -> None:
            op = define_op(op_name, backend, kernels)
            module = kernels()
            refused = _refusals.setdefault(op_name, [])
            for node in list(graph.nodes):
                operands = _gemm_operands(node)
                if operands is None:
                    if node.target in _scaled_products():
                        refused.append("an addmm/baddbmm with alpha or beta other than 1")
                    continue
                a, b, bias = operands
                metas = [_val(x) for x in (a, b)]
                if any(m is None for m in metas):
                    continue
                # The absorbed pointwise nodes, in order, with the step each adds and what it reads (a tensor
                # node, a number, a dtype or None). Casts may repeat (Inductor upcasts half-precision
                # pointwise math to float32 and back): the kernel computes in float32 and stores once, in
                # the last cast's dtype.
                chain: list[tuple[Any, str, Any]] = []
                while len(chain) < 8:
                    produced = chain[-1][0] if chain else node
                    seen = [s for _, s, _ in chain]
                    found = _decomposed(produced)
                    if found is not None:
                        step: tuple[str, Any] | None = (found[0], None)
                        exit_node = found[1]
                    elif len(produced.users) == 1:
                        exit_node = next(iter(produced.users))
                        step = _next_step(exit_node, produced, seen)
                    else:
                        break
                    if step is None or (step[0] in seen and step[0] != "cast"):
                        break
                    chain.append((exit_node, *step))
                # Trim the chain until the kernel takes it (a kernel may fuse fewer steps than the pass finds).
                while True:
                    steps = tuple(dict.fromkeys(s for _, s, _ in chain))
                    picked = {s: arg for _, s, arg in chain}  # for "cast": the last one's dtype
                    why = module.takes(
                        *metas,
                        bias=_val(bias),
                        steps=steps,
                        epi_bias=_val(picked.get("bias")),
                        residual=_val(picked.get("residual")),
                        out_dtype=picked.get("cast"),
                    )
                    if not why or not chain:
                        break
                    chain.pop()
                if why:
                    refused.append(why)
                    continue
                last = chain[-1][0] if chain else node
                with graph.inserting_before(last):
                    swapped = graph.call_function(
                        op,
                        (
                            a,
                            b,
                            bias,
                            picked.get("bias"),
                            picked.get("residual"),
                            "+".join(steps),
                            float(picked.get("scale", 1.0)),
                            picked.get("cast"),
                        ),
                    )
                swapped.meta.update(last.meta)
                last.replace_all_uses_with(swapped)
                # The GEMM and the absorbed chain (decomposed steps included) now have no users.
                graph.eliminate_dead_code()

        def uuid(self) -> str:
            # Inductor's FX graph cache keys on this: a changed pass or kernel file must not be served old code.
            return f"{uuid}-{_source_hash(kernels())}"

    return SwapInKernel()
