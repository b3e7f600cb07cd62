"""Every autotune candidate, not only the winner (`--gemm-all-choices`).

Autotuning picks one choice per shape on this machine; another GPU, or the next shape, picks another, and
a wrong candidate hides until then (pytorch#159940: Inductor's scaled_mm Triton template was wrong on the
H100 only when the autotuner picked it). Autotuning already runs every candidate once on example inputs,
so checking them costs one float64 reference per selection and one comparison per candidate.

    with candidates.watch(case) as seen:   # around any compile (and its first run), in any process
        out = compiled(*inputs)
    seen                                   # [CandidateResult], filled when the block ends

run/check.py instead asks compiler.py's Dynamo backend (`judging`) to watch each graph it compiles and keep the
results on the graph's provenance, so a call that reuses the compile (Hypothesis re-running a failing
example) fails the same way.

What is checked, exactly:

- every choice of every autotune selection lowered inside the block whose benchmark ran in this process,
  on the inputs that benchmark received. Where the GEMM's inputs are graph inputs of a graph compiled
  through gemmguard's Compiler (which publishes them through `graph_inputs`), those example tensors are
  first overwritten with the case's own values (`inputs` of the result says "case"); elsewhere they are
  Inductor's random tensors of the case's shapes, strides and dtypes ("random");
- against a float64 reference of what the choice computes, read from the aten op being lowered: `mm`,
  `bmm`, `addmm`/`baddbmm` (beta * bias + alpha * product), `_scaled_mm` (product times its scales, plus
  its bias), with the oracle's tolerance model for the case's dtype (the GEMM alone: epilogues fused later
  are not part of a candidate's benchmark);
- a choice whose inputs gemmguard cannot map onto the op's (the CPP template takes its weight prepacked,
  CUTLASS and CuteDSL templates have their own argument lists), an op without a reference here, or a choice
  whose benchmark ran in a subprocess (CUTLASS, `autotune_in_subproc`) is reported *not checked*, with why.

Autotuning happens only for a selection with two or more choices that no cache answers (the FX graph
cache; Inductor's autotune cache, whose file torch fixes at the process's first autotune, so it lives in
that run's temporary directory and serves the whole process): a candidate is checked when its op and
input layout are first autotuned in the process, which for pytest is the session. Results are plain data
(`to_json`/`from_json`), so a process that compiles ahead can send them back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import oracle
from .._compat import inductor

# The aten ops whose float64 reference is known here, with the number of tensor inputs a choice takes.
PRODUCTS = {"mm": 2, "bmm": 2, "addmm": 3, "baddbmm": 3}
SCALED = "_scaled_mm"


@dataclass(frozen=True)
class CandidateResult:
    """One autotune candidate of one selection: its verdict on the inputs its benchmark ran, or why none."""

    name: str  # extern_kernels.mm, triton_mm_3, ...
    description: str  # template and config
    op: str  # the selection: "mm (64, 32) x (32, 48) -> float32"
    verdict: oracle.Verdict | None  # None: not checked (see reason)
    reason: str = ""
    inputs: str = ""  # "case" (the case's own values) or "random" (Inductor's example tensors)
    timing_ms: float | None = None  # what autotuning measured for it

    @property
    def wrong(self) -> bool:
        return self.verdict is not None and not self.verdict.ok

    @property
    def checked(self) -> bool:
        return self.verdict is not None

    def line(self) -> str:
        """One line for a report."""
        head = f"{self.name} ({self.description}) on {self.op}"
        if self.verdict is None:
            return f"{head}: not checked: {self.reason}"
        what = "WRONG" if self.wrong else "right"
        worst = ""
        m = self.verdict.mismatch
        if m is not None and m.kind not in ("shape", "dtype"):
            worst = (
                f"; worst element {m.index}: got {m.actual:.6g}, expected {m.expected:.6g}, |error| {m.error:.3g} vs "
                f"tolerance {m.tolerance:.3g}; {m.bad} of {m.total} elements fail"
            )
        elif m is not None:
            worst = f"; {m.detail}"
        return f"{head}: {what}, {self.verdict.summary()}{worst} ({self.inputs} inputs)"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CandidateResult:
        data = dict(data)
        verdict = data.get("verdict")
        if verdict is not None:
            mismatch = verdict.get("mismatch")
            if mismatch is not None:
                mismatch = oracle.Mismatch(**{**mismatch, "index": tuple(mismatch.get("index", ()))})
            verdict = oracle.Verdict(**{**verdict, "mismatch": mismatch})
        return cls(**{**data, "verdict": verdict})


def identity(name: str, description: str) -> tuple[str, str]:
    """What names one candidate across compiles: Inductor numbers template choices per process
    (triton_mm_110 now, triton_mm_3 in the next compile), so the number is left out."""
    return re.sub(r"_\d+$", "", name), description


def tally(results: Sequence[CandidateResult]) -> tuple[int, int, int]:
    """(checked, wrong, not checked)."""
    checked = sum(r.checked for r in results)
    return checked, sum(r.wrong for r in results), len(results) - checked


# ---------------------------------------------------------------- what compiler.py asks for

_published = threading.local()


@contextlib.contextmanager
def judging(dtype: str | None, owner: str = "") -> Iterator[None]:
    """Ask compiler.py's Dynamo backend to judge the candidates of every graph it compiles in the block, with
    the tolerance model of a case of `dtype` (None: don't). It keeps each graph's results with the graph,
    marked as `owner`'s (the case's repr): they were judged on that case's inputs."""
    previous = getattr(_published, "dtype", None), getattr(_published, "owner", "")
    _published.dtype, _published.owner = dtype, owner
    try:
        yield
    finally:
        _published.dtype, _published.owner = previous


