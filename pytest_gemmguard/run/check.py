"""One check of one case on one backend: build inputs, compute the float64 reference and tolerance,
compile through the backend, release NaN-poisoned blocks, run, prove provenance, compare.

The backend never judges and the oracle never compiles: this module only sequences them, and decides
whose fault an exception is (the backend's, or the test's own function's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .. import backends, oracle
from .._compat import hypothesis as hypothesis_compat
from ..ahead import travel
from ..ahead.pool import job_args
from ..cases.case import case_function
from ..cases.ops import DTYPES, OPS, dtype_unsupported
from ..cases.precision import describe, math_precision
from ..compile import candidates
from ..compile.compiler import CallRecord, run_checked
from ..crosscheck import confirm, differential
from ..errors import CandidateMismatch, CaseKilledProcess, CompileTimeout, GemmMismatch, Unsupported, UserCodeError
from ..oracle.function import bound as fn_bound
from ..report import repro
from ..report.failure import candidate_report, failure_report

if TYPE_CHECKING:
    from .gemm import Gemm
    from .session import GemmSession


@dataclass
class CheckResult:
    """What `gemm.check()` returns: the compiled code's output, the oracle's verdict, and the call's provenance."""

    output: Any
    verdict: oracle.Verdict
    record: CallRecord


def check(session: GemmSession, gemm: Gemm, fn: Callable[..., Any] | None) -> CheckResult:
    """`gemm.check(fn)`: verified, or GemmMismatch / Unsupported / BackendCrashed / UserCodeError."""
    reason = dtype_unsupported(gemm.case.dtype, gemm.device)
    if reason:
        session.tally.note_unsupported(gemm.backend, reason)
        raise Unsupported(gemm.backend, reason)
    backend = backends.get(gemm.backend)
    # The case's dtype decides the float32 math (TF32 or IEEE) for the compile, the run and eager.
    with math_precision(gemm.case.dtype):
        try:
            return _attempt(session, gemm, fn, backend)
        except Unsupported as first:
            # A backend with several routes (cutedsl) tries the next where the first ran no kernel of its own:
            # the user asked for the backend, not one route. If no route has a kernel, the case is
            # unsupported, never failed: no kernel of the backend ran, so none was wrong.
            fallback = backend.fallback
            if not fallback or not backends.probe(fallback).available:
                session.tally.note_unsupported(gemm.backend, first.reason)
                raise
            try:
                return _attempt(session, gemm, fn, backends.get(fallback))
            except Unsupported as second:
                reason = f"{first.reason}; {fallback}: {second.reason}"
                session.tally.note_unsupported(gemm.backend, reason)
                raise Unsupported(gemm.backend, reason) from None


def _attempt(session: GemmSession, gemm: Gemm, fn: Callable[..., Any] | None, backend: backends.Backend):
    # The route that runs, as the known-failures file names it: a multi-route backend's own ("nvgemm"), the
    # fallback's ("quack"), or None for a backend with one way to run.
    gemm.route = getattr(backend, "route", None)
    gemm.checks += 1
    return _check(session, gemm, fn, backend)


def _user_eager(fn: Callable[..., Any], flat: tuple) -> Any:
    """Run the test's own function eagerly first: what goes wrong here is the test's, not the backend's."""
    try:
        with torch.no_grad():
            out = fn(*flat)
    except Exception as exc:
        raise UserCodeError(
            f"gemm.check(fn): your function raised {type(exc).__name__} when run eagerly on the case's inputs "
            f"(before any compile): {exc}"
        ) from exc
    if not isinstance(out, torch.Tensor):
        raise UserCodeError(
            f"gemm.check(fn): your function returned {type(out).__name__}; it must return one tensor "
            "(the GEMM's result) so the oracle can compare it"
        )
    return out


def _comparable(expected: Any, dtype: torch.dtype) -> None:
    """The test's own function must give the oracle something to compare: a result that is NaN or infinite in
    every element (its float64 value, stored as its dtype) passes wherever the backend's is too, so it would
    verify nothing."""
    if not isinstance(expected, torch.Tensor) or not (expected.is_floating_point() or expected.is_complex()):
        return
    if expected.numel() and bool(torch.isfinite(expected.to(dtype)).any()):
        return
    raise UserCodeError(
        "gemm.check(fn): your function's result is NaN or infinite in every element, so nothing could be compared"
        if expected.numel()
        else "gemm.check(fn): your function's result is empty, so nothing could be compared"
    )


