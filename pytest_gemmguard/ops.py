"""The GEMM ops and epilogue steps gemmguard knows, as plain data plus the torch code that runs them.

Everything here is shared by the eager function that gets compiled, the float64 reference and the
error model, so the three can never disagree about what a case computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
# What an epilogue "cast" turns each dtype into: always a real change of precision.
CAST_TARGET = {"float32": "bfloat16", "float16": "float32", "bfloat16": "float32"}


@dataclass(frozen=True)
class OpSpec:
    name: str
    batched: bool
    has_bias: bool
    # Argument order of the torch function, naming each input: "a" (M×K), "b" (K×N), "w" (N×K, a
    # linear weight), "bias" (N, or B×M×N for baddbmm).
    arg_names: tuple[str, ...]
    # The operand that Inductor's CPP template needs as a frozen constant (the "weight").
    weight_args: tuple[str, ...]

    @property
    def weight_positions(self) -> tuple[int, ...]:
        """Where the weight operands sit in the argument order (what a frozen-weight backend freezes)."""
        return tuple(self.arg_names.index(r) for r in self.weight_args)

    @property
    def function_name(self) -> str:
        return "torch.nn.functional.linear" if self.name == "linear" else f"torch.{self.name}"

    def call(self, *args: torch.Tensor) -> torch.Tensor:
        fn = torch.nn.functional.linear if self.name == "linear" else getattr(torch, self.name)
        return fn(*args)


OPS: dict[str, OpSpec] = {
    "mm": OpSpec("mm", False, False, ("a", "b"), ("b",)),
    "addmm": OpSpec("addmm", False, True, ("bias", "a", "b"), ("bias", "b")),
    "bmm": OpSpec("bmm", True, False, ("a", "b"), ("b",)),
    "baddbmm": OpSpec("baddbmm", True, True, ("bias", "a", "b"), ("bias", "b")),
    "linear": OpSpec("linear", False, True, ("a", "w", "bias"), ("w", "bias")),
}


SCALE = -1.5  # a fixed, non-power-of-two scale: exact in every dtype and flips the sign


@dataclass(frozen=True)
class StepSpec:
    """One epilogue step, written once as a torch expression of `y` (and its extra tensors): the
    compiled function, the float64 reference and the standalone repro script all use that text."""

    name: str
    expr: str
    # Largest |f'(x)|: how much an error already in the input of the step can grow through it.
    lipschitz: float
    # Extra tensors the step reads (epi_bias has shape (N,), residual the output's shape).
    extra_inputs: tuple[str, ...] = ()
    # Steps that evaluate a transcendental function carry its own approximation error (a few ulp).
    transcendental: bool = False

    def __post_init__(self) -> None:
        fn = eval(f"lambda y, epi_bias=None, residual=None: {self.expr}", {"torch": torch, "SCALE": SCALE})
        object.__setattr__(self, "_fn", fn)

    def apply(self, y: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._fn(y, **{k: extras[k] for k in self.extra_inputs})


STEPS: dict[str, StepSpec] = {
    "bias": StepSpec("bias", "y + epi_bias", 1.0, ("epi_bias",)),
    "relu": StepSpec("relu", "torch.relu(y)", 1.0),
    "gelu": StepSpec("gelu", "torch.nn.functional.gelu(y)", 1.13, transcendental=True),
    "silu": StepSpec("silu", "torch.nn.functional.silu(y)", 1.1, transcendental=True),
    "sigmoid": StepSpec("sigmoid", "torch.sigmoid(y)", 0.25, transcendental=True),
    "tanh": StepSpec("tanh", "torch.tanh(y)", 1.0, transcendental=True),
    "scale": StepSpec("scale", "y * SCALE", abs(SCALE)),
    "residual": StepSpec("residual", "y + residual", 1.0, ("residual",)),
    "cast": StepSpec("cast", "y", 1.0),  # the dtype change itself is applied by apply_chain
}


def parse_chain(text: str) -> tuple[str, ...]:
    """'bias+relu' -> ('bias', 'relu'); 'none' -> (). Raises ValueError naming the unknown step."""
    text = text.strip().lower()
    if text in ("", "none"):
        return ()
    steps = tuple(s.strip() for s in text.split("+"))
    for s in steps:
        if s not in STEPS:
            raise ValueError(f"unknown epilogue step {s!r}; known: none, {', '.join(STEPS)}")
    if steps.count("cast") > 1:
        raise ValueError("an epilogue chain may cast at most once")
    return steps


def chain_name(steps: tuple[str, ...]) -> str:
    return "+".join(steps) if steps else "none"


def output_dtype(dtype: str, steps: tuple[str, ...]) -> str:
    return CAST_TARGET[dtype] if "cast" in steps else dtype


def gemm_flops(m: int, n: int, k: int, batch: int) -> int:
    return 2 * m * n * k * max(batch, 1)


def apply_chain(
    y: torch.Tensor, steps: tuple[str, ...], extras: dict[str, torch.Tensor], cast_to: torch.dtype | None
) -> torch.Tensor:
    """Apply an epilogue chain; `cast_to` is None for the float64 reference (which never rounds)."""
    for name in steps:
        if name == "cast":
            if cast_to is not None:
                y = y.to(cast_to)
            continue
        y = STEPS[name].apply(y, extras)
    return y


def sqrt_k(k: int) -> float:
    return math.sqrt(max(k, 1))
