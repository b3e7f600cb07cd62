"""gemmguard: a pytest plugin that checks the GEMMs TorchInductor's backends compile.

Public surface: `gemm_case` (decorator), `GemmCase` (one case, plain data), `Gemm` (what a test
receives), `strategies` (Hypothesis strategies), `harvest_gemms` (a model's own GEMMs, for
`@gemm_case(harvested=...)`), the exceptions `GemmguardError`, `GemmUsageError` and `Unsupported`, and the
pytest fixtures `gemm_compile`, `gemm_backend` and `gemm_benchmark`. Everything else is internal.

The names are loaded on first use (PEP 562): importing this package, which pytest does when it loads the
plugin, imports no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "gemm_case": ("run.decorator", "gemm_case"),
    "GemmCase": ("cases.case", "GemmCase"),
    "Gemm": ("run.gemm", "Gemm"),
    "GemmguardError": ("errors", "GemmguardError"),
    "GemmUsageError": ("errors", "GemmUsageError"),
    "Unsupported": ("errors", "Unsupported"),
    "harvest_gemms": ("harvest", "harvest_gemms"),
}
# Modules reached as `pytest_gemmguard.<name>` (README, docs and scripts use them), each where it lives now.
_MODULES = {
    "strategies": "strategies",
    "backends": "backends",
    "oracle": "oracle",
    "repro": "report.repro",
    "candidates": "compile.candidates",
    "kernel_swap": "backends.kernel_swap",
}

__all__ = ["Gemm", "GemmCase", "GemmUsageError", "GemmguardError", "Unsupported", "__version__", "gemm_case",
           "harvest_gemms", "strategies"]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        module, attr = _PUBLIC[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    elif name in _MODULES:
        value = importlib.import_module(f"{__name__}.{_MODULES[name]}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *_MODULES])