def _check(session: GemmSession, gemm: Gemm, fn: Callable[..., Any] | None, backend: backends.Backend) -> CheckResult:
    started = time.perf_counter()
    case, inputs = gemm.case, gemm.inputs
    refused = backend.refuses(case) if fn is None else None  # a user's function may compute in any dtype
    if refused:
        raise Unsupported(backend.name, refused)
    expected, tol = case_expected, case_tol = oracle.case_reference(case, inputs)
    if fn is None:
        target, flat = case_function(case.op, case.epilogue, case.dtype), inputs.flat
        expected_dtype = DTYPES[case.out_dtype]
    else:  # fn's own bound: it need not compute the case's epilogue (oracle/function.py)
        target, flat = fn, inputs.args
        expected_dtype = _user_eager(fn, flat).dtype
        expected, tol = fn_bound(fn, flat, case.dtype, expected_dtype, lambda: case_tol)
        _comparable(expected, expected_dtype)
    learnt = _learn_ahead(session, gemm, backend, fn)
    if worker_found_unsupported(learnt, fn):
        raise Unsupported(backend.name, learnt.get("detail") or "no kernel of the backend ran (compile-ahead worker)")
    compiled = session.compiler.compile(backend, target, flat, OPS[case.op].weight_positions)
    oracle.poison_allocator(torch.empty(expected.shape, dtype=expected_dtype, device=expected.device))
    # Every autotune candidate of a graph compiled now is judged too, not only the winner (compile/candidates.py).
    compiling_before = session.compiler.stats["compile_s"]
    with candidates.judging(case.dtype if session.options.all_choices else None, repr(case)):
        try:
            out, record = run_checked(compiled, flat)
        except Unsupported as exc:
            # A compile served from the cache a worker filled never ran the backend's graph passes here, so
            # the worker's reason is the fuller one (an own-kernel route's "its kernel refused: ...").
            told = (learnt or {}).get("detail", "")
            if (learnt or {}).get("status") == "unsupported" and told.startswith(exc.reason) and told != exc.reason:
                raise Unsupported(exc.backend, told) from None
            raise
        finally:  # where the time went (report/table.py): an unsupported or failed case's compile counts too
            session.tally.add(gemm.backend, "compile_s", session.compiler.stats["compile_s"] - compiling_before)
    seen = candidates.judged_for(record, repr(case))
    from_worker = not seen and bool(learnt and learnt.get("candidates"))
    # A worker that could not have the test's own function judged the candidates of the case's own GEMM.
    op_only = from_worker and fn is not None and not learnt.get("candidates_fn", learnt.get("fn"))
    if from_worker:  # this compile was a cache hit of a worker's: its autotuning judged them there
        seen = [candidates.CandidateResult.from_json(d) for d in learnt["candidates"]]
    checked, wrong, unchecked = candidates.tally(seen)
    if record.compiled or from_worker:  # counted once, where judged; a reused compile still fails on them below
        for what, n in (("candidates", checked), ("candidates_wrong", wrong), ("candidates_unchecked", unchecked)):
            session.tally.add(gemm.backend, what, n)
    verdict = oracle.judge(out, expected, tol, expected_dtype)
    if not verdict.ok:
        ratio = oracle.eager_ratio(target, flat, expected, tol)
        verdict = oracle.Verdict(False, verdict.max_ratio, verdict.max_error, verdict.mismatch, ratio)
        session.tally.add(gemm.backend, "failed")
        if ratio > 1:
            session.tally.add(gemm.backend, "failed_like_eager")
        path = repro.write(session.options.repro_dir, gemm, fn, backend, verdict, session.compiler.dynamic)
        weights, reference = OPS[case.op].weight_positions, (expected, tol, expected_dtype)
        # Candidates a worker judged in the case's own op are not what a test's own function compiles here.
        judged_here = [] if op_only else seen
        blamed, lines = _blame_winner(session, gemm, backend, target, flat, weights, reference, judged_here)
        others = None
        if _reported(session, gemm, blamed):
            others = differential.run(session, gemm, backend.name, target, flat, weights, reference)
        report = failure_report(gemm, verdict, record, path, backend.name, describe(case.dtype), others)
        raise GemmMismatch("\n".join([report, *(f"  {line}" for line in lines)]), blamed)
    found: list[confirm.Confirmation] = []
    if wrong:
        # The winner was right. A losing candidate fails the case only when a compile that picks it is wrong
        # too (crosscheck/confirm.py); then it is a wrong result (known failures and shrinking apply). No repro script:
        # the compiled code never runs the candidate.
        weights = OPS[case.op].weight_positions
        where, args, reference = target, flat, (expected, tol, expected_dtype)
        if op_only:  # the worker judged them in the case's own GEMM: confirm them there
            where, args = case_function(case.op, case.epilogue, case.dtype), inputs.flat
            reference = (case_expected, case_tol, DTYPES[case.out_dtype])
        found = confirm.run(session, gemm, backend, where, args, weights, reference, [r for r in seen if r.wrong])
        if any(c.confirmed for c in found):
            session.tally.add(gemm.backend, "failed")
            confirmed = tuple(c.candidate.name for c in found if c.confirmed)  # what fails the case
            raise CandidateMismatch(candidate_report(gemm, found, seen, record, backend.name), confirmed)
        if record.compiled or from_worker:
            right = sum(c.outcome == confirm.RIGHT for c in found)
            session.tally.add(gemm.backend, "candidates_unconfirmed", right)
            session.tally.add(gemm.backend, "candidates_unsettled", len(found) - right)
    cleared = (c.candidate.name for c in found if c.outcome == confirm.RIGHT)
    gemm.judged_right += (*(r.name for r in seen if r.checked and not r.wrong), *cleared)
    session.tally.add(gemm.backend, "verified")
    if any(_fused(k) for g in record.graphs for k in g.gemm_kernels(backend.name)):
        session.tally.add(gemm.backend, "fused")
    session.tally.add(gemm.backend, "check_s", time.perf_counter() - started)
    return CheckResult(out, verdict, record)


