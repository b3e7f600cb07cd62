"""One check of one case on one backend, in stages: the reference (run/reference.py: the float64 result and the
bound a correct one keeps to, the case's own or the test's function's), what the compile-ahead worker learnt, the
compile and run through the backend with provenance, the winner judged (on the CPU also with one thread per OpenMP
team; a share of the cases also from a dynamic compile at another M), then the autotune candidates judged. A case
judged in row chunks (the big profile's) has its winner judged only.

The backend never judges and the oracle never compiles: this module only sequences them, and decides
whose fault an exception is (the backend's, or the test's own function's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import backends, oracle
from .._compat import hypothesis as hypothesis_compat
from ..ahead import travel
from ..ahead.pool import job_args
from ..cases.ops import OPS, dtype_unsupported
from ..cases.precision import describe, math_precision
from ..cases.support import eager_refusal, op_unsupported
from ..compile import candidates
from ..compile.candidates import CandidateResult
from ..compile.compiler import CallRecord, run_checked
from ..crosscheck import confirm, differential, sizes, threads
from ..errors import CandidateMismatch, CaseKilledProcess, CompileTimeout, GemmMismatch, Unsupported
from ..report import repro
from ..report.failure import candidate_report, failure_report
from . import refusal
from .reference import Reference, references

if TYPE_CHECKING:
    from ..ahead.reply import Reply
    from .example import Example
    from .session import GemmSession


@dataclass
class CheckResult:
    """What `gemm.check()` returns: the compiled code's output, the oracle's verdict, and the call's provenance."""

    output: Any
    verdict: oracle.Verdict
    record: CallRecord


def check(session: GemmSession, example: Example, fn: Callable[..., Any] | None) -> CheckResult:
    """`gemm.check(fn)`: verified, or GemmMismatch / Unsupported / BackendCrashed / UserCodeError."""
    case = example.case
    # Input this torch does not take on the device (a dtype, a blockwise recipe, its scales at this size) is no
    # backend's refusal: unsupported before any compile, and never weighed as a refusal that is a bug (refusal.py).
    reason = (
        dtype_unsupported(case.dtype, example.device)
        or op_unsupported(case.op, example.device)
        or eager_refusal(case, example.inputs)
    )
    if reason:
        session.tally.note_unsupported(example.backend, reason)
        raise Unsupported(example.backend, reason)
    backend = backends.get(example.backend)
    # The case's dtype decides the float32 math (TF32 or IEEE) for the compile, the run and eager.
    with math_precision(example.case.dtype):
        try:
            return _attempt(session, example, fn, backend)
        except Unsupported as first:
            # A backend with several routes (cutedsl) tries the next where the first ran no kernel of its own:
            # the user asked for the backend, not one route. If no route has a kernel, the case is
            # unsupported, never failed: no kernel of the backend ran, so none was wrong.
            fallback = backend.fallback
            if not fallback or not backends.probe(fallback).available:
                refusal.raise_if_taken(session, example, backend, fn, first)
                session.tally.note_unsupported(example.backend, first.reason)
                raise
            try:
                return _attempt(session, example, fn, backends.get(fallback))
            except Unsupported as second:
                reason = f"{first.reason}; {fallback}: {second.reason}"
                session.tally.note_unsupported(example.backend, reason)
                raise Unsupported(example.backend, reason) from None


def _attempt(session: GemmSession, example: Example, fn: Callable[..., Any] | None, backend: backends.Backend):
    # The route that runs, as the known-failures file names it: a multi-route backend's own ("nvgemm"), the
    # fallback's ("quack"), or None for a backend with one way to run.
    example.route = getattr(backend, "route", None)
    example.checks += 1
    started = time.perf_counter()
    refused = backend.refuses(example.case) if fn is None else None  # a user's function may compute in any dtype
    if refused:
        raise Unsupported(backend.name, refused)
    own, ref = references(example, fn, backend.name)
    learnt = _learn_ahead(session, example, backend, fn)
    if worker_found_unsupported(learnt, fn):
        detail = learnt.detail or "no kernel of the backend ran (compile-ahead worker)"
        raise Unsupported(backend.name, detail, no_choice=learnt.no_choice)
    compiled, out, record = _compile_and_run(session, example, backend, ref, learnt)
    seen, from_worker = _candidates_seen(session, example, record, learnt)
    # A worker that could not have the test's own function judged the candidates of the case's own GEMM: they are
    # not what that function compiles here, so they are confirmed (or blamed) in the case's own GEMM.
    op_only = from_worker and fn is not None and not learnt.candidates_fn
    verdict = _judge_winner(session, example, fn, backend, ref, out, record, [] if op_only else seen)
    if ref.judged is not None:  # a case judged in row chunks has no whole reference for the cross-checks
        threads.judge_with_one_thread_teams(session, example, fn, backend, compiled, ref.args, ref.judged)
    counted = record.compiled or from_worker
    found = _judge_candidates(session, example, backend, own if op_only else ref, record, seen, counted)
    if fn is None and ref.judged is not None:  # a share of the case's own GEMMs: also from a dynamic compile
        sizes.judge_at_another_size(session, example, backend, ref.judged)
    cleared = (c.candidate.name for c in found if c.outcome == confirm.RIGHT)
    example.judged_right += (*(r.name for r in seen if r.checked and not r.wrong), *cleared)
    counts = session.tally.of(example.backend)
    counts.verified += 1
    counts.chunked += ref.chunked is not None
    refusal.note_taken(session, backend, example.case)
    if any(_fused(k) for g in record.graphs for k in g.gemm_kernels(backend.name)):
        counts.fused += 1
    counts.check_s += time.perf_counter() - started
    return CheckResult(out, verdict, record)


