"""The case space: every regime is reached within the default budget; failures shrink small."""

import pytest
import torch
from hypothesis import find, given, settings

from pytest_gemmguard.cases.case import LAYOUTS, VALUES, GemmCase, build_inputs, takes_values
from pytest_gemmguard.cases.ops import OPS, STEPS, default_dtypes, op_takes
from pytest_gemmguard.cases.space import CaseSpace
from pytest_gemmguard.cases.strategies import PRIMES, cases_in, every_case, gemm_cases, regime_tour
from pytest_gemmguard.cases.support import default_ops
from pytest_gemmguard.run.session import Options


def _regimes(cases):
    seen = set()
    for c in cases:
        dims = (c.m, c.n, c.k)
        seen |= {f"op:{c.op}", f"dtype:{c.dtype}", f"layout:{c.layout}", f"values:{c.values}"}
        seen |= {f"step:{s}" for s in c.steps}
        if c.m == 1:
            seen.add("M=1")
        if any(d in PRIMES for d in dims):
            seen.add("prime")
        if any(d % 8 for d in dims):
            seen.add("not-multiple-of-8")
        if any(d > 2 and (d - 1) & (d - 2) == 0 for d in dims):
            seen.add("power-of-two+1")
        if c.batch > 2:
            seen.add("batch>2")
    return seen


def every_regime(device="cpu"):
    return (
        {f"op:{o}" for o in default_ops(device)} | {f"dtype:{d}" for d in default_dtypes(device)}
        | {f"layout:{lay}" for lay in LAYOUTS} | {f"step:{s}" for s in STEPS} | {f"values:{v}" for v in VALUES}
        | {"M=1", "prime", "not-multiple-of-8", "power-of-two+1", "batch>2"}
    )  # fmt: skip


EVERY_REGIME = every_regime("cpu")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_regime_tour_covers_every_regime_within_the_default_budget(device):
    tour = regime_tour(CaseSpace(), device)
    assert len(tour) < Options().default_examples[device]
    assert _regimes(tour) >= every_regime(device), every_regime(device) - _regimes(tour)
    assert all(op_takes(c.op, c.dtype, c.layout) for c in tour)


@settings(max_examples=200, database=None, deadline=None)
@given(gemm_cases("cuda"))
def test_drawn_cases_keep_each_ops_contract(case):
    """float8 only with the scaled ops, B column-major, N and K multiples of 16; tf32 on the GPU."""
    assert op_takes(case.op, case.dtype, case.layout)
    assert case.layout != "aliased" or case.m == case.n  # B is A transposed
    if OPS[case.op].scaled:
        assert case.dtype == "float8_e4m3fn" and case.n % 16 == 0 and case.k % OPS[case.op].k_align == 0
    a, b, *scales = build_inputs(case, "cpu").args if OPS[case.op].scaled else (None, None)
    if scales:
        assert a.dtype == torch.float8_e4m3fn and b.stride(0) == 1 and all((s > 0).all() for s in scales)
        blocks, rows, cols = case.k // 128, -(-case.m // 128), -(-case.n // 128)
        shapes = {
            "scaled_mm": [(), ()],
            "scaled_mm_rowwise": [(case.m, 1), (1, case.n)],
            "scaled_mm_block_1x128_128x128": [(case.m, blocks), (blocks, cols)],
            "scaled_mm_block_128x128_1x128": [(rows, blocks), (blocks, case.n)],
        }[case.op]
        assert [tuple(s.shape) for s in scales] == shapes


def test_the_tour_respects_a_narrowed_spec():
    spec = CaseSpace(ops=("linear",), dtypes=("bfloat16",), epilogues=("none", "gelu"), shapes=((5, 7, 9),))
    tour = regime_tour(spec, "cpu")
    assert {c.op for c in tour} == {"linear"} and {c.dtype for c in tour} == {"bfloat16"}
    assert {c.epilogue for c in tour} <= {"none", "gelu"} and {(c.m, c.n, c.k) for c in tour} == {(5, 7, 9)}


def test_random_generation_alone_reaches_every_regime():
    seen = set()

    @settings(max_examples=400, database=None, deadline=None, derandomize=True)
    @given(gemm_cases("cpu"))
    def collect(case):
        seen.update(_regimes([case]))

    collect()
    assert seen >= EVERY_REGIME, EVERY_REGIME - seen


def test_failures_shrink_to_a_minimal_case():
    case = find(gemm_cases("cpu"), lambda c: c.k > 40 and c.n % 8 != 0, settings=settings(database=None))
    # Every other field shrinks to its simplest value; K lands on the smallest value above 40 in one
    # of the size regimes (41 plain, 48 a multiple of 16, 65 = 2^6 + 1): Hypothesis's shrinker does
    # not always move between regimes.
    assert (case.op, case.m, case.n) == ("mm", 1, 1) and case.k in (41, 43, 48, 63, 65)
    assert (case.dtype, case.layout, case.epilogue) == ("float32", "contiguous", "none")