def judging_dtype() -> str | None:
    return getattr(_published, "dtype", None)


def judging_owner() -> str:
    return getattr(_published, "owner", "")


def judged_for(record: Any, owner: str) -> list[CandidateResult]:
    """The candidates of the graphs that ran in `record` (compile.CallRecord), judged while they compiled for
    `owner`. A graph another case compiled (a dynamic-shape compile serves many) carries that case's
    judgement, made on that case's inputs: it is that case's failure, reported there, not this one's."""
    graphs = {id(g): g for g in record.graphs if g.judged_for == owner}.values()
    return [c for g in graphs for c in g.candidates]


@contextlib.contextmanager
def graph_inputs(inputs: Sequence[Any]) -> Iterator[None]:
    """While a graph compiles: its real inputs, in placeholder order (compiler.py's Dynamo backend gets them
    from Dynamo), so candidates are benchmarked on the case's values where a GEMM reads a graph input."""
    previous = getattr(_published, "inputs", None)
    _published.inputs = list(inputs)
    try:
        yield
    finally:
        _published.inputs = previous


def _case_values(views: list[tuple[int, tuple, tuple, int] | None], args: tuple) -> bool:
    """Overwrite the example tensors that are views of graph inputs with the real inputs' values; True when
    every tensor input got the case's values."""
    real = getattr(_published, "inputs", None)
    if real is None:
        return False
    done = True
    for view, arg in zip(views, args, strict=False):
        source = real[view[0]] if view is not None and view[0] < len(real) else None
        if not isinstance(arg, torch.Tensor) or not isinstance(source, torch.Tensor) or source.dtype != arg.dtype:
            done = False
            continue
        _, size, stride, offset = view
        if tuple(arg.shape) != size or tuple(arg.stride()) != stride:
            done = False
            continue
        src = torch.as_strided(source, size, stride, offset)
        dst = arg
        for dim in range(arg.dim()):  # an expanded (stride 0) dimension holds one value: write it once
            if stride[dim] == 0:
                src, dst = src.narrow(dim, 0, 1), dst.narrow(dim, 0, 1)
        dst.copy_(src)
    return done


# ---------------------------------------------------------------- watching one compile


@dataclass
class _Entry:
    facts: inductor.ChoiceFacts
    views: list
    result: CandidateResult | None = None
    ran: bool = False  # its benchmark ran in this process


@dataclass
class _Selection:
    op: str
    kwargs: dict
    entries: list[_Entry] = field(default_factory=list)
    references: dict = field(default_factory=dict)  # inputs' identity -> (expected, tolerance)


@contextlib.contextmanager
def watch(case: Any, enabled: bool = True) -> Iterator[list[CandidateResult]]:
    """Check every autotune candidate of the compiles inside the block (`case`: a GemmCase, or its dtype
    name, which sets the tolerance model). The list it yields is filled when the block ends without raising;
    disabled, it stays empty."""
    seen: list[CandidateResult] = []
    if not enabled:
        yield seen
        return
    dtype = getattr(case, "dtype", case)
    selections: list[_Selection] = []

    def on_choices(op: str, kwargs: dict, choices: list) -> None:
        # This runs inside Inductor's lowering: what goes wrong here is reported per choice, never raised.
        selection = _Selection(op, kwargs)
        selections.append(selection)
        for choice in choices:
            try:
                entry = _Entry(inductor.choice_facts(choice), inductor.graph_input_views(choice))
            except Exception as exc:
                entry = _Entry(inductor.ChoiceFacts(str(getattr(choice, "name", "?")), type(choice).__name__, ""), [])
                entry.result = _unchecked(entry, selection, f"gemmguard could not read it: {type(exc).__name__}: {exc}")
            selection.entries.append(entry)
            if entry.result is None:
                inductor.on_benchmark(choice, *_capture(selection, entry, dtype))

    with inductor.watched_choices(on_choices):
        yield seen
    elsewhere = "its benchmark did not run in this process (it failed to compile, or ran in a subprocess)"
    for selection in selections:
        if not any(e.ran for e in selection.entries):
            continue  # never autotuned here: one choice, or a cache answered
        seen += [entry.result or _unchecked(entry, selection, elsewhere) for entry in selection.entries]


