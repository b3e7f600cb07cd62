"""The backends' own settings, environment variables only (GEMMGUARD_TRITON_TMA, GEMMGUARD_CUTLASS_CONFIGS, ...):
each read and validated where a backend needs it, a bad value one line naming the variable. The documentation's
environment page lists them beside validate.py's settings. Torch-free."""

from __future__ import annotations

import os
from typing import Any

from ..errors import GemmUsageError
from ..parsers import flag, positive_int, text

BACKEND_ENV = {
    "GEMMGUARD_TRITON_TMA": (flag, "0 switches off Inductor's persistent TMA Triton template on SM90 (default 1)"),
    "GEMMGUARD_CUTLASS_CONFIGS": (positive_int, "CUTLASS configs profiled per GEMM (default 2: each is an nvcc build)"),
    "GEMMGUARD_CUTLASS_ALLOWLIST": (text, "regex restricting CUTLASS op names (Inductor's cutlass_op_allowlist_regex)"),
    "GEMMGUARD_CUTLASS_TREE": (text, "where the CUTLASS source-tree layout is assembled (default ~/.cache/gemmguard)"),
    "GEMMGUARD_NVGEMM_CONFIGS": (positive_int, "NVGEMM configs profiled per GEMM (default 3)"),
}


def backend_env(name: str, default: Any) -> Any:
    """A backend's environment setting, validated: one line naming the variable when it is bad."""
    parse, _ = BACKEND_ENV[name]
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise GemmUsageError(f"environment {name}={raw!r}: {exc}") from None
