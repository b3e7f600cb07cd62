"""Plant the bugs gemmguard exists to catch, through real Inductor compiles, and watch it catch them.

The planted backends are the only fakes in the suite: each is a real backend with one defect added.
"""

import pathlib
import re
import subprocess
import sys

import pytest
from actrun import plants

from pytest_gemmguard.cases.case import GemmCase

# Wrong only in one regime: every GEMM whose N is odd is off by 0.01. And a backend that says it is CPP but lets
# Inductor use ATen: every GEMM silently runs another backend.
PLANTED = (
    plants.planted_backend(
        "wrong-odd-n", plants.shift_gemms("SkewOddN", 0.01, when='node.meta["val"].shape[-1] % 2 == 1')
    )
    + """
from pytest_gemmguard.backends.cpp import CppBackend


class SilentFallback(CppBackend):
    name = "silent-fallback"
    inductor_name = "ATEN"


backends.register(SilentFallback())  # released when the session ends, so the next in-process run registers again
"""
)

EDGE_TEST = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm", "addmm"], dtypes=["float32"], epilogues=["none"], max_examples=12)
def test_gemms(gemm):
    gemm.check()
"""


def test_wrong_results_in_an_edge_regime_fail_with_a_shrunk_example(pytester):
    pytester.makeconftest(PLANTED)
    pytester.makepyfile(EDGE_TEST)
    result = pytester.runpytest_inprocess("--gemm-backends=wrong-odd-n", "--gemm-seed=1", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "gemmguard: wrong-odd-n produced a wrong result" in out
    # The progress line says what failed at once, so a run a time limit cuts off still tells (H200 main job).
    assert re.search(r"FAILED \(wrong result, [\d.]+ s\): wrong-odd-n produced a wrong result", out), out
    # gemmguard's report stands for Hypothesis's own (its falsifying example, its @reproduce_failure advice).
    assert "Falsifying example" not in out and "Failing test case" not in out and "reproduce_failure" not in out
    shrunk = re.findall(r"GemmCase\(op='(\w+)', m=(\d+), n=(\d+), k=(\d+)", out)
    assert shrunk, out
    _op, _m, n, k = shrunk[-1]
    assert int(n) % 2 == 1 and int(n) <= 3, shrunk  # shrunk into the regime, to its smallest N
    assert "gemmguard reproduce: pytest" in out and "--gemm-replay=" in out
    repro = re.search(r"repro:\s+python (\S+)", out).group(1)
    assert (pytester.path / repro).exists() and pathlib.Path(repro).name.startswith("repro_")
    # The printed replay line reruns exactly the shrunk example, and it still fails.
    replay = re.search(r"--gemm-replay='([^']+)'", out).group(1)
    again = pytester.runpytest_inprocess(
        "--gemm-backends=wrong-odd-n", f"--gemm-replay={replay}", "-p", "no:cacheprovider"
    )
    again.assert_outcomes(failed=1)
    assert f"n={n}, k={k}" in again.stdout.str()


def test_a_backend_that_silently_falls_back_shows_zero_passes(pytester):
    pytester.makeconftest(PLANTED)
    pytester.makepyfile(EDGE_TEST)
    result = pytester.runpytest_inprocess("--gemm-backends=silent-fallback", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)  # never passed
    out = result.stdout.str()
    assert "unsupported by silent-fallback for every case drawn" in out
    assert "Inductor ran another backend's GEMM kernel" in out
    row = next(line for line in out.splitlines() if line.startswith("silent-fallback"))
    passed, unsupported = row.split()[1:3]
    assert passed == "0" and unsupported == "1"


@pytest.mark.parametrize(
    ("backend", "case"),
    [
        ("aten", GemmCase("addmm", 5, 7, 9, dtype="bfloat16", layout="transposed_b", epilogue="bias+gelu+cast")),
        ("cpp", GemmCase("addmm", 5, 7, 9, dtype="bfloat16", layout="transposed_b", epilogue="bias+gelu+cast")),
        ("aten", GemmCase("bmm", 5, 7, 9, 3, dtype="bfloat16", layout="broadcast", epilogue="relu")),
        ("aten", GemmCase("linear", 7, 7, 9, dtype="float32", layout="aliased", epilogue="relu")),
        (
            "aten",
            GemmCase("scaled_mm_rowwise", 8, 16, 32, dtype="float8_e4m3fn", layout="transposed_b", epilogue="relu"),
        ),
    ],
    ids=["aten", "cpp", "aten-shared-weight", "aten-aliased", "aten-scaled"],
)
def test_repro_script_runs_standalone_and_fails_while_the_bug_is_there(pytester, backend, case):
    """The repro needs torch only: run it in a fresh interpreter, without the plugin on the path."""
    import torch

    from pytest_gemmguard import backends, oracle
    from pytest_gemmguard.report import repro
    from pytest_gemmguard.run.example import Example

    wrong = oracle.Verdict(False, 9.0, 1.0, oracle.Mismatch("values", (0, 0), 1.0, 0.0, 1.0, 1e-30, 1, 35))
    example = Example(case, backend, test_id=f"t.py::test_x[{backend}]")
    path = repro.write(str(pytester.path / "out"), example, None, backends.get(backend), wrong, dynamic=False)
    proc = subprocess.run([sys.executable, "-I", path], capture_output=True, text=True, timeout=300)
    assert "max |error|:" in proc.stdout, proc.stderr
    assert "eager PyTorch's max |error|:" in proc.stdout  # is the library off too, on the same inputs?
    assert proc.returncode == 1  # the tolerance recorded (1e-30) is still broken: the script says so
    assert torch.__name__ in open(path).read() and "pytest_gemmguard" not in open(path).read()
    if case.layout == "broadcast":  # the script rebuilds the shared weight: one matrix expanded to the batch
        source = open(path).read()
        assert "'b': ((3, 9, 7), 'broadcast')" in source and ".expand(shape)" in source
    if case.layout == "aliased":  # the script makes the weight the activation itself, as the run did
        source = open(path).read()
        assert "'w': ((7, 9), 'aliased')" in source and "made[role] = a" in source


def test_the_repro_script_of_a_failure_that_compared_no_element_runs_to_its_end(pytester):
    # A wrong shape or dtype names no element: the script still prints both errors, and its missing tolerance is
    # infinity as a float (once the bare name `inf`, a NameError on the script's last lines).
    from pytest_gemmguard import backends, oracle
    from pytest_gemmguard.report import repro
    from pytest_gemmguard.run.example import Example

    wrong = oracle.Verdict(False, float("inf"), float("inf"), oracle.Mismatch("shape", detail="shape (5, 8)"))
    example = Example(GemmCase("mm", 5, 7, 9), "aten", test_id="t.py::test_x[aten]")
    path = repro.write(str(pytester.path / "out"), example, None, backends.get("aten"), wrong, dynamic=False)
    proc = subprocess.run([sys.executable, "-I", path], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "eager PyTorch's max |error|:" in proc.stdout, proc.stderr


# A compile that takes far longer than it should (a planted compile-time blow-up).
SLOW = plants.planted_backend("slow-compile", plants.graph_pass("Stall", "time.sleep(30)"), imports="import time\n")


def test_a_compile_past_the_timeout_fails_the_test_at_once(pytester):
    pytester.makeconftest(SLOW)
    pytester.makepyfile(EDGE_TEST)
    started = __import__("time").perf_counter()
    result = pytester.runpytest_inprocess(
        "--gemm-backends=slow-compile", "--gemm-compile-timeout=2", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gemmguard: slow-compile: compile/run exceeded the 2 s limit*"])
    assert __import__("time").perf_counter() - started < 25  # not one stalled compile per example


def test_a_failure_that_eager_shares_says_so_and_is_counted_apart():
    """Still a failure, never hidden; but a report line and a summary line say the library is wrong too, and,
    where the backend is within 2x of eager, what to do: whose bug it may be, and the known-failures entry that
    keeps the gate green meanwhile. A backend far beyond eager is told it has an error of its own."""
    from pytest_gemmguard import oracle
    from pytest_gemmguard.cases.case import GemmCase
    from pytest_gemmguard.compile.compiler import CallRecord
    from pytest_gemmguard.report.failure import failure_report
    from pytest_gemmguard.report.table import results_table
    from pytest_gemmguard.report.tally import Tally
    from pytest_gemmguard.run.example import Example

    case = GemmCase("mm", 4, 4, 4)
    mismatch = oracle.Mismatch("values", (0, 0), 1.0, 0.0, 1.0, 1e-6, 1, 16)
    example = Example(case, "aten", test_id="t.py::test_x[aten]")
    for eager, shown in ((3.5, True), (6.0, True), (0.2, False)):
        verdict = oracle.Verdict(False, 9.0, 1.0, mismatch, eager)
        report = failure_report(example, verdict, CallRecord(), None, "aten")
        assert ("library:  eager PyTorch is outside the bound too" in report) is shown
        assert ("aten is 2.57x further off: the backend's own error" in report) is (eager == 3.5)
        assert ('a known-failures entry keeps the gate green: backend = "aten", ops = ["mm"], dtypes = '
                '["float32"], versions = { torch = ">=' in report) is (eager == 6.0)  # fmt: skip
    tally = Tally()
    tally.of("aten").failed += 2
    tally.of("aten").failed_like_eager += 1
    tally.add_outcome("aten", "failed")
    lines = results_table(["aten"], tally, dynamic=False)
    assert "aten: 1 of its failed examples are wrong like eager PyTorch" in "\n".join(lines)


# Wrong only where B is one matrix shared across the batch (a zero batch stride: a weight broadcast by `expand`),
# as a kernel that assumes dense batches would be (issue 40; pytorch#179505 faulted on such a bmm while autotuning).
SHARED_WEIGHT = plants.planted_backend(
    "wrong-shared-weight",
    plants.shift_gemms(
        "SkewSharedWeight", 1.0, ops=("bmm", "baddbmm"), when='node.args[-1].meta["val"].stride(0) == 0'
    ),
)

DEFAULT_SPACE_TEST = """
from pytest_gemmguard import gemm_case

