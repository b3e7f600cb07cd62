"""Real Inductor compiles on this CPU: provenance is read from generated code, reuse is sound."""

import pytest
import torch

from pytest_gemmguard import backends
from pytest_gemmguard.cases.case import GemmCase, build_inputs, case_function
from pytest_gemmguard.cases.ops import OPS
from pytest_gemmguard.compile.compiler import Compiler, run_checked
from pytest_gemmguard.errors import Unsupported


@pytest.fixture(scope="module")
def compiler():
    c = Compiler()
    c.activate()
    yield c
    c.deactivate()


def _run(compiler, backend, case, fn=None):
    inputs = build_inputs(case, "cpu")
    weights = OPS[case.op].weight_positions
    target = fn or case_function(case.op, case.epilogue, case.dtype)
    flat = inputs.flat if fn is None else inputs.args
    return run_checked(compiler.compile(backends.get(backend), target, flat, weights), flat)


@pytest.mark.parametrize(
    ("backend", "case", "kernel"),
    [
        ("aten", GemmCase("mm", 33, 17, 65), "mm"),
        ("aten", GemmCase("bmm", 9, 10, 11, batch=3, dtype="bfloat16"), "bmm"),
        ("cpp", GemmCase("linear", 33, 17, 65, epilogue="bias+relu"), "addmm"),
        ("cpp", GemmCase("mm", 20, 24, 40, dtype="bfloat16", layout="transposed_b"), "mm"),
    ],
)
def test_provenance_names_the_backends_own_kernel(compiler, backend, case, kernel):
    _out, record = _run(compiler, backend, case)
    kernels = [k for g in record.graphs for k in g.gemm_kernels(backend)]
    assert len(kernels) == 1 and kernel in kernels[0]
    assert all(not g.foreign(backend) for g in record.graphs)


def test_cpp_template_is_recognised_by_its_micro_gemm_not_by_name(compiler):
    _out, record = _run(compiler, "cpp", GemmCase("mm", 16, 16, 32))
    (graph,) = record.graphs
    launch = next(lc for lc in graph.launches if lc.name.startswith("cpp_fused_mm"))
    assert "micro_gemm" in launch.source


def test_no_valid_choice_is_unsupported_not_an_error(compiler):
    # Inductor's CPP template has no baddbmm: restricted to CPP, Inductor has no choice at all.
    with pytest.raises(Unsupported, match="NoValidChoicesError"):
        _run(compiler, "cpp", GemmCase("baddbmm", 5, 6, 7, batch=3))


def test_a_function_without_a_gemm_is_unsupported(compiler):
    with pytest.raises(Unsupported, match="contains no GEMM"):
        _run(compiler, "aten", GemmCase("mm", 4, 4, 4), fn=lambda a, b: a + b.t())


def test_static_mode_recompiles_per_shape_and_records_each_graph(compiler):
    fn = case_function("mm", "relu", "float32")
    counts = []
    for m in (8, 9, 8):
        case = GemmCase("mm", m, 12, 16, epilogue="relu")
        inputs = build_inputs(case, "cpu").flat
        out, record = run_checked(compiler.compile(backends.get("aten"), fn, inputs), inputs)
        counts.append(record.compiled)
        assert out.shape == (m, 12) and len(record.graphs) == 1
    assert counts == [1, 1, 0]  # the third call reuses the first shape's graph, guarded by Dynamo


def test_dynamic_mode_serves_many_sizes_with_one_compile():
    c = Compiler(dynamic=True)
    c.activate()
    try:
        fn = case_function("mm", "gelu", "float32")
        compiled_counts = []
        for m in (5, 17, 33, 64):
            inputs = build_inputs(GemmCase("mm", m, 12, 16, epilogue="gelu"), "cpu").flat
            _out, record = run_checked(c.compile(backends.get("aten"), fn, inputs), inputs)
            compiled_counts.append(record.compiled)
        assert compiled_counts[0] == 1 and sum(compiled_counts[1:]) == 0
    finally:
        c.deactivate()


def test_frozen_weights_are_reused_only_when_identical(compiler):
    """Frozen constants are invisible to Dynamo's guards: a new weight must mean a new compile."""
    be, fn = backends.get("cpp"), case_function("mm", "none", "float32")
    a, w = torch.randn(8, 16), torch.randn(16, 12)
    _first, r1 = run_checked(compiler.compile(be, fn, (a, w), (1,)), (a, w))
    _same, r2 = run_checked(compiler.compile(be, fn, (a, w.clone()), (1,)), (a, w.clone()))
    w2 = torch.randn(16, 12)
    other, r3 = run_checked(compiler.compile(be, fn, (a, w2), (1,)), (a, w2))
    assert r1.compiled == 1 and r2.compiled == 0 and r3.compiled == 1
    torch.testing.assert_close(other, a @ w2)


def test_user_cache_is_never_touched(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "users-own"))
    c = Compiler()
    c.activate()
    import os

    assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(c.cache_dir)
    c.deactivate()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "users-own")
    assert not os.path.exists(c.cache_dir)  # a temp dir of our own is removed at the end