def test_layouts_are_what_they_say():
    def args(layout):
        return build_inputs(GemmCase("mm", 6, 10, 8, layout=layout), "cpu").args

    a, b = args("transposed_ab")
    assert a.stride() == (1, 6) and b.stride() == (1, 8)
    a, b = args("noncontiguous")
    assert not a.is_contiguous() and a.stride() == (16, 2)
    a, b = args("offset")
    assert a.is_contiguous() and a.storage_offset() == 3 and b.storage_offset() == 3


@pytest.mark.parametrize(("op", "batch", "role"), [("mm", 0, "b"), ("addmm", 0, "b"), ("baddbmm", 3, "b"),
                                                    ("linear", 0, "w")])  # fmt: skip
def test_an_aliased_b_is_a_view_of_as_own_storage(op, batch, role):
    inputs = build_inputs(GemmCase(op, 6, 6, 9, batch, layout="aliased"), "cpu")
    named = dict(zip(OPS[op].arg_names, inputs.args, strict=True))
    a, b = named["a"], named[role]
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert torch.equal(b, a if role == "w" else a.transpose(-1, -2))
    with pytest.raises(ValueError, match="N must equal M"):
        build_inputs(GemmCase(op, 6, 7, 9, batch, layout="aliased"), "cpu")


@pytest.mark.parametrize(("op", "batch"), [("mm", 0), ("addmm", 0), ("bmm", 3), ("baddbmm", 2), ("linear", 0)])
def test_a_square_aliased_case_passes_a_itself_as_b_and_as_the_residual(op, batch):
    """x @ x and bmm(x, x) (one tensor passed twice: pytorch#156412), and a residual that is x (pytorch#149475)."""
    case = GemmCase(op, 7, 7, 7, batch, "float16", "aliased", "relu+residual")
    inputs = build_inputs(case, "cpu")
    named = dict(zip(OPS[op].arg_names, inputs.args, strict=True))
    assert named["b" if "b" in named else "w"] is named["a"]
    assert inputs.extras["residual"] is named["a"]
    # Not where the residual comes after a cast (another dtype), nor on a layout of its own storage.
    cast = build_inputs(GemmCase(op, 7, 7, 7, batch, "float16", "aliased", "cast+residual"), "cpu")
    assert cast.extras["residual"].dtype == torch.float32
    plain = build_inputs(GemmCase(op, 7, 7, 7, batch, "float16", "contiguous", "relu+residual"), "cpu")
    assert plain.extras["residual"].untyped_storage().data_ptr() != plain.args[-2 if op != "linear" else 0].data_ptr()


def test_drawn_aliased_cases_are_x_at_x_transposed_and_x_at_x_and_the_tour_visits_x_at_x():
    drawn = []

    @settings(max_examples=200, database=None, deadline=None, derandomize=True)
    @given(cases_in(CaseSpace(layouts=("aliased",)), "cpu"))
    def collect(case):
        drawn.append(case)

    collect()
    square = [c for c in drawn if c.k == c.m]
    assert all(c.m == c.n for c in drawn) and 0.2 < len(square) / len(drawn) < 0.8, (len(square), len(drawn))
    tour = regime_tour(CaseSpace(), "cpu", 1)
    (aliased,) = [c for c in tour if c.layout == "aliased"]
    assert aliased.m == aliased.n == aliased.k, aliased


def test_a_listed_shape_is_never_changed_to_take_an_aliased_b():
    spec = CaseSpace(ops=("mm",), shapes=((5, 7, 9), (6, 6, 4)))
    tour = regime_tour(spec, "cpu")
    assert {(c.m, c.n, c.k) for c in tour} == {(5, 7, 9), (6, 6, 4)}
    assert all(c.layout != "aliased" or (c.m, c.n) == (6, 6) for c in tour)
    assert any(c.layout == "aliased" for c in tour)
    listed = every_case(spec, "cpu", at_most=10**6)
    assert listed and all(c.layout != "aliased" or (c.m, c.n) == (6, 6) for c in listed)
    seen = []

    @settings(max_examples=60, database=None, deadline=None)
    @given(cases_in(spec, "cpu"))
    def collect(case):
        seen.append(case)

    collect()
    assert {(c.m, c.n, c.k) for c in seen} <= {(5, 7, 9), (6, 6, 4)}
    assert all(c.layout != "aliased" or (c.m, c.n) == (6, 6) for c in seen)


