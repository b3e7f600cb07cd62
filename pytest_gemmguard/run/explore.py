"""The Hypothesis loop around a `@gemm_case` test: explore, shrink what fails, then tour every regime.

Hypothesis explores first, so whatever it finds is shrunk; then the regime tour (explicit cases, which
Hypothesis never shrinks, hence already small) guarantees every op, dtype, layout, epilogue step and size
regime ran. Both come out of one example budget.

Some outcomes end the test at once instead of being shrunk: a compile timeout, a backend that raised, the
test's own error, and Ctrl-C. None of them depends on the case's size as far as anyone knows, and
shrinking them costs a compile per step (minutes) while telling nothing new.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from hypothesis.errors import DidNotReproduce

from .._compat import hypothesis as hypothesis_compat
from ..ahead.worker import fatal_cuda
from ..cases import big
from ..errors import (
    BackendCrashed,
    BackendRefused,
    CaseKilledProcess,
    CompileTimeout,
    GemmMismatch,
    ReplayNotReproduced,
    Unsupported,
    UserCodeError,
    headline,
)
from ..known.entries import FAILURE_KINDS
from ..known.verdicts import Judge
from . import replay
from .gemm import Gemm, example_of
from .plan import SHARED, plan, queue_ahead
from .session import require_backend

if TYPE_CHECKING:
    from ..ahead.reply import Reply
    from ..cases.case import GemmCase
    from ..cases.space import CaseSpace
    from .example import Example
    from .session import GemmSession

# Raised inside an example, these stop the test without shrinking (see the module docstring).
STOPS = (CompileTimeout, BackendCrashed, UserCodeError, KeyboardInterrupt)


def explore(session: GemmSession, test: Callable, space: CaseSpace, fixtures: dict, backend: str, test_id: str) -> None:
    """Run `test(gemm=...)` on the examples of `space` through `backend`."""
    import hypothesis
    from hypothesis import given, settings

    require_backend(backend)
    options = session.options
    if options.profile == "big" and (space.shapes or space.cases is not None):
        import pytest

        pytest.skip(f"gemmguard: {big.SHAPES_LISTED}")
    p = plan(session, space, backend, test_id)
    strategy, explicit, run_seed = p.strategy, p.explicit, p.run_seed
    total = p.total  # the progress lines' count: what will run (the budget undercounts it at 1)
    outcome: Counter = Counter()
    reasons: Counter = Counter()
    stopped: list[tuple[BaseException, GemmCase]] = []
    halted: list[GemmCase] = []  # a known failure that lost the CUDA context: no example may run after it
    tracker = None
    if session.known is not None:
        from ..known import KnownTracker

        tracker = KnownTracker(session.known, backend)
    # Against a base's verdicts, and into this run's record (known/verdicts.py).
    judge = Judge(session.base, session.record, test_id, backend)

    def known(example: Example, kind: str, exc: BaseException, candidates: tuple[str, ...] = ()) -> str | None:
        """The verdict line when a known failure, or the base's same failure, explains this one (counted as
        xfail, not failed); for a failure neither explains, a note where an entry fits all but its versions."""
        case, route = example.case, example.route
        entry = tracker.note_failure(case, kind, route, candidates) if tracker is not None else None
        if entry is None and not judge.failed_on_base(case.describe()):
            near = tracker.near_miss(case, kind, route, candidates) if tracker is not None else None
            if near:
                exc.add_note(near)
            return None
        if isinstance(exc, GemmMismatch):  # a wrong result: check() counted it before the file was consulted
            session.tally.of(backend).failed -= 1
        session.tally.of(backend).xfailed += 1
        return f"known failure {entry.id}" if entry is not None else "pre-existing failure (the base failed it too)"

    def note(case: GemmCase, verdict: str) -> None:
        """This example's outcome, as the record names it (a failure that stopped the test was noted already)."""
        outcome = verdict if verdict in ("verified", "unsupported", *FAILURE_KINDS) else None
        if verdict.startswith(("known failure ", "pre-existing")):
            outcome = "known:" + verdict.split()[2] if verdict.startswith("known") else "pre-existing"
        if outcome is not None:
            judge.note(case.describe(), outcome)

    pool = session.pool_for(backend)
    spent: list[float] = []

    def one_example(case: GemmCase) -> None:
        if stopped or halted:  # one stop ends the test: don't let Hypothesis pay for more
            return
        step = outcome["ran"] + outcome["unsupported"] + 1
        started = time.perf_counter()
        gemm = Gemm(case, backend, session, test_id)
        example = example_of(gemm)
        try:
            test(gemm=gemm, **fixtures)
            outcome["ran"] += 1
            verdict = "verified"
            if tracker is not None and example.checks:
                tracker.note_pass(case, example.route, example.judged_right, example.also_judged)
        except Unsupported as exc:
            outcome["unsupported"] += 1
            reasons[exc.reason] += 1
            hypothesis.event(f"unsupported: {exc.reason}")
            verdict = "unsupported"
        except GemmMismatch as exc:
            verdict = known(example, exc.kind, exc, exc.candidates)
            if verdict is None:
                took = time.perf_counter() - started
                # The report's first line at once: a run cut short (a CI time limit) still says what failed.
                what = headline(exc, 240)
                head = f"[{backend}] {step}/{total} {case.describe()}"
                session.progress(f"{head}: FAILED (wrong result, {took:.1f} s): {what}")
                note(case, exc.kind)
                if not judge.keeps_going:
                    exc.failed_case = case  # its reproduce line where Hypothesis gives no blob (below)
                    raise
                judge.keep(exc, case.describe())  # the record covers the whole draw: on to the next example
                verdict = "FAILED (wrong result; kept going for --gemm-verdicts)"
            outcome["ran"] += 1
        except STOPS as exc:
            verdict = known(example, exc.kind, exc) if isinstance(exc, BackendCrashed) else None
            if verdict is None and isinstance(exc, BackendCrashed) and judge.keeps_going:
                note(case, exc.kind)
                judge.keep(exc, case.describe())
                verdict = f"FAILED ({type(exc).__name__}: {headline(exc, 200)}; kept going for --gemm-verdicts)"
            elif verdict is None:
                if isinstance(exc, BackendCrashed):
                    note(case, exc.kind)
                stopped.append((exc, case))
                verdict = f"FAILED ({type(exc).__name__}: {headline(exc, 200)})"  # shown at once, like a wrong result
            else:
                outcome["ran"] += 1
                if not isinstance(exc, CaseKilledProcess) and fatal_cuda(exc):
                    # Known, but it broke this process's CUDA context: every later example would fail for it.
                    halted.append(case)
                    verdict += "; the CUDA context is lost, so the test's other examples are not run"
        except BaseException as exc:
            took = time.perf_counter() - started
            what = f"FAILED ({type(exc).__name__}, {took:.1f} s)"
            session.progress(f"[{backend}] {step}/{total} {case.describe()}: {what}")
            raise
        note(case, verdict)
        took = time.perf_counter() - started
        spent.append(took)
        session.tally.of(backend).example_s += took  # the wall time per example: cases/min in the table
        how = _ahead_note(example.ahead)
        eta = sum(spent) / len(spent) * max(total - step, 0)
        line = f"{step}/{total} {case.describe()}: {verdict} ({took:.1f} s{how}; ETA {eta:.0f} s)"
        session.progress(f"[{backend}] {line}")

    # Every explicit case runs once (Plan): a draw that meets one runs it there and is then rejected, so that
    # Hypothesis draws another in its place (as `_drawn` does beforehand); a draw of a case that already ran
    # is rejected unrun; the tour leaves out what the draws ran.
    listed = set(explicit)
    ran: set[GemmCase] = set()
    replayed: list[GemmCase] = []  # the cases the draws met (a replay's one: its report names it)

    def drawn_example(case: GemmCase) -> None:
        # The example Hypothesis reports runs whatever ran before: a failure it found once must be run again to
        # be reported, and rejecting it there (another draw of the same case passed meanwhile) would turn a
        # failure that comes and goes into Hypothesis's "unreliable assumption" instead of gemmguard's report.
        if case in ran and not hypothesis_compat.is_final_example():
            hypothesis.reject()
        replayed.append(case)
        one_example(case)
        if stopped or halted:
            return
        ran.add(case)
        if case in listed:
            hypothesis.reject()

    def tour_example(case: GemmCase) -> None:
        if case not in ran:
            one_example(case)

    shared = SHARED
    # The same draw as the base's (or, recording, a base's for later): no example database replaying earlier
    # failures first.
    pinned = session.base is not None or session.record is not None
    drawing = {**shared, "database": None} if pinned else shared
    # Listed shapes are the user's: a shrink (a compile a step) could only vary op, dtype, layout and epilogue.
    phases = hypothesis_compat.explore_phases(shrink=not space.shapes)
    explore_run = settings(max_examples=max(p.explore_n, 1), report_multiple_bugs=False, phases=phases, **drawing)(
        given(case=strategy)(drawn_example)
    )
    if run_seed is not None:
        explore_run = hypothesis.seed(run_seed)(explore_run)
    replay_case = replay.explicit_case(options.replay, space, test_id)  # a case:... replay: the tour runs it
    if options.replay and replay_case is None:
        version, _, blob = options.replay.partition(":")
        if space.cases is not None:
            raise ReplayNotReproduced(_not_reproduced(test_id, backend, [], "its cases are harvested, never drawn"))
        if version != hypothesis.__version__:
            raise ReplayNotReproduced(
                f"--gemm-replay: the blob is from Hypothesis {version} and this is {hypothesis.__version__}, "
                "which cannot replay it (run the test again for a blob of this version)"
            )
        explore_run = hypothesis.reproduce_failure(version, blob.encode())(explore_run)
    if not pinned:  # One database key per test and backend: examples that failed before are replayed first.
        hypothesis_compat.set_database_key(explore_run, test_id.encode())
    runs = [explore_run] if p.explore_n else []  # harvested cases are never mixed with random draws
    if explicit:
        visit = given(case=strategy)(tour_example)
        for case in reversed(explicit):
            visit = hypothesis.example(case=case)(visit)
        tour = settings(phases=[hypothesis.Phase.explicit], database=None, report_multiple_bugs=False, **shared)
        runs.append(tour(visit))  # its first failing example ends it at once (Hypothesis never shrinks these)
    if pool is not None:
        queue_ahead(session, p, backend, test_id)
    try:
        # Each shrink step is a compile (seconds on a GPU): Hypothesis's own five minutes per failing test
        # would make a red run an hour long. The failure is reported either way. No literals from whatever
        # modules the session has loaded by now: the seed alone decides the cases, as in the draw beforehand.
        with hypothesis_compat.shrink_time_limit(options.shrink_s), hypothesis_compat.fixed_constants():
            for run in runs:
                run()
    except DidNotReproduce:
        # A replay whose example ended as a stop, unsupported or a known failure is reported below as that.
        known_fail = tracker is not None and tracker.xfailed()
        if not replayed or not (stopped or halted or outcome["unsupported"] or known_fail):
            raise ReplayNotReproduced(_not_reproduced(test_id, backend, replayed)) from None
    except BaseException as exc:
        blob = hypothesis_compat.replay_blob(exc)
        first = not_repeatable(exc)
        if first is not None:  # failed once, not so when Hypothesis ran the same example again: gemmguard's report
            blob = blob or hypothesis_compat.replay_blob(first)
            exc = first
        # A wrong result raised out of an example carries its case (one_example): the reproduce line where Hypothesis
        # gives no blob (an explicit example; a failure whose re-run failed differently). Kept on the exception, not
        # in a list here: a list would hold every failure a shrink met, with the tensors their tracebacks reach.
        failed = getattr(exc, "failed_case", None)
        if options.profile == "big" and failed is not None:  # a blob means its case only through the profile's sizes
            blob = None
        if blob is not None or failed is not None:
            exc.add_note(replay.line(test_id, f"{blob[0]}:{blob[1]}" if blob else replay.case_value(failed)))
        if first is not None:
            raise exc from None
        raise
    finally:
        if pool is not None:
            pool.forget(test_id)
    if stopped:
        exc, case = stopped[0]
        if isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt from None  # outside Hypothesis: no "Failing explicit example" epitaph
        why = "this outcome does not depend on size"
        if isinstance(exc, BackendRefused):
            why = "a refusal is reported where it is first seen"
        exc.add_note(f"gemmguard: on {case.describe()} ({case!r}); not shrunk: {why}")
        raise exc
    judge.finish()
    if outcome["ran"] == 0 and outcome["unsupported"]:
        raise Unsupported(backend, reasons.most_common(1)[0][0], every_of=outcome["unsupported"])
    if tracker is not None:
        if tracker.xpassed():
            session.tally.of(backend).xpassed += len(tracker.xpassed())
        session.tally.note_known(tracker.seen())
        tracker.finish(session.known_strict, session.known_noted)
    if judge.xfail_reason():
        import pytest

        pytest.xfail(judge.xfail_reason())
    if replay_case is not None:  # the replayed case ran and passed
        raise ReplayNotReproduced(_not_reproduced(test_id, backend, [replay_case]))


