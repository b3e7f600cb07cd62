"""The cross-backend differential of a failure: the same inputs through the run's other backends.

A wrong result reads differently when every other backend gets the same inputs right ("wrong alone": look
at this backend) than when others are wrong too ("wrong like aten": look at what they share, the library
or torch). Only a failure Hypothesis will report pays for it (not every step of shrinking), and only the
backends of this run that can run here on the same device are tried, each under a short time limit.
Whatever an other backend does (no kernel of its own, raising, timing out) is one line of the report:
the differential never turns the failure into a crash or a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import backends, oracle
from ..compile.compiler import run_checked
from ..errors import Unsupported

if TYPE_CHECKING:
    import torch

    from ..compile.compiler import CompiledGemm
    from ..run.example import Example
    from ..run.session import GemmSession

# Seconds each other backend may take to compile and run the case; the run's --gemm-compile-timeout, if
# shorter, wins. A differential is a hint for the reader, not worth minutes of a red run.
LIMIT_S = 120.0


@dataclass(frozen=True)
class Other:
    """What one other backend did with the failing case's inputs."""

    backend: str
    outcome: str  # "ok" | "wrong" | "unsupported" | "error"
    ratio: float | None = None  # max |error| / tolerance, where its kernel ran
    detail: str = ""

    def line(self) -> str:
        if self.outcome in ("ok", "wrong"):
            return f"{self.backend}: max|err|/tol {self.ratio:.3g} ({self.outcome})"
        return f"{self.backend}: {self.outcome} ({self.detail})"


def candidates(session: GemmSession, example: Example, ran: str) -> list[str]:
    """The run's other backends that can take these inputs: available here, on the failing case's device."""
    device = backends.get(example.backend).device()
    out = []
    for name in session.options.differential:
        if name in (example.backend, ran) or name not in backends.names():
            continue
        if backends.probe(name).available and backends.get(name).device() == device:
            out.append(name)
    return out


def run(
    session: GemmSession,
    example: Example,
    ran: str,
    target: Callable[..., Any],
    flat: Sequence[Any],
    weights: Sequence[int],
    reference: tuple[torch.Tensor, torch.Tensor, torch.dtype],
) -> list[Other]:
    """Compile and run `target` on `flat` through each candidate; judge against the same `reference`
    (expected, tolerance, output dtype). `ran` is the backend (route) whose result was wrong."""
    results = []
    for name in candidates(session, example, ran):
        backend = backends.get(name)
        try:
            compiled = session.compiler.compile(backend, target, flat, weights)
            verdict = side_run(session, compiled, flat, reference)
            results.append(Other(name, "ok" if verdict.ok else "wrong", verdict.max_ratio))
        except Unsupported as exc:
            results.append(Other(name, "unsupported", detail=exc.reason))
        except Exception as exc:  # whatever it is, it is this backend's line, never the failing test's outcome
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            results.append(Other(name, "error", detail=f"{type(exc).__name__}: {first}"[:200]))
    return results


def side_run(
    session: GemmSession,
    compiled: CompiledGemm,
    flat: Sequence[Any],
    reference: tuple[torch.Tensor, torch.Tensor, torch.dtype],
    run: Callable[[CompiledGemm, Sequence[Any]], tuple[Any, Any]] = run_checked,
) -> oracle.Verdict:
    """One run of a compile made only to learn something about a failure (this differential, confirm.py), under
    the short LIMIT_S (the run's compile timeout, if shorter), judged against `reference` (expected, tolerance,
    output dtype) on a poisoned allocator like the check itself."""
    expected, tol, expected_dtype = reference
    timeout = session.compiler.timeout_s
    compiled.timeout_s = LIMIT_S if timeout <= 0 else min(timeout, LIMIT_S)
    oracle.poison_allocator(expected.new_empty(expected.shape, dtype=expected_dtype))
    out, _ = run(compiled, flat)
    return oracle.judge(out, expected, tol, expected_dtype)


def classify(others: Sequence[Other]) -> str:
    """'wrong alone', 'wrong like aten, cpp', or why there is no telling."""
    wrong = [o.backend for o in others if o.outcome == "wrong"]
    if wrong:
        return f"wrong like {', '.join(wrong)}"
    if any(o.outcome == "ok" for o in others):
        return "wrong alone"
    if others:
        return "undecided: no other backend ran its own kernel on these inputs"
    return "undecided: no other backend in this run can take these inputs"


def report_lines(others: Sequence[Other]) -> list[str]:
    """The failure report's lines: the classification, then one line per other backend."""
    lines = [f"  backends: {classify(others)} (same inputs through this run's other backends)"]
    lines += [f"    {o.line()}" for o in others]
    return lines
