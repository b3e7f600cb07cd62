"""A wrong winner is put on a known entry's named candidates only where the fault follows them both ways
(confirm.blame), through real Inductor compiles on the CPU.

The plant (a test-only preprocessing function in the conftest) appends extern choices that compute a
wrong mm, report themselves faster than anything and pass for ATen library kernels, so autotuning picks
one of them and the compiled case is wrong: a wrong winner, as the persistent TMA template was on the H200
for `mm 1x864x864 bfloat16 noncontiguous`. With an entry naming the planted choice, the case is xfail with
the proof in its report; an entry naming another template, no known file, or a second wrong choice that
wins once the named one is withheld (so the named one is not what made the winner wrong) each leave it a
failure.
"""

import pytest

PLANT = """
import torch
from torch._inductor import select_algorithm

from pytest_gemmguard.backends import provenance

PLANTS = {plants}  # name suffix -> (relative error, the timing it reports in ms)


def make(name, skew):
    def fast_mm(a, b, out):
        torch.mm(a, b, out=out)
        out.mul_(1 + skew)

    fast_mm.__name__ = name
    return select_algorithm.ExternKernelChoice.lookup(name) or select_algorithm.ExternKernelChoice(fast_mm, name=name)


CHOICES = {{f"gemmguard_test_fast_mm_{{tag}}": (make(f"gemmguard_test_fast_mm_{{tag}}", skew), ms)
            for tag, (skew, ms) in PLANTS.items()}}


def plant(choices):
    nodes = choices[0].input_nodes if choices else ()
    if len(nodes) != 2 or not all(len(n.get_size()) == 2 for n in nodes):  # mm only
        return choices
    added = []
    for choice, ms in CHOICES.values():
        caller = choice.bind(nodes, choices[0].layout)
        measured = caller.benchmark

        def benchmark(*args, out, measured=measured, ms=ms):
            measured(*args, out=out)
            return ms  # faster than ATen's mm: it wins autotuning

        caller.benchmark = benchmark
        added.append(caller)
    return [*choices, *added]


select_algorithm.add_preprocessing_fn(plant)
# The plants stand in for a library kernel of the aten backend (provenance would otherwise call the case unsupported).
provenance.LIBRARY_GEMMS.update(CHOICES)


def pytest_unconfigure(config):
    select_algorithm.get_algorithm_selector_cache().preprocessing_fns.remove(plant)
    provenance.LIBRARY_GEMMS.difference_update(CHOICES)
"""

MM_TEST = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(8, 16, 32)],
           max_examples=1)
def test_mm(gemm):
    gemm.check()
"""

KNOWN = """
[[known]]
id = "planted-fast-mm{suffix}"
backend = "aten"
ops = [{ops}]
candidates = [{names}]
versions = {{ torch = "" }}
kind = "wrong-result"
link = "https://example.org/planted"
reason = "the planted fast mm is wrong"
"""

# The test's own code sees the GemmMismatch (and lets the test pass): what a report and the tracker are given.
CATCH = """
    from pytest_gemmguard.errors import GemmMismatch
    try:
        gemm.check()
    except GemmMismatch as exc:
        for line in str(exc).splitlines():
            print("REPORT", line.strip())
        print("CANDIDATES", exc.candidates)
    else:
        raise AssertionError("the planted winner was right")"""

RUN = ("--gemm-backends=aten", "--gemm-seed=1", "-p", "no:cacheprovider", "-rx", "-v")  # -v: every progress line


def known_file(names: str, ops: str = '"mm"', suffix: str = "") -> str:
    return KNOWN.format(names=names, ops=ops, suffix=suffix)


def _run(pytester, plants: dict, names: str | None, known: str | None = None):
    # Each plant's name is its own per test: Inductor keeps every extern choice it made, by name, for the process.
    pytester.makeconftest(PLANT.format(plants=plants))
    pytester.makepyfile(MM_TEST)
    args = RUN
    if names is not None or known is not None:
        pytester.path.joinpath("known.toml").write_text(known or known_file(names))
        args = (*RUN, "--gemm-known=known.toml")
    return pytester.runpytest_inprocess(*args)


def test_a_wrong_winner_the_named_candidates_explain_both_ways_is_xfail_with_the_proof(pytester):
    result = _run(pytester, {"blamed": (0.01, 1e-6)}, '"extern_kernels.gemmguard_test_fast_mm_blamed"')
    result.assert_outcomes(xfailed=1)
    out = result.stdout.str()
    assert "planted-fast-mm" in out and "known failure" in out
    # Both ways, as the progress lines show: wrong alone, and then a compile without it.
    assert "compiling extern_kernels.gemmguard_test_fast_mm_blamed alone to confirm it" in out
    assert "extern_kernels.gemmguard_test_fast_mm_blamed compiled alone: wrong on the case's inputs" in out
    assert "compiling without extern_kernels.gemmguard_test_fast_mm_blamed to blame them" in out


def test_the_blamed_report_says_how(pytester):
    """What a report shows and the known-failures tracker is given: the test's own code catches the failure."""

    pytester.makeconftest(PLANT.format(plants={"api": (0.01, 1e-6)}))
    pytester.path.joinpath("known.toml").write_text(known_file('"extern_kernels.gemmguard_test_fast_mm_api"'))
    pytester.makepyfile(MM_TEST.replace("gemm.check()", CATCH))
    result = pytester.runpytest_inprocess(*RUN, "--gemm-known=known.toml", "-s")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "REPORT blamed:    extern_kernels.gemmguard_test_fast_mm_api compiled alone: wrong" in out
    withheld = "REPORT blamed:    compiled without extern_kernels.gemmguard_test_fast_mm_api: right on the case's"
    assert withheld in out
    assert "CANDIDATES ('extern_kernels.gemmguard_test_fast_mm_api',)" in out