def worker_found_unsupported(learnt: dict | None, fn: Callable | None) -> bool:
    """Whether a compile-ahead worker's "unsupported" stands without compiling the case again here: it compiled
    exactly what this check compiles (the case's GEMM, or the test's own function that travelled) and no
    kernel of the backend ran, for a reason every compile of the case meets (`Unsupported.settled`). A
    failed compile is never cached, so compiling again would only repeat it (cutlass's refusals cost seconds
    each); a verdict that a busy machine could have caused (every choice failed to build) is not taken."""
    if not learnt or learnt.get("status") != "unsupported" or not learnt.get("settled"):
        return False
    return fn is None or bool(learnt.get("fn"))


def _learn_ahead(session: GemmSession, gemm: Gemm, backend: backends.Backend, fn: Callable | None) -> dict | None:
    """Wait for the compile-ahead worker that has this case (its compile then is a cache hit here) and return
    what it learnt. A case that killed that worker is not run in this process: it fails with the reason. The
    test's own function goes to the workers where it can (ahead/travel.py), for this case and its next ones."""
    pool = session.pool_for(gemm.backend)
    if pool is None or backend.name != gemm.backend or not gemm.use_ahead:
        return None
    job = job_args(backend, session.compiler, session.options.all_choices)
    stays = ""
    if fn is not None:
        payload, stays = travel.pack(fn)
        if payload is not None:
            pool.attach(gemm.test_id, gemm.backend, payload)
    if session.compiler.warm(backend):  # the backend's one-time setup (Backend.warm_up), beside the wait
        session.progress(f"[{backend.name}] its one-time setup runs while the first case compiles ahead")
    asked = time.perf_counter()
    try:
        learnt = pool.vet(gemm.backend, gemm.case, gemm.test_id, **job)
        session.tally.add(gemm.backend, "wait_s", time.perf_counter() - asked)  # where the time went (report/table.py)
    finally:  # what is left of the setup is this process's compile time
        session.tally.add(gemm.backend, "compile_s", session.compiler.settle())
    if learnt is None:
        return None
    gemm.ahead = learnt.get("status")
    gemm.ahead_s = learnt.get("compile_s")
    gemm.ahead_late = not learnt.get("queued_ahead", True)
    gemm.ahead_detail = learnt.get("detail", "") if gemm.ahead == "error" else ""
    if gemm.ahead == "fatal":
        detail = learnt.get("detail", "no detail")
        if fn is not None and not learnt.get("fn"):
            detail += f" (it compiled the case's own GEMM: your function could not go to a worker, {stays})"
        raise CaseKilledProcess(gemm.backend, detail)
    if gemm.ahead == "timeout":
        raise CompileTimeout(f"{learnt.get('detail')} (in the compile-ahead worker)")
    if gemm.ahead == "ok":
        session.tally.add(gemm.backend, "compiled_ahead")
        if learnt.get("fn"):
            session.tally.add(gemm.backend, "compiled_ahead_fn")
    return learnt


def _blame_winner(session, gemm, backend, target, flat, weights, reference, seen) -> tuple[tuple[str, ...], list]:
    """A wrong winner blamed on the autotune candidates a known entry names, where that is proven
    (crosscheck/confirm.py): only for a case exactly one entry with `candidates` covers, so nothing else pays for
    the extra compiles."""
    if session.known is None or not seen:
        return (), []
    from .. import known

    facts = known.machine_facts(session.known)
    patterns = known.blame_patterns(session.known, gemm.backend, gemm.case, facts, gemm.route)
    if not patterns:
        return (), []
    return confirm.blame(session, gemm, backend, target, flat, weights, reference, seen, patterns)


def _reported(session: GemmSession, gemm: Gemm, blamed: tuple[str, ...] = ()) -> bool:
    """Whether this failure is one a reader will see: the example Hypothesis reports (not a step of its
    shrinking) and not one the known-failures file explains. Only those pay for a cross-backend differential."""
    if not hypothesis_compat.is_final_example():
        return False
    if session.known is None:
        return True
    from .. import known

    facts = known.machine_facts(session.known)
    return known.match(session.known, gemm.backend, gemm.case, facts, "wrong-result", gemm.route, blamed) is None


def _fused(kernel_name: str) -> bool:
    # Inductor names a template kernel after every node fused into it (cpp_fused_add_addmm_relu_0,
    # triton_tem_fused_mm_relu_0): any pointwise node there means the epilogue ran inside the GEMM.
    parts = set(kernel_name.split("_"))
    return bool(parts & {"relu", "gelu", "silu", "sigmoid", "tanh", "add", "mul", "erf", "exp", "convert"})
