"""What a check is about: the GEMM ops and epilogue steps (ops.py), one case as plain data (case.py: `GemmCase`,
its inputs and the eager function it compiles), the part of the case space a test asks for (space.py), the
Hypothesis strategies that draw from it (strategies.py), the math a case runs in (precision.py) and the memory
its check needs (memory.py).

Importing this package imports no torch: space.py, memory.py and the plugin's validators read it without torch,
and `GemmCase` is loaded on first use (PEP 562).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # `from pytest_gemmguard.cases import GemmCase` keeps working (cases was one module before it was a package).
    if name == "GemmCase":
        from .case import GemmCase

        return GemmCase
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
