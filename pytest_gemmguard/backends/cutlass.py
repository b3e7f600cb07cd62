"""CUTLASS: Inductor's CUTLASS C++ templates, generated as CUDA C++ and built with nvcc.

torch (2.11 to 2.13) looks for a CUTLASS *source tree* at `config.cutlass.cutlass_dir`: `python/` holding
`cutlass_library`, `cutlass_cppgen` and `pycute`, plus `include/` and `tools/{library,util}/...` for nvcc.
`pip install nvidia-cutlass` ships the same pieces under another layout (the C++ headers live inside
the `cutlass_library` package, under `source/`). gemmguard assembles the layout torch expects, as a tree
of symbolic links in its own cache directory, and points Inductor at it. (The `config.cuda` copy of
`cutlass_dir` is not the one torch reads.)

Compile time is bounded by default: nvcc builds one shared library per autotuning choice, so only a
few configs (and one L2 swizzle) are profiled. GEMMGUARD_CUTLASS_CONFIGS overrides the number of configs
and GEMMGUARD_CUTLASS_ALLOWLIST restricts the op names (a regex, e.g. "warpspecialized_cooperative").
Every nvcc build is timed: `nvcc_seconds()` is the running total for this process.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from typing import Any

from .._compat import inductor
from .base import GPU_INSTALL, Backend, Probe, cuda_probe, gpu_detail, missing_module
from .provenance import KernelLaunch
from .settings import backend_env

DEFAULT_CONFIGS = 2
BUILD_S = 0.5
# Source-tree path -> path inside the pip package (relative to site-packages).
_LAYOUT = {
    "python/cutlass_library": "cutlass_library",
    "python/cutlass_cppgen": "cutlass_cppgen",
    "python/pycute": "pycute",
    "include": "cutlass_library/source/include",
    "tools/library/include": "cutlass_library/source/tools/library/include",
    "tools/library/src": "cutlass_library/source/tools/library/src",
    "tools/util/include": "cutlass_library/source/tools/util/include",
}
_OP_NAME = re.compile(r"\bcutlass\w*_gemm\w*|\bcutlass3x_\w+")


def _site_packages() -> str | None:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(os.path.realpath(next(iter(spec.submodule_search_locations))))


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-cutlass")
    except PackageNotFoundError:
        return "unknown"


def tree_path(root: str | None = None) -> str:
    """Where the assembled tree lives (nothing is created)."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "gemmguard")
    base = root or backend_env("GEMMGUARD_CUTLASS_TREE", None) or default
    return os.path.join(base, f"cutlass-tree-{_package_version()}")


def missing_layout() -> str | None:
    """What the pip package lacks of the layout torch expects, or None (checks only, creates nothing)."""
    site = _site_packages()
    if site is None:
        return "Python package cutlass_library (pip install nvidia-cutlass) is not importable"
    for src in _LAYOUT.values():
        target = os.path.join(site, src)
        if not os.path.isdir(target):
            return f"nvidia-cutlass {_package_version()} lacks {src}/ (expected at {target})"
    return None


def assemble_tree(root: str | None = None) -> str:
    """Build (once) the CUTLASS source-tree layout torch expects, as links into the pip package."""
    problem = missing_layout()
    if problem:
        raise RuntimeError(problem)
    site = _site_packages()
    assert site is not None
    tree = tree_path(root)
    for rel, src in _LAYOUT.items():
        target = os.path.join(site, src)
        link = os.path.join(tree, rel)
        if os.path.islink(link) and os.path.realpath(link) == os.path.realpath(target):
            continue
        if os.path.lexists(link):
            os.unlink(link) if os.path.islink(link) else shutil.rmtree(link)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(target, link)
    return tree


