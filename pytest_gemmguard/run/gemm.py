"""`Gemm`: one drawn case bound to one backend, what a `@gemm_case` test receives as `gemm`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import backends
from ..cases.case import CaseInputs, GemmCase, build_inputs
from ..cases.memory import guard
from ..cases.ops import DTYPES

if TYPE_CHECKING:
    from .check import CheckResult
    from .session import GemmSession


class Gemm:
    """One drawn case bound to one backend: what a `@gemm_case` test receives as `gemm`."""

    def __init__(self, case: GemmCase, backend: str, session: GemmSession, test_id: str = "") -> None:
        self.case = case
        self.backend = backend
        self._session = session
        self._test_id = test_id
        self._inputs: CaseInputs | None = None
        self.route: str | None = None  # the route the last check ran (multi-route backends), for known failures
        self.checks = 0  # checks that reached the backend
        self.calls = 0  # calls of check() by the test: an example with none verified nothing (decorator.py)
        self.ahead: str | None = None  # what the compile-ahead worker said of this case (ok, error, fatal)
        self.ahead_s: float | None = None  # how long that worker took over it (compile, autotune, checks)
        self.ahead_late = False  # the worker started on it only when this process asked (not drawn ahead)
        self.ahead_detail = ""  # what the worker's compile raised, where it raised (then compiled here again)
        self.use_ahead = True  # False for a benchmark: its kernel is autotuned here, on a quiet machine
        # Autotune candidates this example's checks judged right: a known entry that names a template counts a
        # pass as "its bug did not show" only where one of them ran (known/, XPASS).
        self.judged_right: tuple[str, ...] = ()

    test_id = property(lambda self: self._test_id)

    # The case's fields, as the public API names them.
    op = property(lambda self: self.case.op)
    m = property(lambda self: self.case.m)
    n = property(lambda self: self.case.n)
    k = property(lambda self: self.case.k)
    batch = property(lambda self: self.case.batch)
    layout = property(lambda self: self.case.layout)
    epilogue = property(lambda self: self.case.epilogue)

    @property
    def dtype(self):
        return DTYPES[self.case.dtype]

    @property
    def device(self) -> str:
        return backends.get(self.backend).device()

    @property
    def inputs(self) -> CaseInputs:
        if self._inputs is None:
            # A case too large for the memory free here is refused before anything is allocated (cases/memory.py).
            options = getattr(self._session, "options", None)
            limit, all_choices = getattr(options, "memory_limit", "auto"), getattr(options, "all_choices", True)
            guard(self.case, self.device, limit, all_choices)
            self._inputs = build_inputs(self.case, self.device)
        return self._inputs

    @property
    def args(self) -> tuple:
        """The op's inputs in its own argument order: mm(a, b), addmm(bias, a, b), linear(x, w, bias)."""
        return self.inputs.args

    def check(self, fn: Callable[..., Any] | None = None) -> CheckResult:
        """Compile `fn` (default: the case's own op and epilogue) through this backend, run it and
        compare with the float64 reference. Raises GemmMismatch on a wrong result; a case the backend
        did not run with its own kernel ends the example as unsupported."""
        from .check import check

        self.calls += 1
        return check(self._session, self, fn)

    def __repr__(self) -> str:
        return f"Gemm({self.case!r}, backend={self.backend!r})"