def test_inputs_are_deterministic_and_weights_do_not_depend_on_m():
    x = build_inputs(GemmCase("linear", 5, 7, 9, dtype="bfloat16"), "cpu").args
    y = build_inputs(GemmCase("linear", 11, 7, 9, dtype="bfloat16"), "cpu").args
    assert torch.equal(x[1], y[1]) and torch.equal(x[2], y[2])  # weight and bias shared
    again = build_inputs(GemmCase("linear", 5, 7, 9, dtype="bfloat16"), "cpu").args
    assert all(torch.equal(p, q) for p, q in zip(x, again, strict=True))
    other_seed = build_inputs(GemmCase("linear", 5, 7, 9, dtype="bfloat16", seed=1), "cpu").args
    assert not torch.equal(x[0], other_seed[0])


def test_extras_after_a_cast_take_the_cast_dtype():
    inputs = build_inputs(GemmCase("mm", 4, 5, 6, dtype="float32", epilogue="bias+cast+residual"), "cpu")
    assert inputs.extras["epi_bias"].dtype == torch.float32 and inputs.extras["residual"].dtype == torch.bfloat16


MAGIC = "".join(f"SIZE_{i} = {(i * 7919) % 4093 + 1}\n" for i in range(400))  # literals a drawn size could take

SEEDED_FILE = """
import os
import sys

from pytest_gemmguard import gemm_case


@gemm_case(max_examples=40)
def test_draws(gemm):
    if "magic_sizes" not in sys.modules:  # a module loaded mid-run, as a compile loads generated code
        sys.path.insert(0, os.environ["MAGIC_DIR"])
        import magic_sizes  # noqa: F401
    with open(os.environ["SEEN_FILE"], "a") as f:
        f.write(gemm.case.describe() + "\\n")
    gemm.check()  # the conftest's: counted, nothing compiled
"""

# The draws are under test, not the GEMMs: check() only counts the call (an example with none is an error).
COUNTING_CHECK = """
from pytest_gemmguard.run.gemm import Gemm, example_of


def _counted(self, fn=None):
    example_of(self).calls += 1


Gemm.check = _counted
"""