class _NvccClock:
    """Times CUDA builds by wrapping Inductor's CUDA code cache compile (outermost call only)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.builds = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        self.installed = False

    def install(self) -> Callable[[], None] | None:
        """Wrap the CUDA code cache's compile; returns the undo (None when nothing was wrapped)."""
        if self.installed:
            return None
        undo = inductor.wrap_cuda_build(self._timed)
        self.installed = undo is not None
        if undo is None:
            return None

        def uninstall() -> None:
            undo()
            self.installed = False

        return uninstall

    def _timed(self, original):
        def timed(cls_, source_code, dst_file_ext, *args, **kwargs):
            depth = getattr(self._local, "depth", 0)
            self._local.depth = depth + 1
            started = time.perf_counter()
            try:
                return original(cls_, source_code, dst_file_ext, *args, **kwargs)
            finally:
                self._local.depth = depth
                elapsed = time.perf_counter() - started
                if depth == 0 and elapsed > BUILD_S:  # quicker calls were cache hits, not builds
                    with self._lock:
                        self.seconds += elapsed
                        self.builds += 1

        return timed


_NVCC = _NvccClock()


def nvcc_seconds() -> tuple[float, int]:
    """(seconds, builds) spent in Inductor's CUDA code cache compile (nvcc) in this process so far.
    Builds run in parallel threads during autotuning, so the seconds are summed, not wall time."""
    return _NVCC.seconds, _NVCC.builds


def _set_if_known(options: dict[str, Any], key: str, value: Any) -> None:
    """Add a dotted Inductor config key only if this torch has it (names moved between versions)."""
    if inductor.has_config(key):
        options[key] = value


class CutlassBackend(Backend):
    name = "cutlass"
    inductor_name = "CUTLASS"

    def probe(self) -> Probe:
        problem = cuda_probe((8, 0)) or missing_module("cutlass_library", "nvidia-cutlass")
        if problem:
            return problem
        nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
        if nvcc is None:
            return Probe(False, "nvcc not found", "install the CUDA toolkit and put nvcc on PATH")
        problem = missing_layout()
        if problem:
            return Probe(
                False,
                f"cannot assemble a CUTLASS tree: {problem}",
                f"pip install 'nvidia-cutlass>=4.2' ({GPU_INSTALL})",
            )
        return Probe(True, detail=f"{gpu_detail()}, nvidia-cutlass {_package_version()}, tree {tree_path()}, {nvcc}")

    def tree(self) -> str:
        return tree_path()

    def prepare(self) -> Callable[[], None] | None:
        """Assemble the tree, point Inductor's compile workers at it (they read it from the environment) and
        time nvcc; the undo puts the environment and the code cache back."""
        tree = assemble_tree()
        previous = os.environ.get("TORCHINDUCTOR_CUTLASS_DIR")
        os.environ["TORCHINDUCTOR_CUTLASS_DIR"] = tree
        uninstall = _NVCC.install()

        def undo() -> None:
            if previous is None:
                os.environ.pop("TORCHINDUCTOR_CUTLASS_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CUTLASS_DIR"] = previous
            if uninstall is not None:
                uninstall()

        return undo

    def parallel_builds(self) -> int:
        # One nvcc build per profiled config (one swizzle each): built one after another at a worker's one
        # compile thread, a case's two took 247-251 s in the H200's README main job (2026-12-04).
        return backend_env("GEMMGUARD_CUTLASS_CONFIGS", DEFAULT_CONFIGS)

    def inductor_options(self) -> dict[str, Any]:
        options = super().inductor_options()
        configs = self.parallel_builds()
        _set_if_known(options, "cutlass.cutlass_dir", self.tree())
        _set_if_known(options, "cutlass.cutlass_max_profiling_configs", configs)
        _set_if_known(options, "cutlass.cutlass_max_profiling_swizzle_options", [2])
        allow = backend_env("GEMMGUARD_CUTLASS_ALLOWLIST", None)
        if allow:
            _set_if_known(options, "cutlass.cutlass_op_allowlist_regex", allow)
        # One nvcc build that hangs must not hold the session: bound each precompile.
        _set_if_known(options, "precompilation_timeout_seconds", 300)
        return options

    def claims(self, launch: KernelLaunch) -> bool:
        # CUTLASS templates are the only CUDA C++ kernels Inductor generates (async_compile.cuda).
        return launch.kind == "cuda" or (launch.kind != "extern" and "cutlass" in launch.name)

    def describe_kernel(self, launch: KernelLaunch) -> str:
        ops = sorted(set(_OP_NAME.findall(launch.source)), key=len)
        op = next((o for o in ops if "sm" in o and "gemm" in o), ops[-1] if ops else "")
        return f"{launch.name} ({op})" if op else launch.name


BACKEND = CutlassBackend()