@pytest.mark.parametrize("names", ['"triton_mm_persistent_tma_*"', None], ids=["another-template", "no-known-file"])
def test_a_wrong_winner_no_entry_names_stays_a_failure(pytester, names):
    tag = "other" if names else "noknown"
    result = _run(pytester, {tag: (0.01, 1e-6)}, names)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "aten produced a wrong result" in out and "blamed:" not in out


def test_a_wrong_winner_that_stays_wrong_without_the_named_candidate_stays_a_failure(pytester):
    """Two wrong plants: the entry names the slower one, which is wrong alone too; withheld, the other wins
    and the compile is still wrong, so the named one is not what made the winner wrong."""
    plants = {"named": (0.01, 1e-5), "unnamed": (0.02, 1e-6)}
    result = _run(pytester, plants, '"extern_kernels.gemmguard_test_fast_mm_named"')
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "compiling without extern_kernels.gemmguard_test_fast_mm_named to blame them" in out  # tried, refused
    assert "aten produced a wrong result" in out and "blamed:" not in out and "known failure" not in out


def test_a_wrong_loser_of_another_name_beside_a_blamed_winner_stays_a_failure(pytester):
    """The named winner is to blame, but an unnamed candidate that lost autotuning is wrong too: as on the
    losing path, a wrong candidate the entry does not name leaves the case a failure."""
    plants = {"winner": (0.01, 1e-6), "slowloser": (0.02, 1e3)}
    result = _run(pytester, plants, '"extern_kernels.gemmguard_test_fast_mm_winner"')
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "extern_kernels.gemmguard_test_fast_mm_slowloser compiled alone: wrong on the case's inputs" in out
    assert "known failure" not in out


# As on the H100 (linear 1×2×353 float16, torch 2.11 + triton 3.6): no candidate of the compile could be checked, so
# autotuning judged none wrong. The plants are made opaque to gemmguard's candidate check (their kind unknown), the
# condition the test needs; the wrong winner must still be put on the named ones both ways, or stay a failure.
OPAQUE = """

from pytest_gemmguard._compat import inductor as _compat

_facts = _compat.choice_facts


def _opaque(choice):
    facts = _facts(choice)
    if "gemmguard_test_fast_mm" in facts.name:
        return _compat.ChoiceFacts(facts.name, facts.description, "opaque")
    return facts


_compat.choice_facts = _opaque
_plant_unconfigure = pytest_unconfigure


def pytest_unconfigure(config):
    _plant_unconfigure(config)
    _compat.choice_facts = _facts
"""


