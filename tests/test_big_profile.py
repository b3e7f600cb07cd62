"""The big profile (`--gemm-profile=big`, cases/big.py): one tensor of every case past 2**31 elements, where a 32-bit
index wraps, and the oracle in row chunks that judges such a case (oracle/chunks.py).

A case of the real profile holds gigabytes and takes minutes on 2 CPU cores (mm 46341×46341×1 bfloat16: 55 s for the
GEMM, about 90 s for the chunked oracle), so its runs are the GPU validation's (`scripts/gpu_validate.sh big`). Here the
same code runs with the limit lowered to 2**16 elements and small chunks: the sizes, the chunking and the plugin's
path through them are the profile's own; only the constants differ.
"""

import math
import re

import pytest
from actrun import plants
from hypothesis import given, settings

from pytest_gemmguard import oracle
from pytest_gemmguard.cases import big, memory
from pytest_gemmguard.cases.case import GemmCase, build_inputs, case_function
from pytest_gemmguard.cases.ops import DTYPES, OPS
from pytest_gemmguard.cases.space import case_space
from pytest_gemmguard.cases.strategies import cases_in
from pytest_gemmguard.oracle import chunks

CASES = [
    GemmCase("mm", 37, 11, 13, 0, "bfloat16", "offset", "bias+gelu", 3),
    GemmCase("baddbmm", 19, 7, 5, 3, "float16", "broadcast", "residual+cast", 4),
    GemmCase("linear", 23, 23, 9, 0, "float32", "aliased", "silu", 5, "nan"),
    GemmCase("scaled_mm_rowwise", 21, 16, 32, 0, "float8_e4m3fn", "transposed_b", "relu", 6),
    GemmCase("addmm", 29, 8, 8, 0, "float32", "transposed_a", "tanh+scale", 7, "inf"),
    GemmCase("bmm", 17, 5, 6, 2, "bfloat16", "noncontiguous", "sigmoid", 8),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.describe())
def test_the_oracle_in_row_chunks_gives_the_whole_oracles_verdict(monkeypatch, case):
    monkeypatch.setattr(memory, "ROW_WORK", 64)  # chunks of a few rows
    assert len(chunks.row_ranges(case)) > 3
    inputs = build_inputs(case, "cpu")
    fn = case_function(case.op, case.epilogue, case.dtype)
    out = fn(*inputs.flat)
    expected, tol = oracle.case_reference(case, inputs)
    dtype = DTYPES[case.out_dtype]
    chunked = chunks.Chunked(case, inputs)
    whole, parts = oracle.judge(out, expected, tol, dtype), chunked.judge(out, dtype)
    assert (whole.ok, whole.max_ratio, whole.max_error) == (parts.ok, parts.max_ratio, parts.max_error)
    assert chunked.eager_ratio(out) == oracle.eager_ratio(fn, inputs.flat, expected, tol)
    # A wrong element near the end: found at its place in the whole result, with every wrong element counted.
    wrong = out.clone()
    wrong[..., case.m - 2, 1] += 2.0
    whole, parts = oracle.judge(wrong, expected, tol, dtype), chunked.judge(wrong, dtype)
    assert not parts.ok and parts.mismatch == whole.mismatch, (parts.mismatch, whole.mismatch)
    # A wrong shape or dtype is judged before any value.
    assert chunked.judge(wrong[..., :-1, :], dtype).mismatch.kind == "shape"
    assert chunked.judge(wrong.double(), dtype).mismatch.kind == "dtype"


def _drawn(device: str, n: int = 300) -> list[GemmCase]:
    out = []

    # Derandomized: the assertions below are about the distribution, and a layout drawn ~3% of the time can be missed by
    # an unlucky random draw of 300; a fixed draw keeps the test a statement about the code, not about the seed.
    @settings(max_examples=n, database=None, deadline=None, derandomize=True)
    @given(cases_in(case_space("t"), device, 0, sizes=big.sizes))
    def collect(case):
        out.append(case)

    collect()
    return out


