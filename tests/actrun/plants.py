"""Planted defects shared by the gate's tests (tests/test_github.py) and the workflow runs
(tests/test_workflows.py), and a planted witness of autotuning (tests/test_kernel_cache.py too): conftest
sources a test writes into its own temporary project."""

# A compiled slowdown: every compiled GEMM runs in float64 (the same result, about 5x slower), eager untouched,
# as an Inductor regression would be.
UPCAST_GEMMS_CONFTEST = """
import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard.backends.aten import AtenBackend


class UpcastGemms(CustomGraphPass):
    def __call__(self, graph):
        convert = torch.ops.prims.convert_element_type.default
        for node in list(graph.nodes):
            if node.target is torch.ops.aten.mm.default:
                a, b = node.args
                with graph.inserting_before(node):
                    a64 = graph.call_function(convert, (a, torch.float64))
                    b64 = graph.call_function(convert, (b, torch.float64))
                    wide = graph.call_function(torch.ops.aten.mm.default, (a64, b64))
                    back = graph.call_function(convert, (wide, node.meta["val"].dtype))
                node.replace_all_uses_with(back)
                graph.erase_node(node)

    def uuid(self):
        return "gemmguard-test-upcast-gemms"


_options = AtenBackend.inductor_options
AtenBackend.inductor_options = lambda self: {**_options(self), "post_grad_custom_post_pass": UpcastGemms()}
"""

# A witness of autotuning: a second extern mm that is right but reports itself slow, so autotuning runs (ATen
# alone offers one choice on the CPU) and the real mm wins. Each time autotuning benchmarks it, one line goes to
# $GG_AUTOTUNE_LOG (else autotuned.txt beside the conftest): the process's kernel cache and its pid.
AUTOTUNE_LOG_CONFTEST = """
import os

import torch
from torch._inductor import select_algorithm

LOG = os.environ.get("GG_AUTOTUNE_LOG") or os.path.join(os.path.dirname(__file__), "autotuned.txt")


def slow_mm(a, b, out):
    torch.mm(a, b, out=out)


CHOICE = select_algorithm.ExternKernelChoice(slow_mm, name="gemmguard_test_autotune_log_mm")


def plant(choices):
    nodes = choices[0].input_nodes if choices else ()
    if len(nodes) != 2 or not all(len(n.get_size()) == 2 for n in nodes):
        return choices
    caller = CHOICE.bind(nodes, choices[0].layout)
    measured = caller.benchmark

    def benchmark(*args, out):
        with open(LOG, "a") as fh:
            fh.write(f"{os.environ.get('GEMMGUARD_KERNEL_CACHE')} {os.getpid()}\\n")
        return measured(*args, out=out) + 1000.0

    caller.benchmark = benchmark
    return [*choices, caller]


select_algorithm.add_preprocessing_fn(plant)
"""

# A real Inductor post-grad pass on the real ATen backend, planted as a root conftest.py
# (a pull request's, a user's project): every GEMM's result is off by one. A gate must fail on it.
WRONG_ATEN = '''"""Planted by gemmguard's tests: every compiled GEMM of the aten backend is off by one."""

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard.backends.aten import AtenBackend


class OffByOne(CustomGraphPass):
    def __call__(self, graph):
        gemms = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)
        for node in list(graph.nodes):
            if node.target in gemms:
                with graph.inserting_after(node):
                    off = graph.call_function(torch.ops.aten.add.Tensor, (node, 1.0))
                node.replace_all_uses_with(off)
                off.args = (node, 1.0)

    def uuid(self):
        return "gemmguard-test-off-by-one"


_options = AtenBackend.inductor_options
AtenBackend.inductor_options = lambda self: {**_options(self), "post_grad_custom_post_pass": OffByOne()}
'''