@pytest.mark.parametrize("named", [True, False], ids=["named", "another-template"])
def test_a_wrong_winner_whose_candidates_went_unchecked_is_blamed_on_the_named_ones_both_ways(pytester, named):
    tag = "opaque" if named else "opaqueother"
    pytester.makeconftest(PLANT.format(plants={tag: (0.01, 1e-6)}) + OPAQUE)
    pytester.makepyfile(MM_TEST)
    names = f'"extern_kernels.gemmguard_test_fast_mm_{tag}"' if named else '"triton_mm_persistent_tma_*"'
    pytester.path.joinpath("known.toml").write_text(known_file(names))
    result = pytester.runpytest_inprocess(*RUN, "--gemm-known=known.toml")
    out = result.stdout.str()
    assert "checked: 1, wrong: 0, not checked: 1" in out  # ATen's own mm right, the plant unchecked
    if named:
        result.assert_outcomes(xfailed=1)
        assert f"compiling extern_kernels.gemmguard_test_fast_mm_{tag} alone to confirm it" in out
        assert f"compiling without extern_kernels.gemmguard_test_fast_mm_{tag} to blame them" in out
    else:
        result.assert_outcomes(failed=1)
        assert "aten produced a wrong result" in out and "blamed:" not in out


def test_a_wrong_winner_among_choices_the_entry_names_every_one_of_is_blamed_on_them(pytester):
    """As the H100's M = 1 linear on a Triton-only backend: every choice of the selection is one the entry names, so
    no compile without them exists, and none is needed. One named candidate wrong alone, the rest named too: the
    winner was one of them, and the case is xfail. Named more narrowly (the plant alone), the counterfactual compile
    keeps ATen's mm and must be right, as the other tests here show."""
    tag = "opaqueall"
    pytester.makeconftest(PLANT.format(plants={tag: (0.01, 1e-6)}) + OPAQUE)
    pytester.makepyfile(MM_TEST.replace("gemm.check()", CATCH))
    pytester.path.joinpath("known.toml").write_text(known_file('"extern_kernels.*"'))
    result = pytester.runpytest_inprocess(*RUN, "-s", "--gemm-known=known.toml")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert f"compiling extern_kernels.gemmguard_test_fast_mm_{tag} alone to confirm it" in out, out
    assert "REPORT blamed:    every choice autotuning had for the GEMM was one of extern_kernels.*" in out, out
    assert f"CANDIDATES ('extern_kernels.gemmguard_test_fast_mm_{tag}',)" in out


@pytest.mark.parametrize("second", ["overlap", "elsewhere"])
def test_blame_is_tried_only_where_exactly_one_entry_with_candidates_covers_the_case(pytester, second):
    """Two entries covering the case: a proof against their joint names could not say which entry it is for,
    so nothing is compiled to blame and the case fails. An entry that covers another op costs nothing."""
    name = f'"extern_kernels.gemmguard_test_fast_mm_{second}"'
    entries = known_file(name) + known_file(name, suffix="-twin") if second == "overlap" else known_file(name, '"bmm"')
    result = _run(pytester, {second: (0.01, 1e-6)}, None, entries)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "alone to confirm it" not in out and "to blame them" not in out and "known failure" not in out


def test_blame_patterns_come_from_the_one_covering_entry_that_names_candidates(tmp_path):
    from pytest_gemmguard import known
    from pytest_gemmguard.cases.case import GemmCase

    case = GemmCase(op="mm", m=8, n=16, k=32, dtype="float32", layout="contiguous")
    versions = known.installed_versions(("torch",))

    def patterns(text: str) -> tuple:
        path = tmp_path / "known.toml"
        path.write_text(text)
        return known.blame_patterns(known.load(path), "aten", case, versions)

    assert patterns(known_file('"a_*", "b_?"')) == ("a_*", "b_?")
    assert patterns(known_file('"a_*"', '"bmm"')) == ()  # another op
    assert patterns(known_file('"a_*"').replace('"wrong-result"', '"raises"')) == ()  # another kind
    assert patterns(known_file('"a_*"') + known_file('"b_*"', suffix="-2")) == ()  # two entries: none
    no_names = known_file('"a_*"').replace('candidates = ["a_*"]\n', "")
    assert patterns(no_names) == ()  # an entry without candidates explains by itself


def test_a_mismatch_keeps_its_names_and_notes_through_pickling():
    import pickle

    from pytest_gemmguard.errors import CandidateMismatch, GemmMismatch

    for cls in (GemmMismatch, CandidateMismatch):
        exc = cls("wrong", ("triton_mm_persistent_tma_18",))
        exc.add_note("gemmguard reproduce: ...")
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is cls and str(back) == "wrong"
        assert back.candidates == ("triton_mm_persistent_tma_18",) and back.__notes__ == ["gemmguard reproduce: ..."]
