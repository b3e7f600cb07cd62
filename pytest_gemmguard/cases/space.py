"""The part of the case space a test asks for (`CaseSpace`), which ops and shapes fit it, and `case_space`,
the one validator of case-space arguments (`@gemm_case`, `gemm_benchmark`, `strategies.gemm_cases`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import GemmUsageError
from .case import LAYOUTS, VALUES, GemmCase, aliasable
from .ops import DTYPES, OPS, chain_name, op_takes, parse_chain, shape_fits


@dataclass(frozen=True)
class CaseSpace:
    """Validated narrowing of the case space: None means "everything the device allows"."""

    ops: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    epilogues: tuple[str, ...] | None = None
    layouts: tuple[str, ...] | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    max_examples: int | None = None
    values: tuple[str, ...] | None = None  # cases.case.VALUES: ordinary numbers, NaN, inf
    # Explicit cases (`harvested=`): run exactly these, in order, instead of drawing any.
    cases: tuple[GemmCase, ...] | None = None


def values_of(space: CaseSpace) -> tuple[str, ...]:
    """What the space's operands may hold: as asked; else every kind where sizes are drawn, and ordinary numbers
    alone for listed shapes (the user's own cases: each runs as it is, and NaN or inf only where asked for)."""
    return space.values or (VALUES if not space.shapes else ("normal",))


def valid_ops(space: CaseSpace, dtypes: Sequence[str] | None = None, device: str | None = None) -> list[str]:
    """The space's ops (or, where it names none, those eager runs on `device`: support.default_ops) that take at
    least one of its dtypes (or `dtypes`, the device's defaults) in at least one of its layouts, and, with explicit
    shapes, at least one shape of theirs."""
    dtypes = space.dtypes or dtypes or list(DTYPES)
    layouts = space.layouts or LAYOUTS
    if space.ops is None and device is not None:
        from .support import default_ops  # runs eager on the device: not at validation

        candidates: Sequence[str] = default_ops(device)
    else:
        candidates = space.ops or tuple(OPS)
    out = []
    for op in candidates:
        if space.values and "normal" not in space.values and OPS[op].scaled:
            continue  # float8 has no inf, and the scaled ops are kept to ordinary numbers
        takes = [lay for lay in layouts if any(op_takes(op, d, lay) for d in dtypes)]
        if not takes:
            continue
        if space.shapes and not any(
            shape_fits(op, s) and any(aliasable(lay, s[-3], s[-2]) for lay in takes) for s in space.shapes
        ):
            continue
        out.append(op)
    return out


CASE_ARGS = ("ops", "dtypes", "epilogues", "layouts", "shapes", "values", "max_examples", "harvested", "around")


def _listed(where: str, arg: str, value: Any, if_empty: str) -> list | None:
    """None stays None (no narrowing); one string becomes a list of one; an empty list is an error."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple, set)) else None
    if items is None:
        raise GemmUsageError(f"{where}({arg}={value!r}): expected a name or a list of names")
    if not items:
        raise GemmUsageError(f"{where}({arg}=[]): the list is empty; {if_empty}")
    return items


def _names(where: str, arg: str, value: Any, known: Sequence[str]) -> tuple[str, ...] | None:
    value = _listed(where, arg, value, f"leave {arg} out to allow all")
    if value is None:
        return None
    out = []
    for v in value:
        name = str(v).strip().lower()
        if name not in known:
            raise GemmUsageError(f"{where}({arg}=...): unknown value {v!r}; valid: {', '.join(known)}")
        out.append(name)
    return tuple(dict.fromkeys(out))


def _shapes(
    where: str, value: Any, ops: tuple[str, ...] | None, arg: str = "shapes"
) -> tuple[tuple[int, ...], ...] | None:
    value = _listed(where, arg, value, f"leave {arg} out to draw shapes")
    if value is None:
        return None
    out = []
    for s in value:
        dims = tuple(s) if isinstance(s, (tuple, list)) else (s,)
        if len(dims) not in (3, 4) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
            raise GemmUsageError(f"{where}({arg}=...): {s!r} is not (M, N, K) or (B, M, N, K) of ints")
        if any(d <= 0 for d in dims):
            raise GemmUsageError(f"{where}({arg}=...): {s!r} has a size <= 0; every size must be >= 1")
        out.append(dims)
    kinds = {len(d) for d in out}
    chosen = ops or tuple(OPS)
    if kinds == {4} and not any(OPS[o].batched for o in chosen):
        raise GemmUsageError(f"{where}({arg}=...): (B, M, N, K) shapes need a batched op (bmm, baddbmm)")
    if kinds == {3} and ops is not None and all(OPS[o].batched for o in ops):
        raise GemmUsageError(f"{where}({arg}=...): bmm/baddbmm need (B, M, N, K) shapes")
    return tuple(out)


def _in_order(names: tuple[str, ...] | None, order: Sequence[str]) -> tuple[str, ...] | None:
    """`names` in `order`'s order: the first is what a draw shrinks toward (ordinary numbers before NaN)."""
    return None if names is None else tuple(sorted(names, key=list(order).index))


def _epilogues(where: str, value: Any, arg: str = "epilogues") -> tuple[str, ...] | None:
    value = _listed(where, arg, value, "use ['none'] for a bare GEMM")
    if value is None:
        return None
    try:
        return tuple(dict.fromkeys(chain_name(parse_chain(str(v))) for v in value))
    except ValueError as exc:
        raise GemmUsageError(f"{where}({arg}=...): {exc}") from None


def checked_args(where: str, kwargs: dict, singular: bool = False) -> tuple[tuple[str, ...] | None, int | None]:
    """What every list of case-space arguments must pass, drawn or harvested: no unknown name, known ops, and
    max_examples; returns the ops and max_examples."""
    unknown = sorted(set(kwargs) - set(CASE_ARGS))
    if unknown:
        raise GemmUsageError(f"{where} got unknown argument {unknown[0]!r}; valid: {', '.join(sorted(CASE_ARGS))}")
    ops = _names(where, "op" if singular else "ops", kwargs.get("ops"), list(OPS))
    max_examples = kwargs.get("max_examples")
    if max_examples is not None and (
        not isinstance(max_examples, int) or isinstance(max_examples, bool) or max_examples < 1
    ):
        raise GemmUsageError(f"{where}(max_examples={max_examples!r}): must be an integer >= 1")
    return ops, max_examples


def case_space(where: str = "@gemm_case", *, singular: bool = False, **kwargs: Any) -> CaseSpace:
    """Validate case-space arguments (`where` names the caller in errors; `singular`: the caller takes one
    value of each, `op=` rather than `ops=`, and its errors say so); a bad one raises GemmUsageError. A harvest's
    cases (`harvested=`, `around=`) are @gemm_case's alone: run/decorator.py hands those to harvest/cases.py."""

    def arg(name: str) -> str:
        return name[:-1] if singular else name

    ops, max_examples = checked_args(where, kwargs, singular)
    if "harvested" in kwargs or "around" in kwargs:
        raise GemmUsageError(f"{where} takes no harvested= or around= (they are @gemm_case's)")
    space = CaseSpace(
        ops=ops,
        dtypes=_names(where, arg("dtypes"), kwargs.get("dtypes"), list(DTYPES)),
        epilogues=_epilogues(where, kwargs.get("epilogues"), arg("epilogues")),
        layouts=_names(where, arg("layouts"), kwargs.get("layouts"), list(LAYOUTS)),
        shapes=_shapes(where, kwargs.get("shapes"), ops, arg("shapes")),
        max_examples=max_examples,
        values=_in_order(_names(where, "values", kwargs.get("values"), list(VALUES)), VALUES),
    )
    if space.values and "normal" not in space.values:
        for shape in space.shapes or ():
            if min(shape[-3], shape[-2]) < 2:
                raise GemmUsageError(
                    f"{where}({arg('shapes')}=...): {shape!r} cannot hold values={list(space.values)}: NaN and inf "
                    "need M and N >= 2, so one row and one column stay clean (add 'normal' or a larger shape)"
                )
    for shape in space.shapes or ():
        if space.layouts and not any(aliasable(lay, shape[-3], shape[-2]) for lay in space.layouts):
            raise GemmUsageError(
                f"{where}({arg('shapes')}=...): {shape!r} takes none of the layouts {', '.join(space.layouts)} "
                "(an aliased B is A transposed: it needs N = M)"
            )
    fitting = valid_ops(space)
    if not fitting:
        raise GemmUsageError(
            f"{where}: no op takes these dtypes and layouts together (float8_e4m3fn goes with the scaled_mm ops "
            "and the transposed_b layout, which take nothing else; the broadcast layout with bmm/baddbmm)"
        )
    for shape in space.shapes or ():
        if not any(shape_fits(op, shape) for op in fitting):
            raise GemmUsageError(
                f"{where}({arg('shapes')}=...): {shape!r} suits none of the ops {', '.join(fitting)} "
                "(the scaled ops need N and K multiples of 16, the blockwise ones K a multiple of 128)"
            )
    return space
