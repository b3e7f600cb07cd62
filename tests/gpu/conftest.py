"""GPU tests of gemmguard itself: they need a CUDA GPU and skip, with the reason, everywhere else.

Tests marked `cpu_ok` check backend logic on synthetic kernels and run on any machine. Set
GEMMGUARD_GPU_LOG=path to append one JSON line per checked kernel (scripts/gpu_validate.sh does).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _no_gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "gemmguard GPU tests: torch is not installed"
    if torch.cuda.is_available():
        return None
    build = "a CPU-only build" if torch.version.cuda is None else "no CUDA device visible"
    return f"gemmguard GPU tests need a CUDA GPU (torch {torch.__version__}: {build}); see scripts/gpu_validate.sh"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cpu_ok: a tests/gpu test that needs no GPU (synthetic kernels)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _no_gpu_reason()
    if reason is None:
        return
    for item in items:
        if HERE in Path(str(item.fspath)).parents and "cpu_ok" not in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


class GpuLog:
    """Appends what each GPU test saw (kernels, templates, compile and nvcc seconds) as JSON lines."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def code(self, name: str, text: str) -> None:
        """Keep a compiled graph's generated code next to the log (code-<name>.py)."""
        if self.path:
            with open(os.path.join(os.path.dirname(self.path) or ".", f"code-{name}.py"), "w") as f:
                f.write(text)

    def write(self, **record) -> None:
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(record, default=str) + "\n")


@pytest.fixture(scope="session")
def gpu_log() -> GpuLog:
    return GpuLog(os.environ.get("GEMMGUARD_GPU_LOG"))
