"""Binds cases to a backend: the `gemm` object tests receive, and the Hypothesis loop around a test.

A check is: build inputs, compute the float64 reference and tolerance, compile through the backend,
release NaN-poisoned blocks, run, prove provenance, compare. The backend never judges, the oracle
never compiles; this module only sequences them and keeps the tally.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import backends, oracle, repro
from .cases import CaseInputs, CaseSpec, GemmCase, build_inputs, case_function
from .compile import CallRecord, Compiler, run_checked
from .errors import CompileTimeout, Unsupported
from .ops import DTYPES, OPS, dtype_unsupported, math_precision

UNAVAILABLE_PREFIX = "gemmguard: backend"  # starts the skip reason of a backend that cannot run here


def require_backend(backend: str) -> None:
    """Skip the current test, with the probe's reason and fix, when `backend` cannot run here."""
    import pytest

    probe = backends.probe(backend)
    if not probe.available:
        pytest.skip(f"{UNAVAILABLE_PREFIX} {backend} {probe.line()}")


class GemmMismatch(AssertionError):
    """A backend's kernel ran and produced a wrong result."""


@dataclass
class Tally:
    """Per-backend example counts (verified, unsupported, failed, fused) and seconds (compile_s, check_s),
    plus why examples were unsupported. Plain data: a test's share travels on its pytest report, so the
    summary is the same whether tests ran here or in pytest-xdist workers."""

    counts: Counter = field(default_factory=Counter)  # (backend, what) -> number
    reasons: Counter = field(default_factory=Counter)  # (backend, reason) -> examples

    def add(self, backend: str, what: str, amount: float = 1) -> None:
        self.counts[(backend, what)] += amount

    def note_unsupported(self, backend: str, reason: str) -> None:
        self.add(backend, "unsupported")
        self.reasons[(backend, reason)] += 1

    def snapshot(self) -> Tally:
        return Tally(Counter(self.counts), Counter(self.reasons))

    def since(self, before: Tally) -> dict:
        """What was added after `before`, as JSON-able lists."""
        return {
            "counts": [[*key, n - before.counts[key]] for key, n in self.counts.items() if n != before.counts[key]],
            "reasons": [[*key, n - before.reasons[key]] for key, n in self.reasons.items() if n != before.reasons[key]],
        }


@dataclass
class CheckResult:
    output: Any
    verdict: oracle.Verdict
    record: CallRecord


@dataclass
class Options:
    max_examples: int | None = None  # overrides every gemm case's budget
    seed: int | None = None
    replay: str | None = None  # "version:blob" from a failure report
    repro_dir: str = "gemmguard-repro"
    progress: Callable[[str], None] | None = None  # live lines for long runs (the plugin wires -v)
    default_examples: dict = field(default_factory=lambda: {"cpu": 12, "cuda": 25})


class Gemm:
    """One drawn case bound to one backend: what a `@gemm_case` test receives as `gemm`."""

    def __init__(self, case: GemmCase, backend: str, session: GemmSession, test_id: str = "") -> None:
        self.case = case
        self.backend = backend
        self._session = session
        self._test_id = test_id
        self._inputs: CaseInputs | None = None

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
        return self._session.check(self, fn)

    def __repr__(self) -> str:
        return f"Gemm({self.case!r}, backend={self.backend!r})"


