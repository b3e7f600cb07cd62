"""The data of a harvest: one distinct GEMM (`HarvestedGemm`), one kind of GEMM gemmguard cannot express
(`Skipped`), a model's whole harvest (`Harvest`), and `merge` to add several harvests up."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..cases.case import GemmCase
from ..cases.ops import OPS, op_takes, shape_fits


class HarvestWarning(UserWarning):
    """Some GEMMs of the model have no gemmguard case; the message names each and why."""


@dataclass(frozen=True)
class HarvestedGemm:
    """One distinct GEMM of a model: a gemmguard case (op, M, N, K, batch, dtype, layout, epilogue) plus
    where it came from. `operands` is each operand's storage (row, col, strided, offset), `count` how many
    times one forward of the traced model runs it, `sources` the ATen ops it was traced as, `modules` the
    modules that run it (layer indices written as *)."""

    op: str
    m: int
    n: int
    k: int
    batch: int
    dtype: str
    layout: str
    epilogue: str = "none"
    count: int = 1
    operands: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """What makes two GEMMs the same case (the rest is where they came from)."""
        return (self.op, self.batch, self.m, self.n, self.k, self.dtype, self.layout, self.epilogue)

    @property
    def shape(self) -> tuple[int, ...]:
        """(B, M, N, K) for a batched op, else (M, N, K): what `gemm_benchmark(shape=...)` takes."""
        return (self.batch, self.m, self.n, self.k) if OPS[self.op].batched else (self.m, self.n, self.k)

    def case(self, seed: int = 0) -> GemmCase:
        return GemmCase(self.op, self.m, self.n, self.k, self.batch, self.dtype, self.layout, self.epilogue, seed)

    def bench_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `gemm_benchmark(**g.bench_kwargs())`."""
        return {"op": self.op, "shape": self.shape, "dtype": self.dtype, "epilogue": self.epilogue,
                "layout": self.layout}  # fmt: skip

    def describe(self) -> str:
        return self.case().describe() + f" ×{self.count}"

    def __str__(self) -> str:  # a readable pytest id when parametrizing over a harvest
        dims = "x".join(str(d) for d in self.shape)
        return f"{self.op}-{dims}-{self.dtype}-{self.layout}-{self.epilogue}"

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op, "m": self.m, "n": self.n, "k": self.k, "batch": self.batch, "dtype": self.dtype,
            "layout": self.layout, "epilogue": self.epilogue, "count": self.count,
            "operands": list(self.operands), "sources": sorted(self.sources), "modules": sorted(self.modules),
        }  # fmt: skip


def case_problem(item: HarvestedGemm) -> str | None:
    """Why a harvested GEMM is not a valid gemmguard case (after a dtype relabel), or None."""
    if not op_takes(item.op, item.dtype, item.layout):
        return f"{item.op} does not take {item.dtype} in layout {item.layout}"
    if not shape_fits(item.op, item.shape):
        return f"{item.op} needs N and K multiples of {OPS[item.op].align}"
    return None


@dataclass(frozen=True)
class Skipped:
    """A GEMM-like op of the model that gemmguard has no case for, and why."""

    what: str
    why: str
    count: int = 1

    def line(self) -> str:
        return f"{self.what} ×{self.count} ({self.why})"


class Harvest(list):
    """The distinct GEMMs of a model (a list of HarvestedGemm), with what was skipped and how it was made."""

    def __init__(self, items: Iterable[HarvestedGemm] = (), skipped: Iterable[Skipped] = (), source: Any = None):
        super().__init__(sorted(items, key=lambda g: g.key))
        self.skipped: list[Skipped] = sorted(skipped, key=lambda s: (s.what, s.why))
        self.source = source

    def skipped_line(self) -> str | None:
        """One line naming every skipped GEMM kind and why, or None when nothing was skipped."""
        if not self.skipped:
            return None
        calls = sum(s.count for s in self.skipped)
        kinds = len(self.skipped)
        head = f"harvest skipped {kinds} GEMM kind{'s' * (kinds != 1)} ({calls} call{'s' * (calls != 1)})"
        return f"{head} gemmguard cannot express: " + "; ".join(s.line() for s in self.skipped)


def merge(harvests: Iterable[Harvest], source: Any = None) -> Harvest:
    """Several harvests as one (several batch sizes of one model, say): counts add up."""
    counts: Counter = Counter()
    firsts: dict[tuple, HarvestedGemm] = {}
    sources: dict[tuple, set] = {}
    modules: dict[tuple, set] = {}
    skipped: Counter = Counter()
    for h in harvests:
        for g in h:
            counts[g.key] += g.count
            firsts.setdefault(g.key, g)
            sources.setdefault(g.key, set()).update(g.sources)
            modules.setdefault(g.key, set()).update(g.modules)
        for s in h.skipped:
            skipped[(s.what, s.why)] += s.count
    items = [replace(g, count=counts[k], sources=tuple(sorted(sources[k])), modules=tuple(sorted(modules[k])))
             for k, g in firsts.items()]  # fmt: skip
    return Harvest(items, [Skipped(w, y, c) for (w, y), c in skipped.items()], source)
