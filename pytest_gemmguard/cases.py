"""GemmCase (what one example computes), its inputs, and the `@gemm_case` decorator.

A GemmCase is plain frozen data: it crosses into Hypothesis output, failure reports and repro
scripts. Tensors are built from it on demand, deterministically from its fields and `seed`, so the
same case always means the same numbers, on any machine.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import GemmUsageError
from .ops import DTYPES, OPS, apply_chain, chain_name, gemm_out_dtype, op_takes, output_dtype, parse_chain

# Per-operand storage: "row" (contiguous), "col" (column-major: a transposed view of contiguous
# storage), "strided" (every other column of a wider buffer: non-contiguous), "offset" (contiguous
# but starting 3 elements into its storage, so not 16-byte aligned). A scaled op's scales are drawn
# apart ("scale" storage: positive float32, not powers of two, so a dropped scale shows).
LAYOUTS: dict[str, tuple[str, str]] = {
    "contiguous": ("row", "row"),
    "transposed_a": ("col", "row"),
    "transposed_b": ("row", "col"),
    "transposed_ab": ("col", "col"),
    "noncontiguous": ("strided", "strided"),
    "offset": ("offset", "offset"),
}
STORAGE_OFFSET = 3


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

    @property
    def steps(self) -> tuple[str, ...]:
        return parse_chain(self.epilogue)

    @property
    def out_dtype(self) -> str:
        return output_dtype(self.dtype, self.steps)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.batch, self.m, self.n, self.k) if OPS[self.op].batched else (self.m, self.n, self.k)

    def describe(self) -> str:
        dims = "×".join(str(d) for d in self.shape)
        return f"{self.op} {dims} {self.dtype} {self.layout} epilogue={self.epilogue}"


# ---------------------------------------------------------------- inputs


def _operand_seed(case_seed: int, role: str, shape: tuple[int, ...], dtype: str) -> int:
    # An operand's values depend only on its own role, shape and dtype (not on M for a weight), so a
    # weight is bit-identical across cases that share it: frozen-weight compiles can then be reused.
    key = f"{case_seed}|{role}|{shape}|{dtype}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def _make(shape: tuple[int, ...], storage: str, dtype: str, seed: int, device: str):
    import torch

    gen = torch.Generator().manual_seed(seed)
    if storage == "scale":
        return (0.5 + 1.5 * torch.rand(shape, generator=gen, dtype=torch.float32)).to(device)
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
    rowwise = OPS[case.op].rowwise_scales
    return {
        "a": ((*lead, case.m, case.k), a_store),
        "b": ((*lead, case.k, case.n), b_store),
        "w": ((case.n, case.k), b_store),
        "bias": (out_shape if case.op == "baddbmm" else (case.n,), "row"),
        "scale_a": ((case.m, 1) if rowwise else (), "scale"),
        "scale_b": ((1, case.n) if rowwise else (), "scale"),
        "epi_bias": ((case.n,), "row"),
        "residual": (out_shape, "row"),
    }


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


def build_inputs(case: GemmCase, device: str) -> CaseInputs:
    specs, dtypes = operand_specs(case), role_dtypes(case)

    def make(role: str):
        shape, store = specs[role]
        return _make(shape, store, dtypes[role], _operand_seed(case.seed, role, shape, dtypes[role]), device)

    args, extras = input_roles(case)
    return CaseInputs(tuple(make(r) for r in args), {r: make(r) for r in extras})


def _extra_roles(step: str) -> tuple[str, ...]:
    from .ops import STEPS

    return STEPS[step].extra_inputs


@functools.cache
def case_function(op: str, epilogue: str, dtype: str) -> Callable[..., Any]:
    """The eager function a case compiles: op(*args) then the epilogue, extras as trailing args.

    Cached so the same case structure is always the same Python function object (and code object):
    Dynamo's own cache, with its guards, then decides soundly when a compile can be reused.
    """
    import torch

    spec = OPS[op]
    steps = parse_chain(epilogue)
    roles = [r for s in steps for r in _extra_roles(s)]
    cast_to = DTYPES[output_dtype(dtype, steps)]
    n_args = len(spec.arg_names)

    def gemm_with_epilogue(*inputs: torch.Tensor) -> torch.Tensor:
        y = spec.call(*inputs[:n_args])
        return apply_chain(y, steps, dict(zip(roles, inputs[n_args:], strict=True)), cast_to)

    gemm_with_epilogue.__qualname__ = f"{op}[{chain_name(steps)}]"
    return gemm_with_epilogue


# ---------------------------------------------------------------- @gemm_case


@dataclass(frozen=True)
class CaseSpec:
    """The validated arguments of `@gemm_case`: the part of the case space a test asks for."""

    ops: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    epilogues: tuple[str, ...] | None = None
    layouts: tuple[str, ...] | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    max_examples: int | None = None


def _listed(arg: str, value: Any, if_empty: str) -> list | None:
    """None stays None (no narrowing); one string becomes a list of one; an empty list is an error."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise GemmUsageError(f"@gemm_case({arg}=[]): the list is empty; {if_empty}")
    return items


def _names(arg: str, value: Any, known: Sequence[str]) -> tuple[str, ...] | None:
    value = _listed(arg, value, f"leave {arg} out to allow all")
    if value is None:
        return None
    out = []
    for v in value:
        name = str(v).strip().lower()
        if name not in known:
            raise GemmUsageError(f"@gemm_case({arg}=...): unknown value {v!r}; valid: {', '.join(known)}")
        out.append(name)
    return tuple(dict.fromkeys(out))