class GemmSession:
    """Session-wide state: the compiler, options and the tally."""

    def __init__(self, compiler: Compiler, options: Options) -> None:
        self.compiler = compiler
        self.options = options
        self.tally = Tally()

    def check(self, gemm: Gemm, fn: Callable[..., Any] | None) -> CheckResult:
        reason = dtype_unsupported(gemm.case.dtype, gemm.device)
        if reason:
            self.tally.note_unsupported(gemm.backend, reason)
            raise Unsupported(gemm.backend, reason)
        backend = backends.get(gemm.backend)
        # The case's dtype decides the float32 math (TF32 or IEEE) for the compile, the run and eager.
        with math_precision(gemm.case.dtype):
            try:
                return self._check(gemm, fn, backend)
            except Unsupported as first:
                # A backend with several routes (cutedsl) tries the next where the first ran no kernel of its own:
                # the user asked for the backend, not one route. If no route has a kernel, the case is
                # unsupported, never failed: no kernel of the backend ran, so none was wrong.
                fallback = backend.fallback
                if not fallback or not backends.probe(fallback).available:
                    self.tally.note_unsupported(gemm.backend, first.reason)
                    raise
                try:
                    return self._check(gemm, fn, backends.get(fallback))
                except Unsupported as second:
                    reason = f"{first.reason}; {fallback}: {second.reason}"
                    self.tally.note_unsupported(gemm.backend, reason)
                    raise Unsupported(gemm.backend, reason) from None

    def _check(self, gemm: Gemm, fn: Callable[..., Any] | None, backend: backends.Backend) -> CheckResult:
        import torch

        started = time.perf_counter()
        case, inputs = gemm.case, gemm.inputs
        expected, tol = oracle.case_reference(case, inputs)
        if fn is None:
            target, flat = case_function(case.op, case.epilogue, case.dtype), inputs.flat
            expected_dtype = DTYPES[case.out_dtype]
        else:
            target, flat = fn, inputs.args
            with torch.no_grad():
                eager_out = fn(*flat)
            expected = oracle.reference(fn, flat)
            expected_dtype = eager_out.dtype
            tol = oracle.generic_tolerance(expected, tol, expected_dtype)
        compiled = self.compiler.compile(backend, target, flat, OPS[case.op].weight_positions)
        oracle.poison_allocator(torch.empty(expected.shape, dtype=expected_dtype, device=expected.device))
        out, record = run_checked(compiled, flat)
        self.tally.add(gemm.backend, "compile_s", record.compile_s)
        verdict = oracle.compare(out, expected, tol, expected_dtype)
        if not verdict.ok:
            ratio = oracle.eager_ratio(target, flat, expected, tol)
            verdict = oracle.Verdict(False, verdict.max_ratio, verdict.max_error, verdict.mismatch, ratio)
            self.tally.add(gemm.backend, "failed")
            path = repro.write(self.options.repro_dir, gemm, fn, backend, verdict, self.compiler.dynamic)
            raise GemmMismatch(failure_report(gemm, verdict, record, path, backend.name))
        self.tally.add(gemm.backend, "verified")
        if any(_fused(k) for g in record.graphs for k in g.gemm_kernels(backend.name)):
            self.tally.add(gemm.backend, "fused")
        self.tally.add(gemm.backend, "check_s", time.perf_counter() - started)
        return CheckResult(out, verdict, record)

    # ------------------------------------------------------------ the Hypothesis loop

    def run_cases(self, test: Callable, spec: CaseSpec, fixtures: dict, backend: str, test_id: str) -> None:
        import hypothesis
        import pytest
        from hypothesis import HealthCheck, given, settings

        from . import strategies

        require_backend(backend)
        device = backends.get(backend).device()
        seed = self.options.seed or 0
        narrowed = dict(ops=spec.ops, dtypes=spec.dtypes, epilogues=spec.epilogues, layouts=spec.layouts)
        strategy = strategies.gemm_cases(device, shapes=spec.shapes, seed=seed, **narrowed)
        tour = strategies.regime_tour(spec, device, seed)
        budget = self.options.max_examples or spec.max_examples or self.options.default_examples[device]
        outcome: Counter = Counter()
        reasons: Counter = Counter()
        timed_out: list[CompileTimeout] = []

        def one_example(case: GemmCase) -> None:
            if timed_out:  # one timeout ends the test: don't let Hypothesis pay for more
                return
            step = outcome["ran"] + outcome["unsupported"] + 1
            started = time.perf_counter()
            try:
                test(gemm=Gemm(case, backend, self, test_id), **fixtures)
                outcome["ran"] += 1
                verdict = "verified"
            except Unsupported as exc:
                outcome["unsupported"] += 1
                reasons[exc.reason] += 1
                hypothesis.event(f"unsupported: {exc.reason}")
                verdict = "unsupported"
            except CompileTimeout as exc:
                timed_out.append(exc)
                verdict = "timed out"
            except BaseException as exc:
                took = time.perf_counter() - started
                self.progress(
                    f"[{backend}] {step}/{budget} {case.describe()}: FAILED ({type(exc).__name__}, {took:.1f} s)"
                )
                raise
            took = time.perf_counter() - started
            self.progress(f"[{backend}] {step}/{budget} {case.describe()}: {verdict} ({took:.1f} s)")

        # Hypothesis explores first, so whatever it finds is shrunk; then the regime tour (explicit
        # cases, which Hypothesis never shrinks, hence already small) guarantees every regime ran.
        # Both come out of one budget.
        explicit = tour[: max(budget - 1, 1)] if self.options.replay is None else []
        shared = dict(deadline=None, print_blob=True, suppress_health_check=list(HealthCheck))
        explore = settings(max_examples=max(budget - len(explicit), 1), report_multiple_bugs=False, **shared)(
            given(case=strategy)(one_example)
        )
        if self.options.seed is not None:
            explore = hypothesis.seed(self.options.seed)(explore)
        if self.options.replay:
            version, _, blob = self.options.replay.partition(":")
            explore = hypothesis.reproduce_failure(version, blob.encode())(explore)
        # One database key per test and backend: examples that failed before are replayed first.
        explore.hypothesis.inner_test._hypothesis_internal_add_digest = test_id.encode()
        runs = [explore]
        if explicit:
            visit = given(case=strategy)(one_example)
            for case in reversed(explicit):
                visit = hypothesis.example(case=case)(visit)
            runs.append(settings(phases=[hypothesis.Phase.explicit], database=None, **shared)(visit))
        try:
            for run in runs:
                run()
        except BaseException as exc:
            _append_replay_line(exc, test_id)
            raise
        if timed_out:
            pytest.fail(f"gemmguard: {timed_out[0]}", pytrace=False)
        if outcome["ran"] == 0 and outcome["unsupported"]:
            example = reasons.most_common(1)[0][0]
            pytest.skip(
                f"gemmguard: unsupported by {backend} for every case drawn "
                f"({outcome['unsupported']} examples; e.g. {example})"
            )

    def progress(self, message: str) -> None:
        """A live line for long work (shown with pytest -v)."""
        if self.options.progress is not None:
            self.options.progress(message)


