"""The math a case runs in, decided by the case and not by torch's global switches.

Two switches of torch change what a correct GEMM may return, and both default to "faster, less exact":

- TF32 for float32 GEMMs (`torch.backends.cuda.matmul.allow_tf32` / `fp32_precision`): gemmguard turns it
  on for a `tf32` case and off for every other, so a `float32` case is judged by the float32 error model;
- reduced-precision reductions for fp16/bf16 (`allow_fp16_reduced_precision_reduction`,
  `allow_bf16_reduced_precision_reduction`, both True in torch): cuBLAS(Lt) may then add split-K partial
  sums in half precision, an error the float32-accumulation bound does not allow (seen on the H200: eager
  cuBLAS at 3.76x of the bound on mm 2x19x310 fp16). gemmguard switches both off for every case, as
  PyTorch's own CUTLASS backend tests do, so the bound is the contract the kernel is held to and eager
  cuBLAS stays well inside it. A kernel that still reduces in half precision is then a real finding.

Each switch is set around the compile, the run, eager and the benchmarks, and the user's setting is put
back afterwards. Inductor bakes the TF32 setting into what it compiles and Dynamo guards on it, so a TF32
compile never serves a float32 case. `describe()` says what was in force, for headers, failure reports and
repro scripts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

REDUCED_PRECISION = ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")


@contextlib.contextmanager
def math_precision(dtype: str) -> Iterator[None]:
    """Run GEMMs as `dtype` says: TF32 for "tf32", IEEE float32 for every other float32 case, and no
    half-precision reductions for any case.

    torch raises when its legacy TF32 switch is read after the new `fp32_precision` API was written, and
    torch 2.11's Inductor reads the legacy one. So the legacy switch is used (it keeps both views in
    step), unless the user already moved to the new API: then only the new one is touched.
    """
    matmul = torch.backends.cuda.matmul
    tf32 = dtype == "tf32"
    try:
        switch, wanted, previous = "allow_tf32", tf32, matmul.allow_tf32
    except RuntimeError:  # the user set the new API: stay on it
        switch, wanted, previous = "fp32_precision", "tf32" if tf32 else "ieee", matmul.fp32_precision
    reduced = {name: getattr(matmul, name) for name in REDUCED_PRECISION if hasattr(matmul, name)}
    setattr(matmul, switch, wanted)
    for name in reduced:
        setattr(matmul, name, False)
    try:
        yield
    finally:
        setattr(matmul, switch, previous)
        for name, value in reduced.items():
            setattr(matmul, name, value)


def describe(dtype: str) -> str:
    """The math a case of `dtype` runs in, as the line failure reports and repro scripts print."""
    tf32 = "TF32 on" if dtype == "tf32" else "TF32 off"
    return f"{tf32}; fp16/bf16 reduced-precision reductions off (set by gemmguard for the case)"
