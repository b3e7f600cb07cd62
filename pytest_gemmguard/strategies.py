"""Hypothesis strategies for GEMM cases, usable on their own:

    from hypothesis import given
    from pytest_gemmguard import strategies as gs

    @given(gs.gemm_cases(device="cpu", ops=["mm"]))
    def test_something(case): ...

Sizes mix the regimes where GEMM kernels break: M (or N, K) = 1, small primes, sizes that are not
multiples of 8 or 16, sizes just past (or short of) a power of two, aligned sizes, batches > 2.
`regime_tour` lists a few explicit cases that together visit every regime, so a default run always
covers them; Hypothesis then explores at random and shrinks failures toward small, plain cases.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from .cases import LAYOUTS, CaseSpec, GemmCase
from .ops import DTYPES, OPS, STEPS, chain_name

PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


@dataclass(frozen=True)
class SizeLimits:
    mn: int  # largest M and N
    k: int  # largest K
    batch: int  # largest batch

    @staticmethod
    def for_device(device: str) -> SizeLimits:
        # The CPU runs compiles for real in CI on 2 cores: keep problems small. The GPU gets sizes
        # that reach multi-tile and split regimes, and K large enough to expose low-precision sums.
        return SizeLimits(96, 160, 4) if device == "cpu" else SizeLimits(1536, 4096, 6)


def dims(limit: int) -> st.SearchStrategy[int]:
    """One GEMM dimension, drawn from the regimes that break kernels (shrinks toward 1)."""
    pow2 = [p for j in range(1, limit.bit_length()) for p in (2**j + 1, 2**j - 1) if 1 <= p <= limit]
    return st.one_of(
        st.integers(1, limit),
        st.just(1),
        st.sampled_from([p for p in PRIMES if p <= limit]),
        st.sampled_from(pow2),
        st.integers(1, limit).filter(lambda x: x % 8 != 0),
        st.integers(1, max(limit // 16, 1)).map(lambda x: 16 * x),
    )


def epilogue_chains(max_len: int = 3) -> st.SearchStrategy[str]:
    """'none' or a chain of distinct steps such as 'bias+gelu+cast'."""
    return st.lists(st.sampled_from(list(STEPS)), max_size=max_len, unique=True).map(lambda s: chain_name(tuple(s)))


def gemm_cases(
    device: str = "cpu",
    *,
    ops: list[str] | None = None,
    dtypes: list[str] | None = None,
    epilogues: list[str] | None = None,
    layouts: list[str] | None = None,
    shapes: list[tuple[int, ...]] | None = None,
    seed: int = 0,
) -> st.SearchStrategy[GemmCase]:
    """GemmCases for `device`, narrowed like `@gemm_case` (lists of names; None means all)."""
    limits = SizeLimits.for_device(device)
    ops_ = list(ops or OPS)
    epilogue_st = st.sampled_from(list(epilogues)) if epilogues else epilogue_chains()
    dtype_st = st.sampled_from(list(dtypes or DTYPES))
    layout_st = st.sampled_from(list(layouts or LAYOUTS))

    @st.composite
    def draw(data) -> GemmCase:
        if shapes:
            shape = data(st.sampled_from(list(shapes)))
            fitting = [o for o in ops_ if OPS[o].batched == (len(shape) == 4)]
            op = data(st.sampled_from(fitting or ops_))
            batch, m, n, k = shape if len(shape) == 4 else (0, *shape)
            if OPS[op].batched and not batch:
                batch = 1
        else:
            op = data(st.sampled_from(ops_))
            m, n, k = data(dims(limits.mn)), data(dims(limits.mn)), data(dims(limits.k))
            batch = data(st.integers(1, limits.batch)) if OPS[op].batched else 0
        return GemmCase(op, m, n, k, batch, data(dtype_st), data(layout_st), data(epilogue_st), seed)

    return draw()


def regime_tour(spec: CaseSpec, device: str, seed: int = 0) -> list[GemmCase]:
    """A handful of explicit cases that together visit every op, dtype, layout, epilogue step and size
    regime the spec allows. Row i takes the i-th item of each list (cycling), so the tour is as long as
    the longest list, not their product."""
    limits = SizeLimits.for_device(device)
    ops = list(spec.ops or OPS)
    dtypes = list(spec.dtypes or DTYPES)
    layouts = list(spec.layouts or LAYOUTS)
    if spec.epilogues:
        chains = list(spec.epilogues)
    else:
        steps = list(STEPS)
        chains = ["none"] + [chain_name(tuple(steps[i : i + 2])) for i in range(0, len(steps), 2)]
    if spec.shapes:
        sizes = [tuple(s) for s in spec.shapes]
    else:
        past = 1 << (min(limits.mn, limits.k).bit_length() - 2)
        sizes = [
            (3, 1, 7, 13),  # M = 1, primes
            (3, 17, 1, 31),  # N = 1
            (2, past + 1, past - 1, past + 1),  # just past / short of a power of two
            (4, 24, 40, 1),  # K = 1
            (3, 19, 37, limits.k),  # non-multiples of 8 with the largest K
            (2, 64, 48, 96),  # aligned
        ]
    rows = max(len(ops), len(dtypes), len(layouts), len(chains), len(sizes))
    tour = []
    for i in range(rows):
        op = ops[i % len(ops)]
        size = sizes[i % len(sizes)]
        if len(size) == 3:
            size = (1, *size)
        batch, m, n, k = size
        if not OPS[op].batched:
            batch = 0
        else:
            batch = max(batch, 3) if not spec.shapes else batch  # batches > 2
        tour.append(GemmCase(op, m, n, k, batch, dtypes[i % len(dtypes)], layouts[i % len(layouts)],
                             chains[i % len(chains)], seed))  # fmt: skip
    return tour
