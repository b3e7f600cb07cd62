"""Backend logic on synthetic kernels (runs anywhere): claims, template names, decompose-K policy,
CUTLASS tree assembly."""

from __future__ import annotations

import os

import pytest

from pytest_gemmguard.backends import cutedsl, cutlass, triton
from pytest_gemmguard.backends.provenance import GraphProvenance, KernelLaunch, attribute, no_own_kernel_reason

pytestmark = pytest.mark.cpu_ok

PERSISTENT_TMA = """
def triton_tem_fused_mm_0(in_ptr0, in_ptr1, out_ptr0, ws_ptr):
    BLOCK_M : tl.constexpr = 128
    NUM_SMS : tl.constexpr = 132
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pass
"""
PLAIN_MM = """
@triton_heuristics.template(num_stages=3, num_warps=8, triton_meta={}, inductor_meta={'kernel_name': 'triton_tem_fused_mm_0', 'config_args': {'EVEN_K': True, 'BLOCK_M': 128, 'BLOCK_N': 128, 'BLOCK_K': 64, 'GROUP_M': 8}})
def triton_tem_fused_mm_0(in_ptr0, in_ptr1, out_ptr0):
    pid = tl.program_id(0)
"""  # noqa: E501


def claimers():
    from pytest_gemmguard import backends

    return {name: backends.get(name).claims for name in backends.names()}


def test_triton_claims_templates_only():
    b = triton.BACKEND
    assert b.claims(KernelLaunch("triton_tem_fused_mm_0", "triton", PLAIN_MM))
    assert not b.claims(KernelLaunch("triton_poi_fused_relu_0", "triton"))
    assert not b.claims(KernelLaunch("triton_red_fused_mm_0", "triton"))
    assert not b.claims(KernelLaunch("mm", "extern"))


def test_triton_names_the_template_that_won():
    assert triton.template_of(PERSISTENT_TMA, "triton_tem_fused_mm_0") == "mm_persistent_tma"
    assert triton.template_of(PLAIN_MM, "triton_tem_fused_mm_0") == "mm"
    assert triton.template_of("", "triton_tem_fused_bmm_0") == "bmm"
    text = triton.BACKEND.describe_kernel(KernelLaunch("triton_tem_fused_addmm_relu_0", "triton", PLAIN_MM))
    assert "template mm" in text and "relu" in text and "BLOCK_M=128" in text and "num_warps=8" in text


def test_triton_enables_persistent_tma_template():
    options = triton.BACKEND.inductor_options()
    assert options["max_autotune_gemm_backends"] == "TRITON"
    assert options.get("triton.enable_persistent_tma_matmul") is True


def test_decompose_k_counts_as_triton():
    launches = (
        KernelLaunch("triton_tem_fused_bmm_0", "triton", ""),
        KernelLaunch("triton_red_fused_sum_1", "triton", ""),
    )
    graph = GraphProvenance(1, launches, attribute(launches, claimers()), "def decompose_k_mm_8_split_2(args):")
    assert triton.is_decompose_k(graph)
    assert no_own_kernel_reason([graph], "triton") is None
    # The same work rewritten without a template (multiply + sum) is not a triton GEMM.
    rewritten = (KernelLaunch("triton_red_fused_mm_0", "triton", ""),)
    graph = GraphProvenance(1, rewritten, attribute(rewritten, claimers()))
    assert no_own_kernel_reason([graph], "triton") is not None


def test_cutlass_claims_and_names_its_op():
    src = 'extern "C" int cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_void_bf16_128x128x64_1x1x1_0_tnn_align8(...)'
    launch = KernelLaunch("cutlass_0a1b", "cuda", src)
    assert cutlass.BACKEND.claims(launch)
    assert "cutlass3x_sm90_tensorop_gemm_bf16" in cutlass.BACKEND.describe_kernel(launch)
    assert not cutlass.BACKEND.claims(KernelLaunch("triton_tem_fused_mm_0", "triton"))


def test_cutlass_tree_links_the_pip_layout(tmp_path, monkeypatch):
    site = tmp_path / "site"
    for rel in cutlass._LAYOUT.values():
        (site / rel).mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(cutlass, "_site_packages", lambda: str(site))
    tree = cutlass.assemble_tree(str(tmp_path / "cache"))
    for rel, src in cutlass._LAYOUT.items():
        assert os.path.realpath(os.path.join(tree, rel)) == os.path.realpath(site / src)
    assert cutlass.assemble_tree(str(tmp_path / "cache")) == tree  # idempotent