def _fused(kernel_name: str) -> bool:
    # Inductor names a template kernel after every node fused into it (cpp_fused_add_addmm_relu_0,
    # triton_tem_fused_mm_relu_0): any pointwise node there means the epilogue ran inside the GEMM.
    parts = set(kernel_name.split("_"))
    return bool(parts & {"relu", "gelu", "silu", "sigmoid", "tanh", "add", "mul", "erf", "exp", "convert"})


_BLOB = re.compile(r"@reproduce_failure\('([^']+)', b'([^']*)'\)")


def _append_replay_line(exc: BaseException, test_id: str) -> None:
    for note in getattr(exc, "__notes__", []):
        m = _BLOB.search(note)
        if m:
            exc.add_note(f"gemmguard reproduce: pytest '{test_id}' --gemm-replay='{m.group(1)}:{m.group(2)}'")
            return


def failure_report(
    gemm: Gemm, verdict: oracle.Verdict, record: CallRecord, repro_path: str | None, route: str = ""
) -> str:
    case, mm = gemm.case, verdict.mismatch
    via = f" (route {route})" if route and route != gemm.backend else ""
    lines = [
        f"gemmguard: {gemm.backend}{via} produced a wrong result",
        f"  case:     {case.describe()}",
        f"            {case!r}",
    ]
    if mm is not None and mm.kind in ("shape", "dtype"):
        lines.append(f"  output:   {mm.detail}")
    elif mm is not None:
        lines.append(
            f"  worst:    element {mm.index}: got {mm.actual:.6g}, expected {mm.expected:.6g}, "
            f"|error| {mm.error:.3g} vs tolerance {mm.tolerance:.3g} ({verdict.max_ratio:.3g}x)"
        )
        what = {"unwritten": " (NaN: element never written)", "nonfinite": " (non-finite)"}.get(mm.kind, "")
        lines.append(f"  failing:  {mm.bad} of {mm.total} elements{what}")
    if verdict.eager_ratio is not None:
        lines.append(f"  eager PyTorch on the same inputs uses {verdict.eager_ratio:.3g}x of the tolerance")
    kernels = [f"{k} ({b})" for g in record.graphs for k, b in g.owners]
    lines.append(f"  kernels:  {', '.join(kernels) or 'none recorded'}")
    if repro_path:
        lines.append(f"  repro:    python {repro_path}")
    return "\n".join(lines)
