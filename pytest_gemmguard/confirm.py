"""A wrong-looking autotune candidate is confirmed by a compile that picks it before it fails a case.

candidates.py judges each losing candidate on the tensors Inductor's autotuning benchmarked it with. Those
are not always what the compiled code would hand the kernel: on the H200 (torch 2.11, triton 3.6) every
Triton template of a small bf16 `linear` looked wrong on Inductor's random example tensors while the
winner, compiled and run on the case's inputs, was right. A benchmark harness that feeds a kernel other
strides or another bias than the real call is Inductor's business for timing, not a wrong result a user
can ever get, and a gate must not go red on it.

So each wrong-looking candidate (the first `LIMIT`, by identity) is compiled once more, alone: the case's
function through the same backend, with every selection that offers the candidate cut down to it (Inductor
then takes it without benchmarking) and no compile cache below Dynamo, run on the case's inputs and judged
by the case's own oracle, epilogue included. Only a candidate that is wrong there fails the case
("confirmed"). One that is right there, or that the new compile did not offer, or whose compile raised,
is reported in the summary as unconfirmed, never as a pass of the candidate or a failure of the case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import candidates, oracle
from ._compat import inductor

if TYPE_CHECKING:
    import torch

    from .backends import Backend
    from .candidates import CandidateResult
    from .gemm import Gemm
    from .session import GemmSession

LIMIT = 3  # candidates confirmed per case; one compile each, without autotuning
LIMIT_S = 120.0  # seconds each confirming compile and run may take (the run's compile timeout, if shorter)


@dataclass(frozen=True)
class Confirmation:
    """What the compile that picked one wrong-looking candidate returned on the case's inputs."""

    candidate: CandidateResult
    outcome: str  # "wrong" (confirmed), "right", "not offered", "error", "not tried" (over LIMIT)
    ratio: float | None = None  # max |error| / tolerance of that compile's output
    detail: str = ""

    @property
    def confirmed(self) -> bool:
        return self.outcome == "wrong"

    def line(self) -> str:
        head = f"{self.candidate.name} compiled alone"
        if self.outcome in ("wrong", "right"):
            return f"{head}: {self.outcome} on the case's inputs, max|err|/tol {self.ratio:.3g}"
        return f"{head}: {self.outcome}{f' ({self.detail})' if self.detail else ''}"


def run(
    session: GemmSession,
    gemm: Gemm,
    backend: Backend,
    target: Callable[..., Any],
    flat: Sequence[Any],
    weights: Sequence[int],
    reference: tuple[torch.Tensor, torch.Tensor, torch.dtype],
    wrong: Sequence[CandidateResult],
) -> list[Confirmation]:
    """One Confirmation per wrong-looking candidate, in order; remembered per case for the session, so a
    re-run of the example (Hypothesis replays a failure) costs nothing and reads the same."""
    memo = session.confirmations
    done: list[Confirmation] = []
    tried = 0
    for result in wrong:
        key = (repr(gemm.case), gemm.backend, candidates.identity(result.name, result.description))
        if key not in memo:
            if tried >= LIMIT:
                done.append(Confirmation(result, "not tried", detail=f"gemmguard confirms {LIMIT} per case"))
                continue
            tried += 1
            session.progress(f"[{gemm.backend}] {gemm.case.describe()}: compiling {result.name} alone to confirm it")
            memo[key] = _confirm(session, backend, target, flat, weights, reference, key[2])
        done.append(Confirmation(result, *memo[key]))
    return done


def _confirm(session, backend, target, flat, weights, reference, identity) -> tuple[str, float | None, str]:
    expected, tol, expected_dtype = reference

    def keep(choice: Any) -> bool:
        facts = inductor.choice_facts(choice)
        return candidates.identity(facts.name, facts.description) == identity

    timeout = session.compiler.timeout_s
    try:
        with inductor.patched_config({"fx_graph_cache": False}), inductor.only_choices(keep) as cut:
            compiled = session.compiler.compile_fresh(backend, target, flat, weights)
            compiled.timeout_s = LIMIT_S if timeout <= 0 else min(timeout, LIMIT_S)
            oracle.poison_allocator(expected.new_empty(expected.shape, dtype=expected_dtype))
            out, _ = compiled(*flat)  # not run_checked: an extern candidate is not the backend's own kernel
    except Exception as exc:
        return "error", None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if not cut:
        return "not offered", None, "the new compile's selections did not offer it"
    verdict = oracle.judge(out, expected, tol, expected_dtype)
    return ("right" if verdict.ok else "wrong"), verdict.max_ratio, ""
