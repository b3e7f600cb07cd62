"""The backend registry: each backend is one module here exposing `BACKEND`; adding one is one file
plus one line in BUILTIN. Third-party packages add theirs through the `gemmguard.backends` entry
point group (an object with the `Backend` interface)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from importlib.metadata import entry_points

from .base import Backend, Probe

# Modules, each with a BACKEND; the last two are gemmguard's own kernels (kernels/), which `auto` leaves out.
BUILTIN = ("aten", "triton", "cutlass", "cutedsl", "cutedsl_quack", "cpp", "triton_kernels", "cutedsl_kernels")
_REGISTRY: dict[str, Backend] = {}
_ADDED: list[str] = []  # run-time registrations, in order (a session's own are released when it ends)


def _load() -> dict[str, Backend]:
    if not _REGISTRY:
        for module in BUILTIN:
            backend = importlib.import_module(f"{__name__}.{module}").BACKEND
            _REGISTRY[backend.name] = backend
        for ep in entry_points(group="gemmguard.backends"):
            backend = ep.load()
            _REGISTRY.setdefault(backend.name, backend)
    return _REGISTRY


def names() -> list[str]:
    return list(_load())


def get(name: str) -> Backend:
    return _load()[name]


def register(backend: Backend) -> None:
    """Add a backend at run time (a conftest can do this); its name must be new."""
    registry = _load()
    if backend.name in registry:
        raise ValueError(f"a GEMM backend named {backend.name!r} is already registered")
    registry[backend.name] = backend
    _ADDED.append(backend.name)


@contextlib.contextmanager
def registered(*extra: Backend) -> Iterator[None]:
    """Register backends for the duration of a block (tests), then remove them and their probes."""
    start = mark()
    for backend in extra:
        register(backend)
    try:
        yield
    finally:
        release(start)


def mark() -> int:
    """A point in the run-time registrations: `release(mark)` undoes every registration made after it."""
    return len(_ADDED)


def release(start: int) -> None:
    """Remove the backends registered since `start` (their probes too) and forget cached probes. The plugin
    marks when a pytest session's plugins load, before its conftests, and releases when it ends: a
    conftest's backends belong to that session alone, also when sessions nest (pytester)."""
    for name in _ADDED[start:]:
        _REGISTRY.pop(name, None)
    del _ADDED[start:]
    _probes.clear()


_probes: dict[str, Probe] = {}


def probe(name: str) -> Probe:
    """The backend's probe, run once per process (probing imports packages and queries devices)."""
    if name not in _probes:
        try:
            _probes[name] = get(name).probe()
        except Exception as exc:  # a probe must never take the run down
            _probes[name] = Probe(False, f"probe failed: {type(exc).__name__}: {exc}")
    return _probes[name]


__all__ = ["Backend", "Probe", "get", "mark", "names", "probe", "register", "registered", "release"]
