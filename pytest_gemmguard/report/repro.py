"""Standalone repro scripts: torch only, no plugin, for a failing case on one backend.

The script embeds the plugin's own input-generation code (by source), the case's function written
out as plain torch, and the Inductor options of the backend, so anyone can rerun the failure with
`python gemmguard-repro/<test>-<backend>.py` and attach the file to a bug report upstream.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import re
import textwrap
from collections.abc import Callable
from typing import Any

from .._compat import openmp  # runtime_paths' source goes into a script that needs it
from ..cases import case as cases  # the module: its source goes into the script
from ..cases.memory import chunked
from ..cases.ops import DTYPES, OPS, SCALE, STEPS, output_dtype
from ..cases.precision import describe
from ..files import write_text_atomic
from ..oracle import Float64ScaledMM


def _case_function_source(case: cases.GemmCase) -> str:
    op_spec = OPS[case.op]
    args_roles, extra_roles = cases.input_roles(case)
    lines = [f"def fn({', '.join(args_roles + extra_roles)}):"]
    lines.append(f"    y = {op_spec.expr}")
    for name in case.steps:
        if name == "cast":
            lines.append(f"    y = y.to(torch.{output_dtype(case.dtype, case.steps)})")
        else:
            lines.append(f"    y = {STEPS[name].expr}")
    lines.append("    return y")
    return "\n".join(lines)


def _user_function_source(fn: Callable[..., Any]) -> str:
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return "def fn(*args):\n    raise SystemExit('paste the function under test here')"
    name = getattr(fn, "__name__", "fn")
    if name != "<lambda>":
        return f"{src}\nfn = {name}"
    # A lambda's source is the whole line around it (`gemm.check(lambda a, b: ...)`): cut it out exactly.
    try:
        lambdas = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Lambda)]
    except SyntaxError:
        lambdas = []
    if len(lambdas) == 1:
        return f"fn = {ast.get_source_segment(src, lambdas[0])}"
    return "def fn(*args):\n    raise SystemExit('paste the function under test here')  # from: " + src.strip()


def _options_source(backend) -> tuple[str, bool]:
    """`INDUCTOR_OPTIONS = {...}` as Python source, and whether it needs gemmguard itself. Literal values are
    written as they are; an object (a graph pass) is rebuilt from the expression its backend names in
    `repro_option_sources`; one that cannot be written at all is left out, and the script says so."""
    literal, lines, needs_gemmguard = {}, [], False
    rebuilt = backend.repro_option_sources()
    for key, value in backend.inductor_options().items():
        try:
            ast.literal_eval(repr(value))
            literal[key] = value
        except (ValueError, SyntaxError):
            if key in rebuilt:
                module, expr = rebuilt[key]
                name = expr.split("(")[0].split(".")[0]  # the module-level name the expression starts from
                lines += [f"from {module} import {name}", f"INDUCTOR_OPTIONS[{key!r}] = {expr}"]
                needs_gemmguard = needs_gemmguard or module.startswith("pytest_gemmguard")
            else:
                lines.append(f"# option {key!r} left out: {type(value).__name__} cannot be written as source")
    return "\n".join([f"INDUCTOR_OPTIONS = {literal!r}", *lines]), needs_gemmguard


def _run_source(one_thread_teams: bool) -> tuple[str, str]:
    """The script's helpers and its compile-and-run lines: a plain run, or (`one_thread_teams`) a first run with
    every thread, then the judged one with each OpenMP parallel region on one thread, as the CPU check found it
    wrong (pytest_gemmguard/_compat/openmp.py)."""
    runtime = "[a for i, a in enumerate(args) if i not in weights]"
    if not one_thread_teams:
        return "", f"    out = compiled(*{runtime})"
    helpers = "\n".join(
        [
            "import ctypes",
            "import re",
            "",
            f"RUNTIME_FILE = re.compile({openmp.RUNTIME_FILE.pattern!r})",
            f"MAPS = {openmp.MAPS!r}",
            "",
            "",
            inspect.getsource(openmp.runtime_paths),
        ]
    )
    run = "\n".join(
        [
            f"    first = compiled(*{runtime})  # compiled, and run once, with every thread",
            "    # NaN where the next output may land: a tile the kernel skips reads NaN, not the first result",
            "    poison = [torch.full_like(first, float('nan')) for _ in range(4)]",
            "    del first, poison",
            "    teams = [ctypes.CDLL(path) for path in runtime_paths()]",
            "    for lib in teams:  # every OpenMP parallel region on one thread, as the run that failed had it",
            "        lib.omp_set_max_active_levels(0)",
            f"    out = compiled(*{runtime})",
            "    for lib in teams:",
            "        lib.omp_set_max_active_levels(1)",
        ]
    )
    return helpers, run


def _reference_source(case, roles: list[str], row: int) -> str:
    """The script's float64 reference and eager run: of the whole result; or, for a case judged in row chunks
    (cases/memory.py: gigabytes of float64 whole), of the failing row alone, which needs only that row of the
    row-wise inputs (cases.case.row_dims)."""
    whole = [
        "    with Float64ScaledMM():",
        "        expected = fn(*[a.to(torch.float64) for a in args])",
        "    eager = fn(*args)  # eager PyTorch on the same inputs, under the same flags: is the library off too?",
    ]
    if not chunked(case):
        return "\n".join(whole)
    dims = {r: d for r, d in cases.row_dims(case).items() if r in roles}
    return "\n".join(
        [
            f"    # A tensor spans {case.elements} elements: row {row} alone, from that row of the row-wise inputs.",
            f"    ROW, ROW_DIMS, ROLES = {row}, {dims!r}, {roles!r}",
            "    rows = [t.narrow(ROW_DIMS[r] % t.dim(), ROW, 1) if r in ROW_DIMS else t for r, t in zip(ROLES, args)]",
            "    with Float64ScaledMM():",
            "        expected = fn(*[a.to(torch.float64) for a in rows])",
            "    eager = fn(*args).narrow(-2, ROW, 1)  # eager PyTorch on the same inputs: is the library off too?",
            "    out = out.narrow(-2, ROW, 1)",
        ]
    )


def _first_run_source(case, first_case, n_inputs: int) -> tuple[str, str]:
    """For a failure of a compile reused across sizes (crosscheck/sizes.py): the inputs at the size the compile
    autotuned at, and the run on them that comes before the judged one."""
    if first_case is None:
        return "", ""
    specs = cases.operand_specs(first_case)
    inputs = f"FIRST_SPECS = {specs!r}  # the case at M={first_case.m}, where the dynamic compile autotuned"
    run = (
        f"    compiled(*[a for i, a in enumerate(inputs(FIRST_SPECS)[:{n_inputs}]) if i not in weights])"
        f"  # autotunes at M={first_case.m}; the next call reuses the compile at M={case.m}"
    )
    return inputs, run


def script(case, backend, fn, verdict, dynamic: bool, one_thread_teams: bool = False, first_case=None) -> str:
    op_spec = OPS[case.op]
    args_roles, extra_roles = cases.input_roles(case)
    roles = args_roles + extra_roles
    weights = list(op_spec.weight_positions) if backend.freezes_weights else []
    n_inputs = len(op_spec.arg_names) if fn is not None else len(roles)
    body = _user_function_source(fn) if fn is not None else _case_function_source(case)
    mismatch = verdict.mismatch
    index, tol = (mismatch.index, mismatch.tolerance) if mismatch is not None and mismatch.index else ((), float("inf"))
    row = index[-2] if len(index) >= 2 else 0
    if index and chunked(case):  # the script compares the failing row alone (_reference_source)
        index = (*index[:-2], 0, index[-1])
    options, needs_gemmguard = _options_source(backend)
    run_helpers, run = _run_source(one_thread_teams)
    first_inputs, first_run = _first_run_source(case, first_case, n_inputs)
    if first_run:
        run = f"{first_run}\n{run}"
    needs = "torch and pytest_gemmguard (the route's graph pass)" if needs_gemmguard else "torch only"
    return f"""# gemmguard repro: {case.describe()} on backend {backend.name}