# ---------------------------------------------------------------- 2. what the compile-ahead worker learnt


def worker_found_unsupported(learnt: Reply | None, fn: Callable | None) -> bool:
    """Whether a compile-ahead worker's "unsupported" stands without compiling the case again here: it compiled
    exactly what this check compiles (the case's GEMM, or the test's own function that travelled) and no
    kernel of the backend ran, for a reason every compile of the case meets (`Unsupported.settled`). A
    failed compile is never cached, so compiling again would only repeat it (cutlass's refusals cost seconds
    each); a verdict that a busy machine could have caused (every choice failed to build) is not taken."""
    if learnt is None or learnt.status != "unsupported" or not learnt.settled:
        return False
    return fn is None or learnt.fn


def _learn_ahead(
    session: GemmSession, example: Example, backend: backends.Backend, fn: Callable | None
) -> Reply | None:
    """Wait for the compile-ahead worker that has this case (its compile then is a cache hit here) and return
    what it learnt. A case that killed that worker is not run in this process: it fails with the reason. The
    test's own function goes to the workers where it can (ahead/travel.py), for this case and its next ones."""
    pool = session.pool_for(example.backend)
    if pool is None or backend.name != example.backend or not example.use_ahead:
        return None
    job = job_args(backend, session.compiler, session.options.all_choices)
    stays = ""
    if fn is not None:
        payload, stays = travel.pack(fn)
        if payload is not None:
            pool.attach(example.test_id, example.backend, payload)
    if session.compiler.warm(backend):  # the backend's one-time setup (Backend.warm_up), beside the wait
        session.progress(f"[{backend.name}] its one-time setup runs while the first case compiles ahead")
    counts = session.tally.of(example.backend)
    asked = time.perf_counter()
    try:
        learnt = pool.vet(example.backend, example.case, example.test_id, **job)
        counts.wait_s += time.perf_counter() - asked  # where the time went (report/table.py)
    finally:  # what is left of the setup is this process's compile time
        counts.compile_s += session.compiler.settle()
    example.ahead = learnt
    if learnt is None:
        return None
    if learnt.status == "fatal":
        detail = learnt.detail or "no detail"
        if fn is not None and not learnt.fn:
            detail += f" (it compiled the case's own GEMM: your function could not go to a worker, {stays})"
        raise CaseKilledProcess(example.backend, detail)
    if learnt.status == "timeout":
        raise CompileTimeout(f"{learnt.detail} (in the compile-ahead worker)")
    if learnt.status == "ok":
        counts.compiled_ahead += 1
        counts.compiled_ahead_fn += learnt.fn
    return learnt


# ---------------------------------------------------------------- 3. the compile and run, with provenance


def _compile_and_run(
    session: GemmSession, example: Example, backend: backends.Backend, ref: Reference, learnt: Reply | None
) -> tuple[Any, Any, CallRecord]:
    """Compile through the backend (a cache hit where a worker compiled it), release NaN-poisoned blocks, run;
    the record says which kernels ran. Every autotune candidate of a graph compiled now is judged as it compiles
    (compile/candidates.py)."""
    case = example.case
    compiled = session.compiler.compile(backend, ref.target, ref.args, OPS[case.op].weight_positions)
    oracle.poison_allocator(ref.like, count=1 if ref.chunked is not None else 4)  # one block: gigabytes each
    compiling_before = session.compiler.stats["compile_s"]
    # The candidates are judged against whole float64 references: not for a case judged in row chunks.
    judged = case.dtype if session.options.all_choices and ref.chunked is None else None
    with candidates.judging(judged, repr(case)):
        try:
            return (compiled, *run_checked(compiled, ref.args))
        except Unsupported as exc:
            # A compile served from the cache a worker filled never ran the backend's graph passes here, so
            # the worker's reason is the fuller one (an own-kernel route's "its kernel refused: ...").
            told = learnt.detail if learnt is not None and learnt.status == "unsupported" else ""
            if told.startswith(exc.reason) and told != exc.reason:
                raise Unsupported(exc.backend, told, settled=exc.settled, no_choice=exc.no_choice) from None
            raise
        finally:  # where the time went (report/table.py): an unsupported or failed case's compile counts too
            session.tally.of(example.backend).compile_s += session.compiler.stats["compile_s"] - compiling_before