@gemm_case()
def test_any_gemm(gemm):
    gemm.check()
"""


def _default_space_finds(pytester, conftest: str, plant: str, clean: str = "aten") -> str:
    """Run README's default `@gemm_case()` at seed 1 on the planted backend `plant` and on the clean backend it
    was made from, the same draws for both: the plant fails, the clean one passes. Returns the run's output."""
    pytester.makeconftest(conftest)
    pytester.makepyfile(DEFAULT_SPACE_TEST)
    result = pytester.runpytest_inprocess(f"--gemm-backends={plant},{clean}", "--gemm-seed=1", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    assert f"gemmguard: {plant} produced a wrong result" in out, out
    return out


def _only_its_kind_explains(pytester, backend: str, kind: str, other: str, args: tuple, extra: str = "") -> None:
    """Rerun `backend` with a known-failures entry for it: of kind `kind` the failure is xfail, of kind `other` it
    still fails (`extra`: more keys of the entry)."""
    for entry_kind, outcome in ((kind, {"xfailed": 1}), (other, {"failed": 1})):
        pytester.makefile(
            ".toml",
            known=f"""
[[known]]
id = "planted-{backend}"
backend = "{backend}"
kind = "{entry_kind}"
{extra}
versions = {{ torch = ">=2.0" }}
link = "https://example.com/planted"
reason = "the planted defect"
""",
        )
        again = pytester.runpytest_inprocess(f"--gemm-backends={backend}", "--gemm-known=known.toml", *args)
        again.assert_outcomes(**outcome)


def _replay_fails_again(pytester, out: str, plant: str) -> None:
    """The run's one reproduce line, run as printed on the planted backend, fails again: it rebuilt the case."""
    replay = re.search(r"--gemm-replay='([^']+)'", out).group(1)
    again = pytester.runpytest_inprocess(
        f"--gemm-backends={plant}", f"--gemm-replay={replay}", "-p", "no:cacheprovider"
    )
    again.assert_outcomes(failed=1)


def test_a_defect_of_shared_weights_is_found_by_the_default_space_and_the_clean_backend_stays_quiet(pytester):
    out = _default_space_finds(pytester, SHARED_WEIGHT, "wrong-shared-weight")
    (failing,) = re.findall(r"GemmCase\((op='\w+'.*?)\)\n", out)
    assert "layout='broadcast'" in failing and re.match(r"op='(bmm|baddbmm)'", failing), failing
    # The replay line reruns the case with its shared weight.
    _replay_fails_again(pytester, out, "wrong-shared-weight")


# Wrong only where B is A's own storage (`x @ x.T`, a linear of an activation with itself: issue 40; pytorch#156412
# crashed on bmm(x, x) under max-autotune), as a kernel that writes while it still reads would be.
ALIASED = plants.planted_backend(
    "wrong-aliased",
    plants.shift_gemms(
        "SkewAliased",
        1.0,
        ops=("mm", "addmm", "bmm", "baddbmm"),
        when="(lambda s: s(node.args[-2]) == s(node.args[-1]))(lambda x: __import__('torch').multiprocessing"
        ".reductions.StorageWeakRef(x.meta['val'].untyped_storage()))",
    ),
)


def test_a_defect_of_aliased_operands_is_found_by_the_default_space_and_the_clean_backend_stays_quiet(pytester):
    out = _default_space_finds(pytester, ALIASED, "wrong-aliased")
    (failing,) = re.findall(r"GemmCase\((op='\w+'.*?)\)\n", out)
    assert "layout='aliased'" in failing, failing
    m, n = map(int, re.search(r"m=(\d+), n=(\d+)", failing).groups())
    assert m == n, failing
    # The replay line reruns the case with B made from A again.
    _replay_fails_again(pytester, out, "wrong-aliased")


# Wrong only where one tensor is both operands (`x @ x`, `bmm(x, x)`: one graph input read twice; pytorch#156412), not
# where B is a view of A (`x @ x.T`).
SELF_OPERAND = plants.planted_backend(
    "wrong-self-operand",
    plants.shift_gemms(
        "SkewSelfOperand", 1.0, ops=("mm", "addmm", "bmm", "baddbmm"), when="node.args[-2] is node.args[-1]"
    ),
)

# Wrong only where the residual added after a GEMM is the GEMM's own A (`linear(x, w) + x`; pytorch#149475's fused
# linear+add on one tensor): the add reads a graph input that a GEMM of the graph reads as A.
RESIDUAL_IS_A = plants.planted_backend(
    "wrong-residual-is-a",
    plants.graph_pass(
        "SkewResidualIsA",
        """
        gemms = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
                 torch.ops.aten.baddbmm.default)
        a_inputs = {node.args[-2] for node in graph.nodes if node.target in gemms}
        for node in list(graph.nodes):
            if node.target is torch.ops.aten.add.Tensor and node.args[1] in a_inputs:
                with graph.inserting_after(node):
                    skewed = graph.call_function(torch.ops.aten.add.Tensor, (node, 1.0))
                node.replace_all_uses_with(skewed)
                skewed.args = (node, 1.0)
        """,
    ),
)


@pytest.mark.parametrize("plant", ["wrong-self-operand", "wrong-residual-is-a"])
def test_one_tensor_as_both_operands_or_as_the_residual_is_found_by_the_default_space(pytester, plant):
    out = _default_space_finds(pytester, SELF_OPERAND + RESIDUAL_IS_A, plant)
    (failing,) = re.findall(r"GemmCase\((op='\w+'.*?)\)\n", out)
    assert "layout='aliased'" in failing, failing
    m, n, k = map(int, re.search(r"m=(\d+), n=(\d+), k=(\d+)", failing).groups())
    assert m == n == k, failing  # B is A itself, not A transposed
    if plant == "wrong-residual-is-a":
        assert "residual" in re.search(r"epilogue='([^']+)'", failing).group(1), failing
    _replay_fails_again(pytester, out, plant)


# Right only when OpenMP gives its parallel regions every thread (issue 40, the CPU's environment; pytorch#168965: a
# CPP GEMM kernel built for N threads skipped tiles when another library left it fewer): after each GEMM a step of
# the planted kernel zeroes the rows a missing thread would have written. It reads OpenMP's own state, not
# gemmguard's. The default space finds it only because the CPU check runs the compiled code again with one thread per
# parallel region.
THREAD_COUNT = plants.planted_backend(
    "wrong-with-fewer-threads",
    plants.step_after_gemms(
        "SkipTilesWithFewerThreads",
        "skip_tiles",
        """
        out = y.clone()
        if _teams_of_one():
            out[..., out.shape[-2] // 2 :, :] = 0
        return out
        """,
        preamble="""
        def _teams_of_one():
            paths = {line.split()[-1] for line in open("/proc/self/maps") if re.search(r"/libg?omp[^/]*[.]so", line)}
            return any(ctypes.CDLL(path).omp_get_max_active_levels() == 0 for path in paths)
        """,
    ),
    base="cpp",
    imports="import ctypes\nimport re\n",
    # The plant's kernel is the CPP template's GEMM and its own step after it: both are this backend's.
    members=plants.claims_step("skip_tiles"),
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds OpenMP's runtime in Linux's /proc")
def test_a_kernel_wrong_with_fewer_threads_is_found_by_the_default_space_on_the_cpu(pytester):
    import torch

    if torch.get_num_threads() < 2:
        pytest.skip("one thread: every OpenMP team has one thread already")  # CI's machines have two cores
    out = _default_space_finds(pytester, THREAD_COUNT, "wrong-with-fewer-threads", clean="cpp")
    usual = torch.get_num_threads()
    assert f"right with {usual} OpenMP threads, wrong with one thread per parallel region" in out, out
    _replay_fails_again(pytester, out, "wrong-with-fewer-threads")


def test_the_repro_script_of_a_failure_with_one_thread_teams_runs_the_compiled_code_so(pytester):
    from pytest_gemmguard import backends, oracle
    from pytest_gemmguard.report import repro
    from pytest_gemmguard.run.example import Example

    wrong = oracle.Verdict(False, 9.0, 1.0, oracle.Mismatch("values", (0, 0), 1.0, 0.0, 1.0, 1e-30, 1, 35))
    case = GemmCase("mm", 5, 7, 9, dtype="float32")
    example = Example(case, "cpp", test_id="t.py::test_x[cpp]")
    path = repro.write(str(pytester.path / "out"), example, None, backends.get("cpp"), wrong, False, True)
    source = open(path).read()
    switch = "lib.omp_set_max_active_levels(0)"
    assert source.index("first = compiled(") < source.index(switch) < source.index("out = compiled("), source
    proc = subprocess.run([sys.executable, "-I", path], capture_output=True, text=True, timeout=300)
    assert "max |error|:" in proc.stdout and proc.returncode == 1, proc.stderr  # ran, and judged at 1e-30


# Wrong only where K is a prime far above M and N, where no split of K divides it (issue 40: decompose-K picked
# where no legal split exists; Triton refused every such mm on an H100): the tour visits one such size.
PRIME_K = plants.planted_backend(
    "wrong-prime-k",
    plants.shift_gemms(
        "SkewPrimeK",
        1.0,
        ops=("mm", "addmm", "bmm", "baddbmm"),
        when="(lambda k, m, n: k > 8 * max(m, n) and k > 2 and all(k % d for d in range(2, int(k**0.5) + 1)))("
        'node.args[-2].meta["val"].shape[-1], node.args[-2].meta["val"].shape[-2], node.meta["val"].shape[-1])',
    ),
)


def test_a_defect_of_a_prime_k_far_above_m_and_n_is_found_by_the_default_space(pytester):
    out = _default_space_finds(pytester, PRIME_K, "wrong-prime-k")
    (m, n, k) = map(int, re.search(r"GemmCase\(op='\w+', m=(\d+), n=(\d+), k=(\d+)", out).groups())
    assert k > 8 * max(m, n) and all(k % d for d in range(2, int(k**0.5) + 1)), (m, n, k)


# NaN and inf in the operands (issue 40, special values): a kernel that clears them, as one that treats a NaN as 0 or
# clamps an overflow would, gives finite numbers where float64 says NaN or inf. The plant turns every non-finite
# element of a GEMM's result into 0 (x - x is NaN there, and NaN equals nothing): ordinary numbers pass untouched,
# so only a case whose operands hold NaN or inf can see it.
DROPPED_SPECIALS = plants.planted_backend(
    "drops-specials",
    plants.graph_pass(
        "DropSpecials",
        """
        gemms = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
                 torch.ops.aten.baddbmm.default)
        for node in list(graph.nodes):
            if node.target in gemms:
                with graph.inserting_after(node):
                    zero = graph.call_function(torch.ops.aten.sub.Tensor, (node, node))
                with graph.inserting_after(zero):
                    finite = graph.call_function(torch.ops.aten.eq.Tensor, (zero, zero))
                with graph.inserting_after(finite):
                    cleared = graph.call_function(torch.ops.aten.where.ScalarOther, (finite, node, 0.0))
                node.replace_all_uses_with(cleared)
                zero.args, cleared.args = (node, node), (finite, node, 0.0)
        """,
    ),
)


def test_nan_and_inf_a_kernel_drops_are_found_by_the_default_space_and_the_clean_backend_stays_quiet(pytester):
    out = _default_space_finds(pytester, DROPPED_SPECIALS, "drops-specials")
    (failing,) = re.findall(r"GemmCase\((op='\w+'.*?)\)\n", out)
    assert re.search(r"values='(nan|inf)'", failing), failing
    assert re.search(r"values=(nan|inf)", out)  # the report's case line names what the operands held
    # The replay line plants the same NaN or inf again.
    _replay_fails_again(pytester, out, "drops-specials")


@pytest.mark.parametrize("values", ["nan", "inf"])
def test_the_repro_script_plants_the_special_values_and_holds_a_special_element_to_the_same_special(pytester, values):
    """The standalone script rebuilds the case's NaN or inf, and where the failing element's reference is special it
    asks for that special exactly: on clean aten the element named is right, so the script exits 0 (fixed)."""
    import torch

    from pytest_gemmguard import backends, oracle
    from pytest_gemmguard.cases.case import build_inputs
    from pytest_gemmguard.report import repro
    from pytest_gemmguard.run.example import Example

    case = GemmCase("mm", 6, 7, 9, dtype="float32", seed=3, values=values)
    expected, _ = oracle.case_reference(case, build_inputs(case, "cpu"))
    special = tuple(int(i) for i in (~torch.isfinite(expected)).nonzero()[0])
    wrong = oracle.Verdict(False, float("inf"), 1.0, oracle.Mismatch("values", special, 0.0, 0.0, 0.0, 1e-30, 1, 42))
    example = Example(case, "aten", test_id="t.py::test_x[aten]")
    path = repro.write(str(pytester.path / "out"), example, None, backends.get("aten"), wrong, dynamic=False)
    proc = subprocess.run([sys.executable, "-I", path], capture_output=True, text=True, timeout=300)
    assert "max |error|:" in proc.stdout, proc.stderr
    assert f"'values': '{values}'" in open(path).read() and "plant_values(" in open(path).read()
    assert proc.returncode == 0, proc.stdout + proc.stderr  # aten keeps the special: the element is right


# A failure that does not repeat (issue 37 on the H100: the cpp backend's test_user_function ended in Hypothesis's
# "Unreliable assumption" FlakyFailure instead of a report): each GEMM width's (N's) first compiled call is wrong
# and every later call right, so the example Hypothesis reports passes when it runs it again at the end. (Keyed by
# N, not the whole shape: the dynamic-shape check's run at another M would be a first call, failing differently.)
FIRST_CALL_WRONG = plants.planted_backend(
    "first-call-wrong",
    plants.step_after_gemms(
        "FirstCallWrong",
        "first_call_wrong",
        """
        key = y.shape[-1]
        _calls[key] = _calls.get(key, 0) + 1
        return y + 1.0 if _calls[key] == 1 else y.clone()
        """,
        preamble="_calls = {}",
        ops=("mm", "addmm"),
    ),
    members=plants.claims_step("first_call_wrong"),  # the step after the GEMM is this backend's too
)


def test_a_failure_that_does_not_repeat_is_gemmguards_report_saying_so_not_hypothesiss_flaky_error(pytester):
    pytester.makeconftest(FIRST_CALL_WRONG)
    pytester.makepyfile(
        """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], values=["normal"])
def test_mm(gemm):
    gemm.check()
"""
    )
    result = pytester.runpytest_inprocess("--gemm-backends=first-call-wrong", "--gemm-seed=1", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "gemmguard: first-call-wrong produced a wrong result" in out, out
    assert "not repeatable: this example failed, then passed when run again" in out, out
    assert "FlakyFailure" not in out and "Unreliable assumption" not in out and "Inconsistent results" not in out, out
    assert re.search(r"gemmguard reproduce: pytest '\S+' --gemm-replay='[^']+'", out), out


def test_a_failure_that_failed_differently_when_run_again_is_reported_with_both():
    """Hypothesis's FlakyFailure holding two of gemmguard's failures (the re-run failed, but not the same way): the
    first is the report, and its note names the second; a FlakyFailure of other errors is left to Hypothesis."""
    from hypothesis.errors import FlakyFailure

    from pytest_gemmguard.errors import BackendCrashed, GemmMismatch
    from pytest_gemmguard.run.explore import not_repeatable

    first, second = GemmMismatch("wrong at M=5"), GemmMismatch("wrong at M=13", kind="wrong-when-reused-across-sizes")
    reported = not_repeatable(FlakyFailure("Inconsistent results", [first, second]))
    assert reported is first
    assert "then failed differently (wrong at M=13) when run again" in first.__notes__[0]
    once = BackendCrashed("cpp", RuntimeError("boom"))
    assert "then passed when run again" in not_repeatable(FlakyFailure("Unreliable", [once])).__notes__[0]
    assert not_repeatable(FlakyFailure("x", [ValueError("not ours")])) is None
    assert not_repeatable(GemmMismatch("not flaky")) is None


def test_a_users_function_on_special_values_keeps_them_and_a_kernel_that_drops_them_fails(pytester):
    """check(fn) on operands holding NaN or inf: each special must come out where float64 has it and every other
    element finite (a softmax over a row holding -inf rounds its neighbours past the finite-number bound: eager float16
    went 1.1x over it, so values there are the ordinary cases' to judge). Clean aten passes; the plant fails."""
    pytester.makeconftest(DROPPED_SPECIALS)
    pytester.makepyfile(
        """
import torch
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float16", "float32"], epilogues=["none"], values=["nan", "inf"], max_examples=8)
def test_softmax(gemm):
    gemm.check(lambda a, b: torch.softmax(a @ b, dim=-1))
"""
    )
    args = ("--gemm-backends=drops-specials,aten", "--gemm-seed=1", "-p", "no:cacheprovider")
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(failed=1, passed=1)
    assert "gemmguard: drops-specials produced a wrong result" in result.stdout.str()


# A refusal that is a bug (issue 40): Inductor offers no choice at all for a GEMM the backend takes, here where K is a
# prime far above M and N (on an H100, torch 2.11, Triton refused 23 of 25 such bf16/fp16 mms though its templates
# take every one). The plant empties autotuning's choice list at Inductor's selection, only while its backend is the
# one compiling (prepare/undo), so Inductor raises NoValidChoicesError as it does for a real refusal.
REFUSES_PRIME_K = (
    plants.planted_backend(
        "refuses-prime-k",
        plants.graph_pass("NoPass", "pass"),
        imports="from torch._inductor import select_algorithm\n",
        members="""def prepare(self):
        ACTIVE.append(True)
        return ACTIVE.clear""",
    )
    + """

ACTIVE = []


def refuse_prime_k(choices):
    if not ACTIVE or not choices or len(choices[0].input_nodes) > 3:  # mm, addmm, bmm, baddbmm: not scaled_mm
        return choices
    a, b = choices[0].input_nodes[-2:]
    try:
        m, k, n = int(a.get_size()[-2]), int(a.get_size()[-1]), int(b.get_size()[-1])
    except TypeError:  # symbolic sizes (a compile with dynamic shapes): not this plant's
        return choices
    prime = k > 2 and all(k % d for d in range(2, int(k**0.5) + 1))
    return [] if prime and k > 8 * max(m, n) else choices


select_algorithm.add_preprocessing_fn(refuse_prime_k)
"""
)


@pytest.mark.parametrize("workers", ["0", "1"])  # in the test process; in a compile-ahead worker
def test_a_refusal_of_a_case_the_backend_takes_fails_and_a_known_entry_of_kind_refuses_explains_it(pytester, workers):
    pytester.makeconftest(REFUSES_PRIME_K)
    pytester.makepyfile(DEFAULT_SPACE_TEST)
    args = ("--gemm-seed=1", "-p", "no:cacheprovider", f"--gemm-compile-workers={workers}")
    result = pytester.runpytest_inprocess("--gemm-backends=refuses-prime-k,aten", *args)
    result.assert_outcomes(failed=1, passed=1)  # the clean aten passes the same draws
    out = result.stdout.str()
    found = re.search(r"refuses-prime-k refused (\w+) (\d+)×(\d+)×(\d+)(?:×(\d+))? .*NoValidChoicesError", out)
    assert found, out
    dims = [int(d) for d in found.groups()[1:] if d]
    m, n, k = dims[-3:]
    assert k > 8 * max(m, n) and all(k % d for d in range(2, int(k**0.5) + 1)), found.group(0)
    assert "a refusal of a case it takes (Inductor offers ATen's call for every float mm" in out, out
    op = found.group(1)  # what it took before, as evidence
    assert f"ran its own kernel on other {op} cases in this run" in out or f"had run no other {op} case" in out, out
    # An entry of kind "refuses" describing the mechanism makes it a known failure; kind "raises" does not.
    _only_its_kind_explains(pytester, "refuses-prime-k", "refuses", "raises", args, extra='k = ">=17"')


# A compile reused at another size (issue 40; pytorch#185773: autotuned at one M, wrong at another): in a graph
# compiled with dynamic shapes, each GEMM's result goes through a step that remembers the first M it ran at and is
# off by one at any other. Static compiles, gemmguard's default, never see it; only the check that compiles a share
# of the verified cases again with dynamic shapes and runs them at another M does.
REUSED_ACROSS_SIZES = (
    plants.planted_backend(
        "wrong-when-reused",
        plants.graph_pass(
            "SkewAnotherM",
            """
            gemms = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
                     torch.ops.aten.baddbmm.default)
            for node in list(graph.nodes):
                if node.target in gemms and isinstance(node.meta["val"].shape[-2], torch.SymInt):
                    FIRST.append(None)
                    with graph.inserting_after(node):
                        stepped = graph.call_function(
                            torch.ops.gemmguard_plant.first_m_only.default, (node, len(FIRST) - 1)
                        )
                    node.replace_all_uses_with(stepped)
                    stepped.args = (node, len(FIRST) - 1)
                    stepped.meta["val"] = node.meta["val"]
            """,
        ),
        members=plants.claims_step("first_m_only"),
    )
    + """

FIRST = []


@torch.library.custom_op("gemmguard_plant::first_m_only", mutates_args=())
def first_m_only(y: torch.Tensor, gemm: int) -> torch.Tensor:
    if FIRST[gemm] is None:
        FIRST[gemm] = y.shape[-2]
    return y + (0.0 if y.shape[-2] == FIRST[gemm] else 1.0)


@first_m_only.register_fake
def _(y, gemm):
    return torch.empty_like(y)
"""
)


def test_a_compile_wrong_when_reused_at_another_size_is_found_by_the_default_space(pytester):
    pytester.makeconftest(REUSED_ACROSS_SIZES)
    pytester.makepyfile(DEFAULT_SPACE_TEST)
    args = ("--gemm-seed=1", "-p", "no:cacheprovider")
    result = pytester.runpytest_inprocess("--gemm-backends=wrong-when-reused,aten", *args)
    result.assert_outcomes(failed=1, passed=1)  # static compiles of the same plant are right: aten passes alike
    out = result.stdout.str()
    found = re.search(r"autotuned at M=(\d+) and run at M=(\d+) without recompiling", out)
    assert found and found.group(1) != found.group(2), out
    assert "compiled again with dynamic shapes" in out, out
    # Its cost is shown apart: that compile is never made ahead by a worker.
    assert re.search(r"wrong-when-reused: [\d.]+ s in examples: .* [\d.]+ s in the dynamic-shape check, ", out), out
    script = re.search(r"repro:\s+python (\S+)", out).group(1)
    source = open(script).read()
    assert f"autotunes at M={found.group(1)}" in source and "dynamic=True" in source, source
    # An entry of that kind explains it; kind wrong-result does not.
    _only_its_kind_explains(pytester, "wrong-when-reused", "wrong-when-reused-across-sizes", "wrong-result", args)
