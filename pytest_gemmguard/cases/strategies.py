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

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from hypothesis import strategies as st

from .case import LAYOUTS, GemmCase, aliasable, takes_values
from .ops import OPS, STEPS, chain_name, default_dtypes, op_takes, parse_chain, shape_fits
from .space import CaseSpace, case_space, valid_ops, values_of

T = TypeVar("T")

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


CHAIN_STEPS = 3  # the most steps a drawn epilogue chains


def epilogue_chains(max_len: int = CHAIN_STEPS) -> st.SearchStrategy[str]:
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
    values: list[str] | None = None,
    seed: int = 0,
) -> st.SearchStrategy[GemmCase]:
    """GemmCases for `device`, narrowed like `@gemm_case` (lists of names; None means all; a bad name is
    the same one-line GemmUsageError `@gemm_case` gives).

    Only cases valid by the op's own contract are drawn: float8 goes with the scaled ops (B column-
    major, N and K multiples of 16); tf32 only where the device has it, unless asked for by name."""
    space = case_space(
        "gemm_cases", ops=ops, dtypes=dtypes, epilogues=epilogues, layouts=layouts, shapes=shapes, values=values
    )
    return cases_in(space, device, seed)


def cases_in(
    space: CaseSpace, device: str, seed: int = 0, sizes: Callable[[str, str], st.SearchStrategy] | None = None
) -> st.SearchStrategy[GemmCase]:
    """The strategy of a validated CaseSpace (what `gemm_cases` and the `@gemm_case` runner draw from). `sizes`
    (a profile's: cases/big.py) draws (batch, M, N, K) for an op and layout instead of the default regimes."""
    limits = SizeLimits.for_device(device)
    shapes, epilogues = space.shapes, space.epilogues
    dtypes_ = list(space.dtypes or default_dtypes(device))
    ops_ = valid_ops(space, dtypes_, device)
    if sizes is not None and space.ops is None:  # a profile draws the blockwise ops only where named (cases/big.py)
        ops_ = [o for o in ops_ if not OPS[o].scale_blocks]
    layouts_ = list(space.layouts or LAYOUTS)
    values_ = list(values_of(space))
    epilogue_st = st.sampled_from(list(epilogues)) if epilogues else epilogue_chains()
    # Only shapes some op can take (case_space refuses the rest with a usage error).
    usable_shapes = [s for s in shapes or () if any(_listed_fits(o, s, dtypes_, layouts_) for o in ops_)]

    @st.composite
    def draw(data) -> GemmCase:
        if shapes:
            shape = data(st.sampled_from(usable_shapes))
            op = data(st.sampled_from([o for o in ops_ if _listed_fits(o, shape, dtypes_, layouts_)]))
            batch, m, n, k = shape if len(shape) == 4 else (0, *shape)
            if OPS[op].batched and not batch:
                batch = 1
        else:
            op = data(st.sampled_from(ops_))
            if sizes is None:
                m, n, k = data(dims(limits.mn)), data(dims(limits.mn)), data(dims(limits.k))
                n, k = round_up(n, OPS[op].align), round_up(k, OPS[op].k_align)
                batch = data(st.integers(1, limits.batch)) if OPS[op].batched else 0
            else:  # drawn once the layout is (an aliased B needs N = M)
                batch = m = n = k = 0
        # A listed shape is kept as given: it takes an aliased B only where N = M already.
        allowed = [(d, lay) for d in dtypes_ for lay in layouts_
                   if op_takes(op, d, lay) and (not shapes or aliasable(lay, m, n))]  # fmt: skip
        dtype = data(st.sampled_from(sorted({d for d, _ in allowed}, key=dtypes_.index)))
        kinds = values_ if not OPS[op].scaled else ["normal"]
        layout, values = data(st.sampled_from(_layouts_and_values([lay for d, lay in allowed if d == dtype], kinds)))
        if sizes is not None and not shapes:
            batch, m, n, k = data(sizes(op, layout))
        elif not shapes and layout == "aliased":
            m = n = max(m, n)  # B is A transposed: M and N meet at the larger
            if data(st.booleans()):  # or B is A itself (x @ x, a residual that is x): all three meet at K
                # At K, not at M: a failure that needs a large K then still fails with another layout, so Hypothesis
                # can shrink the layout away (tied to M, K fell with it and the failure was stuck at an aliased M).
                m = n = k = min(k, limits.mn)
        if not takes_values(op, values, m, n):
            if "normal" in values_ or shapes:  # a listed shape is kept (case_space refused one too small)
                values = "normal"
            else:  # NaN or inf asked for alone: one row and one column must stay clean
                m, n = max(m, 2), max(n, 2)
        return GemmCase(op, m, n, k, batch, dtype, layout, data(epilogue_st), seed, values)

    return draw()


