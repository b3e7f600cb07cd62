"""`harvest_gemms`: trace a model and walk its graph for the GEMMs it runs.

How the GEMMs are found. The model is traced with `torch.export` (non-strict: the Python runs as is, on
fake tensors; with a model built under `torch.device("meta")` and meta inputs nothing is allocated, so a
70B config costs no memory), then decomposed to ATen with these ops kept whole:

- `aten.linear`: a linear is recognised by its own node, not by pattern-matching `t` + `addmm` after
  decomposition. The decomposed form depends on the input's rank and strides (addmm for 2-D, view +
  addmm + view for contiguous 3-D, a copy + mm + add for a strided input, mm without bias), and the
  pattern also matches user code such as `x @ w.t()`; the op itself says M = prod(leading dims), N, K and
  whether there is a bias directly, wherever it was called from (nn.Linear, F.linear, inside
  nn.MultiheadAttention).
- `aten.scaled_dot_product_attention`: fused attention is not a GEMM of Inductor's GEMM backends. Kept
  whole it is reported as skipped; decomposed on the meta device it would turn into the math path's two
  bmm, which the model never runs on a GPU.
- `aten.baddbmm`: the default decompositions split it into bmm + add; Inductor itself keeps it.
- every other GEMM-like op `classify` reports (mv, addbmm, _int_mm, ...): decomposed (mv into mul +
  sum) it would vanish instead of being listed as skipped.
- the activations gemmguard has epilogue steps for (relu, gelu, silu, sigmoid, tanh): decomposed, a
  bfloat16 silu turns into upcast + math + downcast, which would read as a cast the model never wrote.

Everything else (matmul, einsum, `@`) is decomposed exactly as AOTAutograd decomposes it for Inductor,
so the mm/bmm found here are the ones Inductor compiles, with the strides they really have. An export
graph (rather than a dispatch-mode log) also gives each GEMM's consumers, which is how the epilogue that
follows it is read off.

A GEMM gemmguard cannot express (a dtype, layout, bias shape or scaling it has no case for; fused
attention; a matrix-vector product) is never dropped silently: it is listed in `Harvest.skipped` with
why, and `harvest_gemms` warns with one line naming each.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch

from ..cases.ops import FLOAT_DTYPES
from ..errors import GemmUsageError
from .classify import GEMM_OPS, NOT_EXPRESSIBLE, classify
from .items import Harvest, HarvestedGemm, HarvestWarning, Skipped, case_problem
from .nodes import first_line, modules, op_name, traced_dtype, what_of


def harvest_gemms(model: Any, *example_inputs: Any, dtype: Any = None) -> Harvest:
    """The distinct GEMMs `model(*example_inputs)` runs, with how often each runs.

    Build the model under `torch.device("meta")` and pass meta inputs to trace without memory or weights.
    Each GEMM keeps the dtype it was traced in (the model's parameter dtype, unless the model casts);
    with `dtype=` (a torch dtype or a gemmguard dtype name such as "bfloat16" or "tf32"), GEMMs that ran in
    the model's parameter dtype are recorded in that dtype instead: trace once, guard the dtype you deploy.
    Raises GemmUsageError (one line) when the model cannot be traced.
    """
    return harvest(model, tuple(example_inputs), {}, dtype)


def harvest(model: Any, args: tuple, kwargs: dict, dtype: Any) -> Harvest:
    """`harvest_gemms` with keyword inputs; warns (HarvestWarning, at the caller's caller) about what it skipped."""
    relabel = _dtype_name(dtype) if dtype is not None else None
    if not isinstance(model, torch.nn.Module):
        if not callable(model):
            raise GemmUsageError(f"harvest_gemms: {type(model).__name__} is not an nn.Module or a callable")
        model = _as_module(model)
    graph = _trace(model, args, kwargs)
    found: Counter = Counter()
    extra: dict[tuple, tuple[set, set, tuple]] = {}
    skipped: Counter = Counter()
    main_dtype = _main_dtype(model, args)
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        if name in GEMM_OPS:
            result = classify(node, name)
            if isinstance(result, tuple):  # (what, why)
                skipped[result] += 1
                continue
            item = result
            if relabel is not None and item.dtype == main_dtype:
                item = replace(item, dtype=relabel)
            why = case_problem(item)
            if why:
                skipped[(what_of(node, name), why)] += 1
                continue
            found[item.key] += 1
            sources, mods, _ = extra.setdefault(item.key, (set(), set(), item.operands))
            sources.add(f"aten.{name}")
            mods.update(modules(node))
        elif name in NOT_EXPRESSIBLE:
            skipped[(what_of(node, name), NOT_EXPRESSIBLE[name])] += 1
    items = []
    for key, count in found.items():
        op, batch, m, n, k, dt, layout, epilogue = key
        sources, mods, operands = extra[key]
        items.append(HarvestedGemm(op, m, n, k, batch, dt, layout, epilogue, count, operands,
                                   tuple(sorted(sources)), tuple(sorted(mods))))  # fmt: skip
    result = Harvest(items, [Skipped(what, why, c) for (what, why), c in skipped.items()])
    line = result.skipped_line()
    if line:
        warnings.warn(HarvestWarning(f"gemmguard: {line}"), stacklevel=3)
    return result


def _as_module(fn: Any) -> Any:
    """A plain callable as a module: torch.export traces modules."""

    class Function(torch.nn.Module):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

    return Function()


def _kept_ops() -> list:
    """Ops kept whole through the decompositions (see the module docstring for why)."""
    # Every GEMM-like op `classify` looks at stays whole, so none is decomposed out of sight (mv, say, into
    # mul + sum); and the epilogue steps, or a bfloat16 silu would read as upcast + silu + a cast step.
    names = [*GEMM_OPS, *NOT_EXPRESSIBLE, "relu", "gelu", "silu", "sigmoid", "tanh"]
    packets = [getattr(torch.ops.aten, name) for name in names if hasattr(torch.ops.aten, name)]
    return [getattr(packet, overload) for packet in packets for overload in packet.overloads()]


# Loggers that write a traceback or a graph for a trace that fails (the failure is reported once, as one
# line, by the caller) or warn about tracing internals.
_TRACE_LOGGERS = ("torch._subclasses.fake_tensor", "torch.fx.experimental.symbolic_shapes", "torch.export",
                  "torch._export", "torch._dynamo")  # fmt: skip


@contextlib.contextmanager
def _quiet_trace() -> Iterator[None]:
    """Trace without torch's own noise: a failing meta kernel logs its traceback at ERROR level, a failed
    export prints its partial graph on stderr, and the machinery warns about itself."""
    loggers = [logging.getLogger(name) for name in _TRACE_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _trace(model: Any, args: tuple, kwargs: dict) -> Any:
    label = type(model).__name__
    try:
        with _quiet_trace():
            program = torch.export.export(model, args, kwargs, strict=False)
            table = torch.export.default_decompositions()
            for op in _kept_ops():
                if op in table:
                    del table[op]
            program = program.run_decompositions(table)
    except GemmUsageError:
        raise
    except Exception as exc:
        raise GemmUsageError(
            f"could not trace {label}: {type(exc).__name__}: {first_line(exc)} "
            "(the model must run on its example inputs; build it under torch.device('meta') for meta inputs)"
        ) from None
    return program.graph


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        name = dtype.strip().lower().removeprefix("torch.")
    elif isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    else:
        raise GemmUsageError(f"harvest dtype={dtype!r}: give a torch dtype or one of {', '.join(FLOAT_DTYPES)}")
    if name not in FLOAT_DTYPES:
        raise GemmUsageError(
            f"harvest dtype={dtype!r}: valid: {', '.join(FLOAT_DTYPES)} (float8 GEMMs are harvested as the "
            "model's own torch._scaled_mm calls)"
        )
    return name


def _main_dtype(model: Any, args: tuple) -> str | None:
    """The model's parameter dtype (the one most parameter elements have), else its float inputs'."""
    sizes: Counter = Counter()
    for p in model.parameters():
        if p.is_floating_point():
            sizes[p.dtype] += p.numel()
    if not sizes:
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                sizes[a.dtype] += 1
    return traced_dtype(sizes.most_common(1)[0][0]) if sizes else None