def not_repeatable(exc: BaseException) -> BaseException | None:
    """Where Hypothesis reports `exc` as flaky (its example did not fail the same way when run again), gemmguard's
    own first failure inside it, with a note saying what the re-run did; else None."""
    inner = hypothesis_compat.flaky_inners(exc, (GemmMismatch, BackendCrashed))
    if not inner:
        return None
    again = f"failed differently ({headline(inner[1], 200)})" if len(inner) > 1 else "passed"
    inner[0].add_note(FLAKY_NOTE.format(again=again))
    return inner[0]


FLAKY_NOTE = (
    "gemmguard: not repeatable: this example failed, then {again} when run again in the same process (a failure "
    "that depends on timing, threads or state left by earlier examples); the reproduce line may need a few runs"
)


def _ahead_note(ahead: Reply | None) -> str:
    """The progress line's word on the compile-ahead worker: its own time beside the wait (a wait as long as it
    means the workers did not get ahead), a case nobody had queued (not in the draw beforehand, or dropped), and
    a worker whose compile raised (then this process compiled the case itself)."""
    if ahead is None:
        return ""
    how = ""
    if ahead.status == "ok":
        how = ", compiled ahead" + (f" in {ahead.compile_s:.1f} s" if ahead.compile_s is not None else "")
        how += "" if ahead.queued_ahead else ", not drawn ahead"
    if ahead.status == "error" and ahead.detail:
        how += f", compiled here: its compile-ahead worker raised {ahead.detail[:200]}"
    return how


def _not_reproduced(test_id: str, backend: str, replayed: list[GemmCase], why: str = "") -> str:
    """The line for a --gemm-replay whose example passed, or was no example of the test at all."""
    head = f"--gemm-replay did not reproduce a failure of {test_id}: "
    if not replayed:
        why = why or "it is from another test, or the test's arguments changed since it was printed"
        return head + f"the blob is not an example of this test ({why})"
    return head + (
        f"the replayed example ({replayed[-1].describe()}) passed on {backend}, so the failure it recorded may be "
        "fixed (or the blob is from another test)"
    )
