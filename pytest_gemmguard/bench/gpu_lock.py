"""Timing owns the GPU: one timer per device at a time, across processes (pytest-xdist workers)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def gpu_lock(device: str) -> Iterator[None]:
    """Timing owns the GPU: one timer per device across processes (pytest-xdist workers) at a time."""
    if not str(device).startswith("cuda"):
        yield
        return
    import fcntl

    index = str(device).partition(":")[2] or os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    path = os.path.join(tempfile.gettempdir(), f"gemmguard-gpu-{index}.lock")
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
