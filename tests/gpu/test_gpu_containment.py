"""Crash containment on a real GPU: a case whose kernel makes an illegal memory access poisons the CUDA
context of the process that runs it. With compile-ahead a worker runs every case first, so that case fails
with the reason and the session goes on; without workers the same plant leaves the session's context
unusable, so the next test cannot pass (which shows the plant is real).

The plant: a Triton backend whose post-grad graph pass adds, after every mm with M == 7, a custom op whose
Triton kernel stores through the pointer 16.
"""

from __future__ import annotations

import pytest

PLANT = """
import torch
import triton
import triton.language as tl
from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard import backends
from pytest_gemmguard.backends.triton import TritonBackend


@triton.jit
def _wild_store(x_ptr, addr):
    # A store through a pointer made from a small integer: the page at address 16 is never mapped on the
    # device. (A first plant stored 4 TiB past its tensor; on the H200 it did not fault.)
    tl.store(addr.to(tl.int64).to(tl.pointer_type(tl.float32), bitcast=True), tl.load(x_ptr))


@torch.library.custom_op("gemmguard_test::wild", mutates_args=())
def wild(x: torch.Tensor) -> torch.Tensor:
    _wild_store[(1,)](x, 16)
    return x.clone()


@wild.register_fake
def _(x):
    return torch.empty_like(x)


class WildAfterM7(CustomGraphPass):
    def __call__(self, graph):
        for node in list(graph.nodes):
            if node.target is torch.ops.aten.mm.default and node.meta["val"].shape[0] == 7:
                with graph.inserting_after(node):
                    wild_node = graph.call_function(torch.ops.gemmguard_test.wild.default, (node,))
                node.replace_all_uses_with(wild_node)
                wild_node.args = (node,)

    def uuid(self):
        return "gemmguard-test-wild-after-m7"


class IllegalAccess(TritonBackend):
    name = "ima-m7"

    def inductor_options(self):
        return {**super().inductor_options(), "post_grad_custom_post_pass": WildAfterM7()}


backends.register(IllegalAccess())
"""

TWO_TESTS = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"],
           shapes=[(5, 64, 64), (7, 64, 64)])
def test_meets_m7(gemm):
    gemm.check()

@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"],
           shapes=[(5, 64, 64), (9, 64, 64)])
def test_never_m7(gemm):
    gemm.check()
"""


def test_an_illegal_memory_access_fails_its_case_and_the_session_goes_on(pytester, plugin_args):
    pytester.makeconftest(PLANT)
    pytester.makepyfile(TWO_TESTS)
    args = (*plugin_args, "--gemm-backends=ima-m7", "-p", "no:cacheprovider")
    pooled = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=1")
    out = pooled.stdout.str()
    outcomes = pooled.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("failed")) == (1, 1), out[-6000:]
    assert "ima-m7 broke the process that compiled and ran the case ahead" in out, out
    assert "illegal memory access" in out and "the test process did not run it" in out
    # The plant is real: run in the session's own process, it leaves the CUDA context unusable.
    alone = pytester.runpytest_subprocess(*args, "--gemm-compile-workers=0")
    assert alone.parseoutcomes().get("passed", 0) == 0, alone.stdout.str()


@pytest.fixture(autouse=True)
def _needs_triton():
    from pytest_gemmguard import backends

    probe = backends.probe("triton")
    if not probe.available:
        pytest.skip(f"triton {probe.line()}")
