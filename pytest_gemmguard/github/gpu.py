"""The GPU job's first step (a working NVIDIA GPU, or one clear line and exit status 1) and the backends it
runs (the required ones, plus the optional ones usable on this machine)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from .commands import workflow_command


def _no_gpu(runner: str, why: str) -> int:
    print(workflow_command("error", f"gemmguard: no GPU on {runner}: {why}", title="gemmguard: no GPU"))
    return 1


def check_gpu() -> int:
    """Fail at once, with one clear line, on a runner without a working NVIDIA GPU. Standard library only: it
    runs from the checkout before anything is installed."""
    runner = os.environ.get("RUNNER_NAME") or "this machine"
    exe = shutil.which("nvidia-smi")
    if exe is None:
        why = "nvidia-smi is not on PATH; the GPU job needs a runner with an NVIDIA GPU and its driver"
        return _no_gpu(runner, why)
    try:
        proc = subprocess.run(
            [exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        gpus = proc.stdout.strip() if proc.returncode == 0 else ""
        said = (proc.stderr or proc.stdout).strip().splitlines()
        why = said[0] if said else f"exit status {proc.returncode}, no GPU listed"
    except (OSError, subprocess.TimeoutExpired) as exc:
        gpus, why = "", str(exc)
    if not gpus:
        return _no_gpu(runner, f"nvidia-smi failed: {why}")
    for line in gpus.splitlines():
        print(f"gemmguard: GPU: {line}")
    return 0


def usable_backends(required: Sequence[str], optional: Sequence[str]) -> list[str]:
    """The required backends, plus each optional one this machine can run (cutlass when it is installed).
    The required ones are never dropped: the run itself fails a named backend that cannot run."""
    from .. import backends  # needs torch: only here, never at import

    return [*required, *[b for b in optional if b not in required and backends.probe(b).available]]
