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

from ._compat.pytest import point_reports_at
from ._state import RUNNER_FIXTURE
from .errors import GemmUsageError
from .space import case_space

GEMM_ARG = "gemm"


def gemm_case(**kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Run the decorated test once per selected backend, on GEMM cases drawn by Hypothesis.

    The test takes an argument `gemm` (see `Gemm`); other pytest fixtures work as usual. Keyword
    arguments narrow the case space: ops, dtypes, epilogues, layouts, shapes, max_examples; or
    `harvested=` (a harvest list or file, see pytest_gemmguard.harvest) gives the cases, `around=True`
    adds sizes next to them.
    """
    caller = sys._getframe(1).f_globals.get("__file__")  # a relative harvest file sits beside the test
    base = os.path.dirname(os.path.abspath(caller)) if caller else None
    space = case_space("@gemm_case", harvest_base=base, **kwargs)

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(test)
        if GEMM_ARG not in sig.parameters:
            raise GemmUsageError(f"@gemm_case: {test.__name__}() must take an argument named 'gemm'")
        fixtures = [p for name, p in sig.parameters.items() if name != GEMM_ARG]

        @functools.wraps(test)
        def gemm_case_test(**kw: Any) -> None:
            runner = kw.pop(RUNNER_FIXTURE)
            runner.explore(test, space, kw)

        params = [*fixtures, inspect.Parameter(RUNNER_FIXTURE, inspect.Parameter.KEYWORD_ONLY)]
        gemm_case_test.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        del gemm_case_test.__wrapped__  # pytest must see the new signature, not the test's own
        gemm_case_test._gemmguard_space = space  # type: ignore[attr-defined]
        point_reports_at(gemm_case_test, test)  # reports and skips name the test's own line
        return gemm_case_test

    return decorate