def test_a_seed_draws_the_same_cases_whatever_modules_are_loaded(pytester, tmp_path, monkeypatch):
    """Hypothesis now and then draws a literal found in the local modules loaded at that moment; a session
    loads more of them as it goes (gemmguard's own modules, generated code), so the draw made beforehand for
    compile-ahead and the test's own draw with the same seed could part (on the H200 from `test_any`'s 10th
    example). Both draw without those literals: the cases are the seed's alone."""
    from pytest_gemmguard.cases.space import case_space
    from pytest_gemmguard.cases.strategies import cases_in
    from pytest_gemmguard.run.plan import SHARED, _drawn

    (tmp_path / "magic").mkdir()
    (tmp_path / "magic" / "magic_sizes.py").write_text(MAGIC)
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("MAGIC_DIR", str(tmp_path / "magic"))
    monkeypatch.setenv("SEEN_FILE", str(seen))
    pytester.makepyfile(SEEDED_FILE)
    pytester.makeconftest(COUNTING_CHECK)
    result = pytester.runpytest_subprocess("--gemm-backends=aten", "--gemm-seed=7", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    ran = seen.read_text().splitlines()
    space = case_space("test_draws", max_examples=40)
    explicit = regime_tour(space, "cpu", 7)[:39]
    drawn = [c.describe() for c in _drawn(cases_in(space, "cpu", 7), 40 - len(explicit), 7, SHARED, explicit)]
    assert len(drawn) > 20 and ran[: len(drawn)] == drawn


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize(
    "narrowed",
    [dict(ops=["mm"]), dict(ops=["addmm"], epilogues=["relu"]), dict(dtypes=["float32"]), dict(ops=["bmm"]), {}],
)
def test_the_tour_never_repeats_a_case(device, narrowed):
    """A space of `mm` alone cannot take float8: waiting to visit it made the tour cycle to three times its
    rows, and 12 of 18 cases on the GPU (6 on the CPU) were repeats, each spending an example of the budget
    on a case already checked (and counting again as verified)."""
    from pytest_gemmguard.cases.space import case_space

    space = case_space("t", **narrowed)
    tour = regime_tour(space, device)
    assert len(set(tour)) == len(tour)
    takes = [(d, lay) for d in (space.dtypes or default_dtypes(device)) for o in space.ops or OPS for lay in LAYOUTS
             if op_takes(o, d, lay)]  # fmt: skip
    # Every dtype and layout some op of the space takes (`broadcast` needs a batched op).
    assert {c.dtype for c in tour} == {d for d, _ in takes} and {c.layout for c in tour} == {lay for _, lay in takes}


@pytest.mark.parametrize(("op", "batch", "layout"), [("mm", 0, "contiguous"), ("linear", 0, "transposed_b"),
                                                     ("bmm", 3, "broadcast"), ("baddbmm", 2, "aliased"),
                                                     ("addmm", 0, "offset")])  # fmt: skip
@pytest.mark.parametrize("values", ["nan", "inf"])
def test_special_values_leave_a_clean_row_and_column_and_the_reference_has_them(op, batch, layout, values):
    """NaN (or +inf and -inf) in A and B: the float64 reference holds them along one row and one column (per batch
    element hit), every other element stays finite, and the same case always plants them at the same places."""
    from pytest_gemmguard import oracle

    case = GemmCase(op, 6, 6, 9, batch, dtype="bfloat16", layout=layout, epilogue="relu", seed=5, values=values)
    expected, _ = oracle.case_reference(case, build_inputs(case, "cpu"))
    special = ~torch.isfinite(expected)
    assert special.any() and not special.all()
    # Within one row and one column of each batch element: the rest, (M - 1) x (N - 1) at least, is finite.
    assert bool(((~special).sum((-2, -1)) >= 5 * 5).all()), special
    again, _ = oracle.case_reference(case, build_inputs(case, "cpu"))
    assert torch.equal(special, ~torch.isfinite(again))
    if values == "inf":
        assert torch.isinf(expected).any()
    else:
        assert torch.isnan(expected).any() and not torch.isinf(expected).any()
    assert "values=" + values in case.describe()


def test_special_values_need_a_clean_row_and_column_and_no_scaled_op():
    assert not takes_values("mm", "nan", 1, 5) and not takes_values("mm", "inf", 5, 1)
    assert not takes_values("scaled_mm", "nan", 32, 32) and takes_values("scaled_mm", "normal", 32, 32)
    with pytest.raises(ValueError, match="takes no values=nan"):
        build_inputs(GemmCase("mm", 1, 5, 7, values="nan"), "cpu")
    from pytest_gemmguard.cases.space import case_space

    assert case_space(values=["inf", "normal"]).values == ("normal", "inf")  # ordinary first: shrinks toward it


def test_about_one_draw_in_five_holds_special_values_and_a_space_can_ask_for_them_alone():
    seen = []

    @settings(max_examples=300, database=None, deadline=None, derandomize=True)
    @given(cases_in(CaseSpace(), "cpu"))
    def collect(case):
        seen.append(case)

    collect()
    special = [c for c in seen if c.values != "normal"]
    assert {c.values for c in special} == {"nan", "inf"}
    assert 0.1 < len(special) / len(seen) < 0.4, len(special) / len(seen)
    assert all(takes_values(c.op, c.values, c.m, c.n) for c in seen)
    alone = CaseSpace(values=("nan",))
    drawn = find(cases_in(alone, "cpu"), lambda c: True)
    assert drawn.values == "nan" and min(drawn.m, drawn.n) >= 2  # drawn sizes keep a clean row and column
    assert {c.values for c in regime_tour(alone, "cpu")} == {"nan"}
    assert not any(OPS[c.op].scaled for c in regime_tour(alone, "cuda"))


def test_a_case_line_carries_special_values_and_older_lines_still_decode():
    from pytest_gemmguard.run import replay

    nan_case = GemmCase("bmm", 5, 6, 7, 3, dtype="bfloat16", layout="broadcast", epilogue="relu", seed=9, values="nan")
    line = replay.case_value(nan_case)
    assert line == "case:bmm,5,6,7,3,bfloat16,broadcast,relu,9,nan" and replay.replayed_case(line) == nan_case
    plain = GemmCase("mm", 5, 6, 7, seed=9)
    assert replay.case_value(plain) == "case:mm,5,6,7,0,float32,contiguous,none,9"  # as printed before values
    assert replay.replayed_case(replay.case_value(plain)) == plain
    with pytest.raises(ValueError, match="VALUES must be one of nan, inf, not 'zero'"):
        replay.case_fields("case:mm,5,6,7,0,float32,contiguous,none,9,zero")
    assert replay.fits(nan_case, CaseSpace()) and not replay.fits(nan_case, CaseSpace(values=("normal",)))
    assert not replay.fits(nan_case, CaseSpace(shapes=((3, 5, 6, 7),)))  # listed shapes: ordinary numbers


def test_a_drawn_layout_means_what_it_meant_before_cases_had_values():
    """Layout and values are one draw: its first choices are the layouts with ordinary numbers, in the order the
    layout alone was drawn from, so a choice recorded before values existed (an older replay line) picks the same
    case; an op that takes no specials draws from exactly the old list."""
    from pytest_gemmguard.cases.case import VALUES
    from pytest_gemmguard.cases.strategies import _layouts_and_values

    layouts = list(LAYOUTS)
    both = _layouts_and_values(layouts, list(VALUES))
    assert both[: len(layouts)] == [(lay, "normal") for lay in layouts]
    assert {v for _, v in both} == set(VALUES) and sum(v != "normal" for _, v in both) == 2 * len(layouts)
    assert _layouts_and_values(layouts, ["normal"]) == [(lay, "normal") for lay in layouts]
