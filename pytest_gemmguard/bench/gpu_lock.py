"""Timing owns the GPU: one timer per physical GPU at a time, across processes (pytest-xdist workers).

The lock file is named after the GPU's identity (gpus.identity: its UUID), not after the device string:
a worker given GPU 1 calls it 'cuda:0' under its CUDA_VISIBLE_DEVICES, another calls the same card
'cuda:1', and each must find the other's lock. Two workers on different GPUs hold different locks and time
at once. An flock ends with its process, so a worker that dies mid-timing (a lost GPU) frees its GPU's lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator


def lock_path(identity: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", identity)
    return os.path.join(tempfile.gettempdir(), f"gemmguard-gpu-{safe}.lock")


@contextlib.contextmanager
def gpu_lock(device: str) -> Iterator[None]:
    """Hold the lock of the physical GPU behind `device` (nothing to hold on the CPU)."""
    if not str(device).startswith("cuda"):
        yield
        return
    import fcntl

    from ..gpus import identity

    with open(lock_path(identity(device)), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
