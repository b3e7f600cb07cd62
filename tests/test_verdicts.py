"""Verdicts on a change (known/verdicts.py, known/proposals.py): a run's record, the head judged against the
base's record (pre-existing, new, fixed, coverage lost), the comparison command, and entries proposed from a record.

The end-to-end runs use torch's real CPP offset-weight bug as the upstream bug nobody in a pull request can act
on (the shipped entries switched off, so it shows as a failure), and plant the new defects in a conftest."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from actrun import plants

from pytest_gemmguard import known
from pytest_gemmguard.errors import GemmUsageError
from pytest_gemmguard.known import proposals, verdicts

MM = "mm 8×16×32 float32 contiguous epilogue=none"
LIN = "linear 5×6×130 float32 offset epilogue=none"


def record(*rows: tuple[str, str, str], seed: int = 3) -> verdicts.Record:
    r = verdicts.Record(seed, {"torch": "2.13.0+cpu"})
    for test, case, outcome in rows:
        r.add(test, test.rsplit("[", 1)[-1].rstrip("]"), case, outcome)
    return r


# ---------------------------------------------------------------- the record and the comparison


def test_a_case_seen_twice_keeps_its_worst_outcome():
    r = record(("t[cpp]", LIN, "verified"), ("t[cpp]", LIN, "wrong-result"), ("t[cpp]", LIN, "unsupported"))
    assert r.outcome("t[cpp]", LIN) == "wrong-result"


def test_compare_sorts_every_change_and_blocks_only_on_new_and_lost():
    base = record(
        ("t[cpp]", LIN, "wrong-result"),  # still failing: pre-existing
        ("t[cpp]", MM, "known:some-bug"),  # fixed on head
        ("t[aten]", MM, "verified"),  # wrong on head: new
        ("t[aten]", LIN, "verified"),  # refused on head: coverage lost
        ("u[aten]", MM, "unsupported"),
    )
    head = record(
        ("t[cpp]", LIN, "pre-existing"),
        ("t[cpp]", MM, "verified"),
        ("t[aten]", MM, "wrong-result"),
        ("t[aten]", LIN, "unsupported"),
        ("u[aten]", MM, "unsupported"),
        ("u[aten]", LIN, "raises"),  # the base never judged it: new
    )
    result = verdicts.compare(base, head)
    assert [(c.test, c.case) for c in result.new] == [("t[aten]", MM), ("u[aten]", LIN)]
    assert [(c.test, c.case) for c in result.pre_existing] == [("t[cpp]", LIN)]
    assert [(c.test, c.case) for c in result.fixed] == [("t[cpp]", MM)]
    assert [(c.test, c.case) for c in result.coverage_lost] == [("t[aten]", LIN)]
    assert result.blocking
    assert not verdicts.compare(base, base).blocking  # an unchanged library: nothing blocks


@pytest.mark.parametrize(
    "content,fragment",
    [
        (None, "no such verdict record"),
        ("{not json", "not a readable verdict record"),
        ('{"benchmarks": []}', "not a gemmguard verdict record"),
        ('{"gemmguard_verdicts": 1, "seed": "x", "results": []}', "integer 'seed'"),
        ('{"gemmguard_verdicts": 1, "seed": 1, "results": [], "facts": [1]}', "a 'facts' table"),
        ('{"gemmguard_verdicts": 1, "seed": 1, "results": [{"test": 1}]}', "result 1 needs the strings"),
        (
            '{"gemmguard_verdicts": 1, "seed": 1, "results": [{"test": "t", "backend": "aten", "case": "c", '
            '"outcome": "verified", "device": 1}]}',
            "result 1: device must be a string",
        ),
    ],
    ids=["missing", "corrupt", "foreign", "bad-seed", "bad-facts", "bad-row", "bad-device"],
)
def test_a_bad_record_is_one_line(tmp_path, content, fragment):
    path = tmp_path / "base.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(GemmUsageError, match=fragment) as info:
        verdicts.load(str(path))
    assert "\n" not in str(info.value)


def test_a_record_round_trips(tmp_path):
    r = record(("t[cpp]", LIN, "wrong-result"), ("t[aten]", MM, "verified"))
    again = verdicts.load(r.save(str(tmp_path / "r.json")))
    assert again.seed == 3 and again.results == r.results and again.facts == r.facts


# ---------------------------------------------------------------- proposed entries


def test_proposed_entries_generalise_the_failures_and_load_as_a_known_file(tmp_path):
    r = record(
        ("t[cutlass]", "bmm 4×74×129×1179 bfloat16 transposed_ab epilogue=silu+scale+cast", "wrong-result"),
        ("t[cutlass]", "bmm 6×1×29×1901 float16 contiguous epilogue=bias+relu+gelu", "wrong-result"),
        ("t[cutlass]", "bmm 2×8×8×8 float16 contiguous epilogue=none", "verified"),
        ("t[cutlass]", "mm 1×8×8 float16 contiguous epilogue=none", "known:already-entered"),
    )
    r.facts = {"torch": "2.11.0+cu130", "nvidia-cutlass": "4.2.0.0"}
    (entry,) = proposals.propose([r])
    assert 'ops = ["bmm"]' in entry and 'dtypes = ["bfloat16", "float16"]' in entry
    assert 'epilogues = ["fused"]' in entry  # two chains, never none: the fused epilogue is the mechanism
    assert 'versions = { torch = ">=2.11", nvidia-cutlass = ">=4.2" }' in entry
    assert 'seen_right = ["bmm 2×8×8×8 float16 contiguous epilogue=none"]' in entry
    path = tmp_path / "proposed.toml"
    path.write_text(entry)
    (parsed,) = known.load(str(path)).entries
    assert parsed.kind == "wrong-result" and len(parsed.seen) == 2 and parsed.epilogues == ("fused",)
    assert "values =" not in entry  # ordinary numbers: no pattern to name


def test_a_proposed_aten_entry_names_the_device_its_failures_were_seen_on(tmp_path):
    """ATen is oneDNN's code on a CPU and cuBLAS on a GPU: an entry from CPU sightings must not explain a cuBLAS
    failure of the same case."""
    r = verdicts.Record(3, {"torch": "2.13.0+cpu"})
    r.add("t[aten]", "aten", "mm 6×7×33 bfloat16 contiguous epilogue=none values=nan", "wrong-result", "cpu")
    r.add("t[cpp]", "cpp", "mm 6×7×33 bfloat16 contiguous epilogue=none", "wrong-result", "cpu")
    again = verdicts.load(r.save(str(tmp_path / "r.json")))
    aten, cpp = proposals.propose([again])
    assert 'device = ["cpu"]' in aten and "device" not in cpp  # cpp's kernels run on the CPU alone
    path = tmp_path / "proposed.toml"
    path.write_text(aten)
    (parsed,) = known.load(str(path)).entries
    assert parsed.devices == ("cpu",)
    # A record from before rows named their device: the entry leaves it for the reviewer.
    old = record(("t[aten]", "mm 6×7×33 bfloat16 contiguous epilogue=none", "wrong-result"))
    assert "device" not in proposals.propose([old])[0]


def test_a_proposed_entry_names_the_special_values_its_failures_held(tmp_path):
    r = record(
        ("t[aten]", "mm 6×7×9 bfloat16 contiguous epilogue=none values=nan", "wrong-result"),
        ("t[aten]", "mm 5×5×9 float16 transposed_b epilogue=relu values=inf", "wrong-result"),
        ("t[aten]", "mm 6×7×9 bfloat16 contiguous epilogue=none", "verified"),
    )
    (entry,) = proposals.propose([r])
    assert 'values = ["inf", "nan"]' in entry
    path = tmp_path / "proposed.toml"
    path.write_text(entry)
    (parsed,) = known.load(str(path)).entries
    assert parsed.values == ("inf", "nan")


def test_a_proposed_entry_names_the_32_bit_class_where_every_failure_had_a_tensor_past_2_31_elements(tmp_path):
    from pytest_gemmguard.cases.case import GemmCase

    big = ("mm 46341×46341×16 bfloat16 contiguous epilogue=none", "mm 129×3×16647161 float16 offset epilogue=none")
    right = ("t[triton]", "mm 8×8×8 bfloat16 contiguous epilogue=none", "verified")
    (entry,) = proposals.propose([record(*(("t[triton]", case, "wrong-result") for case in big), right)])
    assert 'elements = ">2147483648"' in entry, entry
    path = tmp_path / "proposed.toml"
    path.write_text(entry)
    (parsed,) = known.load(str(path)).entries
    case = GemmCase("mm", 46341, 46341, 16, 0, "bfloat16")
    assert parsed.sizes["elements"](case.elements, case) and not parsed.sizes["elements"](2**31, case)
    # With a small failure among them, the class is not the 32-bit one.
    small = ("t[triton]", "mm 5×6×7 bfloat16 offset epilogue=none", "wrong-result")
    assert "elements" not in proposals.propose([record(("t[triton]", big[0], "wrong-result"), small)])[0]


# ---------------------------------------------------------------- end to end: base and head


TEST = """
from pytest_gemmguard import gemm_case


