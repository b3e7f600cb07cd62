"""Which backend's kernel ran: read from the code Inductor generated, never assumed.

Inductor hands every compiled graph's Python wrapper to `GraphLowering.save_output_code`. From that
source we list the kernels the graph's `call()` launches; each registered backend then claims the
GEMM kernels that are its own. The graph's FX nodes say how many GEMMs the function contained, so a
GEMM that was rewritten into a reduction, or run by another backend, shows up as a shortfall.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Names Inductor gives GEMM library calls in generated code (extern_kernels.X / torch.ops.aten.X),
# and the oneDNN/MKL linear ops CPU weight-prepacking turns a GEMM into.
# bmm_dtype / mm_dtype: the out_dtype variants (Inductor's decompose-K subgraph calls bmm_dtype).
LIBRARY_GEMMS = {
    "mm", "addmm", "bias_addmm", "bmm", "bmm_dtype", "mm_dtype", "baddbmm", "_scaled_mm", "_int_mm", "matmul", "linear",
}  # fmt: skip
# Only calls count: generated code also names ops inside strings (assert_size_stride messages).
VENDOR_LINEAR = re.compile(r"torch\.ops\.(mkldnn|mkl|onednn)\.(\w+)(?:\.\w+)?\(")
_DEF = re.compile(r"^(\w+) = async_compile\.(\w+)\(", re.M)
_EXTERN = re.compile(r"extern_kernels\.(\w+)\(")
_ATEN_OP = re.compile(r"torch\.ops\.aten\.(\w+)(?:\.\w+)?\(")
# gemmguard's own custom ops (a route that swaps a GEMM for a kernel of its choosing).
_CUSTOM_OP = re.compile(r"torch\.ops\.gemmguard\.(\w+)(?:\.\w+)?\(")
_SUBGRAPH_FN = re.compile(r"^def \w+\(args\):$", re.M)
# A kernel whose name says it computes a GEMM node, whether or not it is a GEMM kernel.
_GEMM_NAME = re.compile(r"_(mm|addmm|bmm|baddbmm|_scaled_mm|linear)(_|$)")


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel the graph launches: `kind` is 'extern' (a library call) or the async_compile kind
    ('triton', 'cpp_pybinding', 'cuda', ...); `source` is the kernel's generated source, if any."""

    name: str
    kind: str
    source: str = ""

    @property
    def mentions_gemm(self) -> bool:
        return bool(_GEMM_NAME.search(self.name)) or self.name in LIBRARY_GEMMS


@dataclass(frozen=True)
class GraphProvenance:
    """What one compiled graph runs, and which backend each of its GEMM kernels belongs to."""

    gemm_nodes: int
    launches: tuple[KernelLaunch, ...]
    owners: tuple[tuple[str, str], ...] = field(default=())  # (kernel name, backend) for GEMM kernels
    code: str = ""
    # Its autotune candidates, judged while it compiled (candidates.CandidateResult): kept with the graph, so
    # a call that reuses the compile reports them again and a re-run of a failing example fails the same way.
    candidates: tuple = ()
    judged_for: str = ""  # the case (repr) on whose inputs they were judged

    def gemm_kernels(self, backend: str) -> list[str]:
        return [k for k, b in self.owners if b == backend]

    def foreign(self, backend: str) -> list[tuple[str, str]]:
        return [(k, b) for k, b in self.owners if b != backend]


def parse_launches(code: str) -> tuple[KernelLaunch, ...]:
    """List the kernels the wrapper's call() launches, in order, with each one's source."""
    defs: dict[str, tuple[str, str]] = {}
    matches = list(_DEF.finditer(code))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(code)
        wait = code.find("async_compile.wait", m.end())
        if 0 <= wait < end:
            end = wait
        defs[m.group(1)] = (m.group(2), code[m.start() : end])
    # The launches live in call() and in the module-level functions it calls for inlined subgraphs
    # (Inductor's decompose-K choice is one: `def decompose_k_mm_8_split_2(args):`), which precede it.
    starts = [i for i in (code.find("def call("), _first(_SUBGRAPH_FN, code)) if i >= 0]
    body = code[min(starts) :] if starts else code
    launches: list[KernelLaunch] = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        for m in _EXTERN.finditer(stripped):
            launches.append(KernelLaunch(m.group(1), "extern"))
        for m in _ATEN_OP.finditer(stripped):
            launches.append(KernelLaunch(m.group(1), "extern"))
        for m in _CUSTOM_OP.finditer(stripped):
            launches.append(KernelLaunch(m.group(1), "custom"))
        for m in VENDOR_LINEAR.finditer(stripped):
            launches.append(KernelLaunch(f"{m.group(1)}.{m.group(2)}", "vendor"))
        for name in re.findall(r"\b(\w+)(?:\.run)?\(", stripped):
            if name in defs:
                kind, src = defs[name]
                launches.append(KernelLaunch(name, kind, src))
    return tuple(launches)


def _first(pattern: re.Pattern, text: str) -> int:
    m = pattern.search(text)
    return m.start() if m else -1


def attribute(
    launches: Iterable[KernelLaunch], claimers: dict[str, Callable[[KernelLaunch], bool]], prefer: str = ""
) -> tuple[tuple[str, str], ...]:
    """Give each GEMM kernel to the backend that claims it ('?' when none does). The backend under
    test (`prefer`) is asked first: a kernel two backends could claim counts as the tested one's."""
    if prefer in claimers:
        claimers = {prefer: claimers[prefer], **claimers}
    owners = []
    for launch in launches:
        owner = next((name for name, claims in claimers.items() if claims(launch)), None)
        if owner is not None:
            owners.append((launch.name, owner))
        elif launch.kind == "custom" or (launch.mentions_gemm and launch.kind == "extern"):
            owners.append((launch.name, "?"))
    return tuple(owners)


def count_gemm_nodes(gm) -> int:
    """GEMMs in a Dynamo FX graph: calls of the torch GEMM functions, methods and nn.Linear."""
    import torch

    targets = {
        torch.mm, torch.bmm, torch.addmm, torch.baddbmm, torch.matmul, operator.matmul,
        torch.nn.functional.linear, torch._scaled_mm, torch.einsum,
    }  # fmt: skip
    methods = {"mm", "bmm", "addmm", "baddbmm", "matmul", "__matmul__"}
    n = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in targets:
            n += 1
        elif node.op == "call_method" and node.target in methods:
            n += 1
        elif node.op == "call_module" and isinstance(gm.get_submodule(node.target), torch.nn.Linear):
            n += 1
    return n


def no_own_kernel_reason(graphs: list[GraphProvenance], backend: str) -> str | None:
    """None when every GEMM of every graph that ran was `backend`'s own kernel; else the reason."""
    if not graphs:
        return "no compiled graph ran (Dynamo ran the function eagerly)"
    expected = sum(g.gemm_nodes for g in graphs)
    if expected == 0:
        return "the function contains no GEMM (mm, addmm, bmm, baddbmm, matmul, linear)"
    own = sum(len(g.gemm_kernels(backend)) for g in graphs)
    foreign = [f"{k} ({b})" for g in graphs for k, b in g.foreign(backend)]
    if foreign:
        return f"Inductor ran another backend's GEMM kernel: {', '.join(foreign)}"
    if own < expected:
        others = [launch.name for g in graphs for launch in g.launches if launch.mentions_gemm]
        how = f" (GEMM work went to: {', '.join(others)})" if others else ""
        return f"{expected - own} of {expected} GEMM(s) ran without a GEMM kernel of {backend}{how}"
    return None
