"""Every autotune candidate is checked, not only the winner (--gemm-all-choices), through real Inductor
compiles on the CPU.

ATen alone offers Inductor one choice on the CPU, so nothing is autotuned; the plant (a test-only
preprocessing function in the conftest) appends a second extern choice that reports itself slow, so
autotuning runs and the real ATen kernel wins. A wrong planted candidate must fail the case by name while the winner is
right; with --gemm-all-choices=off the same run passes (the plant really lost autotuning); a right planted
candidate passes and is counted.
"""

import json
import math

import pytest
import torch

from pytest_gemmguard import oracle
from pytest_gemmguard.compile import candidates

PLANT = """
import torch
from torch._inductor import select_algorithm

SKEW = {skew}  # the planted kernel's relative error (0: a right GEMM)
BENCH_SKEW = {bench_skew}  # an error in autotuning's benchmark only: what a benchmark harness's own inputs can do
NAME = "gemmguard_test_slow_mm_{tag}"
SEEN = []  # the inputs the planted kernel was benchmarked on


def slow_mm(a, b, out):
    SEEN.append((a.clone(), b.clone()))
    torch.mm(a, b, out=out)
    out.mul_(1 + SKEW)


CHOICE = select_algorithm.ExternKernelChoice.lookup(NAME) or select_algorithm.ExternKernelChoice(slow_mm, name=NAME)


def plant(choices):
    nodes = choices[0].input_nodes if choices else ()
    if len(nodes) == 2 and all(len(n.get_size()) == 2 for n in nodes):  # mm only
        caller = CHOICE.bind(nodes, choices[0].layout)
        measured = caller.benchmark
        # It reports itself a second slower than it ran, so it loses autotuning whatever the load (a sleep in the
        # kernel did not: on a loaded 2-core machine ATen's tiny mm once timed at 16 ms and lost to it).
        def benchmark(*args, out):
            took = measured(*args, out=out)
            out.mul_(1 + BENCH_SKEW)
            return took + 1000.0

        caller.benchmark = benchmark
        return [*choices, caller]
    return choices


select_algorithm.add_preprocessing_fn(plant)


def pytest_unconfigure(config):
    # pytester runs share this process: the plant must not outlive its session.
    select_algorithm.get_algorithm_selector_cache().preprocessing_fns.remove(plant)
"""

MM_TEST = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], shapes=[(8, 16, 32)],
           max_examples=1)
def test_mm(gemm):
    gemm.check()
