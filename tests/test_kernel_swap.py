"""kernel_swap's graph pass on the CPU, through real Inductor compiles and without triton: a stand-in kernel
module (torch math) stands where pytest_gemmguard/kernels/*.py would, so CI checks which GEMMs and epilogue
chains the pass hands to a kernel and what it leaves to Inductor (tests/test_kernels.py runs the real Triton
kernel)."""

import types

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from pytest_gemmguard.backends import kernel_swap

UNARY = {"relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
         "sigmoid": torch.sigmoid, "tanh": torch.tanh}  # fmt: skip


def stand_in(refuses: str = "") -> types.SimpleNamespace:
    """A kernel module with the contract of kernels/triton_gemm.py; `refuses` names a step it cannot fuse."""

    def takes(a, b, *, bias=None, steps=(), epi_bias=None, residual=None, out_dtype=None):
        return f"no {refuses}" if refuses and refuses in steps else None

    def gemm(a, b, *, bias=None, steps=(), epi_bias=None, residual=None, scale=1.0, out_dtype=None):
        y = a.float() @ b.float()
        if bias is not None:
            y = y + bias.float()
        for step in steps:
            if step in UNARY:
                y = UNARY[step](y)
            elif step == "scale":
                y = y * scale
            elif step == "bias":
                y = y + epi_bias.float()
            elif step == "residual":
                y = y + residual.float()
        return y.to(out_dtype or a.dtype)

    return types.SimpleNamespace(takes=takes, gemm=gemm, __file__=kernel_swap.__file__)


def compiled_calls(fn, args, module, op_name):
    torch._dynamo.reset()
    swap = kernel_swap.swap_pass(op_name, "stand-in", lambda: module, f"test-{op_name}")
    options = {"post_grad_custom_post_pass": swap, "max_autotune": True, "max_autotune_gemm_backends": "ATEN"}
    out, (code,) = run_and_get_code(torch.compile(fn, options=options), *args)
    expected = fn(*[a.double() for a in args])
    assert (out.double() - expected).abs().max() < 1e-2
    calls = [ln.strip() for ln in code.splitlines() if f"torch.ops.gemmguard.{op_name}" in ln and "=" in ln]
    others = [ln for ln in code.splitlines() if "async_compile.cpp_pybinding" in ln or "extern_kernels." in ln]
    return [c for c in calls if "assert" not in c], others


def _inputs(*shapes):
    torch.manual_seed(0)
    return [torch.randn(*s, dtype=torch.float16) for s in shapes]


def test_a_gemm_and_its_whole_chain_become_one_kernel_call():
    def fn(bias, a, b, eb):
        return torch.tanh(torch.nn.functional.gelu(torch.addmm(bias, a, b) + eb) * -1.5).float()

    calls, others = compiled_calls(fn, _inputs((24,), (8, 16), (16, 24), (24,)), stand_in(), "swap_whole")
    assert len(calls) == 1 and not others, (calls, others)
    # Inductor's decomposed gelu and its upcasts are recognised: the steps arrive in order, casts included.
    steps = calls[0].split("'")[1].split("+")
    assert [s for s in steps if s != "cast"] == ["bias", "gelu", "scale", "tanh"], steps
    assert "-1.5" in calls[0] and "torch.float32" in calls[0]


def test_what_the_kernel_refuses_stays_inductors():
    def fn(a, b, r):
        return torch.tanh(torch.nn.functional.silu(torch.mm(a, b) + r))

    calls, others = compiled_calls(fn, _inputs((8, 16), (16, 24), (8, 24)), stand_in(refuses="tanh"), "swap_trim")
    assert len(calls) == 1 and "tanh" not in calls[0] and "silu" in calls[0], calls
    assert any("cpp_pybinding" in ln for ln in others), others  # tanh runs in Inductor's own kernel


def vector_bias_only() -> types.SimpleNamespace:
    """A kernel module with the CuteDSL kernel's contract for its epilogue bias: a length-N vector, nothing else
    (kernels/cute_gemm.py's takes); a residual may be any tensor that broadcasts to the output."""
    module = stand_in()
    takes_any = module.takes

    def takes(a, b, *, bias=None, steps=(), epi_bias=None, residual=None, out_dtype=None):
        if epi_bias is not None and (epi_bias.dim() != 1 or epi_bias.shape[0] != b.shape[-1]):
            return f"epi_bias must be a length-{b.shape[-1]} vector (got {tuple(epi_bias.shape)})"
        return takes_any(a, b, bias=bias, steps=steps, epi_bias=epi_bias, residual=residual, out_dtype=out_dtype)

    module.takes = takes
    return module


