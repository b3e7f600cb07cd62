"""A refusal that is a bug: Inductor found no valid choice for a case the backend takes (Backend.takes), so the case
fails (errors.BackendRefused) instead of counting as unsupported, with the cases of that op the backend ran in the
run as its evidence."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import BackendRefused, Unsupported

if TYPE_CHECKING:
    from ..backends import Backend
    from ..cases.case import GemmCase
    from .example import Example
    from .session import GemmSession

# How many cases of an op a backend ran are kept to show beside a refusal of one.
SHOWN = 3


def note_taken(session: GemmSession, backend: Backend, case: GemmCase) -> None:
    """A verified case: evidence that the backend takes its op, should it refuse another."""
    took = session.taken.setdefault((backend.name, case.op), [])
    if len(took) < SHOWN:
        took.append(case.describe())


def raise_if_taken(
    session: GemmSession, example: Example, backend: Backend, fn: Callable[..., Any] | None, exc: Unsupported
) -> None:
    """Raise BackendRefused where Inductor found no valid choice for the case's own GEMM and the backend takes every
    GEMM like it: that refusal is a bug of the backend, not a case outside it. A test's own function may compute in
    any dtype or hold no GEMM, so its refusals stay "unsupported"."""
    takes = getattr(backend, "takes", lambda case: None)  # a third-party backend need not subclass Backend
    takes = takes(example.case) if fn is None and exc.no_choice else None
    if takes:
        case = example.case
        took = session.taken.get((backend.name, case.op), [])
        raise BackendRefused(backend.name, case.describe(), case.op, exc.reason, takes, took) from None
