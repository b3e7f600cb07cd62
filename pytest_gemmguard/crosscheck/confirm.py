"""A wrong-looking autotune candidate is confirmed by a compile that picks it before it fails a case.

compile/candidates.py judges each losing candidate on the tensors Inductor's autotuning benchmarked it with. Those
are not always what the compiled code would hand the kernel: on the H200 (torch 2.11, triton 3.6) every
Triton template of a small bf16 `linear` looked wrong on Inductor's random example tensors while the
winner, compiled and run on the case's inputs, was right. A benchmark harness that feeds a kernel other
strides or another bias than the real call is Inductor's business for timing, not a wrong result a user
can ever get, and a gate must not go red on it.

So each wrong-looking candidate (the first `LIMIT`, by identity) is compiled once more, alone: the case's
function through the same backend, with every selection that offers the candidate cut down to it (Inductor
then takes it without benchmarking) and no compile cache below Dynamo, run on the case's inputs and judged
by the case's own oracle, epilogue included. Only a candidate that is wrong there fails the case
("confirmed"). One that is right there is counted in the summary as right when compiled alone; one the
new compile did not offer (or not alone), whose compile raised, or beyond the LIMIT is counted apart, with
its reason, as not settled: never a failure of the case, never hidden. A CUDA fault while confirming fails
the case with its reason (the process's CUDA context may be gone).

A wrong *winner* is never confirmed this way (it ran: its output is the verdict). Where exactly one known
entry that names candidates covers the case, `blame` asks whether the fault follows those candidates both
ways: the wrong-looking candidates are confirmed as above, at least one named one is wrong alone, and one
more compile, with every named choice withheld from autotuning, is right on the case's inputs. Only then does
the failure carry the confirmed names, which the entry explains if every one is its own.

Each confirmation keeps its compile for the session (Dynamo holds every backend it was given, and the CPP
backend's frozen module its weights): a few per case at most, and only for cases with a wrong-looking
candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from .._compat import inductor
from ..compile import candidates
from ..errors import BackendCrashed
from . import differential

if TYPE_CHECKING:
    import torch

    from ..backends import Backend
    from ..compile.candidates import CandidateResult
    from ..run.example import Example
    from ..run.session import GemmSession

LIMIT = 3  # candidates confirmed per case; one compile each, without autotuning
# The outcomes that do not fail the case, each counted in the summary under its own words (report/table.py).
RIGHT, UNSETTLED = "right", ("not offered", "not isolated", "error", "not tried")


@dataclass(frozen=True)
class Confirmation:
    """What the compile that picked one wrong-looking candidate returned on the case's inputs."""

    candidate: CandidateResult
    outcome: str  # "wrong" (confirmed), "right", or one of UNSETTLED
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
    example: Example,
    backend: Backend,
    target: Callable[..., Any],
    flat: Sequence[Any],
    weights: Sequence[int],
    reference: tuple[torch.Tensor, torch.Tensor, torch.dtype],
    wrong: Sequence[CandidateResult],
) -> list[Confirmation]:
    """One Confirmation per wrong-looking candidate. The LIMIT tried are the likeliest to be real (judged on
    the case's own values first, then the largest error), the same ones on every call of the case; each is
    remembered for the session per test, function, case and backend, so a re-run of the example (Hypothesis
    replays a failure) compiles nothing and reads the same."""
    memo = session.confirmations
    ranked = sorted(wrong, key=lambda r: (r.inputs != "case", -(r.verdict.max_ratio if r.verdict else 0.0)))
    tried = {id(r) for r in ranked[:LIMIT]}
    where = _where(session, example, backend, target)
    done: list[Confirmation] = []
    for result in wrong:
        if id(result) not in tried:
            done.append(Confirmation(result, "not tried", detail=f"gemmguard confirms {LIMIT} per case"))
            continue
        key = (*where, candidates.identity(result.name, result.description))
        if key not in memo:
            session.progress(
                f"[{example.backend}] {example.case.describe()}: compiling {result.name} alone to confirm it"
            )
            memo[key] = _confirm(session, backend, target, flat, weights, reference, result)
            session.progress(
                f"[{example.backend}] {example.case.describe()}: {Confirmation(result, *memo[key]).line()}"
            )
        done.append(Confirmation(result, *memo[key]))
    return done


def _where(session: GemmSession, example: Example, backend: Backend, target: Callable[..., Any]) -> tuple:
    """What a confirmation is remembered by for the session: case, backend, test, function, shape mode."""
    return (
        repr(example.case),
        backend.name,
        example.test_id,
        getattr(target, "__code__", target),
        session.compiler.dynamic,
    )


def _confirm(session, backend, target, flat, weights, reference, result) -> tuple[str, float | None, str]:
    identity = candidates.identity(result.name, result.description)
    op = result.op.split(" ", 1)[0]  # the selection it was judged in: "addmm (19,) x ..." -> addmm

    def keep(selection_op: str, choice: Any) -> bool:
        try:
            facts = inductor.choice_facts(choice)
        except Exception:  # inside Inductor's lowering: a choice gemmguard cannot read is simply not it
            return False
        return selection_op == op and candidates.identity(facts.name, facts.description) == identity

    only = inductor.only_choices(keep)
    verdict, cut, error = _compile_judged(session, backend, target, flat, weights, reference, only)
    if verdict is None:
        return "error", None, error
    if not cut:
        return "not offered", None, f"no {op} selection of the new compile offered it"
    if any(n != 1 for n in cut):
        return "not isolated", None, f"{max(cut)} choices of one selection matched it"
    return ("right" if verdict.ok else "wrong"), verdict.max_ratio, ""