@gemm_case(ops=["linear"], dtypes=["float32"], layouts=["offset", "contiguous"], epilogues=["none"],
           shapes=[(5, 6, 130), (3, 4, 24)])
def test_linear(gemm):
    gemm.check()
"""

# Plants cpp's refusal of every case: Inductor may only pick ATen's kernel, so no CPP kernel runs (unsupported).
REFUSING_CPP = """
from pytest_gemmguard.backends.cpp import CppBackend

_options = CppBackend.inductor_options
CppBackend.inductor_options = lambda self: {**_options(self), "max_autotune_gemm_backends": "ATEN"}
"""


def run(pytester, plugin_args, *args: str) -> tuple[int, str]:
    proc = pytester.runpytest_subprocess(
        *plugin_args, "-p", "no:cacheprovider", "-rfExX", "--gemm-known-shipped=off", "--gemm-compile-workers=0",
        *args,
    )  # fmt: skip
    return proc.ret, proc.stdout.str() + proc.stderr.str()


@pytest.mark.slow
def test_the_head_is_judged_against_the_base(pytester, plugin_args):
    pytester.makepyfile(test_lin=TEST)
    # The base: torch's CPP offset bug fails; the record covers every case anyway.
    rc, out = run(pytester, plugin_args, "--gemm-backends=aten,cpp", "--gemm-verdicts=base.json", "--gemm-seed=5")
    assert rc == 1 and "FAILED test_lin.py::test_linear[cpp]" in out, out[-3000:]
    base = verdicts.load(str(pytester.path / "base.json"))
    assert base.seed == 5 and base.failed("test_lin.py::test_linear[cpp]", LIN)
    assert base.outcome("test_lin.py::test_linear[aten]", LIN) in ("verified", "unsupported")
    assert len([k for k in base.results if k[0].endswith("[cpp]")]) >= 2  # past the failure: the whole draw
    assert {row.get("device") for row in base.results.values()} == {"cpu"}  # where each backend's kernels ran

    # The same change again (an unchanged library): the upstream bug is pre-existing, the run green.
    rc, out = run(pytester, plugin_args, "--gemm-backends=aten,cpp", "--gemm-base-verdicts=base.json",
                  "--gemm-verdicts=same.json")  # fmt: skip
    assert rc == 0, out[-3000:]
    assert "XFAIL test_lin.py::test_linear[cpp]" in out and "pre-existing failure" in out, out[-3000:]
    same = subprocess.run([sys.executable, "-m", "pytest_gemmguard", "verdicts", "base.json", "same.json"],
                          cwd=pytester.path, capture_output=True, text=True)  # fmt: skip
    assert same.returncode == 0 and "0 new, 0 coverage lost, 2 pre-existing, 0 fixed" in same.stdout, same.stdout

    # A head with a new wrong result: red, and named as new beside the pre-existing one.
    pytester.makeconftest(plants.WRONG_ATEN)
    rc, out = run(pytester, plugin_args, "--gemm-backends=aten,cpp", "--gemm-base-verdicts=base.json",
                  "--gemm-verdicts=head.json")  # fmt: skip
    assert rc == 1 and "FAILED test_lin.py::test_linear[aten]" in out, out[-3000:]
    assert "XFAIL test_lin.py::test_linear[cpp]" in out, out[-3000:]
    diff = subprocess.run([sys.executable, "-m", "pytest_gemmguard", "verdicts", "base.json", "head.json"],
                          cwd=pytester.path, capture_output=True, text=True)  # fmt: skip
    assert diff.returncode == 1, diff.stdout + diff.stderr
    assert "  new failure: test_lin.py::test_linear[aten]: mm" not in diff.stdout  # the case it names is a linear
    assert "  new failure: test_lin.py::test_linear[aten]: linear" in diff.stdout, diff.stdout
    assert "  pre-existing (not blocking): test_lin.py::test_linear[cpp]: " + LIN in diff.stdout, diff.stdout

    # A head whose cpp refuses what the base's ran: coverage lost, red.
    pytester.makeconftest(REFUSING_CPP)
    rc, out = run(pytester, plugin_args, "--gemm-backends=cpp", "--gemm-base-verdicts=base.json")
    assert rc == 1 and "FAILED test_lin.py::test_linear[cpp]" in out, out[-3000:]
    assert "refuses" in out and "the base's backend ran" in out, out[-3000:]

    # The base's seed is the head's: another one is a usage error.
    rc, out = run(pytester, plugin_args, "--gemm-backends=cpp", "--gemm-base-verdicts=base.json", "--gemm-seed=6")
    assert rc == 4 and "was drawn with seed 5" in out, out[-3000:]


def test_proposals_from_a_real_record(tmp_path):
    # The shape of what the base run above writes, proposed as an entry a reviewer edits.
    doc = {"gemmguard_verdicts": 1, "seed": 5, "facts": {"torch": "2.13.0+cpu"}, "results": [
        {"test": "t.py::test_linear[cpp]", "backend": "cpp", "case": LIN, "outcome": "wrong-result"},
        {"test": "t.py::test_linear[cpp]", "backend": "cpp", "case": "linear 3×4×24 float32 offset epilogue=none",
         "outcome": "wrong-result"},
        {"test": "t.py::test_linear[cpp]", "backend": "cpp", "case": "linear 3×4×24 float32 contiguous epilogue=none",
         "outcome": "verified"},
    ]}  # fmt: skip
    path = tmp_path / "base.json"
    path.write_text(json.dumps(doc))
    out = subprocess.run([sys.executable, "-m", "pytest_gemmguard", "propose", str(path)],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert 'layouts = ["offset"]' in out and 'versions = { torch = ">=2.13" }' in out
    (tmp_path / "k.toml").write_text(out)
    assert len(known.load(str(tmp_path / "k.toml")).entries) == 1
