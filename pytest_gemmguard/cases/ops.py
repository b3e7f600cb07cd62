"""The GEMM ops and epilogue steps gemmguard knows, as plain data plus the torch code that runs them.

Everything here is shared by the eager function that gets compiled, the float64 reference and the
error model, so the three can never disagree about what a case computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

# A case's dtype names how its operands are stored AND the precision its GEMM computes in:
# "tf32" is float32 storage with TF32 tensor-core math (10-bit mantissa operands); float8_e4m3fn goes
# with the scaled ops only, which write bfloat16.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "tf32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
}
FP8 = "float8_e4m3fn"
FLOAT_DTYPES = ("float32", "tf32", "float16", "bfloat16")
# The dtype the GEMM itself writes, before any epilogue cast.
GEMM_OUT = {"tf32": "float32", FP8: "bfloat16"}
# What an epilogue "cast" turns the GEMM's output into: always a real change of precision.
CAST_TARGET = {"float32": "bfloat16", "float16": "float32", "bfloat16": "float32"}


def gemm_out_dtype(dtype: str) -> str:
    """The dtype a case's GEMM writes: its own, except float32 for tf32 and bfloat16 for float8."""
    return GEMM_OUT.get(dtype, dtype)


def dtype_unsupported(dtype: str, device: str) -> str | None:
    """Why `dtype` cannot run on `device` at all (whatever the backend), or None."""
    if device == "cpu":
        return "tf32 is a CUDA tensor-core precision (SM >= 8.0); the CPU has none" if dtype == "tf32" else None
    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
    if dtype == "tf32" and cap < (8, 0):
        return f"tf32 needs SM >= 8.0 (this GPU is SM{cap[0]}{cap[1]})"
    if dtype == FP8 and cap < (8, 9):
        return f"float8 GEMMs need SM >= 8.9 (this GPU is SM{cap[0]}{cap[1]})"
    return None


def default_dtypes(device: str) -> tuple[str, ...]:
    """The dtypes a case space draws from when a test names none: every dtype the device can run (a GPU
    without them draws no tf32 or float8 cases; naming them still runs them, as unsupported)."""
    if device != "cpu" and not torch.cuda.is_available():  # planning a GPU run from a CPU machine
        return tuple(DTYPES)
    return tuple(d for d in DTYPES if dtype_unsupported(d, device) is None)


@dataclass(frozen=True)
class OpSpec:
    name: str
    batched: bool
    has_bias: bool
    # Argument order of the torch function, naming each input: "a" (M×K), "b" (K×N), "w" (N×K, a
    # linear weight), "bias" (N, or B×M×N for baddbmm), "scale_a"/"scale_b" (float32 dequantization
    # scales: one number each, one per row of A (M×1) and per column of B (1×N), or one per block: `scale_blocks`).
    arg_names: tuple[str, ...]
    # The operand that Inductor's CPP template needs as a frozen constant (the "weight").
    weight_args: tuple[str, ...]
    # The call as torch code over arg_names (compiled function, reference and repro scripts share it).
    expr: str
    # Case dtypes the op takes. The scaled ops take float8 alone; no other op takes float8.
    dtypes: tuple[str, ...] = FLOAT_DTYPES
    # Layouts the op's own contract allows (None: all). torch._scaled_mm wants A row-major and B
    # column-major on CUDA: other layouts are invalid input, not a backend's failure.
    layouts: tuple[str, ...] | None = None
    # N and K must be multiples of this (16 for float8: cuBLASLt and the Triton template need it).
    align: int = 1
    rowwise_scales: bool = False
    # Blockwise scaling: the block of A and of B one scale covers, as (rows, columns) of A (M×K) and of B stored N×K
    # (DeepSeek-V3's recipe: "1x128" for A, one scale per row and 128 of K; "128x128" for B). K is then a multiple
    # of BLOCK: a partial block of K has no meaning every library agrees on.
    scale_blocks: tuple[str, str] | None = None
    _fn: Callable[..., torch.Tensor] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fn = eval(f"lambda {', '.join(self.arg_names)}: {self.expr}", {"torch": torch})
        object.__setattr__(self, "_fn", fn)

    @property
    def weight_positions(self) -> tuple[int, ...]:
        """Where the weight operands sit in the argument order (what a frozen-weight backend freezes)."""
        return tuple(self.arg_names.index(r) for r in self.weight_args)

    @property
    def scaled(self) -> bool:
        return "scale_a" in self.arg_names

    @property
    def k_align(self) -> int:
        """What K must be a multiple of: a whole number of scale blocks for a blockwise op, else `align`."""
        return BLOCK if self.scale_blocks else self.align

    def call(self, *args: torch.Tensor) -> torch.Tensor:
        return self._fn(*args)