# Ordinary numbers stand in the layout-and-values list this many times as each special kind (VALUES): two entries in
# five are special, and with Hypothesis's preference for early choices and the cases that cannot hold them (M or N of
# 1, the scaled ops) 16% of 1000 CPU draws and 19% of 1000 GPU draws held NaN or inf; the rest keep the whole result
# for the bound.
NORMAL_WEIGHT = 3


def _layouts_and_values(layouts: list[str], values: list[str]) -> list[tuple[str, str]]:
    """What one draw picks a case's layout and values from: every layout with ordinary numbers first, in the
    order the layout alone was drawn from before values existed, then the specials. One draw, not two, so that an
    older replay line's choice still means the same case wherever the layout had a choice (an op that takes no
    specials, the scaled ones, has the same list as before; a single layout with specials becomes a choice)."""
    first = values[0]
    weight = NORMAL_WEIGHT if first == "normal" and len(values) > 1 else 1
    return [(lay, first) for lay in layouts] * weight + [(lay, v) for v in values[1:] for lay in layouts]


def _listed_fits(op: str, shape: tuple[int, ...], dtypes: list[str], layouts: list[str]) -> bool:
    """Whether `op` takes a listed shape in one of the space's dtypes and layouts (an aliased B needs N = M)."""
    return shape_fits(op, shape) and any(
        op_takes(op, d, lay) and aliasable(lay, shape[-3], shape[-2]) for d in dtypes for lay in layouts
    )


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def regime_tour(space: CaseSpace, device: str, seed: int = 0) -> list[GemmCase]:
    """A handful of explicit cases that together visit every op, dtype, layout, epilogue step and size
    regime the space allows: about as long as the longest list, not their product."""
    limits = SizeLimits.for_device(device)
    dtypes = list(space.dtypes or default_dtypes(device))
    ops = valid_ops(space, dtypes, device)
    layouts = list(space.layouts or LAYOUTS)
    if space.epilogues:
        chains = list(space.epilogues)
    else:
        steps = list(STEPS)
        chains = ["none"] + [chain_name(tuple(steps[i : i + 2])) for i in range(0, len(steps), 2)]
    if space.shapes:
        sizes = [tuple(s) for s in space.shapes]
    else:
        past = 1 << (min(limits.mn, limits.k).bit_length() - 2)
        sizes = [
            (3, 1, 7, 13),  # M = 1, primes
            (3, 17, 1, 31),  # N = 1
            (2, 5, 3, _prime_at_most(limits.k)),  # a prime K far above M and N: no split of K divides it
            (2, past + 1, past - 1, past + 1),  # just past / short of a power of two
            (4, 24, 40, 1),  # K = 1
            (3, 19, 37, limits.k),  # non-multiples of 8 with the largest K
            (2, 64, 48, 96),  # aligned
        ]
    # Row i takes the i-th op, chain and size (cycling) and the first dtype and layout not yet visited
    # that its op takes: rows go on until every item of every list ran (float8 rows can only take the
    # scaled ops' layout, so another op's row catches the layout they skipped).
    rows = max(len(ops), len(dtypes), len(layouts), len(chains), len(sizes))
    # What the space's ops can take at all: a dtype or layout none of them takes (float8 in a space of `mm`)
    # is never visited, and waiting for it would only repeat rows.
    takes = [(d, lay) for o in ops for d in dtypes for lay in layouts if op_takes(o, d, lay)]
    reachable_dtypes, reachable_layouts = {d for d, _ in takes}, {lay for _, lay in takes}
    seen_dtypes: set[str] = set()
    seen_layouts: set[str] = set()
    values = list(values_of(space))
    seen_values: set[str] = {"normal"}
    # Listed shapes are visited like dtypes: each row takes the first its op suits that no row took yet (taken
    # by turns, a shape of the second op of two never came: the second op's rows were all odd).
    listed = set(sizes) if space.shapes else set()
    seen_sizes: set[tuple[int, ...]] = set()
    tour: list[GemmCase] = []
    for i in range(3 * rows):
        if i >= rows and seen_dtypes >= reachable_dtypes and seen_layouts >= reachable_layouts and seen_sizes >= listed:
            break
        op = ops[i % len(ops)]
        # valid_ops kept only ops that suit at least one explicit shape, so `fitting` is never empty.
        fitting = [s for s in sizes if _listed_fits(op, s, dtypes, layouts)] if space.shapes else sizes
        size = _first_unvisited(fitting, seen_sizes, i) if space.shapes else fitting[i % len(fitting)]
        seen_sizes.add(size)
        if len(size) == 3:
            size = (1, *size)
        batch, m, n, k = size
        if not OPS[op].batched:
            batch = 0
        else:
            batch = max(batch, 3) if not space.shapes else batch  # batches > 2
        n, k = round_up(n, OPS[op].align), round_up(k, OPS[op].k_align)
        fits = [lay for lay in layouts if not space.shapes or aliasable(lay, m, n)]
        dtype = _first_unvisited([d for d in dtypes if any(op_takes(op, d, lay) for lay in fits)], seen_dtypes, i)
        layout = _first_unvisited([lay for lay in fits if op_takes(op, dtype, lay)], seen_layouts, i)
        seen_dtypes.add(dtype)
        seen_layouts.add(layout)
        if layout == "aliased" and not space.shapes:  # a drawn size: B is A itself (x @ x), so M, N and K meet
            m = n = k = max(m, n)
        # Each special kind of values once, on the first rows that can hold it; the other rows ordinary numbers, or,
        # in a space of specials alone, the kinds by turns (drawn sizes then keep a clean row and column).
        specials_only = "normal" not in values
        if specials_only and not space.shapes:
            m, n = max(m, 2), max(n, 2)
        fresh = [v for v in values if v not in seen_values and takes_values(op, v, m, n)]
        value = fresh[0] if fresh else values[i % len(values)] if specials_only else "normal"
        value = value if takes_values(op, value, m, n) else "normal"
        seen_values.add(value)
        chain = chains[i % len(chains)]
        if layout == "aliased" and i >= len(chains):  # every chain had its row: add x itself as the residual too
            chain = next((c for c in chains if "residual" in parse_chain(c) and "cast" not in parse_chain(c)), chain)
        case = GemmCase(op, m, n, k, batch, dtype, layout, chain, seed, value)
        if case not in tour:  # a repeat would spend an example of the budget on a case already checked
            tour.append(case)
    return tour


