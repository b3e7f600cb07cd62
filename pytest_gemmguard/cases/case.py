"""GemmCase (what one example computes), its inputs, and the eager function it compiles.

A GemmCase is plain frozen data: it crosses into Hypothesis output, failure reports and repro
scripts. Tensors are built from it on demand, deterministically from its fields and `seed`, so the
same case always means the same numbers, on any machine.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .ops import BLOCK, DTYPES, OPS, STEPS, apply_chain, chain_name, gemm_out_dtype, output_dtype, parse_chain

# Per-operand storage: "row" (contiguous), "col" (column-major: a transposed view of contiguous
# storage), "strided" (every other column of a wider buffer: non-contiguous), "offset" (contiguous
# but starting 3 elements into its storage, so not 16-byte aligned), "broadcast" (one matrix expanded to every
# batch: a zero batch stride, as a weight shared across a batch by `expand` is; pytorch#179505 faulted on one while
# autotuning). A scaled op's scales are drawn apart ("scale" storage: positive float32, not powers of two, so a
# dropped scale shows; "scale_col", "scale_col4": the same, column-major, for the blockwise recipes' strides).
# "aliased": B is A's own storage, so the two operands share it: A transposed (`x @ x.T`; a linear's weight is the
# activation), or, where K = M too, A itself (`x @ x`, `bmm(x, x)`: pytorch#156412 crashed under max-autotune), and
# then a residual step adds A as well (`linear(x, x) + x`: pytorch#149475's fused linear+add on one tensor). It needs
# N = M (`aliasable`).
# The order is the tour's (strategies.regime_tour): "broadcast" second, so the first batched op's row, at a size
# where Inductor keeps the GEMM a GEMM, takes it; "aliased" last, so the rows before it stay as they were.
LAYOUTS: dict[str, tuple[str, str]] = {
    "contiguous": ("row", "row"),
    "broadcast": ("row", "broadcast"),  # batched ops only (ops.op_takes)
    "transposed_a": ("col", "row"),
    "transposed_b": ("row", "col"),
    "transposed_ab": ("col", "col"),
    "noncontiguous": ("strided", "strided"),
    "offset": ("offset", "offset"),
    "aliased": ("row", "aliased"),  # N = M only (aliasable); B made from A (alias_operands)
}
STORAGE_OFFSET = 3

# What the operands hold besides ordinary numbers. "nan": one NaN in A (so its row of the result is NaN) and one in B
# (its column); "inf": +inf in A and -inf in B, so that row and column hold +-inf where float64 says so, and NaN
# where float64 has it (inf - inf where they meet, an infinity times an exact zero). The rest of the result stays
# finite, and the oracle holds every special element to the same special and every other element to its bound: a
# kernel that drops a NaN (treats it as 0), leaks one into clean rows (a vendor bf16 bmm once did) or turns inf times
# a finite number into NaN (pytorch#171034) fails. Not for the scaled ops (float8 e4m3fn has no inf) and only where
# M, N >= 2, so at least one row and one column stay clean (`takes_values`). "normal" is first: Hypothesis shrinks
# toward it.
VALUES = ("normal", "nan", "inf")


def takes_values(op: str, values: str, m: int, n: int) -> bool:
    """Whether a case of `op` at (M, N) can hold `values` (see VALUES)."""
    return values == "normal" or (not OPS[op].scaled and m >= 2 and n >= 2)


def aliasable(layout: str, m: int, n: int) -> bool:
    """Whether a case of (M, N) can take `layout`: an aliased B is A transposed, so it needs N = M."""
    return layout != "aliased" or m == n


@dataclass(frozen=True)
class GemmCase:
    """One GEMM: `op` on (M×K)·(K×N) [× batch], in `dtype`, stored as `layout`, then `epilogue`."""

    op: str
    m: int
    n: int
    k: int
    batch: int = 0  # 0 for unbatched ops
    dtype: str = "float32"
    layout: str = "contiguous"
    epilogue: str = "none"
    seed: int = 0
    values: str = "normal"  # VALUES: NaN or inf planted in A and B (last, so positional construction stays as it was)

    @property
    def steps(self) -> tuple[str, ...]:
        return parse_chain(self.epilogue)

    @property
    def out_dtype(self) -> str:
        return output_dtype(self.dtype, self.steps)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.batch, self.m, self.n, self.k) if OPS[self.op].batched else (self.m, self.n, self.k)

    @property
    def elements(self) -> int:
        """The most elements one tensor of the case spans (A, B or the result, a batch counted whole): past
        2**31 (`cases.big`) a kernel that indexes with 32-bit integers wraps."""
        lead = max(self.batch, 1) if OPS[self.op].batched else 1
        return lead * max(self.m * self.k, self.k * self.n, self.m * self.n)

    def describe(self) -> str:
        dims = "×".join(str(d) for d in self.shape)
        text = f"{self.op} {dims} {self.dtype} {self.layout} epilogue={self.epilogue}"
        return text if self.values == "normal" else f"{text} values={self.values}"


# ---------------------------------------------------------------- inputs


def _operand_seed(case_seed: int, role: str, shape: tuple[int, ...], dtype: str) -> int:
    # An operand's values depend only on its own role, shape and dtype (not on M for a weight), so a
    # weight is bit-identical across cases that share it: frozen-weight compiles can then be reused.
    key = f"{case_seed}|{role}|{shape}|{dtype}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def _make(shape: tuple[int, ...], storage: str, dtype: str, seed: int, device: str):
    if storage == "aliased":  # a placeholder: alias_operands puts A's own storage here
        return None
    if storage == "broadcast":
        return _make((1, *shape[1:]), "row", dtype, seed, device).expand(shape)
    gen = torch.Generator().manual_seed(seed)
    if storage.startswith("scale"):
        scales = (0.5 + 1.5 * torch.rand(shape, generator=gen, dtype=torch.float32)).to(device)
        if storage == "scale":
            return scales
        # Column-major, the leading dimension padded to a multiple of 4 for "scale_col4": the blockwise recipes'
        # strides (ops.OpSpec.scale_blocks; case.scale_specs says which scale takes which).
        rows, cols = shape
        lead = -(-rows // 4) * 4 if storage == "scale_col4" else rows
        store = torch.zeros((cols, lead), dtype=torch.float32, device=device)
        store[:, :rows] = scales.t()
        return store.t()[:rows]
    values = torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=DTYPES[dtype])
    if storage == "row":
        return values.contiguous()
    if storage == "col":
        return values.transpose(-1, -2).contiguous().transpose(-1, -2)
    if storage == "strided":
        wide = torch.zeros((*shape[:-1], 2 * shape[-1]), dtype=values.dtype, device=device)
        out = wide[..., ::2]
    elif storage == "offset":
        flat = torch.zeros(values.numel() + STORAGE_OFFSET, dtype=values.dtype, device=device)
        out = flat[STORAGE_OFFSET:].view(shape)
    else:  # pragma: no cover - LAYOUTS is closed
        raise ValueError(storage)
    out.copy_(values)
    return out


@dataclass
class CaseInputs:
    """The tensors of a case: `args` in the op's own order, then the epilogue's extra tensors."""

    args: tuple
    extras: dict = field(default_factory=dict)

    @property
    def flat(self) -> tuple:
        return self.args + tuple(self.extras.values())


def operand_specs(case: GemmCase) -> dict[str, tuple[tuple[int, ...], str]]:
    """(shape, storage) of every tensor a case may read, by role."""
    lead = (case.batch,) if OPS[case.op].batched else ()
    out_shape = (*lead, case.m, case.n)
    a_store, b_store = LAYOUTS[case.layout]
    return {
        "a": ((*lead, case.m, case.k), a_store),
        "b": ((*lead, case.k, case.n), b_store),
        "w": ((case.n, case.k), b_store),
        "bias": (out_shape if case.op == "baddbmm" else (case.n,), "row"),
        **scale_specs(case),
        "epi_bias": ((case.n,), "row"),
        "residual": (out_shape, "aliased" if _residual_is_a(case) else "row"),
    }


def scale_specs(case: GemmCase) -> dict[str, tuple[tuple[int, ...], str]]:
    """(shape, storage) of a scaled op's scales: one number each; one per row of A and per column of B; or one per
    block (ops.OpSpec.scale_blocks), A's of (M, K/128) column-major or (M/128, K/128) row-major, B's of (K/128, N)
    row-major or (K/128, N/128) column-major with its leading dimension padded to 4: the strides torch 2.11's
    cuBLASLt path takes (support.py asks eager whether the running torch still does)."""
    spec = OPS[case.op]
    if spec.scale_blocks:
        a_block, b_block = spec.scale_blocks
        blocks = -(-case.k // BLOCK)
        a = ((case.m, blocks), "scale_col") if a_block == "1x128" else ((-(-case.m // BLOCK), blocks), "scale")
        b = ((blocks, case.n), "scale") if b_block == "1x128" else ((blocks, -(-case.n // BLOCK)), "scale_col4")
        return {"scale_a": a, "scale_b": b}
    rowwise = spec.rowwise_scales
    return {"scale_a": ((case.m, 1) if rowwise else (), "scale"), "scale_b": ((1, case.n) if rowwise else (), "scale")}


def row_dims(case: GemmCase) -> dict[str, int]:
    """The dimension holding the result's rows, for each input that has one: a row of every GEMM of the space, and
    of every epilogue step, is computed from the same row of these and the whole of the others (oracle/chunks.py)."""
    dims = {"a": -2, "residual": -2}
    if case.op == "baddbmm":
        dims["bias"] = -2
    blocks = OPS[case.op].scale_blocks
    if OPS[case.op].rowwise_scales or (blocks and blocks[0] == "1x128"):
        dims["scale_a"] = 0  # (M, 1) or (M, K/128); a 128x128 block's scale spans 128 rows (run/reference.py)
    return dims


def _residual_is_a(case: GemmCase) -> bool:
    """An aliased case whose residual can be A itself: the same shape (K = M = N) and dtype (no cast before it)."""
    if case.layout != "aliased" or "residual" not in case.steps or not case.k == case.m == case.n:
        return False
    return DTYPES[role_dtypes(case)["residual"]] == DTYPES[case.dtype]


def input_roles(case: GemmCase) -> tuple[list[str], list[str]]:
    """The op's argument roles in order, and the epilogue's extra roles in order."""
    return list(OPS[case.op].arg_names), list(role_dtypes(case))[len(OPS[case.op].arg_names) :]


def role_dtypes(case: GemmCase) -> dict[str, str]:
    """Each input's dtype: the case dtype, except that an epilogue tensor read after a cast has the
    cast's dtype (otherwise type promotion would silently undo the cast)."""
    dtypes = dict.fromkeys(OPS[case.op].arg_names, case.dtype)
    dtypes.update(dict.fromkeys(("scale_a", "scale_b"), "float32") if OPS[case.op].scaled else {})
    current = gemm_out_dtype(case.dtype)
    for step in case.steps:
        if step == "cast":
            current = output_dtype(case.dtype, case.steps)
        dtypes.update(dict.fromkeys(_extra_roles(step), current))
    return dtypes


