"""`@gemm_case`: run a test once per selected backend, on GEMM cases drawn by Hypothesis.

The decorated function's signature is rewritten so pytest injects the plugin's runner fixture; the
runner then calls the test once per example with `gemm` bound to the drawn case.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

from .._compat.pytest import point_reports_at
from ..cases.space import CaseSpace, case_space
from ..errors import GemmUsageError, NothingVerified
from . import RUNNER_FIXTURE

GEMM_ARG = "gemm"


def gemm_case(test: Callable[..., Any] | None = None, /, **kwargs: Any) -> Any:
    """Run the decorated test once per selected backend, on GEMM cases drawn by Hypothesis.

    The test takes an argument `gemm` (see `Gemm`); other pytest fixtures work as usual, and so does a test
    method of a class. Keyword arguments narrow the case space: ops, dtypes, epilogues, layouts, shapes,
    max_examples; or `harvested=` (a harvest list or file, see pytest_gemmguard.harvest) gives the cases,
    `around=True` adds sizes next to them. Bare `@gemm_case` is `@gemm_case()`: the whole case space.
    Every example must call `gemm.check()` (or `gemm.check(fn)`): one that returns without it verified
    nothing, and is the test's error.
    """
    if test is not None and (kwargs or not callable(test)):
        raise GemmUsageError(
            f"@gemm_case takes keyword arguments only (ops=..., shapes=..., ...); got {test!r} as a positional one"
        )
    caller = sys._getframe(1).f_globals.get("__file__")  # a relative harvest file sits beside the test
    base = os.path.dirname(os.path.abspath(caller)) if caller else None
    space = gemm_case_space("@gemm_case", base, **kwargs)

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        name = getattr(test, "__name__", repr(test))
        if hasattr(test, "_gemmguard_space"):
            raise GemmUsageError(
                f"@gemm_case: {name}() has two @gemm_case decorators; use one (one test runs one case space: "
                "write two tests for two)"
            )
        if getattr(test, "is_hypothesis_test", False):
            raise GemmUsageError(given_line(name))
        sig = inspect.signature(test)
        if GEMM_ARG not in sig.parameters:
            raise GemmUsageError(f"@gemm_case: {name}() must take an argument named 'gemm'")
        fixtures = [p for arg, p in sig.parameters.items() if arg != GEMM_ARG]

        @functools.wraps(test)
        def gemm_case_test(*args: Any, **kw: Any) -> None:  # args: a test method's `self`
            runner = kw.pop(RUNNER_FIXTURE)

            def example(gemm: Any, **fixtures: Any) -> None:
                from .gemm import example_of

                test(*args, gemm=gemm, **fixtures)
                if not example_of(gemm).calls:
                    raise NothingVerified(
                        f"{name}() returned without calling gemm.check() (or gemm.check(fn)), so nothing was "
                        "verified; a @gemm_case test must check every example it is given"
                    )

            runner.explore(example, space, kw)

        params = [*fixtures, inspect.Parameter(RUNNER_FIXTURE, inspect.Parameter.KEYWORD_ONLY)]
        gemm_case_test.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        del gemm_case_test.__wrapped__  # pytest must see the new signature, not the test's own
        gemm_case_test._gemmguard_space = space  # type: ignore[attr-defined]
        point_reports_at(gemm_case_test, test)  # reports and skips name the test's own line
        return gemm_case_test

    return decorate if test is None else decorate(test)


def gemm_case_space(where: str = "@gemm_case", base: str | None = None, **kwargs: Any) -> CaseSpace:
    """The case space @gemm_case's arguments give: a harvest's cases (`harvested=`, `around=`; a relative harvest
    file is taken from `base`) or the part of the space to draw from."""
    if "harvested" in kwargs or "around" in kwargs:
        from ..harvest.cases import harvested_space

        return harvested_space(where, kwargs, base)
    return case_space(where, **kwargs)


def given_line(name: str) -> str:
    """The one line for a `@gemm_case` test that Hypothesis's @given wraps too (either way round)."""
    return (
        f"@gemm_case: {name}() is also a Hypothesis @given test; @gemm_case draws its cases with Hypothesis "
        "itself: drop @given (or drop @gemm_case and draw with @given(case=pytest_gemmguard.strategies.gemm_cases()))"
    )
