"""Reading one node of an export graph: its ATen op, its traced value, its arguments by name, the module
that ran it, and how to name it in a skipped line."""

from __future__ import annotations

import re
from typing import Any

import torch

from ..cases.ops import DTYPES


def op_name(target: Any) -> str:
    """'mm' for torch.ops.aten.mm.default; '' for anything that is not an ATen op."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.name.startswith("aten::"):
        return ""
    return schema.name[len("aten::") :]


def val(arg: Any) -> Any:
    """The traced (fake) tensor a node produces, or None (not a node, or not a tensor)."""
    meta = getattr(arg, "meta", None)
    value = meta.get("val") if meta else None
    return value if isinstance(value, torch.Tensor) else None


def bind(node: Any) -> dict[str, Any]:
    """The node's arguments by their schema names, defaults filled in."""
    out = {}
    for i, arg in enumerate(node.target._schema.arguments):
        if i < len(node.args):
            out[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        else:
            out[arg.name] = arg.default_value if arg.has_default_value() else None
    return out


def what_of(node: Any, name: str) -> str:
    """How a skipped line names the node: its op and its tensor arguments' shapes."""
    shapes = [tuple(a.meta["val"].shape) for a in node.args if val(a) is not None]
    return f"aten.{name} on {', '.join(str(s) for s in shapes)}" if shapes else f"aten.{name}"


def traced_dtype(dtype: Any) -> str | None:
    """gemmguard's name for a traced tensor dtype (float32, never tf32: TF32 is a math mode), or None."""
    for name, torch_dtype in DTYPES.items():
        if torch_dtype == dtype and name != "tf32":
            return name
    return None


def modules(node: Any) -> set[str]:
    """The innermost module that ran the node, its layer indices written as * (one name for all layers)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return set()
    path, kind = list(stack.values())[-1]
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    parts = ["*" if p.isdigit() else p for p in path.split(".") if p]
    if not parts:  # the model's own forward
        return {str(getattr(kind, "__name__", kind)).rsplit(".", 1)[-1]}
    return {".".join(parts)}


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (its first), for a one-line GemmUsageError."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__