def _compile_judged(session, backend, target, flat, weights, reference, choices):
    """Compile the case afresh inside `choices` (an adapter context that narrows autotuning's choices and
    yields its counts), run it on the case's inputs and judge it: (verdict, counts, ""), or (None, counts,
    why) when the compile or run raised."""
    import torch

    def run_synced(compiled: Any, args: Sequence[Any]) -> tuple[Any, Any]:
        # Not run_checked: an extern candidate is not the backend's own kernel.
        out, record = compiled(*args)
        if isinstance(out, torch.Tensor) and out.is_cuda:
            torch.cuda.synchronize()  # a fault of the candidate's kernel is reported here, as this case's
        return out, record

    try:
        with inductor.patched_config({"fx_graph_cache": False}), choices as cut:
            compiled = session.compiler.compile_fresh(backend, target, flat, weights)
            verdict = differential.side_run(session, compiled, flat, reference, run=run_synced)
    except Exception as exc:
        if "cuda error" in str(exc).lower():
            # The CUDA context may be gone: the case fails with the reason, never "unconfirmed".
            raise BackendCrashed(backend.name, exc) from exc
        return None, [], f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return verdict, cut, ""


def blame(
    session: GemmSession,
    example: Example,
    backend: Backend,
    target: Callable[..., Any],
    flat: Sequence[Any],
    weights: Sequence[int],
    reference: tuple[torch.Tensor, torch.Tensor, torch.dtype],
    seen: Sequence[CandidateResult],
    patterns: Sequence[str],
) -> tuple[tuple[str, ...], list[str]]:
    """A wrong winner blamed on the candidates `patterns` name (one known entry's), or nothing: the names of
    every candidate confirmed wrong and the report's lines saying how. Which candidate won is not recorded
    anywhere gemmguard can read, so the fault must follow the named ones both ways: every candidate this
    compile's autotuning judged wrong goes through `run` as a losing one would (named or not, up to LIMIT),
    at least one named one is wrong compiled alone, and a compile offered every other choice but none of the
    named ones is right on the same inputs. The names returned include any unnamed candidate confirmed wrong,
    so the entry (which explains only its own names) then does not explain the case, as on the losing path.
    Where autotuning judged none wrong because none could be checked, the named candidates left unchecked are the
    suspects instead, fastest benchmark first (the likeliest winner): on the H100 every candidate of a wrong M = 1
    `linear` went unchecked, and its winner could not be put on the entry's templates. Where the named ones were
    every choice autotuning had (the same linear on a Triton-only backend: 11 choices, all Triton templates), no
    compile without them exists, and none is needed: the winner was one of them. Anything less blames nothing, and
    the case fails as before."""
    wrong = [r for r in seen if r.wrong] or _unchecked_suspects(seen, patterns)
    if not any(_named(r.name, patterns) for r in wrong):
        return (), []
    tried = run(session, example, backend, target, flat, weights, reference, wrong)
    confirmed = [c for c in tried if c.confirmed]
    if not any(_named(c.candidate.name, patterns) for c in confirmed):
        return (), []
    key = (*_where(session, example, backend, target), "withheld", tuple(patterns))
    if key not in session.confirmations:  # once per case and test, as `run`'s: a replay reads the same
        named = ", ".join(patterns)
        session.progress(f"[{example.backend}] {example.case.describe()}: compiling without {named} to blame them")
        withhold = inductor.without_choices(lambda op, choice: _named(_choice_name(choice), patterns))
        verdict, removed, _ = _compile_judged(session, backend, target, flat, weights, reference, withhold)
        # Right, with every selection that offered a named choice left with others: else nothing is shown. Or
        # every selection that offered a named choice offered nothing else (each would be left with none, so the
        # compile kept them all): whatever won there was one of them, and one of them is wrong alone.
        shown = verdict is not None and verdict.ok and bool(removed) and 0 not in removed
        only_named = bool(removed) and all(n == 0 for n in removed)
        session.confirmations[key] = verdict.max_ratio if shown else ONLY_NAMED if only_named else None
    ratio = session.confirmations[key]
    if ratio is None:
        return (), []
    lines = [f"blamed:    {c.line()}" for c in tried]
    if ratio == ONLY_NAMED:
        lines.append(f"blamed:    every choice autotuning had for the GEMM was one of {', '.join(patterns)}; so the "
                     "wrong winner was one of them")  # fmt: skip
    else:
        lines.append(f"blamed:    compiled without {', '.join(patterns)}: right on the case's inputs, max|err|/tol "
                     f"{ratio:.3g}; so the wrong winner was one of them")  # fmt: skip
    return tuple(c.candidate.name for c in confirmed), lines


# What the blame's counterfactual compile records where it could not be made: every choice was a named one.
ONLY_NAMED = "only named choices"


def _unchecked_suspects(seen: Sequence[CandidateResult], patterns: Sequence[str]) -> list[CandidateResult]:
    named = [r for r in seen if not r.checked and _named(r.name, patterns)]
    return sorted(named, key=lambda r: (r.timing_ms is None, r.timing_ms or 0.0))


def _named(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def _choice_name(choice: Any) -> str:
    try:
        return inductor.choice_facts(choice).name
    except Exception:  # inside Inductor's lowering: a choice gemmguard cannot read is not one of the named
        return ""
