"""A backend leaves the process as it found it: plant a backend that changes everything compile/isolation.py watches
(sys.path with a shadowing module, the environment, Inductor config outside a patch) and undoes nothing,
then show that the next backend's verdict is the one it gets alone and the process is back as it was; and,
with the compiler's clean-up taken out, that the same check fails."""

import os
import sys

import pytest
import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from pytest_gemmguard import backends
from pytest_gemmguard._compat import inductor
from pytest_gemmguard.backends.aten import AtenBackend
from pytest_gemmguard.cases.case import GemmCase
from pytest_gemmguard.compile import isolation
from pytest_gemmguard.compile.compiler import Compiler
from pytest_gemmguard.errors import GemmMismatch, Unsupported
from pytest_gemmguard.run.gemm import Gemm
from pytest_gemmguard.run.session import GemmSession, Options

CASE = GemmCase("mm", 5, 7, 9)


class Shift(CustomGraphPass):
    def __call__(self, graph):
        for node in list(graph.nodes):
            if node.target is torch.ops.aten.mm.default:
                with graph.inserting_after(node):
                    shifted = graph.call_function(torch.ops.aten.add.Tensor, (node, 0.01))
                node.replace_all_uses_with(shifted)
                shifted.args = (node, 0.01)

    def uuid(self):
        return "gemmguard-test-isolation-shift"


def _unimported_stdlib_module() -> str:
    return next(m for m in ("colorsys", "tabnanny", "pyclbr", "mailcap", "sndhdr") if m not in sys.modules)


class Leaky(AtenBackend):
    """ATen whose prepare changes the process and returns no undo."""

    name = "leaky"

    def __init__(self, folder, shadow: str) -> None:
        self.folder, self.shadow = str(folder), shadow

    def prepare(self):
        (open(os.path.join(self.folder, f"{self.shadow}.py"), "w")).write("SHADOW = True\n")
        sys.path.insert(0, self.folder)
        __import__(self.shadow)  # a stdlib name, now served from the planted folder
        os.environ["GEMMGUARD_TEST_LEAK"] = "1"
        inductor.set_config("post_grad_custom_post_pass", Shift())  # outside a patch: every later compile sees it
        return None


def _verdict(session: GemmSession, backend: str) -> str:
    try:
        Gemm(CASE, backend, session).check()
        return "verified"
    except GemmMismatch:
        return "failed"
    except Unsupported:
        return "unsupported"


@pytest.fixture
def leaky(tmp_path):
    shadow = _unimported_stdlib_module()
    folder = tmp_path / "planted"
    folder.mkdir()
    path, env = list(sys.path), dict(os.environ)
    config = inductor.config_values()["post_grad_custom_post_pass"]
    with backends.registered(Leaky(folder, shadow)):
        yield shadow, folder
    # Whatever the test did, the planted changes go (the planted-defect variant leaves them in place).
    sys.path[:] = path
    sys.modules.pop(shadow, None)
    os.environ.clear()
    os.environ.update(env)
    inductor.set_config("post_grad_custom_post_pass", config)


def _unless_cache_dirs(lines: list[str]) -> list[str]:
    return [
        line
        for line in lines
        if not line.startswith(
            tuple(
                f"environment {v}:" for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "GEMMGUARD_CUTE_CACHE_DIR")
            )
        )
    ]


def _session(tmp_path, name: str) -> GemmSession:
    # A session per role: a fresh compiler compiles afresh (Dynamo never serves one backend object's code
    # to another), so a verdict after the leak is a new compile, not the one made before it.
    cache, repro = str(tmp_path / f"cache-{name}"), str(tmp_path / f"repro-{name}")
    return GemmSession(Compiler(cache_dir=cache), Options(repro_dir=repro))


def test_a_leaky_backend_cannot_change_the_next_backends_verdict(tmp_path, leaky):
    shadow, folder = leaky
    found = isolation.take()
    alone = _session(tmp_path, "alone")
    assert _verdict(alone, "aten") == "verified"
    alone.compiler.deactivate()
    session = _session(tmp_path, "after")
    assert _verdict(session, "leaky") == "failed"  # its own leaked pass shifts its own results
    assert sys.modules[shadow].__file__.startswith(str(folder))
    session.compiler.use(None)  # leaky's undo (it has none) and its footprint taken out
    # All back as found, but for the session's own Inductor and Triton cache directories (no backend's doing).
    assert _unless_cache_dirs(isolation.changes(found, isolation.take())) == []
    assert not getattr(sys.modules.get(shadow), "SHADOW", False)
    assert _verdict(session, "aten") == "verified"  # the verdict aten gets alone
    # Back to leaky: its footprint comes back as it was (the same module object), and so does its verdict.
    assert _verdict(session, "leaky") == "failed"
    assert getattr(sys.modules[shadow], "SHADOW", False)
    session.compiler.deactivate()
    assert isolation.changes(found, isolation.take()) == []


def test_without_the_clean_up_the_same_checks_fail(tmp_path, leaky, monkeypatch):
    """The planted defect in the guard itself: a footprint that is never taken out."""
    shadow, _ = leaky
    monkeypatch.setattr(isolation.Footprint, "remove", lambda self, baseline: None)
    found = isolation.take()
    session = _session(tmp_path, "unguarded")
    assert _verdict(session, "leaky") == "failed"
    session.compiler.use(None)
    changed = "\n".join(isolation.changes(found, isolation.take()))
    for what in (
        "sys.path changed",
        "environment GEMMGUARD_TEST_LEAK",
        "post_grad_custom_post_pass",
        f"module {shadow}",
    ):
        assert what in changed, changed
    assert _verdict(session, "aten") == "failed"  # leaky's pass now shifts aten's results: harmed
    session.compiler.deactivate()


def test_snapshot_changes_name_what_differs():
    before = isolation.Snapshot(("/a",), {"X": "1"}, {"k": 1}, {"json": "/usr/lib/python3/json/__init__.py"})
    after = isolation.Snapshot(("/a", "/b"), {"X": "2"}, {"k": 2}, {"json": "/b/json/__init__.py"})
    lines = isolation.changes(before, after)
    assert any("added ['/b']" in line for line in lines)
    assert any("environment X: '1' -> '2'" in line for line in lines)
    assert any("Inductor config k: 1 -> 2" in line for line in lines)
    assert any("module json replaced" in line for line in lines)
    assert isolation.changes(before, before) == []


def test_a_namespace_package_that_gains_an_installed_packages_folder_is_no_change(tmp_path, monkeypatch):
    """setuptools adds its vendored `jaraco` to the `jaraco` namespace package (keyring's, twine's) while torch
    builds C++ for cpp: the process would import the same package, so this is not the backend's doing. A folder
    from outside the installed packages still is."""
    site = tmp_path / "site"
    for folder in (site / "nsx", site / "setuptools" / "_vendor" / "nsx", tmp_path / "elsewhere" / "nsx"):
        folder.mkdir(parents=True)
        (folder / "part.py").write_text("")
    monkeypatch.setattr(isolation, "_install_roots", lambda: (str(site),))
    before = isolation.Snapshot((str(site),), {}, {}, {})
    vendored = isolation.Snapshot((str(site),), {}, {}, {"nsx": f"{site / 'nsx'}:{site / 'setuptools/_vendor/nsx'}"})
    assert isolation.changes(before, vendored) == []
    foreign = isolation.Snapshot((str(site),), {}, {}, {"nsx": f"{site / 'nsx'}:{tmp_path / 'elsewhere/nsx'}"})
    (line,) = isolation.changes(before, foreign)
    assert line.startswith("module nsx loaded from ") and "where the process as found would import" in line
