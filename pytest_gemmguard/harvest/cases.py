"""A harvest as gemmguard cases: `cases_for` (each GEMM as it runs, and with `around` the sizes next to
it), `harvested_cases` (a harvest list or file) and `harvested_space`, what `@gemm_case(harvested=..., around=...)`
calls."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..cases.case import GemmCase
from ..cases.space import CaseSpace, checked_args
from ..errors import GemmUsageError
from .file import load_harvest
from .items import HarvestedGemm


def cases_for(items: Iterable[HarvestedGemm], *, around: bool = False, seed: int = 0) -> list[GemmCase]:
    """The gemmguard cases of a harvest: each GEMM as it runs; with `around`, then sizes next to each
    (M - 1, M + 1, the next multiples of 8 and 16 above M, and M = 1 for decode). Only M varies: N and K
    are the weights' and fixed by the model. Duplicates are dropped, the model's own sizes come first."""
    items = list(items)
    out = [g.case(seed) for g in items]
    seen = set(out)
    if around:
        for g in items:
            for m in _near(g.m):
                case = replace(g.case(seed), m=m)
                if case not in seen:
                    seen.add(case)
                    out.append(case)
    return out


def _near(m: int) -> list[int]:
    sizes = [m - 1, m + 1, (m // 8 + 1) * 8, (m // 16 + 1) * 16, 1]
    return [s for s in dict.fromkeys(sizes) if s >= 1 and s != m]


def harvested_cases(value: Any, *, around: bool = False, seed: int = 0, base: str | None = None) -> list[GemmCase]:
    """`@gemm_case(harvested=...)`: a harvest (list of HarvestedGemm) or a path to a harvest file (relative
    paths from `base`, the test file's directory) -> its cases. Raises GemmUsageError (one line)."""
    if isinstance(value, (str, os.PathLike)):
        path = Path(value)
        if base is not None and not path.is_absolute():
            path = Path(base) / path
        value = load_harvest(path)
    items = list(value) if isinstance(value, (list, tuple)) else None
    if items is None or not all(isinstance(g, HarvestedGemm) for g in items):
        raise GemmUsageError(
            "@gemm_case(harvested=...): give the list harvest_gemms returned, or the path of a harvest JSON file"
        )
    if not items:
        skipped = getattr(value, "skipped_line", lambda: None)()
        raise GemmUsageError(f"@gemm_case(harvested=...): the harvest holds no GEMM gemmguard can run{_and(skipped)}")
    return cases_for(items, around=around, seed=seed)


def _and(line: str | None) -> str:
    return f" ({line})" if line else ""


def harvested_space(where: str, kwargs: dict, base: str | None = None) -> CaseSpace:
    """`harvested=..., around=...`: the model's own GEMMs are the cases; nothing is drawn. A relative harvest file
    is taken from `base` (the test file's directory)."""
    _, max_examples = checked_args(where, kwargs)
    if kwargs.get("harvested") is None:
        raise GemmUsageError(f"{where}(around=...) goes with harvested=: the sizes around a model's GEMMs")
    narrowing = sorted(set(kwargs) & {"ops", "dtypes", "epilogues", "layouts", "shapes"})
    if narrowing:
        raise GemmUsageError(
            f"{where}(harvested=...) gives the cases itself; drop {narrowing[0]}= (filter the harvest list instead)"
        )
    around = kwargs.get("around", False)
    if not isinstance(around, bool):
        raise GemmUsageError(f"{where}(around={around!r}): must be True or False")
    cases = harvested_cases(kwargs["harvested"], around=around, base=base)
    return CaseSpace(max_examples=max_examples, cases=tuple(cases))