def every_case(space: CaseSpace, device: str, seed: int = 0, at_most: int = 0) -> list[GemmCase] | None:
    """Every case `cases_in` can draw from a space of listed shapes, where there are at most `at_most` of them
    (a budget that large runs them all, and drawing would only meet them again); None where there are more,
    or the sizes are drawn."""
    if not space.shapes:
        return None
    dtypes = list(space.dtypes or default_dtypes(device))
    ops = valid_ops(space, dtypes, device)
    layouts = list(space.layouts or LAYOUTS)
    combos = [
        (op, shape, d, lay, v)
        for shape in space.shapes
        for op in ops
        if shape_fits(op, shape)
        for d in dtypes
        for lay in layouts
        if op_takes(op, d, lay) and aliasable(lay, shape[-3], shape[-2])
        for v in values_of(space)
        if takes_values(op, v, shape[-3], shape[-2])
    ]
    longest = CHAIN_STEPS + 1  # epilogue_chains: none, or up to CHAIN_STEPS distinct steps in any order
    chains_n = len(space.epilogues) if space.epilogues else sum(math.perm(len(STEPS), r) for r in range(longest))
    if len(combos) * chains_n > at_most:
        return None
    chains = list(space.epilogues or (chain_name(p) for r in range(longest) for p in itertools.permutations(STEPS, r)))
    out = []
    for op, shape, dtype, layout, values in combos:
        batch, m, n, k = shape if len(shape) == 4 else (0, *shape)
        out += [GemmCase(op, m, n, k, batch, dtype, layout, chain, seed, values) for chain in chains]
    return out


def _prime_at_most(n: int) -> int:
    return next(p for p in range(n, 1, -1) if all(p % d for d in range(2, math.isqrt(p) + 1)))


def _first_unvisited(allowed: list[T], seen: set[T], i: int) -> T:
    """The first allowed item the tour has not visited yet; once all were, the i-th (cycling)."""
    fresh = [x for x in allowed if x not in seen]
    return fresh[0] if fresh else allowed[i % len(allowed)]
