"""The `big` profile (`--gemm-profile=big`): cases in which one tensor spans more than 2**31 elements, so that a
kernel, or the indexing code around it, that computes offsets in 32-bit integers wraps (pytorch#196431;
triton-lang/triton#832; pytorch#179333 fixed a Triton template whose signature kept 32-bit offsets for an input past
them). Off by default: a case holds gigabytes (an mm result just past 2**31 elements is 4 GiB in bfloat16), and its
float64 reference is judged in row chunks (oracle/chunks.py): about 90 s a case on 2 CPU cores.

Which tensor crosses is drawn: the result (M×N just past 2**31; for a batched op each matrix stays below it and the
batch's offset crosses), or A (M×K, with K long and N small). B (K×N) is A's mirror and is left out: the chunked
reference holds B whole in float64. Each crosses by a little (a few rows or columns past the limit, where a wrapped
index lands on the tensor's first elements) with K, or N, small, so a case is mostly memory traffic, not arithmetic.
Everything else (op, dtype, layout, epilogue, values) is drawn as in the default space; a case too large for the
memory free is refused by the memory guard (cases/memory.py), before anything is allocated.
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from .case import GemmCase, takes_values
from .ops import OPS, chain_name, default_dtypes, op_takes
from .strategies import round_up

INT32_ELEMENTS = 2**31
# Examples per test under the big profile, where a test does not set its own with --gemm-max-examples: each case
# allocates gigabytes and is judged in chunks.
EXAMPLES = {"cpu": 2, "cuda": 6}
# Rows of a result that crosses: near the square root of 2**31 (46341**2 just passes it, so an aliased `x @ x.T`
# crosses too), a power of two past it, and a prime.
RESULT_ROWS = (46341, 65537, 32771)
BATCH_RESULT_ROWS = (16385, 32771)
# Rows of an A that crosses through a long K (a row of at most 2**24 elements, which its float64 chunk holds).
LONG_K_ROWS = (129, 1031, 32771)
CROSSING = ("result", "a")
SHAPES_LISTED = (
    "the big profile draws its own sizes (one tensor past 2**31 elements): a test that lists its shapes or runs "
    "harvested cases has none to run under it"
)


def _past(elements_per_unit: int, align: int, extra: int) -> int:
    """The smallest multiple of `align` that takes `elements_per_unit` of it past 2**31 elements, plus `extra`
    multiples: a wrapped index then lands `extra` units into the tensor's first elements."""
    return round_up(INT32_ELEMENTS // elements_per_unit + 1, align) + extra * align


def _square_past(batch: int) -> int:
    """The smallest M with batch × M × M past 2**31."""
    m = math.isqrt(INT32_ELEMENTS // batch)
    while batch * m * m <= INT32_ELEMENTS:
        m += 1
    return m


def sizes(op: str, layout: str) -> st.SearchStrategy[tuple[int, int, int, int]]:
    """(batch, M, N, K) of a case of `op` in `layout` one of whose tensors crosses 2**31 elements (module
    docstring). An aliased B is A transposed (N = M): its result crosses at a square M = N, its A through K."""
    align, k_align, batched = OPS[op].align, OPS[op].k_align, OPS[op].batched

    @st.composite
    def draw(data) -> tuple[int, int, int, int]:
        batch = data(st.sampled_from((2, 3, 5))) if batched else 1
        extra = data(st.sampled_from((0, 1, 7)))
        small = data(st.sampled_from((1, 3, 16, 17, 64)))
        if data(st.sampled_from(CROSSING)) == "result":
            k = round_up(small, k_align)
            if layout == "aliased":  # B is A transposed, so N = M: the square crosses
                m = n = _square_past(batch) + extra
            else:
                m = data(st.sampled_from(BATCH_RESULT_ROWS if batched else RESULT_ROWS))
                n = _past(batch * m, align, extra)
        else:
            # An aliased B is A transposed, so N = M: kept to the smaller rows, or the result would cross too.
            m = data(st.sampled_from(LONG_K_ROWS[:2] if layout == "aliased" else LONG_K_ROWS))
            k = _past(batch * m, k_align, extra)
            n = m if layout == "aliased" else round_up(small, align)
        return (batch if batched else 0, m, n, k)

    return draw()


def tour(space, device: str, seed: int = 0) -> list[GemmCase]:
    """The profile's explicit cases: each op of the space crossing through its result and through A, at the
    smallest crossing; first one crossing per op (by turns, so a budget of a few examples meets both and many ops),
    then the other. The dtypes and layouts the op takes, and the space's chains (or none and bias+gelu), by turns."""
    from .space import valid_ops, values_of

    dtypes = list(space.dtypes or default_dtypes(device))
    layouts = list(space.layouts or ("contiguous", "transposed_b"))
    chains = list(space.epilogues or ("none", chain_name(("bias", "gelu"))))
    values = values_of(space)[0]  # ordinary numbers, unless the space holds specials alone
    # The blockwise ops only where named: their indexing past 2**31 is the scaled ops', which the tour visits.
    ops = [op for op in valid_ops(space, dtypes, device) if any(op_takes(op, d, lay) for d in dtypes for lay in layouts)
           and (space.ops or not OPS[op].scale_blocks)]  # fmt: skip
    out = []
    for turn in range(2):
        for i, op in enumerate(ops):
            taken = [(d, lay) for d in dtypes for lay in layouts if op_takes(op, d, lay)]
            dtype, layout = taken[(i + turn) % len(taken)]
            out.append(_smallest_crossing(op, dtype, layout, (i + turn) % 2 == 0, chains[len(out) % len(chains)],
                                          values, seed))  # fmt: skip
    return out


def _smallest_crossing(op: str, dtype: str, layout: str, result: bool, chain: str, values: str, seed: int) -> GemmCase:
    """The case of `op` whose result (or A, through K) crosses 2**31 elements by the least."""
    align, k_align, batched = OPS[op].align, OPS[op].k_align, OPS[op].batched
    batch = 3 if batched else 1
    if result and layout == "aliased":
        side = _square_past(batch)
        m, n, k = side, side, round_up(16, k_align)
    elif result:
        m = BATCH_RESULT_ROWS[0] if batched else RESULT_ROWS[0]
        n, k = _past(batch * m, align, 0), round_up(16, k_align)
    else:
        m = LONG_K_ROWS[0]
        n, k = m if layout == "aliased" else round_up(3, align), _past(batch * m, k_align, 0)
    value = values if takes_values(op, values, m, n) else "normal"
    return GemmCase(op, m, n, k, batch if batched else 0, dtype, layout, chain, seed, value)