def _shapes(value: Any, ops: tuple[str, ...] | None) -> tuple[tuple[int, ...], ...] | None:
    value = _listed("shapes", value, "leave shapes out to draw shapes")
    if value is None:
        return None
    out = []
    for s in value:
        dims = tuple(s) if isinstance(s, (tuple, list)) else (s,)
        if len(dims) not in (3, 4) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
            raise GemmUsageError(f"@gemm_case(shapes=...): {s!r} is not (M, N, K) or (B, M, N, K) of ints")
        if any(d <= 0 for d in dims):
            raise GemmUsageError(f"@gemm_case(shapes=...): {s!r} has a size <= 0; every size must be >= 1")
        out.append(dims)
    kinds = {len(d) for d in out}
    chosen = ops or tuple(OPS)
    if kinds == {4} and not any(OPS[o].batched for o in chosen):
        raise GemmUsageError("@gemm_case(shapes=...): (B, M, N, K) shapes need a batched op (bmm, baddbmm)")
    if kinds == {3} and ops is not None and all(OPS[o].batched for o in ops):
        raise GemmUsageError("@gemm_case(shapes=...): bmm/baddbmm need (B, M, N, K) shapes")
    return tuple(out)


def _epilogues(value: Any) -> tuple[str, ...] | None:
    value = _listed("epilogues", value, "use ['none'] for a bare GEMM")
    if value is None:
        return None
    try:
        return tuple(dict.fromkeys(chain_name(parse_chain(str(v))) for v in value))
    except ValueError as exc:
        raise GemmUsageError(f"@gemm_case(epilogues=...): {exc}") from None


def make_spec(**kwargs: Any) -> CaseSpec:
    """Validate `@gemm_case` keyword arguments; a bad one raises GemmUsageError naming it."""
    allowed = {"ops", "dtypes", "epilogues", "layouts", "shapes", "max_examples"}
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise GemmUsageError(f"@gemm_case got unknown argument {unknown[0]!r}; valid: {', '.join(sorted(allowed))}")
    ops = _names("ops", kwargs.get("ops"), list(OPS))
    max_examples = kwargs.get("max_examples")
    if max_examples is not None and (
        not isinstance(max_examples, int) or isinstance(max_examples, bool) or max_examples < 1
    ):
        raise GemmUsageError(f"@gemm_case(max_examples={max_examples!r}): must be an integer >= 1")
    spec = CaseSpec(
        ops=ops,
        dtypes=_names("dtypes", kwargs.get("dtypes"), list(DTYPES)),
        epilogues=_epilogues(kwargs.get("epilogues")),
        layouts=_names("layouts", kwargs.get("layouts"), list(LAYOUTS)),
        shapes=_shapes(kwargs.get("shapes"), ops),
        max_examples=max_examples,
    )
    ops_ = valid_ops(spec)
    if not ops_:
        raise GemmUsageError(
            "@gemm_case: no op takes these dtypes and layouts together (float8_e4m3fn goes with "
            "scaled_mm/scaled_mm_rowwise and the transposed_b layout, which take nothing else)"
        )
    for shape in spec.shapes or ():
        if not any(shape_fits(op, shape) for op in ops_):
            raise GemmUsageError(
                f"@gemm_case(shapes=...): {shape!r} suits none of the ops {', '.join(ops_)} "
                "(the scaled ops need N and K multiples of 16)"
            )
    return spec


def valid_ops(spec: CaseSpec, dtypes: Sequence[str] | None = None) -> list[str]:
    """The spec's ops that take at least one of its dtypes (or `dtypes`, the device's defaults) in at
    least one of its layouts, and, with explicit shapes, at least one shape of theirs."""
    dtypes = spec.dtypes or dtypes or list(DTYPES)
    out = []
    for op in spec.ops or OPS:
        if not any(op_takes(op, d, lay) for d in dtypes for lay in spec.layouts or LAYOUTS):
            continue
        if spec.shapes and not any(shape_fits(op, s) for s in spec.shapes):
            continue
        out.append(op)
    return out


def shape_fits(op: str, shape: tuple[int, ...]) -> bool:
    """Whether an explicit shape suits `op`: rank (batched or not) and the op's N, K alignment."""
    spec = OPS[op]
    if spec.batched != (len(shape) == 4):
        return False
    n, k = shape[-2], shape[-1]
    return n % spec.align == 0 and k % spec.align == 0


GEMM_ARG = "gemm"
RUNNER_FIXTURE = "_gemmguard_runner"


def gemm_case(**kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Run the decorated test once per selected backend, on GEMM cases drawn by Hypothesis.

    The test takes an argument `gemm` (see `Gemm`); other pytest fixtures work as usual. Keyword
    arguments narrow the case space: ops, dtypes, epilogues, layouts, shapes, max_examples.
    """
    spec = make_spec(**kwargs)

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(test)
        if GEMM_ARG not in sig.parameters:
            raise GemmUsageError(f"@gemm_case: {test.__name__}() must take an argument named 'gemm'")
        fixtures = [p for name, p in sig.parameters.items() if name != GEMM_ARG]

        @functools.wraps(test)
        def run_cases(**kw: Any) -> None:
            runner = kw.pop(RUNNER_FIXTURE)
            runner.run_cases(test, spec, kw)

        params = [*fixtures, inspect.Parameter(RUNNER_FIXTURE, inspect.Parameter.KEYWORD_ONLY)]
        run_cases.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        del run_cases.__wrapped__  # pytest must see the new signature, not the test's own
        run_cases._gemmguard_spec = spec  # type: ignore[attr-defined]
        return run_cases

    return decorate
