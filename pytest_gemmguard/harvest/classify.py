"""Which ATen ops are GEMMs (and which GEMM-like ops gemmguard cannot express, and why), and one GEMM node
of the export graph -> a HarvestedGemm, or (what, why) when gemmguard has no case for it."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..cases.case import GemmCase, scale_specs
from ..cases.ops import FLOAT_DTYPES, FP8, OPS, gemm_out_dtype
from .epilogue import epilogue
from .items import HarvestedGemm
from .layouts import flip, layout_of, rows_of, storage
from .nodes import bind, traced_dtype, val, what_of

GEMM_OPS = ("linear", "mm", "addmm", "bmm", "baddbmm", "_scaled_mm")
_FUSED_ATTENTION = "fused attention, not a GEMM of Inductor's GEMM backends: its matmuls run in one attention kernel"
NOT_EXPRESSIBLE = {
    "scaled_dot_product_attention": _FUSED_ATTENTION,
    "_scaled_dot_product_flash_attention": _FUSED_ATTENTION,
    "_scaled_dot_product_flash_attention_for_cpu": _FUSED_ATTENTION,
    "_scaled_dot_product_efficient_attention": _FUSED_ATTENTION,
    "_scaled_dot_product_cudnn_attention": _FUSED_ATTENTION,
    "_flash_attention_forward": _FUSED_ATTENTION,
    "_efficient_attention_forward": _FUSED_ATTENTION,
    "_transformer_encoder_layer_fwd": "a fused native transformer layer: its GEMMs are inside one kernel "
    "(trace with autograd on, or on the meta device, to see them)",
    "_native_multi_head_attention": "fused native attention: its GEMMs are inside one kernel",
    "mv": "a matrix-vector product: Inductor's GEMM backends have no template for it",
    "addmv": "a matrix-vector product: Inductor's GEMM backends have no template for it",
    "dot": "a vector dot product, not a GEMM",
    "vdot": "a vector dot product, not a GEMM",
    "addr": "an outer product, not a GEMM",
    "addbmm": "addbmm (a batch-reduced GEMM): gemmguard has no case for it",
    "_int_mm": "an int8 GEMM: gemmguard's cases are float32, tf32, float16, bfloat16 and float8",
    "_weight_int8pack_mm": "a weight-only int8 GEMM: gemmguard has no case for it",
    "_weight_int4pack_mm": "a weight-only int4 GEMM: gemmguard has no case for it",
    "_grouped_mm": "a grouped GEMM: gemmguard has no case for it",
    "_scaled_grouped_mm": "a grouped float8 GEMM: gemmguard has no case for it",
    "convolution": "a convolution: gemmguard checks GEMMs, not Inductor's convolution kernels",
}


def classify(node: Any, name: str) -> HarvestedGemm | tuple[str, str]:
    """The GEMM node `node` (ATen op `name`, one of GEMM_OPS) as a case, or (what, why) when it has none."""
    args = bind(node)
    out = val(node)
    what = what_of(node, name)
    if out is None:
        return what, "no traced output value"
    if name == "linear":
        x, w, bias = val(args["input"]), val(args["weight"]), val(args["bias"])
        n, k = w.shape
        m = math.prod(x.shape[:-1]) if x.dim() > 1 else 1
        a_store, w_store = rows_of(x), storage(w)
        if bias is not None:
            if tuple(bias.shape) != (n,):
                return what, f"a linear bias of shape {tuple(bias.shape)}: gemmguard's linear takes ({n},)"
            op, operands, batch = "linear", (a_store, w_store), 0
        else:
            # gemmguard's linear always has a bias; without one the GEMM is mm(x, w.t()) exactly as
            # Inductor compiles it (B = w.t(), column-major for a row-major weight).
            op, operands, batch = "mm", (a_store, flip(w_store)), 0
        dtype_of = x
    elif name in ("mm", "addmm"):
        a, b = val(args["mat1" if name == "addmm" else "self"]), val(args["mat2"])
        (m, k), n, batch = a.shape, b.shape[1], 0
        if name == "addmm":
            why = _unit_coefficients(args) or _vector_bias(val(args["self"]), n)
            if why:
                return what, why
        op, operands, dtype_of = name, (storage(a), storage(b)), a
    elif name in ("bmm", "baddbmm"):
        a, b = val(args["batch1" if name == "baddbmm" else "self"]), val(args["mat2" if name == "bmm" else "batch2"])
        batch, m, k = a.shape
        n = b.shape[2]
        if name == "baddbmm":
            bias = val(args["self"])
            why = _unit_coefficients(args)
            if not why and (tuple(bias.shape) != (batch, m, n) or storage(bias) != "row"):
                why = f"a baddbmm bias {tuple(bias.shape)}: gemmguard's baddbmm takes a full ({batch}, {m}, {n})"
            if why:
                return what, why
        op, operands, dtype_of = name, (storage(a), storage(b)), a
    else:  # _scaled_mm
        return _classify_scaled(node, args, what)
    dtype = traced_dtype(dtype_of.dtype)
    if dtype is None or dtype == FP8:
        traced = str(dtype_of.dtype).removeprefix("torch.")
        return what, f"dtype {traced}: gemmguard's {op} takes {', '.join(FLOAT_DTYPES)}"
    layout = layout_of(*operands)
    if layout is None:
        return what, f"operand storage ({', '.join(operands)}) is none of gemmguard's layouts"
    return HarvestedGemm(op, m, n, k, batch, dtype, layout, epilogue(node, n, gemm_out_dtype(dtype)), 1, operands)


def _unit_coefficients(args: dict[str, Any]) -> str | None:
    alpha, beta = args.get("alpha", 1), args.get("beta", 1)
    if alpha != 1 or beta != 1:
        return f"alpha={alpha}, beta={beta}: gemmguard's ops add the bias with alpha = beta = 1"
    return None


def _vector_bias(bias: Any, n: int) -> str | None:
    """None when an addmm bias is one value per column, (N,) (or (1, N), or (M, N) broadcast from it)."""
    if bias is None:
        return "no bias value"
    shape, stride = tuple(bias.shape), tuple(bias.stride())
    if shape == (n,) or (len(shape) == 2 and shape[1] == n and (shape[0] == 1 or stride[0] == 0)):
        return None
    return f"an addmm bias of shape {shape}: gemmguard's addmm takes ({n},)"


def _block_recipe(sa: tuple, sb: tuple, m: int, n: int, k: int) -> str | None:
    """The blockwise op whose scales (cases/case.py scale_specs, the shapes gemmguard builds) have these shapes."""
    for op, spec in OPS.items():
        if spec.scale_blocks and k % spec.k_align == 0:
            specs = scale_specs(GemmCase(op, m, n, k, 0, FP8, "transposed_b"))
            if (sa, sb) == (specs["scale_a"][0], specs["scale_b"][0]):
                return op
    return None


def _classify_scaled(node: Any, args: dict[str, Any], what: str) -> HarvestedGemm | tuple[str, str]:
    a, b = val(args["self"]), val(args["mat2"])
    sa, sb = val(args["scale_a"]), val(args["scale_b"])
    (m, k), n = a.shape, b.shape[1]
    problems = []
    if a.dtype != torch.float8_e4m3fn or b.dtype != torch.float8_e4m3fn:
        problems.append(f"operands {a.dtype}/{b.dtype} (gemmguard's scaled ops are float8_e4m3fn)")
    if args.get("out_dtype") not in (torch.bfloat16,):
        problems.append(f"out_dtype {args.get('out_dtype')} (gemmguard's scaled ops write bfloat16)")
    if args.get("bias") is not None or args.get("scale_result") is not None:
        problems.append("a bias or result scale")
    if args.get("use_fast_accum"):
        problems.append("use_fast_accum=True (gemmguard's scaled ops accumulate in full)")
    if sa is None or sb is None or sa.dtype != torch.float32 or sb.dtype != torch.float32:
        problems.append("scales that are not float32 tensors")
        op = None
    elif sa.numel() == 1 and sb.numel() == 1:
        op = "scaled_mm"
    elif tuple(sa.shape) == (m, 1) and tuple(sb.shape) == (1, n):
        op = "scaled_mm_rowwise"
    else:
        op = _block_recipe(tuple(sa.shape), tuple(sb.shape), m, n, k)
        if op is None:
            problems.append(
                f"scales of shapes {tuple(sa.shape)}, {tuple(sb.shape)} (tensor-wise, row-wise, or blockwise "
                "1x128/128x128 with K a multiple of 128)"
            )
    operands = (storage(a), storage(b))
    layout = layout_of(*operands)
    if layout != "transposed_b":
        problems.append(f"operand storage ({', '.join(operands)}); torch._scaled_mm wants (row, col)")
    if problems:
        return what, "; ".join(problems)
    return HarvestedGemm(op, m, n, k, 0, FP8, layout, epilogue(node, n, gemm_out_dtype(FP8)), 1, operands)