# {verdict.summary()}
# Run: python {{this file}}  (needs {needs}). Exit status 1 while the bug is present.
from __future__ import annotations  # the embedded helpers keep gemmguard's type hints, unevaluated

import hashlib
import sys

import torch
import torch._inductor.config as inductor_config

DTYPES = {{{", ".join(f"{k!r}: {v}" for k, v in DTYPES.items())}}}
STORAGE_OFFSET = {cases.STORAGE_OFFSET}
SCALE = {SCALE!r}
CASE = {dataclasses.asdict(case)!r}
{options}
DEVICE = {backend.device()!r}


{inspect.getsource(cases._operand_seed)}

{inspect.getsource(cases._make)}

{inspect.getsource(cases.alias_operands)}

{inspect.getsource(cases.plant_values)}

{inspect.getsource(Float64ScaledMM)}

{run_helpers}

{body}


SPECS, ROLE_DTYPES = {cases.operand_specs(case)!r}, {cases.role_dtypes(case)!r}
{first_inputs}


def inputs(specs=SPECS):
    dtypes = ROLE_DTYPES
    made = alias_operands({roles!r}, [_make(*specs[r], dtypes[r], _operand_seed(CASE_SEED, r, specs[r][0], dtypes[r]),
                                            DEVICE) for r in {roles!r}])
    return plant_values({roles!r}, made, CASE["values"], CASE_SEED)  # NaN or inf, where the case holds them


