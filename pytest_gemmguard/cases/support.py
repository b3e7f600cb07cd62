"""Which ops the running torch takes on a device, asked of eager PyTorch itself.

Blockwise-scaled float8 (`OpSpec.scale_blocks`) depends on the torch version, the CUDA version and the GPU: torch
2.11 on an H100 takes two recipes and refuses a third, torch 2.13's CPU build refuses all of them, and which scale
strides a release demands has changed between releases. No table of versions would stay true, so eager is asked:
an op eager refuses on the device is left out of the default space there (`default_ops`), and a case eager refuses
at its own size is unsupported (`eager_refusal`), never a failure of a backend: it is not valid input for this torch.
"""

from __future__ import annotations

import functools

import torch

from .case import CaseInputs, GemmCase, build_inputs
from .ops import FP8, OPS

# The size an op's probe runs at: every blockwise recipe torch 2.11 takes on an H100 takes it (K / 128 = 4 blocks).
PROBE_SIZE = (256, 256, 512)


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


@functools.cache
def op_unsupported(op: str, device: str) -> str | None:
    """Why eager PyTorch cannot run `op` on `device` at all, or None. Only the blockwise ops are asked (every other
    op runs wherever its dtype does); a GPU run planned on a machine without one is not asked."""
    if not OPS[op].scale_blocks or (device != "cpu" and not torch.cuda.is_available()):
        return None
    m, n, k = PROBE_SIZE
    case = GemmCase(op, m, n, k, 0, FP8, "transposed_b")
    try:
        refused = _eager_error(case, build_inputs(case, device))
    except Exception as exc:  # float8 itself missing on the device
        refused = _first_line(exc)
    if refused is None:
        return None
    return f"torch {torch.__version__} takes no {op} on {device} (eager refused it at {m}x{n}x{k}: {refused})"


def default_ops(device: str) -> tuple[str, ...]:
    """The ops a case space draws from when a test names none: every op eager runs on `device` (naming one it
    refuses still runs it, as unsupported)."""
    return tuple(op for op in OPS if op_unsupported(op, device) is None)


def eager_refusal(case: GemmCase, inputs: CaseInputs) -> str | None:
    """Why eager PyTorch refuses a blockwise case's inputs (its scale shapes or strides at this size), or None. Other
    ops are not asked: their input is valid by construction."""
    refused = _eager_error(case, inputs) if OPS[case.op].scale_blocks else None
    if refused is None:
        return None
    return f"eager PyTorch (torch {torch.__version__}) refuses {case.op} at this size: {refused}"


def _eager_error(case: GemmCase, inputs: CaseInputs) -> str | None:
    try:
        with torch.no_grad():
            OPS[case.op].call(*inputs.args)
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        return _first_line(exc)
    return None
