"""pytest internals gemmguard relies on (8.x-9.x tested): `place_as`, the attribute pytest's location lookup
(`_pytest._code.getfslineno`) follows from a wrapper to the function it stands for. With it, a `@gemm_case`
test's reports, skips and annotations point at the user's test, not at gemmguard's wrapper. And the shape of a
report's `longrepr` pytest prints whole in place of a traceback (`Report`)."""

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


class _Crash:
    def __init__(self, message: str) -> None:
        self.message = message


class Report:
    """gemmguard's failure report as a test report's `longrepr`: printed whole where pytest prints a traceback,
    while the short summary (and JUnit's message) take its first line. A plain string would be pytest's
    summary message too, and on CI (`CI` set) pytest prints that message untrimmed: the report twice. pytest
    duck-types a longrepr by `toterminal` and `reprcrash`; pytest-xdist sends it to the controller as `str()`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reprcrash = _Crash(text.splitlines()[0] if text else "")

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text