"""

RUN = ("--gemm-backends=aten", "--gemm-seed=1", "-p", "no:cacheprovider")


def test_a_wrong_candidate_that_loses_autotuning_fails_the_case_by_name(pytester):
    pytester.makeconftest(PLANT.format(skew=0.01, bench_skew=0, tag="wrong"))
    pytester.makepyfile(MM_TEST)
    result = pytester.runpytest_inprocess(*RUN)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert (
        "aten: 1 of 2 autotune candidates checked produced a wrong result, 1 confirmed by a compile that picks it; "
        "the winner that ran was right"
    ) in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "wrong:     " in line)
    wrong, confirmed = lines[at], lines[at + 1]
    assert "extern_kernels.gemmguard_test_slow_mm_wrong" in wrong and "WRONG" in wrong, wrong
    assert "x tolerance" in wrong and "(case inputs)" in wrong, wrong
    # The planted kernel is wrong when it really runs too: a compile that picks it says so, with its error.
    assert (
        "confirmed: extern_kernels.gemmguard_test_slow_mm_wrong compiled alone: wrong on the case's inputs" in confirmed
    )
    assert "winner:    mm (aten): within tolerance" in out
    assert "aten: autotune candidates checked: 2, wrong: 1, not checked: 0" in out


def test_with_all_choices_off_the_same_run_passes(pytester):
    """The wrong plant lost autotuning: only the candidate check could see it."""
    pytester.makeconftest(PLANT.format(skew=0.01, bench_skew=0, tag="wrong"))
    pytester.makepyfile(MM_TEST)
    result = pytester.runpytest_inprocess(*RUN, "--gemm-all-choices=off")
    result.assert_outcomes(passed=1)
    assert "autotune candidates: only the winners were checked (--gemm-all-choices=off)" in result.stdout.str()


def test_a_right_extra_candidate_passes_and_is_counted(pytester):
    pytester.makeconftest(PLANT.format(skew=0.0, bench_skew=0, tag="right"))
    pytester.makepyfile(MM_TEST)
    result = pytester.runpytest_inprocess(*RUN)
    result.assert_outcomes(passed=1)
    assert "aten: autotune candidates checked: 2, wrong: 0, not checked: 0" in result.stdout.str()


KNOWN_CANDIDATE = """
[[known]]
id = "planted-slow-mm"
backend = "aten"
ops = ["mm"]
candidates = [{names}]
versions = {{ torch = "" }}
kind = "wrong-result"
link = "https://example.org/planted"
reason = "the planted slow mm is wrong"
"""


def _plant_with_entry(pytester, names: str, skew: float, prefix: str) -> str:
    """The plant (wrong by `skew`) and a known entry naming `names`; returns the plant's tag, one of its own per
    use: Inductor keeps every extern choice it made, by name, for the process."""
    tag = prefix + "".join(ch for ch in names if ch.isalpha())[:24]
    pytester.makeconftest(PLANT.format(skew=skew, bench_skew=0, tag=tag))
    pytester.makepyfile(MM_TEST)
    pytester.path.joinpath("known.toml").write_text(KNOWN_CANDIDATE.format(names=names))
    return tag


@pytest.mark.parametrize(
    "names,outcome",
    [
        ('"extern_kernels.gemmguard_test_slow_mm_*"', {"xfailed": 1}),  # the wrong candidate, by its name
        ('"triton_mm_persistent_tma_*"', {"failed": 1}),  # another template's bug: this one stays a failure
    ],
    ids=["named", "another-name"],
)
def test_a_known_entry_that_names_candidates_explains_only_those(pytester, names, outcome):
    tag = _plant_with_entry(pytester, names, 0.01, "known_")
    result = pytester.runpytest_inprocess(*RUN, "--gemm-known=known.toml", "-rx")
    result.assert_outcomes(**outcome)
    out = result.stdout.str()
    if "xfailed" in outcome:
        assert "planted-slow-mm" in out and "known failure" in out
    else:
        assert f"extern_kernels.gemmguard_test_slow_mm_{tag}" in out and "confirmed" in out


@pytest.mark.parametrize(
    "names,xpass", [('"extern_kernels.gemmguard_test_slow_mm_*"', True), ('"triton_mm_persistent_tma_*"', False)]
)
def test_a_template_entry_is_xpass_only_where_its_template_ran_right(pytester, names, xpass):
    """The planted candidate is right now: an entry naming it no longer tells the truth (XPASS, a failure
    under --gemm-known-strict); an entry naming a template this run never offered says nothing either way."""
    _plant_with_entry(pytester, names, 0.0, "xpass_")
    result = pytester.runpytest_inprocess(*RUN, "--gemm-known=known.toml", "--gemm-known-strict")
    result.assert_outcomes(**({"failed": 1} if xpass else {"passed": 1}))
    assert ("known failure no longer shows: planted-slow-mm" in result.stdout.str()) == xpass


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The plant, in this process: a wrong slow candidate for every mm selection."""
    import importlib.util

    # A name of its own per use: Inductor keeps every extern choice it ever made, by name, for the process.
    tag = f"api_{tmp_path.name}"
    path = tmp_path / "plant_wrong.py"
    path.write_text(PLANT.format(skew=0.01, bench_skew=0, tag=tag))
    spec = importlib.util.spec_from_file_location("plant_wrong", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        module.pytest_unconfigure(None)


def test_the_api_checks_each_candidate_on_the_case_inputs_and_round_trips_as_json(planted, tmp_path):
    """What a compile-ahead worker calls around its own compile, and sends back as JSON."""
    from pytest_gemmguard import backends
    from pytest_gemmguard.compile.compiler import Compiler, run_checked

    torch.manual_seed(0)
    a, b = torch.randn(8, 32), torch.randn(32, 16)
    compiler = Compiler(cache_dir=str(tmp_path / "cache"))
    try:
        compiled = compiler.compile(backends.get("aten"), lambda x, y: x @ y, (a, b))
        with candidates.watch("float32") as seen:
            out, _ = run_checked(compiled, (a, b))
    finally:
        compiler.deactivate()
    assert torch.allclose(out, a @ b)
    by_name = {r.name: r for r in seen}
    plant = f"extern_kernels.{planted.NAME}"
    assert set(by_name) == {"extern_kernels.mm", plant}, seen
    assert not by_name["extern_kernels.mm"].wrong and by_name[plant].wrong
    assert all(r.inputs == "case" for r in seen), seen
    bench_a, bench_b = planted.SEEN[0]  # the planted candidate ran on the case's own values
    assert torch.equal(bench_a, a) and torch.equal(bench_b, b)
    assert candidates.tally(seen) == (2, 1, 0)
    again = [candidates.CandidateResult.from_json(json.loads(json.dumps(r.to_json()))) for r in seen]
    assert again == seen and again[0].line() == seen[0].line()


def test_the_addmm_reference_applies_alpha_beta_and_a_broadcast_bias():
    bias, a, b = torch.randn(16), torch.randn(8, 32), torch.randn(32, 16)
    y, tol = candidates._reference("addmm", {"alpha": 2.0, "beta": 0.5}, (bias, a, b), "float32", torch.float32)
    exact = torch.addmm(bias.double(), a.double(), b.double(), alpha=2.0, beta=0.5)
    assert torch.allclose(y, exact) and bool((tol > 0).all())
    right = torch.addmm(bias, a, b, alpha=2.0, beta=0.5)
    assert oracle.judge(right, y, tol, torch.float32).ok
    assert not oracle.judge(torch.addmm(bias, a, b), y, tol, torch.float32).ok  # alpha/beta dropped: wrong


def test_a_result_that_could_not_be_checked_says_why_and_round_trips():
    result = candidates.CandidateResult("cpp_CppMicroGemm_0", "CppTemplateCaller", "mm", None, "prepacked weight")
    assert not result.checked and not result.wrong and "not checked: prepacked weight" in result.line()
    assert candidates.CandidateResult.from_json(result.to_json()) == result
    inf = oracle.Verdict(False, math.inf, math.inf, oracle.Mismatch("shape", detail="shape (2,), expected (3,)"))
    shaped = candidates.CandidateResult("x", "y", "mm", inf, inputs="random")
    # NaN fields (a shape mismatch has no worst element) never compare equal: compare the JSON text.
    again = candidates.CandidateResult.from_json(json.loads(json.dumps(shaped.to_json())))
    assert json.dumps(again.to_json()) == json.dumps(shaped.to_json()) and again.wrong and "shape (2,)" in again.line()


def test_a_call_that_reuses_the_compile_fails_on_its_wrong_candidate_again(planted, tmp_path):
    """Hypothesis re-runs a failing example, and the re-run hits Dynamo's cache (nothing is autotuned): the
    candidates judged when the graph compiled stay with it, so the re-run fails the same way, not flakily.
    Another case that reuses the compile (other values, same shape) is not failed by them: they were judged
    on the first case's inputs, and that case reported them (on the H200 a dynamic-shape compile served 30
    cases, and each was failed with the first one's candidate until this held)."""
    from pytest_gemmguard.cases.case import GemmCase
    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import CandidateMismatch
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    compiler = Compiler(cache_dir=str(tmp_path / "cache"))
    session = GemmSession(compiler, Options(repro_dir=str(tmp_path / "repro")))
    try:
        for _ in range(2):  # the example, then its re-run
            with pytest.raises(CandidateMismatch, match=planted.NAME):
                Gemm(GemmCase("mm", 8, 16, 32, seed=1), "aten", session).check()
        other = Gemm(GemmCase("mm", 8, 16, 32, seed=2), "aten", session).check()
    finally:
        compiler.deactivate()
    assert other.verdict.ok
    # One compile for the three calls (the confirming compile is counted apart: it has a backend of its own).
    assert compiler.stats["reused_calls"] == 2
    assert session.tally.of("aten").candidates == 2  # counted once, where they were judged
    assert len(session.confirmations) == 1  # the re-run read the first confirmation


def test_a_candidate_wrong_only_in_autotunings_benchmark_does_not_fail_the_case(pytester):
    """Inductor's benchmark can hand a kernel tensors the real call never does (seen on the H200: every Triton
    template of a small bf16 linear looked wrong there, the compiled code was right). The plant's output is
    wrong in the benchmark only; the compile that picks it runs the right GEMM, so the case passes and the
    summary counts the candidate as unconfirmed."""
    pytester.makeconftest(PLANT.format(skew=0.0, bench_skew=0.01, tag="bench"))
    pytester.makepyfile(MM_TEST)
    result = pytester.runpytest_inprocess(*RUN, "-v")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "compiling extern_kernels.gemmguard_test_slow_mm_bench alone to confirm it" in out
    # Right when it really ran alone: not "not offered", not "error" (a compile cache serving the winner's code
    # would leave the candidate unoffered, and that would not count here).
    assert "extern_kernels.gemmguard_test_slow_mm_bench compiled alone: right on the case's inputs" in out
    assert "aten: autotune candidates checked: 2, wrong: 1, not checked: 0" in out
    assert "aten: 1 of the wrong-looking candidates were right when compiled alone on the case's inputs" in out
    assert "could not be confirmed" not in out


def test_without_the_confirming_compile_that_benchmark_only_error_would_fail_the_case(pytester):
    """The plant above is seen by the candidate check: with the confirmation taken out (it now says every
    candidate is wrong), the same run fails on it."""
    conftest = (
        PLANT.format(skew=0.0, bench_skew=0.01, tag="noconfirm")
        + """
from pytest_gemmguard.crosscheck import confirm

_real_confirm, _plant_unconfigure = confirm._confirm, pytest_unconfigure
confirm._confirm = lambda *args, **kwargs: ("wrong", 99.0, "")


def pytest_unconfigure(config):  # pytester runs share this process: put the real confirmation back
    confirm._confirm = _real_confirm
    _plant_unconfigure(config)
"""
    )
    pytester.makeconftest(conftest)
    pytester.makepyfile(MM_TEST)
    result = pytester.runpytest_inprocess(*RUN)
    result.assert_outcomes(failed=1)
    assert "extern_kernels.gemmguard_test_slow_mm_noconfirm" in result.stdout.str()
