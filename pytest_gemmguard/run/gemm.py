"""`Gemm`: one drawn case bound to one backend, what a `@gemm_case` test receives as `gemm`: the case and its
API (its fields, dtype, device, inputs, and `check`). What the run keeps of the example (example.py) is not the
test's to see."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..cases.case import CaseInputs, GemmCase
from ..cases.ops import DTYPES
from .check import check
from .example import Example

if TYPE_CHECKING:
    from .check import CheckResult
    from .session import GemmSession


class Gemm:
    """One drawn case bound to one backend: what a `@gemm_case` test receives as `gemm`."""

    def __init__(self, case: GemmCase, backend: str, session: GemmSession, test_id: str = "") -> None:
        options = getattr(session, "options", None)  # no session: a gemm for its inputs alone (tests)
        self._example = Example(
            case,
            backend,
            test_id,
            memory_limit=getattr(options, "memory_limit", "auto"),
            all_choices=getattr(options, "all_choices", True),
        )
        self._session = session

    case = property(lambda self: self._example.case)
    backend = property(lambda self: self._example.backend)
    test_id = property(lambda self: self._example.test_id)

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
        return self._example.device

    @property
    def inputs(self) -> CaseInputs:
        return self._example.inputs

    @property
    def args(self) -> tuple:
        """The op's inputs in its own argument order: mm(a, b), addmm(bias, a, b), linear(x, w, bias)."""
        return self.inputs.args

    def check(self, fn: Callable[..., Any] | None = None) -> CheckResult:
        """Compile `fn` (default: the case's own op and epilogue) through this backend, run it and
        compare with the float64 reference. Raises GemmMismatch on a wrong result; a case the backend
        did not run with its own kernel ends the example as unsupported."""
        self._example.calls += 1
        return check(self._session, self._example, fn)

    def __repr__(self) -> str:
        return f"Gemm({self.case!r}, backend={self.backend!r})"


def example_of(gemm: Gemm) -> Example:
    """What the run keeps of `gemm`'s example (explore.py, the decorator and the benchmark read and set it)."""
    return gemm._example
