"""Planted defects shared by the tests: conftest sources a test writes into its own temporary project.

Most plants are one real Inductor post-grad pass on the real ATen backend, either as a backend of its own
(planted_backend: a name to run beside the real ones) or in the aten backend itself (patched_aten: a pull
request's or a user's conftest, which the run's own aten obeys); graph_pass and shift_gemms write the pass.
UPCAST_GEMMS_CONFTEST and WRONG_ATEN serve the gate's tests (tests/test_github.py) and the workflow runs
(tests/test_workflows.py) among others; AUTOTUNE_LOG_CONFTEST tests/test_kernel_cache.py too. step_after_gemms
puts a Python step after each GEMM, for defects that depend on how the compiled code runs rather than on the case."""

import hashlib
import re
import textwrap
from typing import NamedTuple

# A plant's conftest lands in a project whose CI lints it (ruff): every import is used, in ruff's order.
_IMPORTS = """
import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard.backends.aten import AtenBackend
"""
_REGISTRY_IMPORTS = _IMPORTS.replace(
    "from pytest_gemmguard.backends.aten", "from pytest_gemmguard import backends\nfrom pytest_gemmguard.backends.aten"
)


_STAMP = "<conftest hash>"


class GraphPass(NamedTuple):
    """A post-grad pass as conftest source: its class `name` and the class's definition."""

    name: str
    source: str


def graph_pass(name: str, body: str) -> GraphPass:
    """The pass class `name` whose `__call__(self, graph)` runs `body` (source, indented as it likes). Its uuid,
    Inductor's cache key for the pass, is stamped by planted_backend or patched_aten with a hash of the whole
    conftest: two plants built apart (another body, backend name or class member) never share a cached compile;
    a source edited after building keeps its stamp."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    slug = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()
    source = f"class {name}(CustomGraphPass):\n    def __call__(self, graph):\n{body}\n\n"
    return GraphPass(name, f'{source}    def uuid(self):\n        return "gemmguard-test-{slug}-{_STAMP}"\n')


def _stamped(conftest: str) -> str:
    return conftest.replace(_STAMP, hashlib.sha256(conftest.encode()).hexdigest()[:12])


def shift_gemms(name: str, by: float, ops: tuple[str, ...] = ("mm", "addmm", "bmm"), when: str = "True") -> GraphPass:
    """The pass `name` that adds `by` to the result of every GEMM of `ops` (aten op names) for which `when` holds
    (an expression of the GEMM's graph node, `node`): a wrong result in the compiled GEMM only, eager untouched."""
    gemms = "".join(f"torch.ops.aten.{op}.default, " for op in ops).rstrip(" ")
    return graph_pass(
        name,
        f"""
        gemms = ({gemms})
        for node in list(graph.nodes):
            if node.target in gemms and ({when}):
                with graph.inserting_after(node):
                    shifted = graph.call_function(torch.ops.aten.add.Tensor, (node, {by!r}))
                node.replace_all_uses_with(shifted)
                shifted.args = (node, {by!r})
        """,
    )


def step_after_gemms(
    name: str, step: str, body: str, *, preamble: str = "", ops: tuple[str, ...] = ("mm", "addmm", "bmm", "baddbmm")
) -> GraphPass:
    """The pass `name` that follows every GEMM of `ops` (aten op names) with the custom op `gemmguard_plant::<step>`:
    Python the compiled code calls each time it runs, so it can read the run's state (OpenMP's, a call count).
    `body` is the op's source, a function of the GEMM's result `y` returning the result to use (never `y` itself:
    a custom op returns a new tensor); `preamble` is source it needs (imports come through planted_backend). The
    backend must claim the step's launch as its own (`claims_step`)."""
    # The op first and what it needs after it (read when the op runs): a conftest's imports then end as ruff wants.
    op = f"""@torch.library.custom_op("gemmguard_plant::{step}", mutates_args=())
def {step}(y: torch.Tensor) -> torch.Tensor:
{textwrap.indent(textwrap.dedent(body).strip(), "    ")}


@{step}.register_fake
def _(y):
    return torch.empty_like(y)


{textwrap.dedent(preamble).strip()}
"""
    plant = graph_pass(
        name,
        f"""
        gemms = tuple(getattr(torch.ops.aten, op).default for op in {ops!r})
        for node in list(graph.nodes):
            if node.target in gemms:
                with graph.inserting_after(node):
                    stepped = graph.call_function(torch.ops.gemmguard_plant.{step}.default, (node,))
                node.replace_all_uses_with(stepped)
                stepped.args = (node,)
                stepped.meta["val"] = node.meta["val"]
        """,
    )
    return GraphPass(plant.name, op + "\n\n" + plant.source)


def claims_step(step: str) -> str:
    """The backend member (planted_backend's `members`) that counts a step_after_gemms launch as the backend's own
    kernel: the planted kernel is the GEMM and the step after it."""
    return f"def claims(self, launch):\n        return super().claims(launch) or {step!r} in launch.name"


def planted_backend(
    name: str, plant: GraphPass, *, imports: str = "", members: str = "", once: bool = False, base: str = "aten"
) -> str:
    """The source of a conftest.py that registers the backend `name`: ATen (or `base="cpp"`: Inductor's CPP
    template), with `plant` run on every compile's post-grad graph. `imports`: more import lines; `members`: more
    lines of the backend's class; `once`: register only while no backend has that name (the same conftest imported
    again in one process)."""
    cls = "".join(part.title() for part in name.split("-")) + "Backend"  # never the pass's own name
    members = f"\n    {members}" if members else ""
    register = f"backends.register({cls}())"
    if once:
        register = f'if "{name}" not in backends.names():\n    {register}'
    parent, registry_imports = "AtenBackend", _REGISTRY_IMPORTS
    if base == "cpp":
        parent = "CppBackend"
        registry_imports = _REGISTRY_IMPORTS.replace("aten import AtenBackend", "cpp import CppBackend")
    return _stamped(f"""{imports}{registry_imports}

{plant.source}

class {cls}({parent}):
    name = "{name}"{members}

    def inductor_options(self):
        return {{**super().inductor_options(), "post_grad_custom_post_pass": {plant.name}()}}


{register}
""")


def patched_aten(plant: GraphPass, doc: str = "") -> str:
    """The source of a conftest.py that puts `plant` in the real aten backend itself, as a pull request's or a
    user's conftest could: no new backend, the run's own aten goes wrong (`doc`: the module's docstring)."""
    docstring = f'"""{doc}"""\n' if doc else ""
    return _stamped(f"""{docstring}{_IMPORTS}

{plant.source}

_options = AtenBackend.inductor_options
AtenBackend.inductor_options = lambda self: {{**_options(self), "post_grad_custom_post_pass": {plant.name}()}}
""")


# A compiled slowdown: every compiled GEMM runs in float64 (the same result, about 5x slower), eager untouched,
# as an Inductor regression would be.
UPCAST_GEMMS_CONFTEST = patched_aten(
    graph_pass(
        "UpcastGemms",
        """
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
        """,
    )
)

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
WRONG_ATEN = patched_aten(
    shift_gemms("OffByOne", 1.0), "Planted by gemmguard's tests: every compiled GEMM of the aten backend is off by one."
)
