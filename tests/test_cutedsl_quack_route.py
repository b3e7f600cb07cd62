"""The cutedsl[quack] route's wiring, proven on the CPU with real Inductor compiles.

The route's graph pass swaps GEMM nodes for gemmguard's custom op; here the op runs a planted wrong
kernel (quack itself needs an SM90 GPU: tests/gpu runs the real one), so these tests show that what
the route runs is what gets judged, that GEMMs it cannot take end as unsupported, and that a backend's
per-case fallback to the route is judged and named as the route.
"""

import pytest
import torch

from pytest_gemmguard import backends
from pytest_gemmguard.backends import cutedsl_quack
from pytest_gemmguard.backends.base import Probe
from pytest_gemmguard.backends.cpp import CppBackend
from pytest_gemmguard.cases.case import GemmCase
from pytest_gemmguard.compile.compiler import Compiler
from pytest_gemmguard.errors import GemmMismatch, Unsupported
from pytest_gemmguard.run.gemm import Gemm
from pytest_gemmguard.run.session import GemmSession, Options

ROUTE = "cpu-quack-route"
PRIMARY = "cpu-cpp-then-quack"


class CpuRoute(cutedsl_quack.CuteDslQuackBackend):
    name = ROUTE

    def device(self) -> str:
        return "cpu"

    def probe(self) -> Probe:
        return Probe(True)


class CppThenRoute(CppBackend):
    name = PRIMARY
    fallback = ROUTE


for backend in (CpuRoute(), CppThenRoute()):
    if backend.name not in backends.names():
        backends.register(backend)


def _five_percent_high(a, b, bias):
    """The planted defect: every output 5% too large."""
    y = a.float() @ b.float() * 1.05
    return (y if bias is None else y + bias.float()).to(a.dtype)


@pytest.fixture
def session(tmp_path):
    cutedsl_quack.set_kernel(_five_percent_high)
    yield GemmSession(Compiler(), Options(repro_dir=str(tmp_path)))
    cutedsl_quack.set_kernel(None)


@pytest.mark.parametrize(
    "case",
    [
        GemmCase("mm", 16, 32, 64, dtype="bfloat16"),
        GemmCase("addmm", 16, 24, 64, dtype="float16", epilogue="relu"),
        GemmCase("linear", 8, 16, 32, dtype="bfloat16", layout="transposed_a"),
        GemmCase("bmm", 8, 16, 32, 2, dtype="bfloat16"),
    ],
    ids=lambda c: c.describe(),
)
def test_the_swapped_in_kernel_is_what_gets_judged(session, case):
    with pytest.raises(GemmMismatch) as info:
        Gemm(case, ROUTE, session).check()
    assert "cutedsl_quack_gemm (cpu-quack-route)" in str(info.value)


