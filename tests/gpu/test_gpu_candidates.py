"""Every Triton autotune candidate is checked, not only the winner (--gemm-all-choices), on a real GPU.

A bf16 mm of 328 x 392 x 456 offers Inductor several Triton template configs (and, on SM90, the persistent
TMA template), so autotuning benchmarks all of them in this process (a shape no other GPU test uses:
Inductor's autotune cache file is fixed for the whole process at its first autotune, and a shape tuned
before would be served from it, benchmarking nothing); each must be judged against the float64
reference, on the case's own inputs, and be right. The counts are asserted: a run in which nothing was
autotuned, or the candidates went unjudged, fails instead of passing.
"""

from __future__ import annotations

import re

import pytest

from pytest_gemmguard import GemmCase, backends
from pytest_gemmguard.cases.case import build_inputs, case_function
from pytest_gemmguard.compile import candidates
from pytest_gemmguard.compile.compiler import Compiler, run_checked

CASE = GemmCase("mm", 328, 392, 456, dtype="bfloat16")


def _triton() -> backends.Backend:
    probe = backends.probe("triton")
    if not probe.available:  # on a GPU machine this is a broken install, not a reason to pass
        pytest.fail(f"triton backend unavailable on this GPU machine: {probe.line()}")
    return backends.get("triton")


def test_every_triton_candidate_is_judged_right_on_the_case_inputs(tmp_path, gpu_log):
    backend = _triton()
    inputs = build_inputs(CASE, "cuda")
    compiler = Compiler(cache_dir=str(tmp_path / "cache"))
    try:
        compiled = compiler.compile(backend, case_function(CASE.op, CASE.epilogue, CASE.dtype), inputs.flat)
        with candidates.watch(CASE) as seen:
            run_checked(compiled, inputs.flat)
    finally:
        compiler.deactivate()
    for result in seen:
        gpu_log.write(test="candidates", **result.to_json())
    triton = [r for r in seen if r.name.startswith("triton_")]
    checked, wrong, _ = candidates.tally(triton)
    assert checked >= 2, [r.line() for r in seen]  # several Triton configs were autotuned and judged
    assert wrong == 0, [r.line() for r in seen if r.wrong]
    assert all(r.inputs == "case" for r in triton if r.checked), [r.line() for r in triton]
    assert all(r.verdict.max_ratio <= 1 for r in triton if r.checked)


SUITE = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["bfloat16"], epilogues=["none"], layouts=["contiguous"], shapes=[(328, 392, 456)],
           max_examples=1)
def test_mm(gemm):
    gemm.check()
"""


def test_the_summary_counts_the_triton_candidates_checked(pytester, plugin_args):
    _triton()
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess(*plugin_args, "--gemm-backends=triton", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    found = re.search(r"triton: autotune candidates checked: (\d+), wrong: (\d+)", result.stdout.str())
    assert found, result.stdout.str()
    assert int(found.group(1)) > 1 and int(found.group(2)) == 0, found.group(0)


def test_a_candidate_wrong_only_on_autotunings_own_inputs_does_not_fail_a_small_bf16_linear(tmp_path, gpu_log):
    """H200, torch 2.11.0+cu130, triton 3.6.0, 2026-12-01 20:42 (the triton calibration with dynamic shapes):
    every Triton template candidate of this case looked wrong on Inductor's random example tensors (132 of 133
    elements) while the winner was right, and the case failed. Each is now compiled alone on the case's inputs
    first (crosscheck/confirm.py): the case fails only if one is wrong there too. Nothing autotuned fails this test."""
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    _triton()
    case = GemmCase("linear", 7, 19, 19, dtype="bfloat16", seed=3003)
    compiler = Compiler(cache_dir=str(tmp_path / "cache"))
    session = GemmSession(compiler, Options(repro_dir=str(tmp_path / "repro")))
    try:
        result = Gemm(case, "triton", session).check()
    finally:
        compiler.deactivate()
    counts = {what: getattr(session.tally.of("triton"), what) for what in ("candidates", "candidates_wrong",
              "candidates_unconfirmed")}  # fmt: skip
    outcomes = [outcome for outcome, _ratio, _detail in session.confirmations.values()]
    gpu_log.write(test="linear-confirm", case=repr(case), **counts, outcomes=outcomes)
    assert result.verdict.ok
    assert counts["candidates"] >= 2, counts  # autotuning ran and its candidates were judged
    # Each candidate that looked wrong really ran alone and was right (none looking wrong passes too: logged).
    assert all(outcome == "right" for outcome in outcomes), outcomes