def test_cutedsl_claims_nvgemm_and_names_the_kernel():
    src = "kernel = get_kernel_by_name('Sm80TensorOpGemmKernel_bf16_128x128')\n"
    launch = KernelLaunch("nv_universal_gemm_fused_mm_1a2b3c4d", "nv_universal_gemm", src)
    assert cutedsl.BACKEND.claims(launch)
    assert "Sm80TensorOpGemmKernel_bf16_128x128" in cutedsl.BACKEND.describe_kernel(launch)
    assert not cutedsl.BACKEND.claims(KernelLaunch("nv_universal_gemm", "extern"))


def test_aten_claims_bias_addmm():
    """Inductor's ATen choice for addmm with a broadcast bias is extern_kernels.bias_addmm (seen on the H200)."""
    from pytest_gemmguard.backends import aten

    assert aten.BACKEND.claims(KernelLaunch("bias_addmm", "extern"))


def test_k_slices_in_pointwise_kernels_are_not_triton():
    """Seen on the H200 (torch 2.11): a 16x64x4096 fp32 mm under TRITON alone ran as two launches of
    triton_poi_fused_mm_0, no template kernel: provenance must not count that as a triton GEMM."""
    poi = KernelLaunch("triton_poi_fused_mm_0", "triton", "")
    launches = (poi, poi)
    graph = GraphProvenance(1, launches, attribute(launches, claimers()))
    reason = no_own_kernel_reason([graph], "triton")
    assert reason is not None and "triton_poi_fused_mm_0" in reason


# The shape of what Inductor (torch 2.11, H200) saved while compiling a 16x64x4096 fp32 mm under TRITON
# alone: first a module compiled only to benchmark a decompose-K choice, then the graph's own module,
# whose call() runs the winning decompose-K subgraph: ATen's bmm_dtype (cuBLAS) and a Triton sum.
BENCHMARK_MODULE = """
triton_per_fused_0 = async_compile.triton('triton_per_fused_0', '''
def triton_per_fused_0(in_ptr0, out_ptr0):
    pass
''')
async_compile.wait(globals())
class Runner:
    def call(self, args):
        benchmark_decompose_k_mm_8_split_2_arg0_1, benchmark_decompose_k_mm_8_split_2_arg1_1 = args
        extern_kernels.bmm_dtype(benchmark_decompose_k_mm_8_split_2_arg0_1, out=buf0)
        triton_per_fused_0.run(buf0, buf1, 1024, 8, stream=stream0)
"""
GRAPH_MODULE = """
triton_per_fused_mm_0 = async_compile.triton('triton_per_fused_mm_0', '''
def triton_per_fused_mm_0(in_ptr0, out_ptr0):
    pass
''')
def decompose_k_mm_8_split_2(args):
    decompose_k_mm_8_split_2_arg0_1, decompose_k_mm_8_split_2_arg1_1 = args
    extern_kernels.bmm_dtype(decompose_k_mm_8_split_2_arg0_1, out=decompose_k_mm_8_split_2_buf0)
    triton_per_fused_mm_0.run(decompose_k_mm_8_split_2_buf0, decompose_k_mm_8_split_2_buf1, 1024, 8, stream=stream0)
    return (decompose_k_mm_8_split_2_buf1, )
async_compile.wait(globals())
class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        buf0 = decompose_k_mm_8_split_2([arg0_1, arg1_1])
"""


def test_decompose_k_through_aten_bmm_is_not_triton():
    from pytest_gemmguard.backends.provenance import parse_launches
    from pytest_gemmguard.compile.compiler import _graph_code

    code = _graph_code([BENCHMARK_MODULE, GRAPH_MODULE])
    assert "benchmark_" not in code
    launches = parse_launches(code)
    assert [launch.name for launch in launches] == ["bmm_dtype", "triton_per_fused_mm_0"]
    graph = GraphProvenance(1, launches, attribute(launches, claimers(), prefer="triton"))
    assert dict(graph.owners) == {"bmm_dtype": "aten"}
    assert triton.is_decompose_k(GraphProvenance(1, launches, graph.owners, code))
    reason = no_own_kernel_reason([graph], "triton")
    assert reason is not None and "bmm_dtype (aten)" in reason
