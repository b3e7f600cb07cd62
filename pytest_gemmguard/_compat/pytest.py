"""pytest internals gemmguard relies on (8.x-9.x tested): `place_as`, the attribute pytest's location lookup
(`_pytest._code.getfslineno`) follows from a wrapper to the function it stands for. With it, a `@gemm_case`
test's reports, skips and annotations point at the user's test, not at gemmguard's wrapper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def point_reports_at(wrapper: Callable[..., Any], test: Callable[..., Any]) -> None:
    """Make pytest locate `wrapper` (file and line of reports) where `test` is defined."""
    wrapper.place_as = test  # type: ignore[attr-defined]


def check() -> None:
    """Raise RuntimeError naming pytest's version when pytest stops honouring `place_as`."""
    import pytest
    from _pytest._code import getfslineno

    def target() -> None:
        pass

    def wrapper() -> None:
        pass

    point_reports_at(wrapper, target)
    if getfslineno(wrapper)[1] != target.__code__.co_firstlineno - 1:
        raise RuntimeError(f"pytest {pytest.__version__} no longer follows place_as: reports point at the wrapper")