BLOCK = 128  # the side of a scale block of the blockwise float8 recipes


_SCALED = "torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)"
OPS: dict[str, OpSpec] = {
    "mm": OpSpec("mm", False, False, ("a", "b"), ("b",), "torch.mm(a, b)"),
    "addmm": OpSpec("addmm", False, True, ("bias", "a", "b"), ("bias", "b"), "torch.addmm(bias, a, b)"),
    "bmm": OpSpec("bmm", True, False, ("a", "b"), ("b",), "torch.bmm(a, b)"),
    "baddbmm": OpSpec("baddbmm", True, True, ("bias", "a", "b"), ("bias", "b"), "torch.baddbmm(bias, a, b)"),
    "linear": OpSpec("linear", False, True, ("a", "w", "bias"), ("w", "bias"),
                     "torch.nn.functional.linear(a, w, bias)"),
    # float8 e4m3 GEMMs with dequantization scales, tensor-wise and row-wise, writing bfloat16.
    "scaled_mm": OpSpec("scaled_mm", False, False, ("a", "b", "scale_a", "scale_b"), ("b", "scale_b"), _SCALED,
                        dtypes=(FP8,), layouts=("transposed_b",), align=16),
    "scaled_mm_rowwise": OpSpec("scaled_mm_rowwise", False, False, ("a", "b", "scale_a", "scale_b"),
                                ("b", "scale_b"), _SCALED, dtypes=(FP8,), layouts=("transposed_b",), align=16,
                                rowwise_scales=True),
    # Blockwise: a scale per 1x128 block of A and per 128x128 block of B (or the other way round), where eager takes
    # them (cases/support.py). pytorch#188711's Triton template and pytorch#166752's cuBLASLt scale reads
    # were wrong here while eager and Inductor agreed: only a float64 reference of the dequantized operands sees it.
    "scaled_mm_block_1x128_128x128": OpSpec("scaled_mm_block_1x128_128x128", False, False,
                                            ("a", "b", "scale_a", "scale_b"), ("b", "scale_b"), _SCALED,
                                            dtypes=(FP8,), layouts=("transposed_b",), align=16,
                                            scale_blocks=("1x128", "128x128")),
    "scaled_mm_block_128x128_1x128": OpSpec("scaled_mm_block_128x128_1x128", False, False,
                                            ("a", "b", "scale_a", "scale_b"), ("b", "scale_b"), _SCALED,
                                            dtypes=(FP8,), layouts=("transposed_b",), align=16,
                                            scale_blocks=("128x128", "1x128")),
}  # fmt: skip


def op_takes(op: str, dtype: str, layout: str) -> bool:
    """Whether (dtype, layout) is valid input for `op` by the op's own contract."""
    spec = OPS[op]
    if layout == "broadcast" and not spec.batched:  # a matrix shared across a batch needs a batch
        return False
    return dtype in spec.dtypes and (spec.layouts is None or layout in spec.layouts)


def shape_fits(op: str, shape: tuple[int, ...]) -> bool:
    """Whether an explicit shape suits `op`: rank (batched or not) and the op's N and K alignment."""
    op_spec = OPS[op]
    if op_spec.batched != (len(shape) == 4):
        return False
    n, k = shape[-2], shape[-1]
    return n % op_spec.align == 0 and k % op_spec.k_align == 0


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
    repeated = sorted({s for s in steps if steps.count(s) > 1})
    if repeated:
        # Each step's extra tensor (epi_bias, residual) is one input: a chain uses each step at most once.
        raise ValueError(f"epilogue step {repeated[0]!r} appears twice in {text!r}; each step may appear once")
    return steps


def chain_name(steps: tuple[str, ...]) -> str:
    return "+".join(steps) if steps else "none"


def output_dtype(dtype: str, steps: tuple[str, ...]) -> str:
    out = gemm_out_dtype(dtype)
    return CAST_TARGET[out] if "cast" in steps else out


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
