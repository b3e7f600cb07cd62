"""One example of a test on one backend, as the run keeps it: the case, where it runs, its inputs, and what its
checks learnt (the route that ran, the compile-ahead worker's reply, the autotune candidates judged right).

The `gemm` a test receives (gemm.py) shows the case and its API over this record; check.py writes it, explore.py
reads it for its progress lines and the known failures, and crosscheck/ and report/ take it to know what they
are about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import backends
from ..cases.case import CaseInputs, GemmCase, build_inputs
from ..cases.memory import guard

if TYPE_CHECKING:
    from ..ahead.reply import Reply


@dataclass(eq=False)
class Example:
    case: GemmCase
    backend: str
    test_id: str = ""
    memory_limit: str | int = "auto"  # --gemm-memory-limit, applied before the inputs are allocated
    all_choices: bool = True  # autotuning's candidates are judged too: the memory guard counts their outputs
    use_ahead: bool = True  # False for a benchmark: its kernel is autotuned here, on a quiet machine
    calls: int = 0  # the test's calls of gemm.check(): an example with none verified nothing (decorator.py)
    checks: int = 0  # checks that reached the backend
    route: str | None = None  # the route the last check ran (a multi-route backend's), for known failures
    ahead: Reply | None = None  # what the compile-ahead worker learnt of the case (None: no worker had it)
    # Autotune candidates this example's checks judged right: a known entry that names a template counts a pass
    # as "its bug did not show" only where one of them ran (known/, XPASS).
    judged_right: tuple[str, ...] = ()
    # The kinds of the checks after the verified one that ran and were right (known.CROSSCHECK_KINDS: the compiled
    # code with one thread per OpenMP team, crosscheck/threads.py; a dynamic compile at another size,
    # crosscheck/sizes.py): a known entry of such a kind counts a pass only then.
    also_judged: set[str] = field(default_factory=set)
    _inputs: CaseInputs | None = field(default=None, repr=False)

    @property
    def device(self) -> str:
        return backends.get(self.backend).device()

    @property
    def inputs(self) -> CaseInputs:
        """The case's inputs on the backend's device, built once. A case too large for the memory free here is
        refused before anything is allocated (cases/memory.py)."""
        if self._inputs is None:
            guard(self.case, self.device, self.memory_limit, self.all_choices)
            self._inputs = build_inputs(self.case, self.device)
        return self._inputs