CASE_SEED = {case.seed}
args = inputs()[:{n_inputs}]
weights = {weights!r}  # operands frozen as constants (Inductor's CPP GEMM template needs this)


class Frozen(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.ParameterList([torch.nn.Parameter(args[i], requires_grad=False) for i in weights])

    def forward(self, *runtime):
        it, ws = iter(runtime), dict(zip(weights, self.w))
        return fn(*[ws[i] if i in ws else next(it) for i in range(len(args))])


# The math the case ran in ({describe(case.dtype)}): TF32 for a "tf32" case, IEEE float32 otherwise,
# and no half-precision (split-K) reductions in cuBLAS for fp16/bf16.
torch.backends.cuda.matmul.allow_tf32 = {case.dtype == "tf32"!r}
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
# Patched globally, not passed as torch.compile(options=...): Dynamo itself reads `freezing`.
with torch.no_grad(), inductor_config.patch(INDUCTOR_OPTIONS):
    compiled = torch.compile(Frozen().eval(), dynamic={dynamic})
{run}
{_reference_source(case, roles[:n_inputs], row)}
err = (out.to(torch.float64) - expected).abs()
eager_err = (eager.to(torch.float64) - expected).abs()
index, tolerance = {index!r}, float('{tol!r}')  # inf where no element was compared
print("max |error|:", err.nan_to_num(nan=float("inf")).max().item())
print("eager PyTorch's max |error|:", eager_err.nan_to_num(nan=float("inf")).max().item())
if index:
    print("at", index, "got", out[index].item(), "expected", expected[index].item(), "tolerance", tolerance)
    print("eager PyTorch there:", eager[index].item(), "|error|", eager_err[index].item())
    want, got = expected[index].item(), out[index].item()
    if want != want or abs(want) == float("inf"):  # NaN or inf in the operands: the same special, exactly
        sys.exit(0 if got == want or (got != got and want != want) else 1)
    sys.exit(1 if not (err[index].item() <= tolerance) else 0)
"""


def write(
    directory: str, example, fn, backend, verdict, dynamic: bool, one_thread_teams: bool = False, first_case=None
) -> str | None:
    """Write the repro script atomically; returns its path (None if the directory is not writable).
    `one_thread_teams`: the run it reproduces had every OpenMP parallel region on one thread (crosscheck/threads.py);
    `first_case`: the compile (dynamic) autotuned at this case's size first, then ran at the example's
    (crosscheck/sizes.py).

    The script is compiled before it is written: a repro that is not valid Python is gemmguard's bug, and
    must fail loudly here (every test that writes one then proves the script parses), not in a user's hands."""
    # The test id already ends in [backend]; a bare case (no test) is named after the backend.
    label = example.test_id.split("::")[-1] or f"case-{backend.name}"
    # "repro_" first: a file named test_*.py would be collected by the user's next pytest run.
    name = "repro_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_")
    path = os.path.join(directory, f"{name}.py")
    text = script(example.case, backend, fn, verdict, dynamic, one_thread_teams, first_case)
    compile(text, path, "exec")
    try:
        return write_text_atomic(path, text)
    except OSError:
        return None