# The profile's ops where a test names none: the blockwise ones only where named (their indexing is the scaled ops').
UNBLOCKED = {op for op, spec in OPS.items() if not spec.scale_blocks}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_drawn_case_has_one_tensor_just_past_2_31_elements_and_fits_a_big_gpu(device):
    drawn = _drawn(device)
    assert all(c.elements > big.INT32_ELEMENTS for c in drawn)
    result = [c for c in drawn if (c.batch or 1) * c.m * c.n > big.INT32_ELEMENTS]
    long_a = [c for c in drawn if (c.batch or 1) * c.m * c.k > big.INT32_ELEMENTS]
    assert len(result) > 30 and len(long_a) > 30, (len(result), len(long_a))
    # Just past: a wrapped index lands within a few rows (of the op's alignment) of the tensor's first elements.
    past = [(c.elements - big.INT32_ELEMENTS) / ((c.batch or 1) * max(c.m, c.n, c.k) * OPS[c.op].align) for c in drawn]
    assert max(past) <= 16, max(past)
    assert sum(p < 1 for p in past) > len(past) / 10  # and some by less than one row
    # A batched result crosses through its batch: each matrix stays below the limit.
    assert all(c.m * c.n < big.INT32_ELEMENTS for c in result if c.batch)
    assert all(c.n == c.m for c in drawn if c.layout == "aliased")
    assert all(c.n % OPS[c.op].align == 0 and c.k % OPS[c.op].align == 0 for c in drawn)
    assert {c.op for c in drawn} == UNBLOCKED and {c.layout for c in drawn} >= {"aliased", "broadcast", "offset"}
    # The chunked oracle's memory, not nine float64 copies of the result: every case fits an 80 GB GPU.
    assert all(memory.chunked(c) for c in drawn)
    assert max(memory.estimate(c, "cuda").device for c in drawn) < 48 * 2**30


def test_the_tour_crosses_each_op_through_its_result_and_through_a():
    space = case_space("t", dtypes=["bfloat16", "float8_e4m3fn"])
    tour = big.tour(space, "cuda")
    for op in UNBLOCKED:
        cases = [c for c in tour if c.op == op]
        lead = [c.batch or 1 for c in cases]
        assert any(b * c.m * c.n > big.INT32_ELEMENTS for b, c in zip(lead, cases, strict=True)), op
        assert any(b * c.m * c.k > big.INT32_ELEMENTS for b, c in zip(lead, cases, strict=True)), op
    assert {c.dtype for c in tour} == {"bfloat16", "float8_e4m3fn"}
    # A budget of a few examples meets both crossings and as many ops as it has examples.
    first = tour[: len(UNBLOCKED)]
    assert len({c.op for c in first}) == len(UNBLOCKED) and len({c.m * c.n > c.m * c.k for c in first[:2]}) == 2
    aliased = big.tour(case_space("t", ops=["mm"], layouts=["aliased"]), "cuda")
    assert aliased and all(c.n == c.m and c.elements > big.INT32_ELEMENTS for c in aliased)


def test_a_case_judged_in_row_chunks_is_estimated_at_its_chunks_not_at_nine_copies_of_its_result():
    case = GemmCase("mm", 46341, 46341, 16, 0, "bfloat16")
    need = memory.estimate(case, "cuda")
    out = 46341 * 46341 * 2
    assert 3 * out < need.device < 4 * out, memory.size(need.device)  # NaN block, output, eager's; chunks small
    assert math.isclose(memory.estimate(GemmCase("mm", 64, 64, 64), "cuda").device, 4.5e5, rel_tol=0.5)


# The profile at a limit of 2**16 elements (the module docstring says why): a kernel whose index wraps past the limit
# writes the result's first elements again where the elements past it belong.
LIMIT = 2**16
WRAPS = plants.planted_backend(
    "wraps-past-limit",
    plants.step_after_gemms(
        "WrapPastLimit",
        "wrap_past_limit",
        """
        out = y.clone()
        flat = out.view(-1)
        if flat.numel() > big.INT32_ELEMENTS:
            flat[big.INT32_ELEMENTS :] = flat[: flat.numel() - big.INT32_ELEMENTS].clone()
        return out
        """,
        preamble="from pytest_gemmguard.cases import big",
    ),
    members=plants.claims_step("wrap_past_limit"),
)
BIG_TESTS = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm", "bmm"], dtypes=["float32"], epilogues=["none"])
def test_gemms(gemm):
    gemm.check()

@gemm_case(ops=["mm"], shapes=[(8, 8, 8)])
def test_listed(gemm):
    gemm.check()

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"])
def test_own_function(gemm):
    gemm.check(lambda a, b: a @ b)
