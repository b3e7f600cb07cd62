"""Backends that cannot harm each other: what a backend changed in the process, taken out and put back.

A backend's own use changes the process in ways another backend can trip over. Inductor's CUTLASS
support, for one, appends `<inductor cache>/torch_cutlass` to `sys.path` the first time it imports
CUTLASS, and that folder holds mock `cuda`, `scipy` and `pydot` packages; once the mock `cuda` is in
`sys.modules`, CuteDSL's `import cuda.bindings` fails ("No module named 'cuda.bindings'"), so
`cutedsl[quack]` run after `cutlass` in one process failed where it passed alone.

The compiler (compiler.py) therefore keeps one backend *active* at a time. Switching away from a backend
captures its `Footprint` against the process as the session found it (the baseline `Snapshot`) and takes
it out; switching back puts it in again, the same module objects included, so nothing is imported twice.
A footprint is:

- the `sys.path` entries it added, taken out while it is away (but for folders inside an installed package,
  such as setuptools' `_vendor`, which setuptools adds for itself whichever backend builds C++ first);
- the modules loaded through those entries (they shadow, or are importable only through them), popped
  from `sys.modules` while it is away;
- environment variables its `prepare` set, changed or removed (torch sets a few for itself while it
  compiles, TORCH_OWN_ENV: those are the process's, whichever backend ran first, and stay);
- Inductor config values it changed outside a `patch` (gemmguard's own options are patched per run).

Modules imported from the baseline's own `sys.path` stay: a later `import` would load the very same
files, and importing a native package (CuteDSL's MLIR bindings, cuda-bindings) a second time is what
breaks a process. `changes(before, after)` is the test's view: what differs between two snapshots, with
the modules that matter judged by where their top-level name would import from on the baseline's path.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .._compat import inductor

# Inductor loads its generated code as modules named by a hash (never imported by name): not a shadow.
_GENERATED = re.compile(r"^[a-z0-9_]{30,}$")
# Variables torch and Triton set for their own later use while compiling (torch 2.11-2.13: cpp_builder,
# runtime/compile_tasks, codecache, async_compile), the same whichever backend compiles first.
TORCH_OWN_ENV = frozenset(
    {
        "TRITON_PTXAS_PATH",
        "TRITON_LIBDEVICE_PATH",
        "KMP_DUPLICATE_LIB_OK",
        "CUDA_HOME",
        "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR",
        "TORCH_WARM_POOL",
        "CUBLAS_WORKSPACE_CONFIG",
    }
)


@dataclass(frozen=True)
class Snapshot:
    """The parts of the process a backend could leave changed."""

    sys_path: tuple[str, ...]
    environ: dict[str, str]
    config: dict[str, Any]  # Inductor config: key -> the value object itself (compared by identity or ==)
    origins: dict[str, str | None]  # top-level module name -> where it was loaded from


def _origin(module: Any) -> str | None:
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) or getattr(module, "__file__", None)
    if origin is None and spec is not None and spec.submodule_search_locations:
        return os.pathsep.join(spec.submodule_search_locations)  # a namespace package: its portions
    return origin


def take() -> Snapshot:
    """Snapshot the process now."""
    origins = {
        name: _origin(mod) for name, mod in list(sys.modules.items()) if "." not in name and isinstance(mod, ModuleType)
    }
    return Snapshot(tuple(sys.path), dict(os.environ), inductor.config_values(), origins)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # a value whose == raises or is not a bool (a tensor): only identity counts
        return False


@functools.cache
def _install_roots() -> tuple[str, ...]:
    """Where installed packages live (stdlib, site-packages)."""
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    with contextlib.suppress(AttributeError):  # site lacks these in some virtualenv layouts
        roots.update(site.getsitepackages())
    roots.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else None)
    return tuple(os.path.abspath(r) for r in roots if r)


def foreign_entries(path: Iterable[str], baseline: Snapshot) -> list[str]:
    """The `sys.path` entries of `path` the baseline lacks, but for those inside an installed package (setuptools
    puts its own `_vendor` folder there while torch builds C++: the process's, whichever backend ran first)."""
    return [p for p in path if p not in baseline.sys_path and not _under(p, list(_install_roots()))]


def _under(path: str | None, roots: list[str]) -> bool:
    if not path:
        return False
    path = os.path.abspath(path)
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """One line per difference that could change another backend's verdict (empty: none)."""
    lines = []
    added = foreign_entries(after.sys_path, before)
    removed = [p for p in before.sys_path if p not in after.sys_path]
    if added or removed:
        lines.append(f"sys.path changed: added {added}, removed {removed}")
    for key in sorted((set(before.environ) | set(after.environ)) - TORCH_OWN_ENV):
        if before.environ.get(key) != after.environ.get(key):
            lines.append(f"environment {key}: {before.environ.get(key)!r} -> {after.environ.get(key)!r}")
    for key in sorted(set(before.config) | set(after.config)):
        if not _same(before.config.get(key), after.config.get(key)):
            lines.append(f"Inductor config {key}: {before.config.get(key)!r} -> {after.config.get(key)!r}")
    finder = importlib.machinery.PathFinder
    for name, origin in sorted(after.origins.items()):
        if name in before.origins:
            if before.origins[name] != origin:
                lines.append(f"module {name} replaced: {before.origins[name]} -> {origin}")
            continue
        if _GENERATED.match(name) or origin in (None, "built-in", "frozen"):
            continue
        try:
            spec = finder.find_spec(name, list(before.sys_path))
        except (ImportError, ValueError):
            spec = None
        fresh = _origin_of_spec(spec)
        if fresh is not None and not _same_place(fresh, origin):
            fresh = _fresh_import_origin(name, before.sys_path)  # an import hook may serve it (see below)
        own = [os.path.abspath(p) for p in after.sys_path if p not in before.sys_path and p not in added]
        if _under(origin, own):
            continue  # an installed package's own folder (foreign_entries): the process's
        moved = fresh is not None and not _same_place(fresh, origin)
        if _under(origin, [os.path.abspath(p) for p in added]) or moved:
            lines.append(f"module {name} loaded from {origin}, where the process as found would import {fresh}")
    return lines


def _same_file(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _same_place(fresh: str, origin: str) -> bool:
    """The module the process would import is the one loaded. A namespace package's origin is its folders; one
    that gained a folder inside an installed package is still the process's: setuptools adds its `_vendor`
    copy to `jaraco` while torch builds C++ (keyring, twine and others install `jaraco` beside it)."""
    if _same_file(fresh, origin):
        return True
    had, has = fresh.split(os.pathsep), origin.split(os.pathsep)
    gained = [p for p in has if p not in had]
    return len(has) > 1 and set(had) <= set(has) and all(_under(p, list(_install_roots())) for p in gained)


def _fresh_import_origin(name: str, path: tuple[str, ...]) -> str | None:
    """Where `import name` would load from with `path` as sys.path, asking every finder on sys.meta_path
    (setuptools' distutils hook serves `distutils` from setuptools, whoever imported it first: the process's,
    not a backend's doing)."""
    saved = sys.path[:]
    sys.path[:] = list(path)
    try:
        for meta in sys.meta_path:
            find = getattr(meta, "find_spec", None)
            try:
                spec = find(name, None) if find is not None else None
            except Exception:  # a finder that cannot answer for this name: ask the next
                continue
            if spec is not None:
                return _origin_of_spec(spec)
        return None
    finally:
        sys.path[:] = saved


def _origin_of_spec(spec: Any) -> str | None:
    if spec is None:
        return None
    if spec.origin:
        return spec.origin
    locations = spec.submodule_search_locations
    return os.pathsep.join(locations) if locations else None


@dataclass
class Footprint:
    """What one backend's use changed in the process, taken out while another backend runs."""

    sys_path: list[str] = field(default_factory=list)  # as the backend left it
    foreign: list[str] = field(default_factory=list)  # its entries that are taken out (foreign_entries)
    modules: dict[str, ModuleType] = field(default_factory=dict)
    environ: dict[str, str | None] = field(default_factory=dict)  # None: the backend removed the variable
    config: dict[str, Any] = field(default_factory=dict)
    _displaced: dict[str, ModuleType] = field(default_factory=dict)

    def remove(self, baseline: Snapshot) -> None:
        """Put the process back as the baseline had it, for everything this footprint holds."""
        kept = [p for p in sys.path if p not in self.foreign]
        sys.path[:] = [p for p in baseline.sys_path if p not in kept] + kept  # baseline entries it removed come back
        for name in self.modules:
            sys.modules.pop(name, None)
        sys.modules.update(self._displaced)
        self._displaced.clear()
        for key in self.environ:
            if key in baseline.environ:
                os.environ[key] = baseline.environ[key]
            else:
                os.environ.pop(key, None)
        for key in self.config:
            inductor.set_config(key, baseline.config[key])

    def apply(self) -> None:
        """Put the footprint back in (the backend is active again), keeping what it displaces for `remove`."""
        sys.path[:] = self.sys_path + [p for p in sys.path if p not in self.sys_path]
        for name, module in self.modules.items():
            current = sys.modules.get(name)
            if current is not None and current is not module:
                self._displaced[name] = current
            sys.modules[name] = module
        for key, value in self.environ.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for key, value in self.config.items():
            inductor.set_config(key, value)


def capture(baseline: Snapshot, env_keys: Iterable[str] = ()) -> Footprint:
    """The footprint of what changed since `baseline` (the active backend's doing): sys.path, the modules
    loaded through entries it added, Inductor config, and of the environment the `env_keys` (what its
    prepare changed)."""
    foreign = foreign_entries(sys.path, baseline)
    added = [os.path.abspath(p) for p in foreign]
    modules = {
        name: mod
        for name, mod in list(sys.modules.items())
        if isinstance(mod, ModuleType) and added and _under(_module_file(mod), added)
    }
    env = {k: os.environ.get(k) for k in env_keys if os.environ.get(k) != baseline.environ.get(k)}
    now = inductor.config_values()
    config = {k: v for k, v in now.items() if k in baseline.config and not _same(v, baseline.config[k])}
    return Footprint(list(sys.path), foreign, modules, env, config)


def _module_file(module: ModuleType) -> str | None:
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) or getattr(module, "__file__", None)
    if origin is None and spec is not None and spec.submodule_search_locations:
        return next(iter(spec.submodule_search_locations), None)
    return origin
