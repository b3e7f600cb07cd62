"""Frozen weights, for backends whose GEMM template needs a constant operand (Inductor's CPP template):
the weight operands become parameters of a small module that Inductor's `freezing` folds into constants,
and a content key says when two weights are the same constant.

Dynamo's guards do not cover graph constants, so gemmguard reuses a frozen compile only for a weight with
the same values *and* the same layout, storage offset included (a weight viewed 3 elements into its
storage is a different constant from a compact one: torch 2.13's CPP template gets only the first right).
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Callable, Iterable
from typing import Any


def frozen_module(fn: Callable, n_inputs: int, frozen: dict[int, Any]):
    """A module holding the inputs at the positions in `frozen` as parameters; its forward takes the
    remaining (runtime) inputs in order and calls `fn` with all of them in their places."""
    import torch

    class FrozenWeights(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fn = fn
            self.weights = torch.nn.ParameterList([torch.nn.Parameter(t, requires_grad=False) for t in frozen.values()])
            self.positions = tuple(frozen)

        def forward(self, *runtime):
            it = iter(runtime)
            weights = dict(zip(self.positions, self.weights, strict=True))
            args = [weights[i] if i in weights else next(it) for i in range(n_inputs)]
            return self.fn(*args)

    return FrozenWeights().eval()


def content_key(tensors: Iterable[Any]) -> str:
    """Everything a frozen constant is: values and the whole layout, storage offset included."""
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        h.update(f"{tuple(t.shape)}{tuple(t.stride())}{t.storage_offset()}{t.dtype}{t.device}".encode())
        # A fresh compact copy: .contiguous() keeps a 1x1 strided view as it is (size-1 dimensions count as
        # contiguous whatever their stride), and a byte view needs stride 1.
        compact = t.detach().new_empty(tuple(t.shape), device="cpu").copy_(t.detach())
        # Raw bytes straight from the buffer: torch's CPU build does not depend on numpy, so no .numpy().
        h.update(ctypes.string_at(compact.data_ptr(), compact.numel() * compact.element_size()))
    return h.hexdigest()
