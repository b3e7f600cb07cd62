"""Planted defects shared by the gate's tests (tests/test_github.py) and the workflow runs
(tests/test_workflows.py): conftest sources a test writes into its own temporary project."""

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
