"""The backend registry: each backend is one module here exposing `BACKEND`; adding one is one file
plus one line in BUILTIN. Third-party packages add theirs through the `gemmguard.backends` entry
point group (an object with the `Backend` interface)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from .base import Backend, Probe

BUILTIN = ("aten", "triton", "cutlass", "cutedsl", "cutedsl_quack", "cpp")  # modules, each with a BACKEND
_REGISTRY: dict[str, Backend] = {}


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


_probes: dict[str, Probe] = {}


def probe(name: str) -> Probe:
    """The backend's probe, run once per process (probing imports packages and queries devices)."""
    if name not in _probes:
        try:
            _probes[name] = get(name).probe()
        except Exception as exc:  # a probe must never take the run down
            _probes[name] = Probe(False, f"probe failed: {type(exc).__name__}: {exc}")
    return _probes[name]


__all__ = ["Backend", "Probe", "get", "names", "probe", "register"]