@pytest.mark.parametrize("first", ["residual", "column", "vector"])
def test_a_tensor_added_is_named_by_its_shape_not_its_place(first):
    """addmm + a whole-output residual, then silu (gemmguard's residual+silu+cast on addmm): the residual is the
    chain's first tensor add, and a kernel that takes only a vector as its epilogue bias must still get it as
    the residual, whole chain fused (the H200's cutedsl[kernels] left add+silu to Inductor when the pass named
    it "bias"); a vector added after it is the bias. A column (M, 1) broadcasts as a residual does."""

    def fn(bias, a, b, r, v):
        y = torch.addmm(bias, a, b)
        y = y + v if first == "vector" else y + r
        y = torch.nn.functional.silu(y)
        return (y + r if first == "vector" else y + v).float()

    args = _inputs((24,), (8, 16), (16, 24), (8, 1) if first == "column" else (8, 24), (24,))
    calls, others = compiled_calls(fn, args, vector_bias_only(), f"swap_named_{first}")
    assert len(calls) == 1 and not others, (calls, others)
    steps = [s for s in calls[0].split("'")[1].split("+") if s != "cast"]
    assert steps == (["bias", "silu", "residual"] if first == "vector" else ["residual", "silu", "bias"]), steps


@pytest.mark.parametrize("alpha", [1, 2])
def test_a_scaled_addmm_is_left_alone(alpha):
    def fn(bias, a, b):
        return torch.addmm(bias, a, b, alpha=alpha)

    calls, others = compiled_calls(fn, _inputs((24,), (8, 16), (16, 24)), stand_in(), f"swap_alpha{alpha}")
    assert (len(calls) == 1) == (alpha == 1), (calls, others)


def test_a_refused_gemm_says_why_in_the_verdict():
    """Through gemmguard's own check: the case is unsupported, and the reason names the kernel's refusal."""
    from pytest_gemmguard import backends
    from pytest_gemmguard.backends.base import Probe
    from pytest_gemmguard.backends.own_kernel import OwnKernelBackend
    from pytest_gemmguard.cases.case import GemmCase
    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import Unsupported
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    module = stand_in()
    module.takes = lambda a, b, **kw: "operands of this test never fit"

    class Refusing(OwnKernelBackend):
        name = "refusing-stand-in"
        op_name = "swap_refusing"
        pass_uuid = "test-refusing"

        def device(self):
            return "cpu"

        def probe(self):
            return Probe(True)

        def kernels(self):
            return module

    case = GemmCase(op="mm", m=8, n=16, k=32, batch=0, dtype="float32", layout="contiguous", epilogue="none", seed=1)
    options = Options()
    options.compile_workers = 0
    compiler = Compiler()
    with backends.registered(Refusing()):
        try:
            with pytest.raises(Unsupported, match="its kernel refused: operands of this test never fit"):
                Gemm(case, "refusing-stand-in", GemmSession(compiler, options)).check()
        finally:
            compiler.deactivate()


REFUSING_CONFTEST = """
import types

from pytest_gemmguard import backends
from pytest_gemmguard.backends.base import Probe
from pytest_gemmguard.backends.own_kernel import OwnKernelBackend

KERNEL = types.SimpleNamespace(takes=lambda a, b, **kw: "operands of this test never fit", gemm=None,
                               __file__=__file__)


class Refusing(OwnKernelBackend):
    name = "refusing-stand-in"
    op_name = "swap_refusing_ahead"
    pass_uuid = "test-refusing-ahead"

    def device(self):
        return "cpu"

    def probe(self):
        return Probe(True)

    def kernels(self):
        return KERNEL


backends.register(Refusing())
"""


def test_the_refusal_survives_a_compile_made_ahead_by_a_worker(pytester, plugin_args):
    """With compile-ahead the pass runs in the worker; the test process's compile is a cache hit that runs
    no pass, so the reason must come back from the worker."""
    pytester.makeconftest(REFUSING_CONFTEST)
    pytester.makepyfile(
        test_user="""
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"], shapes=[(8, 16, 32)],
           max_examples=2)
def test_mm(gemm):
    gemm.check()
"""
    )
    result = pytester.runpytest_subprocess(
        *plugin_args, "--gemm-backends=refusing-stand-in", "-p", "no:cacheprovider", "--gemm-compile-workers=1"
    )
    text = result.stdout.str()
    assert "its kernel refused: operands of this test never fit" in text, text[-3000:]