"""


@pytest.fixture
def lowered(monkeypatch):
    monkeypatch.setattr(big, "INT32_ELEMENTS", LIMIT)
    monkeypatch.setattr(memory, "CHUNK_ELEMENTS", LIMIT // 16)
    monkeypatch.setattr(memory, "ROW_WORK", 2**10)


def test_the_big_profile_finds_an_index_that_wraps_and_clean_aten_passes_the_same_cases(pytester, lowered):
    pytester.makeconftest(WRAPS)
    pytester.makepyfile(BIG_TESTS)
    args = ["--gemm-profile=big", "--gemm-seed=3", "-p", "no:cacheprovider", "-rs", "--gemm-shrink-time=5"]
    result = pytester.runpytest_inprocess("--gemm-backends=wraps-past-limit", "-k", "test_gemms", *args)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "gemmguard: wraps-past-limit produced a wrong result" in out, out
    case = re.findall(r"GemmCase\(op='(\w+)', m=(\d+), n=(\d+), k=(\d+), batch=(\d+)", out)[-1]
    _op, m, n, _k, batch = map(lambda v: int(v) if v.isdigit() else v, case)
    assert max(batch, 1) * m * n > LIMIT, case  # the result crossed, as it must for this plant
    # The case itself, not a Hypothesis blob: a blob means its case only through the profile's sizes.
    assert re.search(r"gemmguard reproduce: pytest '\S+' --gemm-replay='case:mm,46341,", out), out
    clean = pytester.runpytest_inprocess("--gemm-backends=aten", *args)
    clean.assert_outcomes(passed=1, skipped=2)
    text = clean.stdout.str()
    assert re.search(r"SKIPPED \[1\] test_\w+\.py:\d+: gemmguard: the big profile draws its own sizes", text), text
    assert "unsupported by aten for every case drawn" in text and "gemm.check(fn) on a case with a tensor" in text
    # The table says which verified examples were judged without their candidates and cross-checks.
    past = memory.CHUNK_ELEMENTS  # the lowered one
    chunked = re.search(rf"aten: (\d+) verified examples? judged in row chunks \(a tensor past {past} ", text)
    verified = re.search(r"^aten +\d+ +\d+ +\d+ +\d+ \| +(\d+) ", text, re.M)
    assert chunked and verified and 0 < int(chunked[1]) <= int(verified[1]), text


def test_a_scaled_case_is_judged_in_row_chunks_unless_its_a_scales_span_128_rows(lowered):
    from pytest_gemmguard.errors import Unsupported
    from pytest_gemmguard.run.example import Example
    from pytest_gemmguard.run.reference import references

    for op in ("scaled_mm", "scaled_mm_rowwise", "scaled_mm_block_1x128_128x128"):
        case = GemmCase(op, 600, 16, 128, 0, "float8_e4m3fn", "transposed_b")
        assert memory.chunked(case)
        own, _ = references(Example(case, "aten"), None, "aten")
        assert own.chunked is not None, op
    # A chunk's rows need not start a block of 128: such a case is unsupported, with the reason, never misjudged.
    case = GemmCase("scaled_mm_block_128x128_1x128", 600, 16, 128, 0, "float8_e4m3fn", "transposed_b")
    with pytest.raises(Unsupported, match="A scales span 128 rows"):
        references(Example(case, "aten"), None, "aten")


def test_the_repro_script_of_a_case_judged_in_row_chunks_compares_the_failing_row(pytester, lowered):
    import subprocess
    import sys

    from pytest_gemmguard import backends
    from pytest_gemmguard.report import repro
    from pytest_gemmguard.run.example import Example

    case = GemmCase("addmm", 600, 7, 9, dtype="float32", epilogue="residual")
    assert memory.chunked(case)
    # Judged at 1e-30 at row 511: the script must find that element of the row it computes, and exit 1 on it.
    wrong = oracle.Verdict(False, 9.0, 1.0, oracle.Mismatch("values", (511, 3), 1.0, 0.0, 1.0, 1e-30, 1, 4200))
    example = Example(case, "aten", test_id="t.py::test_x[aten]")
    path = repro.write(str(pytester.path / "out"), example, None, backends.get("aten"), wrong, False)
    source = open(path).read()
    assert "ROW, ROW_DIMS, ROLES = 511, {'a': -2, 'residual': -2}" in source, source
    proc = subprocess.run([sys.executable, "-I", path], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "at (0, 3) got" in proc.stdout, proc.stdout + proc.stderr
