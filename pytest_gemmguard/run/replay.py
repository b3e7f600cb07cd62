"""--gemm-replay: the one line a failure's report gives to run its example again, and nothing else.

A drawn example is Hypothesis's: `VERSION:BLOB`, the choices Hypothesis made, replayed through the test's own
strategy. An explicit example (a listed shape's case from the regime tour, a harvested GEMM) was never drawn,
so it has no blob: its line names the case itself, `case:OP,M,N,K,BATCH,DTYPE,LAYOUT,EPILOGUE,SEED[,VALUES]`
(VALUES only where the operands hold NaN or inf), and the replay runs that case alone, once. Torch-free:
validate.py checks the option when pytest starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..cases.case import GemmCase
    from ..cases.space import CaseSpace

CASE = "case"
FIELDS = ("op", "m", "n", "k", "batch", "dtype", "layout", "epilogue", "seed")
NUMBERS = frozenset({"m", "n", "k", "batch", "seed"})
SPECIALS = ("nan", "inf")  # cases.case.VALUES past "normal", named here without importing torch


def line(test_id: str, value: str) -> str:
    """The report's reproduce line."""
    return f"gemmguard reproduce: pytest '{test_id}' --gemm-replay='{value}'"


def case_value(case: GemmCase) -> str:
    """The --gemm-replay value of an explicit example (`,VALUES` after the seed only where they are not ordinary
    numbers, so a case of ordinary numbers prints as it did before cases had values)."""
    value = f"{CASE}:" + ",".join(str(getattr(case, name)) for name in FIELDS)
    return value if case.values == "normal" else f"{value},{case.values}"


def case_fields(value: str | None) -> dict[str, Any] | None:
    """The fields of a `case:...` value (None for a blob, or no value); ValueError when it is malformed."""
    kind, _, rest = (value or "").partition(":")
    if kind != CASE:
        return None
    parts = [p.strip() for p in rest.split(",")]
    if len(parts) not in (len(FIELDS), len(FIELDS) + 1) or not all(parts):
        raise ValueError(f"expected case:{','.join(f.upper() for f in FIELDS)}[,VALUES] as printed in a failure report")
    fields: dict[str, Any] = {}
    for name, text in zip(FIELDS, parts, strict=False):
        if name in NUMBERS and not text.isdigit():
            raise ValueError(f"case: {name.upper()} must be a whole number, not {text!r}")
        fields[name] = int(text) if name in NUMBERS else text
    if len(parts) > len(FIELDS):
        if parts[-1] not in SPECIALS:
            raise ValueError(f"case: VALUES must be one of {', '.join(SPECIALS)}, not {parts[-1]!r}")
        fields["values"] = parts[-1]
    return fields


def replayed_case(value: str | None) -> GemmCase | None:
    """The case a `case:...` value names (None for a blob, or no replay)."""
    fields = case_fields(value)
    if fields is None:
        return None
    from ..cases.case import GemmCase

    return GemmCase(**fields)


def explicit_case(value: str | None, space: CaseSpace, test_id: str) -> GemmCase | None:
    """The case a `case:...` value names, where the test could run it (None for a blob, or no replay)."""
    case = replayed_case(value)
    if case is not None and not fits(case, space):
        from ..errors import ReplayNotReproduced

        raise ReplayNotReproduced(
            f"--gemm-replay did not reproduce a failure of {test_id}: {case.describe()} is no case of this test "
            "(the line is from another test, or the test's arguments changed since it was printed)"
        )
    return case


def fits(case: GemmCase, space: CaseSpace) -> bool:
    """Whether the test could have run `case`: its harvested GEMMs, or its ops, dtypes, layouts and epilogues."""
    import dataclasses

    from ..cases.case import LAYOUTS, takes_values
    from ..cases.ops import DTYPES, OPS, op_takes, parse_chain
    from ..cases.space import values_of

    if space.cases is not None:
        return any(dataclasses.replace(c, seed=case.seed) == case for c in space.cases)
    if case.op not in (space.ops or OPS) or case.dtype not in (space.dtypes or DTYPES):
        return False
    if case.layout not in (space.layouts or LAYOUTS) or not op_takes(case.op, case.dtype, case.layout):
        return False
    if case.values not in values_of(space) or not takes_values(case.op, case.values, case.m, case.n):
        return False
    if space.epilogues:
        return case.epilogue in space.epilogues
    try:
        parse_chain(case.epilogue)
    except ValueError:  # not a chain of known steps
        return False
    return True