def test_ops_named_inside_strings_are_not_launches():
    from pytest_gemmguard.backends.provenance import parse_launches

    code = """def call(self, args):
        buf0 = torch.ops.mkl._mkl_linear.default(arg2_1, _frozen_param4, _frozen_param3, None, 16)
        assert_size_stride(buf0, (16, 83), (83, 1), 'torch.ops.mkl._mkl_linear')
        # extern_kernels.mm(a, b) in a comment
        extern_kernels.addmm(bias, a, b, alpha=1, beta=1, out=buf1)
"""
    assert [(lc.name, lc.kind) for lc in parse_launches(code)] == [("mkl._mkl_linear", "vendor"), ("addmm", "extern")]


@pytest.mark.parametrize("backend", ["aten", "cpp"])
def test_a_gemm_rewritten_into_a_pointwise_kernel_is_unsupported(compiler, backend):
    """Inductor turns a 1x1x1 GEMM into plain C++ arithmetic: no GEMM kernel ran, so no pass."""
    with pytest.raises(Unsupported, match=r"ran without a GEMM kernel of \w+ \(GEMM work went to: cpp_fused_mm"):
        _run(compiler, backend, GemmCase("mm", 1, 1, 1))


def test_frozen_weights_that_differ_only_in_storage_offset_are_not_shared(compiler):
    """A frozen weight is its values *and* its layout: the same values viewed 3 elements into their
    storage must get their own compile, or a verdict on one layout would be blamed on the other."""
    be, fn = backends.get("cpp"), case_function("mm", "none", "float32")
    a, w = torch.randn(8, 16), torch.randn(16, 12)
    flat = torch.zeros(w.numel() + 3)
    shifted = flat[3:].view(16, 12)
    shifted.copy_(w)
    _, r1 = run_checked(compiler.compile(be, fn, (a, w), (1,)), (a, w))
    _, r2 = run_checked(compiler.compile(be, fn, (a, shifted), (1,)), (a, shifted))
    assert r1.compiled == 1 and r2.compiled == 1


def test_every_weight_layout_can_be_keyed_for_freezing():
    """A 1x1 strided weight counts as contiguous in torch yet has stride 2: keying it once crashed."""
    from pytest_gemmguard.cases.case import LAYOUTS
    from pytest_gemmguard.compile.frozen import content_key as _content_key

    for layout in LAYOUTS:
        for n, k in ((1, 1), (1, 3), (3, 1), (4, 5)):
            m = n if layout == "aliased" else 2  # an aliased weight is the input itself: N = M
            inputs = build_inputs(GemmCase("linear", m, n, k, layout=layout), "cpu")
            assert len(_content_key([inputs.args[i] for i in OPS["linear"].weight_positions])) == 32


def test_a_frozen_weight_compile_never_serves_the_same_values_stored_otherwise(tmp_path):
    """Inductor's FX graph cache served the graph compiled for a weight with a storage offset (wrong on
    torch 2.13: a CPP template bug) to the same values stored compactly, failing a contiguous case whose
    own compile is right. With the cache on (the old setting) the second check below fails."""
    from pytest_gemmguard.errors import GemmMismatch
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    session = GemmSession(Compiler(), Options(repro_dir=str(tmp_path)))
    offset = GemmCase("mm", 10, 1, 1, dtype="bfloat16", layout="offset", seed=20261130)
    try:
        Gemm(offset, "cpp", session).check()
    except GemmMismatch:
        pass  # the torch bug itself (docs/findings.md); whether it shows is torch's business
    contiguous = GemmCase("mm", 10, 1, 1, dtype="bfloat16", layout="contiguous", seed=20261130)
    assert Gemm(contiguous, "cpp", session).check().verdict.ok


def test_inductors_own_notices_while_gemmguard_compiles_are_not_the_users_warnings(compiler):
    """Inductor says TF32 is available but off (gemmguard turns it off for a float32 case on purpose) and that
    TypedStorage is deprecated (its own autotuning's call), once each in a GPU run of the examples. A planted
    post-grad pass says both, and a third thing, while a real CPU compile runs: only the third reaches the user."""
    import warnings

    from torch._inductor.custom_graph_pass import CustomGraphPass

    from pytest_gemmguard.backends.aten import AtenBackend

    class Notices(CustomGraphPass):
        def __call__(self, graph):
            for text in (
                "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. Consider",
                "TypedStorage is deprecated. It will be removed in the future",
                "a warning of the user's own compile",
            ):
                warnings.warn(text, UserWarning, stacklevel=2)

        def uuid(self):
            return "gemmguard-test-inductor-notices"

    class Noisy(AtenBackend):
        name = "aten-inductor-notices"

        def inductor_options(self):
            return {**super().inductor_options(), "post_grad_custom_post_pass": Notices()}

    if Noisy.name not in backends.names():
        backends.register(Noisy())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _run(compiler, Noisy.name, GemmCase("mm", 24, 16, 40))
    messages = [str(w.message) for w in seen]
    assert "a warning of the user's own compile" in messages, messages
    assert not [m for m in messages if m.startswith(("TensorFloat32", "TypedStorage"))], messages
