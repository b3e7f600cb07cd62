"""The epilogue of a harvested GEMM: the chain of gemmguard epilogue steps (bias, residual, scale, the
activations, cast) read off the ops that consume the GEMM's output in the export graph."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..cases.ops import CAST_TARGET, DTYPES
from .nodes import bind, op_name, val

# Ops that pass values through unchanged: looked through when reading the epilogue (a linear's output
# viewed back to (B, T, N), an eval-mode dropout that export writes as a clone).
_PASS_THROUGH = {"clone", "alias", "view", "_unsafe_view", "reshape", "contiguous"}
_UNARY_STEPS = {"relu": "relu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh"}


def epilogue(node: Any, n: int, out_dtype: str) -> str:
    """The chain of gemmguard epilogue steps that consume the GEMM's output and nothing else, in order.
    Reading stops at the first op that is not a step, at a value with several users (fusing into it would
    change what the others read), or at a step already taken (each step appears once in a chain)."""
    steps: list[str] = []
    current = node
    shape = tuple(val(node).shape)
    while True:
        users = [u for u in current.users if not op_name(u.target).startswith("_assert")]
        if len(users) != 1:  # export's own metadata checks are not consumers
            break
        user = users[0]
        name = op_name(user.target) if user.op == "call_function" else ""
        value = val(user)
        if value is None:
            break
        if name in _PASS_THROUGH and value.numel() == math.prod(shape) and value.shape[-1:] == (n,):
            current, shape = user, tuple(value.shape)
            continue
        step = _step(user, name, current, shape, n, out_dtype)
        if step is None or step in steps:
            break
        steps.append(step)
        if step == "cast":
            out_dtype = CAST_TARGET[out_dtype]
        current = user
    return "+".join(steps) if steps else "none"


def _step(user: Any, name: str, current: Any, shape: tuple, n: int, out_dtype: str) -> str | None:
    args = bind(user) if name else {}
    if name in _UNARY_STEPS:
        return _UNARY_STEPS[name]
    if name == "gelu":
        return "gelu" if args.get("approximate", "none") == "none" else None  # gemmguard's gelu is exact
    if name == "add" and user.target == torch.ops.aten.add.Tensor and args.get("alpha", 1) == 1:
        others = [a for a in (args["self"], args["other"]) if a is not current]
        if len(others) != 1 or val(others[0]) is None:
            return None  # y + y, or y + a number: no step
        other = tuple(val(others[0]).shape)
        if other == shape:
            return "residual"
        if other[-1:] == (n,) and math.prod(other) == n:
            return "bias"
        return None
    if name == "mul" and user.target == torch.ops.aten.mul.Tensor:
        others = [a for a in (args["self"], args["other"]) if a is not current]
        if len(others) == 1 and isinstance(others[0], (int, float)) and not isinstance(others[0], bool):
            return "scale"  # y times a constant (gemmguard's own constant is -1.5)
        return None
    if name == "_to_copy":
        target = args.get("dtype")
        wanted = DTYPES.get(CAST_TARGET.get(out_dtype, ""))
        # gemmguard's cast goes to one dtype per output dtype (CAST_TARGET), on the same device.
        if target is not None and target == wanted and args.get("device") in (None, val(current).device):
            return "cast"
        return None
    return None