def alias_operands(roles: list[str], tensors: list) -> list:
    """An aliased case's operands made from A's own storage: `b` is A itself where A is square (`x @ x`: one tensor
    passed twice), else A transposed (a view); a linear's `w` is A itself; a `residual` left unmade is A; every
    other operand as made."""
    made = dict(zip(roles, tensors, strict=True))
    a = made["a"]
    if "b" in made and made["b"] is None:
        made["b"] = a if a.shape[-1] == a.shape[-2] else a.transpose(-1, -2)
    for role in ("w", "residual"):
        if role in made and made[role] is None:
            made[role] = a
    return [made[r] for r in roles]


def plant_values(roles: list[str], tensors: list, values: str, seed: int) -> list:
    """NaN or inf written into A and B where a case holds `values` (VALUES), in place, at places drawn from `seed`:
    A's at one row and depth, B's at one column and depth (B's own only where B is not A's storage: an aliased B
    already shows A's). A row or column past the first tile is as likely as the first."""
    if values == "normal":
        return tensors
    made = dict(zip(roles, tensors, strict=True))
    a, b = made["a"], made.get("b", made.get("w"))
    gen = torch.Generator().manual_seed(seed ^ 0x5EC1A1)

    def pick(size: int) -> int:
        return int(torch.randint(size, (), generator=gen))

    lead = tuple(pick(d) for d in a.shape[:-2])
    a[(*lead, pick(a.shape[-2]), pick(a.shape[-1]))] = float("nan") if values == "nan" else float("inf")
    if b.untyped_storage().data_ptr() != a.untyped_storage().data_ptr():
        lead = tuple(pick(d) for d in b.shape[:-2])
        b[(*lead, pick(b.shape[-2]), pick(b.shape[-1]))] = float("nan") if values == "nan" else float("-inf")
    return tensors