def _unchecked(
    entry: _Entry, selection: _Selection, reason: str, op: str = "", timing: float | None = None
) -> CandidateResult:
    return CandidateResult(entry.facts.name, entry.facts.description, op or selection.op, None, reason, "", timing)


def _capture(selection: _Selection, entry: _Entry, dtype: str):
    """The benchmark hook of one choice: judge its first benchmark's output. It runs inside Inductor's
    autotuning, which treats an exception as a failed choice, so nothing may escape it."""

    def before(args: tuple) -> str:
        if entry.result is not None:
            return ""
        entry.ran = True
        try:
            return "case" if _case_values(entry.views, args) else "random"
        except Exception:  # a value that cannot be copied: judge on Inductor's own values
            return "random"

    def seen(args: tuple, out: Any, timing: float, inputs: str) -> None:
        if entry.result is not None:
            return
        try:
            entry.result = _judge(selection, entry, args, out, dtype, inputs, float(timing))
        except Exception as exc:
            entry.result = _unchecked(entry, selection, f"gemmguard could not judge it: {type(exc).__name__}: {exc}")

    return before, seen


def _describe_op(op: str, args: tuple, out: Any) -> str:
    shapes = " x ".join(str(tuple(a.shape)) for a in args if isinstance(a, torch.Tensor))
    return f"{op} {shapes} -> {str(getattr(out, 'dtype', '?')).replace('torch.', '')}"


def _judge(selection: _Selection, entry: _Entry, args: tuple, out: Any, dtype: str, inputs: str, timing: float):
    op = _describe_op(selection.op, args, out)
    facts = entry.facts
    if facts.kind not in ("extern", "triton", "subgraph"):
        why = f"gemmguard does not know how a {facts.kind} choice's inputs map onto {selection.op}'s"
        return _unchecked(entry, selection, why, op, timing)
    tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
    wanted = PRODUCTS.get(selection.op)
    if selection.op == SCALED:
        wanted = 5 if len(tensors) == 5 else 4
    if wanted is None or len(tensors) != wanted or not isinstance(out, torch.Tensor):
        why = f"no float64 reference for {selection.op} with {len(tensors)} tensor inputs"
        return _unchecked(entry, selection, why, op, timing)
    rank = 3 if selection.op in ("bmm", "baddbmm") else 2
    operands = tensors[-2:] if selection.op in ("addmm", "baddbmm") else tensors[:2]
    if any(t.dim() != rank for t in operands) or out.dim() != rank:
        # Seen on the H200 with dynamic shapes: a bmm of batch 1 autotuned as an mm whose choices take the 3-D
        # buffers (the kernel reads them through its own strides). Judged as an mm they all looked wrong;
        # a check that cannot tell what the choice computes says so instead of crying wolf.
        shapes = ", ".join(str(tuple(t.shape)) for t in (*operands, out))
        why = f"its operands reach it as {shapes}, not as the {rank}-D operands of {selection.op}"
        return _unchecked(entry, selection, why, op, timing)
    key = tuple((t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype) for t in tensors)
    if key not in selection.references:
        selection.references[key] = _reference(selection.op, selection.kwargs, tensors, dtype, out.dtype)
    expected, tol = selection.references[key]
    verdict = oracle.judge(out, expected, tol, out.dtype)
    return CandidateResult(facts.name, facts.description, op, verdict, "", inputs, timing)


def _reference(op: str, kwargs: dict, tensors: tuple, dtype: str, out_dtype: torch.dtype):
    """What the candidate should have computed, in float64, and the tolerance of a correct kernel."""
    args = oracle.upcast(tensors)
    alpha, beta, bias = 1.0, 1.0, None
    if op in ("addmm", "baddbmm"):
        bias, a, b = args
        alpha, beta = float(kwargs.get("alpha", 1)), float(kwargs.get("beta", 1))
    else:
        a, b = args[:2]
    with torch.no_grad():
        if op == SCALED:
            y, e = oracle.scaled_product_bound(a, b, args[2], args[3], dtype)
            bias = args[4] if len(args) == 5 else None
        else:
            y, e = oracle.product_bound(a, b, a.shape[-1], dtype)
        eps, tiny = torch.finfo(out_dtype).eps, torch.finfo(out_dtype).tiny
        y, e = alpha * y, abs(alpha) * e
        e = e + eps * y.abs()
        if bias is not None:
            y = y + beta * bias
            e = e + eps * y.abs()
    return y, e + tiny