@pytest.mark.parametrize(
    "case, why",
    [
        (GemmCase("mm", 16, 33, 64, dtype="bfloat16"), "N not a multiple of 8"),
        (GemmCase("mm", 16, 32, 64, dtype="float32"), "float32"),
        (GemmCase("mm", 16, 32, 64, dtype="bfloat16", layout="offset"), "not 16-byte aligned"),
        (GemmCase("mm", 16, 32, 64, dtype="bfloat16", layout="noncontiguous"), "no unit stride"),
        (GemmCase("baddbmm", 8, 16, 32, 2, dtype="bfloat16"), "baddbmm"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_gemms_the_route_cannot_take_are_unsupported(session, case, why):
    compiles = session.compiler.stats["compiles"]
    with pytest.raises(Unsupported) as info:
        Gemm(case, ROUTE, session).check()
    reason = info.value.reason
    if case.dtype == "float32":  # refused from the case alone (Backend.refuses): no compile paid for it
        assert "quack takes float16/bfloat16 GEMMs only" in reason and "float32" in reason, reason
        assert session.compiler.stats["compiles"] == compiles
        return
    # Refused by the graph pass (the GEMM fell to ATen) or, for what FakeTensors do not show (a graph
    # input's storage offset), by the custom op's own check of the real operands.
    assert "another backend's GEMM kernel" in reason or "quack cannot take it" in reason, reason


@pytest.mark.parametrize("dtype", ["float32", "tf32", "float16", "bfloat16"])
def test_the_refusal_without_a_compile_agrees_with_the_compile(session, dtype):
    """Backend.refuses must never turn a case the route would run into "unsupported": compiled through the
    route with the refusal switched off, each dtype it refuses runs no quack kernel, and the others do."""

    class Compiling(CpuRoute):
        name = "cpu-quack-route-compiling"

        def refuses(self, case):
            return None

    if Compiling.name not in backends.names():
        backends.register(Compiling())
    case = GemmCase("mm", 16, 32, 64, dtype=dtype)
    refused = backends.get(ROUTE).refuses(case)
    try:
        Gemm(case, Compiling.name, session).check()
        ran = True
    except Unsupported:
        ran = False
    except GemmMismatch:  # the plant is 5% high: its kernel ran
        ran = True
    assert ran == (refused is None), (dtype, refused)


def test_a_backend_falls_back_to_the_route_case_by_case_and_names_it(session):
    # CPP has no kernel for a bmm with both operands transposed; the fallback route runs it.
    case = GemmCase("bmm", 8, 16, 32, 2, dtype="bfloat16", layout="transposed_ab")
    with pytest.raises(GemmMismatch) as info:
        Gemm(case, PRIMARY, session).check()
    assert f"{PRIMARY} (route {ROUTE}) produced a wrong result" in str(info.value)
    # Where neither route has a kernel, the reason names both.
    with pytest.raises(Unsupported) as info:
        Gemm(GemmCase("bmm", 8, 17, 32, 2, dtype="bfloat16", layout="transposed_ab"), PRIMARY, session).check()
    assert f"; {ROUTE}: " in info.value.reason
    assert session.tally.of(PRIMARY).unsupported == 1


def test_the_custom_op_traces_with_fake_tensors():
    cutedsl_quack._define_op()
    op = torch.ops.gemmguard.cutedsl_quack_gemm
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = op(torch.empty(3, 4, 8, dtype=torch.bfloat16), torch.empty(3, 8, 16, dtype=torch.bfloat16), None)
    assert out.shape == (3, 4, 16) and out.dtype == torch.bfloat16


def test_the_route_without_its_pass_is_unsupported(session):
    """The route's own plant of a foreign kernel: without the swap pass ATen runs the GEMM."""

    class NoPass(CpuRoute):
        name = "cpu-quack-route-without-pass"

        def inductor_options(self):
            return {**super().inductor_options(), "post_grad_custom_post_pass": None}

    if NoPass.name not in backends.names():
        backends.register(NoPass())
    with pytest.raises(Unsupported, match="another backend's GEMM kernel: mm"):
        Gemm(GemmCase("mm", 16, 32, 64, dtype="bfloat16"), NoPass.name, session).check()


def test_cutedsl_without_nvgemm_is_the_quack_route_alone():
    """On a machine with quack but no NVGEMM provider, cutedsl resolves to the quack route: it compiles
    with the route's pass, claims the route's kernel, and has no fallback left to try."""
    from pytest_gemmguard.backends.cutedsl import CuteDslBackend
    from pytest_gemmguard.backends.provenance import KernelLaunch

    resolved = CuteDslBackend()
    assert resolved.fallback == "cutedsl[quack]"
    resolved.route = "quack"
    assert resolved.fallback is None
    assert resolved.inductor_options()["post_grad_custom_post_pass"].uuid() == "gemmguard-cutedsl-quack-swap-v1"
    assert resolved.claims(KernelLaunch("cutedsl_quack_gemm", "custom"))
    assert not CuteDslBackend().claims(KernelLaunch("cutedsl_quack_gemm", "custom"))  # NVGEMM's never is


def test_the_pass_takes_only_what_quack_can_read():
    a = torch.empty(16, 64, dtype=torch.bfloat16)
    b = torch.empty(64, 32, dtype=torch.bfloat16)
    out = torch.empty(16, 32, dtype=torch.bfloat16)
    assert cutedsl_quack.takes(a, b, torch.empty(32, dtype=torch.bfloat16), out)
    assert not cutedsl_quack.takes(a, b, torch.empty(1, dtype=torch.bfloat16), out)  # broadcast bias
    assert not cutedsl_quack.takes(a, b, None, out.float())  # output dtype differs
    assert not cutedsl_quack.takes(a.float(), b.float(), None, out.float())  # float32


def test_cutlass_renaming_notices_raised_inside_quack_are_not_the_users_warnings(tmp_path):
    """quack uses names cutlass-dsl has renamed, and each use warns (17 DeprecationWarnings in a GPU run of the
    examples). Raised while gemmguard runs quack, they are silenced; any other warning still reaches the user."""
    import warnings

    def right_but_noisy(a, b, bias):
        for text in (
            "cutlass.utils.LayoutEnum is deprecated; use cutlass.tensor_utils.LayoutEnum instead.",
            "cutlass.utils.smem_allocator.SmemPartition is deprecated; use cutlass.memory.SmemPartition",
        ):
            warnings.warn(text, DeprecationWarning, stacklevel=2)
        warnings.warn("a warning quack's caller should see", UserWarning, stacklevel=2)
        y = a.float() @ b.float()
        return (y if bias is None else y + bias.float()).to(a.dtype)

    session = GemmSession(Compiler(), Options(repro_dir=str(tmp_path)))
    cutedsl_quack.set_kernel(right_but_noisy)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            Gemm(GemmCase("mm", 16, 32, 64, dtype="bfloat16"), ROUTE, session).check()
    finally:
        cutedsl_quack.set_kernel(None)
    messages = [str(w.message) for w in seen]
    assert "a warning quack's caller should see" in messages, messages
    assert not [m for m in messages if m.startswith("cutlass.utils.")], messages
