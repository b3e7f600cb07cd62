"""The shape of the package, checked so it stays the shape README and the module docstrings describe:
plugins that load without torch and never import each other, one exception root, modules small enough to
read, and an adapter per third-party internal that fails loudly when the internal moves."""

import ast
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

PACKAGE = pathlib.Path(__file__).parent.parent / "pytest_gemmguard"
MAX_LINES = 400


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: pathlib.Path, root: pathlib.Path = PACKAGE) -> set[str]:
    """Every module a file imports, at any depth (a function's own, a type checker's), resolved against the
    package."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
    if path.name == "__init__.py":  # a package's own relative imports start from the package itself
        package = ".".join(path.relative_to(root.parent).parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base]) if base else ".".join(parts)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return found


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(root: pathlib.Path = PACKAGE) -> list[list[str]]:
    """The cycles among a package's modules: each a list of modules that import one another, directly or round a
    loop, by any import (at a module's top, inside a function, or for a type checker alone: a module that names
    another's type depends on it as much as one that calls it). An import of `a.b.c` counts as one of the module
    `a.b.c` (a package's own `__init__` where that is all it names)."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py") if "__pycache__" not in p.parts}

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        while parts and ".".join(parts) not in paths:
            parts.pop()
        return ".".join(parts) or None

    graph = {m: {r for n in _imports(p, root) if (r := resolve(n)) and r != m} for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle_among_gemmguard_modules():
    """Each concept's folder imports only what sits below it, so a module can be read (and moved) without the one
    that imports it: a cycle means two modules that are one concept, or one that reaches up."""
    assert import_cycles() == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in import_cycles())


def test_a_planted_import_cycle_is_found(tmp_path):
    """The check above can fail: a copy of the package where errors.py, at the bottom, imports the plugin."""
    copy = tmp_path / "pytest_gemmguard"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    errors = copy / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _late():\n    from . import plugin  # noqa: F401\n")
    (cycle,) = [c for c in import_cycles(copy) if "pytest_gemmguard.errors" in c]
    assert {"pytest_gemmguard.errors", "pytest_gemmguard.plugin"} <= set(cycle)
    # For a type checker alone, the same.
    errors.write_text(errors.read_text().replace("def _late():\n", "if TYPE_CHECKING:\n"))
    (cycle,) = [c for c in import_cycles(copy) if "pytest_gemmguard.errors" in c]
    assert {"pytest_gemmguard.errors", "pytest_gemmguard.plugin"} <= set(cycle)


def test_the_public_names_keep_their_paths():
    """Moving a module inside the package moves no name a user reaches (README, the docs, the release workflow),
    in a fresh interpreter, where each loads on first use."""
    code = textwrap.dedent(
        """
        import pytest_gemmguard as g
        from pytest_gemmguard import Gemm, GemmCase, GemmguardError, GemmUsageError, Unsupported, gemm_case
        from pytest_gemmguard import backends, candidates, harvest_gemms, kernel_swap, oracle, repro, strategies
        from pytest_gemmguard.cases import GemmCase as Case
        from pytest_gemmguard.strategies import gemm_cases

        assert Case is GemmCase and g.strategies.gemm_cases is gemm_cases is strategies.gemm_cases
        assert callable(Gemm.check) and issubclass(GemmUsageError, GemmguardError)
        assert issubclass(Unsupported, GemmguardError)
        assert gemm_case and harvest_gemms and backends.register and candidates.watch and kernel_swap.kernel_path
        assert oracle.judge and repro.write
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_loading_both_plugins_imports_no_torch():
    code = "import pytest_gemmguard.plugin, pytest_gemmguard.bench.plugin, sys; print(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    heavy = [m for m in ("torch", "triton", "cutlass", "quack", "numpy", "hypothesis") if f"'{m}'" in out]
    assert not heavy, f"plugin load imported {heavy}"


def test_a_pytest_run_without_gemm_tests_never_imports_torch(pytester):
    """A project that has gemmguard installed but no GEMM test: the whole run, configure to unconfigure."""
    pytester.makeconftest(
        textwrap.dedent(
            """
            import sys

            def pytest_unconfigure(config):
                open("modules.txt", "w").write("\\n".join(sorted(sys.modules)))
            """
        )
    )
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess()  # both plugins load through their entry points
    result.assert_outcomes(passed=1)
    modules = (pytester.path / "modules.txt").read_text().split()
    assert "pytest_gemmguard.plugin" in modules and "pytest_gemmguard.bench.plugin" in modules
    assert "torch" not in modules


def test_a_cpu_run_prints_no_warning_gemmguard_caused(pytester, monkeypatch, plugin_args):
    """Issue 41: every CPU run printed 14 DeprecationWarnings, raised by torch's own torch.utils.mkldnn when
    gemmguard first imported Inductor's compile path (silenced there: no user can act on them), and with a
    compile-ahead worker a ResourceWarning for its pipe, which gemmguard never closed (now closed). A fresh
    interpreter, as a user's run is, with every warning shown: the run's summary and its stderr hold none."""
    pytester.makepyfile(
        "from pytest_gemmguard import gemm_case\n\n"
        "@gemm_case(ops=['mm'], dtypes=['float32'], shapes=[(8, 8, 8)], max_examples=1)\n"
        "def test_mm(gemm):\n    gemm.check()\n"
    )
    monkeypatch.setenv("PYTHONWARNINGS", "default")  # the interpreter's too: what is printed after pytest ends
    result = pytester.runpytest_subprocess(
        *plugin_args, "--gemm-backends=aten,cpp", "--gemm-compile-workers=1", "-W", "default", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2)  # no "warnings" in the outcome line
    shown = [line for line in (*result.outlines, *result.errlines) if "Warning" in line]
    assert not shown, shown


def test_deprecations_from_cutlass_api_are_silenced_inside_a_compile(monkeypatch):
    """cutlass_api (which Inductor's NVGEMM imports) warned 134,675 times in one GPU run about cutlass-dsl names it
    still uses; inside gemmguard's compile that is silenced, and only for its modules."""
    import types
    import warnings

    from pytest_gemmguard._compat import inductor

    def module(name):
        mod = types.ModuleType(name)
        exec("import warnings\ndef f():\n    warnings.warn('x is deprecated', DeprecationWarning)", mod.__dict__)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    theirs, users = module("cutlass_api.providers.gemm"), module("my_project.kernels")
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        with inductor.quiet_compile():
            theirs.f()
            users.f()
        theirs.f()
    assert [w.filename for w in heard].count("<string>") == 2 and len(heard) == 2, heard


def test_deprecations_from_cutlass_api_are_silenced_in_a_gemmguard_session_outside_a_compile_too(pytester):
    """NVGEMM's kernel list is built by a warm-up thread, outside any compile (compiler.warm): 134,596 of cutlass_api's
    DeprecationWarnings still reached one H100 run's summary. The session silences them wherever they are raised; a
    DeprecationWarning of the user's own module still shows."""
    (pytester.path / "cutlass_api").mkdir()
    (pytester.path / "cutlass_api" / "__init__.py").write_text(
        "import warnings\n\ndef enumerate_kernels():\n    warnings.warn('old name is deprecated', DeprecationWarning)\n"
    )
    pytester.makepyfile(
        "import threading\nimport warnings\n\nimport cutlass_api\n\n"
        "def test_a_thread_lists_kernels():\n"
        "    worker = threading.Thread(target=cutlass_api.enumerate_kernels)\n    worker.start()\n    worker.join()\n"
        "    cutlass_api.enumerate_kernels()\n\n"
        "def test_mine():\n    warnings.warn('my own name is deprecated', DeprecationWarning)\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # pytest shows DeprecationWarnings by default
    result.assert_outcomes(passed=2, warnings=1)
    out = result.stdout.str()
    assert "my own name is deprecated" in out and "old name is deprecated" not in out, out


def test_neither_plugin_imports_the_other():
    core, bench = PACKAGE / "plugin.py", PACKAGE / "bench" / "plugin.py"
    assert not any(m.startswith("pytest_gemmguard.bench") for m in _imports(core))
    assert "pytest_gemmguard.plugin" not in _imports(bench)


TESTS = pathlib.Path(__file__).parent


def files_importing_test_modules(root: pathlib.Path) -> dict[str, list[str]]:
    """Each file under `root` that imports a test module (`test_*`), with what it imports."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        named = sorted(m for m in _imports(path, root) if m.split(".")[-1].startswith("test_"))
        if named:
            found[str(path.relative_to(root))] = named
    return found


def test_no_test_module_imports_another(tmp_path):
    """What tests share lives in helper modules (tests/actrun, tests/gpu/gpu_selection.py). A test module importing
    another ties one file's collection to the other's private names: a helper moved out of test_user_project
    left test_release unable to import, and CI failed collecting it. The check can fail: a planted file does."""
    assert files_importing_test_modules(TESTS) == {}
    (tmp_path / "test_a.py").write_text("from test_b import helper\n")
    (tmp_path / "test_b.py").write_text("def helper():\n    pass\n")
    assert files_importing_test_modules(tmp_path) == {"test_a.py": ["test_b"]}


def test_no_module_is_a_god_module():
    # gemmguard's own GEMMs (kernels/) are each one GPU kernel with its launcher, kept whole as a user's kernel
    # would be: the limit is for gemmguard's own logic.
    logic = [p for p in _modules() if p.parent != PACKAGE / "kernels"]
    long = {str(p.relative_to(PACKAGE)): n for p in logic if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_every_exception_class_lives_in_errors_under_one_root():
    from pytest_gemmguard import errors

    defined = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")) or b.id in ("Unsupported",))
                for b in node.bases
            ):
                defined[node.name] = path.name
    assert {name for name, where in defined.items() if where != "errors.py"} == set(), defined
    for name in defined:
        assert issubclass(getattr(errors, name), errors.GemmguardError), name


@pytest.mark.parametrize("library", ["inductor", "hypothesis", "pytest_benchmark", "pytest", "openmp"])
def test_each_adapter_accepts_the_installed_library(library):
    import importlib

    importlib.import_module(f"pytest_gemmguard._compat.{library}").check()


def test_an_adapter_fails_loudly_naming_the_version_when_an_internal_moves(monkeypatch):
    """Plant the move: take away the hook provenance reads, and the adapter's check must say so."""
    import torch
    from torch._inductor.graph import GraphLowering

    from pytest_gemmguard._compat import inductor

    monkeypatch.delattr(GraphLowering, "save_output_code")
    with pytest.raises(RuntimeError, match=rf"torch {re.escape(torch.__version__)} moved .*save_output_code"):
        inductor.check()


def test_the_adapter_fails_loudly_when_autotuning_s_choice_hook_moves(monkeypatch):
    """Plant the move for --gemm-all-choices: the algorithm selector's preprocessing hook is gone."""
    from torch._inductor import select_algorithm

    from pytest_gemmguard._compat import inductor

    monkeypatch.delattr(select_algorithm, "get_algorithm_selector_cache")
    with pytest.raises(RuntimeError, match=r"moved .*get_algorithm_selector_cache\(\)\.preprocessing_fns"):
        inductor.check()


def test_no_module_outside_the_adapters_touches_a_listed_internal():
    internals = {"save_output_code", "_hypothesis_internal_add_digest", "_add_stats", "_mode", "CUTLASSCodeCache",
                 "preprocessing_fns", "get_algorithm_selector_cache", "current_node", "graph_input_names"}  # fmt: skip
    offenders = []
    for path in _modules():
        if "_compat" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in internals:
                offenders.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not offenders


def test_temporary_backend_registrations_leave_the_registry_as_it_was():
    from pytest_gemmguard import backends
    from pytest_gemmguard.backends.aten import AtenBackend

    class Extra(AtenBackend):
        name = "structure-test-extra"

    before = backends.names()
    with backends.registered(Extra()):
        assert "structure-test-extra" in backends.names() and backends.probe("structure-test-extra").available
    assert backends.names() == before
