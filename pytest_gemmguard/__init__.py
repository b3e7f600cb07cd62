"""gemmguard: a pytest plugin that checks the GEMMs TorchInductor's backends compile.

Public surface: `gemm_case` (decorator), `GemmCase` (one case, plain data), `Gemm` (what a test
receives), `strategies` (Hypothesis strategies), and the pytest fixtures `gemm_compile` and
`gemm_backend`. Everything else is internal.
"""

from __future__ import annotations

from . import strategies
from .cases import GemmCase, gemm_case
from .errors import GemmUsageError, Unsupported
from .runner import Gemm

__version__ = "0.1.0"
__all__ = ["Gemm", "GemmCase", "GemmUsageError", "Unsupported", "__version__", "gemm_case", "strategies"]