def build_inputs(case: GemmCase, device: str) -> CaseInputs:
    if not aliasable(case.layout, case.m, case.n):
        raise ValueError(f"{case.describe()}: an aliased B is A transposed, so N must equal M")
    if case.values not in VALUES or not takes_values(case.op, case.values, case.m, case.n):
        raise ValueError(f"{case.describe()}: {case.op} at M={case.m}, N={case.n} takes no values={case.values}")
    specs, dtypes = operand_specs(case), role_dtypes(case)
    args, extras = input_roles(case)
    roles = [*args, *extras]
    made = [_make(*specs[r], dtypes[r], _operand_seed(case.seed, r, specs[r][0], dtypes[r]), device) for r in roles]
    made = plant_values(roles, alias_operands(roles, made), case.values, case.seed)
    return CaseInputs(tuple(made[: len(args)]), dict(zip(extras, made[len(args) :], strict=True)))


def _extra_roles(step: str) -> tuple[str, ...]:
    return STEPS[step].extra_inputs


@functools.cache
def case_function(op: str, epilogue: str, dtype: str) -> Callable[..., Any]:
    """The eager function a case compiles: op(*args) then the epilogue, extras as trailing args.

    Cached so the same case structure is always the same Python function object (and code object):
    Dynamo's own cache, with its guards, then decides soundly when a compile can be reused.
    """
    op_spec = OPS[op]
    steps = parse_chain(epilogue)
    roles = [r for s in steps for r in _extra_roles(s)]
    cast_to = DTYPES[output_dtype(dtype, steps)]
    n_args = len(op_spec.arg_names)

    def gemm_with_epilogue(*inputs: torch.Tensor) -> torch.Tensor:
        y = op_spec.call(*inputs[:n_args])
        return apply_chain(y, steps, dict(zip(roles, inputs[n_args:], strict=True)), cast_to)

    gemm_with_epilogue.__qualname__ = f"{op}[{chain_name(steps)}]"
    return gemm_with_epilogue