def _candidates_seen(
    session: GemmSession, example: Example, record: CallRecord, learnt: Reply | None
) -> tuple[list[CandidateResult], bool]:
    """The autotune candidates judged for this case, and whether a worker judged them: this compile was a cache
    hit of a worker's, whose autotuning judged them there. Counted once, where judged; a reused compile still
    fails on them."""
    seen = candidates.judged_for(record, repr(example.case))
    from_worker = not seen and learnt is not None and bool(learnt.candidates)
    if from_worker:
        seen = [CandidateResult.from_json(d) for d in learnt.candidates]
    if record.compiled or from_worker:
        checked, wrong, unchecked = candidates.tally(seen)
        counts = session.tally.of(example.backend)
        counts.candidates += checked
        counts.candidates_wrong += wrong
        counts.candidates_unchecked += unchecked
    return seen, from_worker


# ---------------------------------------------------------------- 4. the winner judged


def _judge_winner(
    session: GemmSession,
    example: Example,
    fn: Callable[..., Any] | None,
    backend: backends.Backend,
    ref: Reference,
    out: Any,
    record: CallRecord,
    seen: list[CandidateResult],
) -> oracle.Verdict:
    """The oracle's verdict on what ran; a wrong one raises GemmMismatch with its report: the repro script, a
    known entry's candidates blamed where that is proven, and for a failure a reader sees, the other backends."""
    verdict = ref.judge(out)
    if verdict.ok:
        return verdict
    ratio = ref.eager_ratio()
    verdict = oracle.Verdict(False, verdict.max_ratio, verdict.max_error, verdict.mismatch, ratio)
    counts = session.tally.of(example.backend)
    counts.failed += 1
    counts.failed_like_eager += ratio > 1
    path = repro.write(session.options.repro_dir, example, fn, backend, verdict, session.compiler.dynamic)
    weights = OPS[example.case.op].weight_positions
    blamed, lines = _blame_winner(session, example, backend, ref, weights, seen)
    others = None
    if _reported(session, example, blamed) and ref.judged is not None:
        others = differential.run(session, example, backend.name, ref.target, ref.args, weights, ref.judged)
    report = failure_report(example, verdict, record, path, backend.name, describe(example.case.dtype), others)
    raise GemmMismatch("\n".join([report, *(f"  {line}" for line in lines)]), blamed)


def _blame_winner(
    session: GemmSession, example: Example, backend: backends.Backend, ref: Reference, weights: Any, seen: list
) -> tuple[tuple[str, ...], list]:
    """A wrong winner blamed on the autotune candidates a known entry names, where that is proven
    (crosscheck/confirm.py): only for a case exactly one entry with `candidates` covers, so nothing else pays for
    the extra compiles."""
    if session.known is None or not seen or ref.judged is None:
        return (), []
    from .. import known

    facts = known.machine_facts(session.known, example.backend)
    patterns = known.blame_patterns(session.known, example.backend, example.case, facts, example.route)
    if not patterns:
        return (), []
    return confirm.blame(session, example, backend, ref.target, ref.args, weights, ref.judged, seen, patterns)


def _reported(session: GemmSession, example: Example, blamed: tuple[str, ...] = ()) -> bool:
    """Whether this failure is one a reader will see: the example Hypothesis reports (not a step of its
    shrinking) and not one the known-failures file explains. Only those pay for a cross-backend differential."""
    if not hypothesis_compat.is_final_example():
        return False
    if session.known is None:
        return True
    from .. import known

    facts = known.machine_facts(session.known, example.backend)
    case, route = example.case, example.route
    return known.match(session.known, example.backend, case, facts, "wrong-result", route, blamed) is None


# ---------------------------------------------------------------- 5. the candidates judged


def _judge_candidates(
    session: GemmSession,
    example: Example,
    backend: backends.Backend,
    ref: Reference,
    record: CallRecord,
    seen: list[CandidateResult],
    counted: bool,
) -> list[confirm.Confirmation]:
    """The winner was right. A losing candidate fails the case only when a compile that picks it is wrong too
    (crosscheck/confirm.py): then CandidateMismatch, a wrong result (known failures and shrinking apply), with no
    repro script (the compiled code never runs the candidate). Returns what the confirmations found."""
    wrong = [r for r in seen if r.wrong]
    if not wrong:
        return []
    weights = OPS[example.case.op].weight_positions
    found = confirm.run(session, example, backend, ref.target, ref.args, weights, ref.judged, wrong)
    counts = session.tally.of(example.backend)
    if any(c.confirmed for c in found):
        counts.failed += 1
        confirmed = tuple(c.candidate.name for c in found if c.confirmed)  # what fails the case
        raise CandidateMismatch(candidate_report(example, found, seen, record, backend.name), confirmed)
    if counted:
        right = sum(c.outcome == confirm.RIGHT for c in found)
        counts.candidates_unconfirmed += right
        counts.candidates_unsettled += len(found) - right
    return found


def _fused(kernel_name: str) -> bool:
    # Inductor names a template kernel after every node fused into it (cpp_fused_add_addmm_relu_0,
    # triton_tem_fused_mm_relu_0): any pointwise node there means the epilogue ran inside the GEMM.
    parts = set(kernel_name.split("_"))
    return bool(parts & {"relu", "gelu", "silu", "sigmoid", "tanh", "add", "mul", "erf", "exp", "convert"})
