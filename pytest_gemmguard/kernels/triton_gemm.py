"""gemmguard's own Triton GEMM: out = epilogue(a @ b + bias), one kernel, any strides, fused epilogues.

Two kernels behind one call:

* `_gemm_tiled`: one program per output tile, operands read through pointers with arbitrary strides and
  masked ragged edges, so every shape and layout of gemmguard's case space runs (transposed, sliced,
  offset, batched). It is also what the Triton interpreter runs on the CPU.
* `_gemm_tma`: on SM90 and later, for 2-D operands whose rows are 16-byte aligned with a unit inner stride,
  a persistent kernel that streams tiles with TMA tensor descriptors (Triton's `tl.make_tensor_descriptor`);
  each program walks many output tiles, so the prologue and the grid launch are paid once per SM.

Both accumulate in fp32 and apply the epilogue chain in fp32 registers before the one store: an op-level
bias (any tensor broadcastable to the output), then up to four steps from STEPS, in order. Rounding happens
once, at the store, in the output dtype (a "cast" step is that store's dtype, nothing in the kernel).

Autotuning picks among a small config set per (M, N, K, dtypes); the pruning keeps decode-shaped GEMMs
(small M) on small-M tiles and large ones on large tiles, so a first call tunes a handful of configs only.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

# The epilogue steps the kernel applies after the GEMM, by code (0 ends the chain). "cast" has no code:
# the output tensor's dtype is the cast.
STEPS = {"bias": 1, "relu": 2, "gelu": 3, "silu": 4, "sigmoid": 5, "tanh": 6, "scale": 7, "residual": 8}
MAX_STEPS = 4
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def interpreting() -> bool:
    """Triton's interpreter runs kernels on CPU tensors with numpy (TRITON_INTERPRET=1, read at import)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def takes(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    steps: tuple[str, ...] = (),
    epi_bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> str | None:
    """None when `gemm` can compute this; else one line saying why not. Looks only at shapes, strides and
    dtypes, so the graph pass can ask it about FakeTensors."""
    if a.dim() != b.dim() or a.dim() not in (2, 3):
        return f"operands must both be 2-D or both 3-D (got {a.dim()}-D and {b.dim()}-D)"
    if a.dtype not in DTYPES or b.dtype != a.dtype:
        return f"dtypes {a.dtype} x {b.dtype}: the kernel takes two float16, bfloat16 or float32 operands"
    if interpreting() and a.dtype == torch.bfloat16:
        return "the Triton interpreter misreads bfloat16 tensors (run bfloat16 on a GPU)"
    if a.shape[-1] != b.shape[-2] or (a.dim() == 3 and a.shape[0] != b.shape[0]):
        return f"shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply"
    rest = [s for s in steps if s != "cast"]
    if len(rest) > MAX_STEPS or any(s not in STEPS for s in rest):
        return f"epilogue {'+'.join(steps)}: the kernel fuses up to {MAX_STEPS} of {', '.join(STEPS)} (and cast)"
    out = (*a.shape[:-1], b.shape[-1])
    for name, t in (("bias", bias), ("residual", residual)):
        if t is not None and not _broadcasts(t.shape, out):
            return f"{name} of shape {tuple(t.shape)} does not broadcast to the output {out}"
    if ("bias" in steps) != (epi_bias is not None) or ("residual" in steps) != (residual is not None):
        return "a bias or residual step needs its tensor, and a tensor needs its step"
    if epi_bias is not None and not _broadcasts(epi_bias.shape, out):
        return f"epilogue bias of shape {tuple(epi_bias.shape)} does not broadcast to the output {out}"
    if out_dtype is not None and out_dtype not in DTYPES:
        return f"output dtype {out_dtype}: the kernel writes float16, bfloat16 or float32"
    return None


def _broadcasts(shape: tuple, out: tuple) -> bool:
    if len(shape) > len(out):
        return False
    return all(s in (1, o) for s, o in zip(reversed(shape), reversed(out), strict=False))


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    steps: tuple[str, ...] = (),
    epi_bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    scale: float = -1.5,
    out_dtype: torch.dtype | None = None,
    tf32: bool | None = None,
) -> torch.Tensor:
    """epilogue(a @ b + bias) in one kernel. `tf32`: float32 operands on TF32 tensor cores; None follows
    torch's own flag (torch.backends.cuda.matmul.allow_tf32), as torch.mm does."""
    why = takes(a, b, bias=bias, steps=steps, epi_bias=epi_bias, residual=residual, out_dtype=out_dtype)
    if why:
        raise ValueError(f"triton_gemm: {why}")
    batched = a.dim() == 3
    if not batched:
        a, b = a.unsqueeze(0), b.unsqueeze(0)
    batch, m, k = a.shape
    n = b.shape[-1]
    out = torch.empty((batch, m, n), device=a.device, dtype=out_dtype or a.dtype)
    if tf32 is None:
        tf32 = torch.backends.cuda.matmul.allow_tf32
    precision = "tf32" if (a.dtype == torch.float32 and tf32) else "ieee"
    codes = [STEPS[s] for s in steps if s != "cast"]
    codes += [0] * (MAX_STEPS - len(codes))

    def view3(t: torch.Tensor | None) -> tuple[torch.Tensor, tuple[int, int, int]]:
        if t is None:
            return out, (0, 0, 0)  # never read: the kernel's HAS_ flag is off
        t3 = t.expand(out.shape) if t.dim() == 3 else t.expand(out.shape[1:]).unsqueeze(0).expand(out.shape)
        return t3, tuple(t3.stride())

    bias3, s_bias = view3(bias)
    epi3, s_epi = view3(epi_bias)
    res3, s_res = view3(residual)
    if out.numel() == 0:
        return out if batched else out[0]
    args = (
        a,
        b,
        out,
        bias3,
        epi3,
        res3,
        batch,
        m,
        n,
        k,
        *a.stride(),
        *b.stride(),
        *out.stride(),
        *s_bias,
        *s_epi,
        *s_res,
        float(scale),
    )
    flags = dict(HAS_BIAS=bias is not None, S0=codes[0], S1=codes[1], S2=codes[2], S3=codes[3], PRECISION=precision)
    if _split_k_pays(m, n, k, batch, a):
        _launch_split_k(args, flags, out)
    elif not interpreting() and _tma_fits(a, b, out):
        _launch_tma(args, flags, a.device)
    elif interpreting():
        # The interpreter computes in numpy: one modest tile, no autotuning (timing means nothing there).
        grid = (triton.cdiv(m, 32) * triton.cdiv(n, 32), batch)
        _gemm_tiled[grid](*args, **flags, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8)
    else:

        def grid(meta: dict) -> tuple[int, int]:
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), batch)

        _tiled_tuned()[grid](*args, **flags)
    return out if batched else out[0]


# ---------------------------------------------------------------------------------------------- kernels

if interpreting():
    # The interpreter has no libdevice: numpy-backed stand-ins, accurate enough for its small CPU checks.
    @triton.jit
    def _tanh(x):
        return 2.0 * tl.sigmoid(2.0 * x) - 1.0

    @triton.jit
    def _erf(x):
        return tl.math.erf(x)
else:  # libdevice's tanh and erf are within an ulp or two
    _tanh = libdevice.tanh
    _erf = libdevice.erf


@triton.jit
def _step(x, code: tl.constexpr, epi, res, scale):
    if code == 1:
        x = x + epi
    elif code == 2:
        x = tl.maximum(x, 0.0)
    elif code == 3:
        x = 0.5 * x * (1.0 + _erf(x * 0.7071067811865476))
    elif code == 4:
        x = x * tl.sigmoid(x)
    elif code == 5:
        x = tl.sigmoid(x)
    elif code == 6:
        x = _tanh(x)
    elif code == 7:
        x = x * scale
    elif code == 8:
        x = x + res
    return x


@triton.jit
def _epilogue(
    acc,
    z,
    offs_m,
    offs_n,
    M,
    N,
    c_ptr,
    bias_ptr,
    epi_ptr,
    res_ptr,
    s_cb,
    s_cm,
    s_cn,
    s_xb,
    s_xm,
    s_xn,
    s_eb,
    s_em,
    s_en,
    s_rb,
    s_rm,
    s_rn,
    scale,
    HAS_BIAS: tl.constexpr,
    S0: tl.constexpr,
    S1: tl.constexpr,
    S2: tl.constexpr,
    S3: tl.constexpr,
):
    """Bias, the step chain, and the masked store of one tile (rows offs_m, columns offs_n of batch z)."""
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    z64 = z.to(tl.int64)
    om = offs_m[:, None].to(tl.int64)
    on = offs_n[None, :].to(tl.int64)
    x = acc
    if HAS_BIAS:
        x += tl.load(bias_ptr + z64 * s_xb + om * s_xm + on * s_xn, mask=mask, other=0.0).to(tl.float32)
    uses_epi: tl.constexpr = (S0 == 1) or (S1 == 1) or (S2 == 1) or (S3 == 1)
    uses_res: tl.constexpr = (S0 == 8) or (S1 == 8) or (S2 == 8) or (S3 == 8)
    epi = 0.0
    res = 0.0
    if uses_epi:
        epi = tl.load(epi_ptr + z64 * s_eb + om * s_em + on * s_en, mask=mask, other=0.0).to(tl.float32)
    if uses_res:
        res = tl.load(res_ptr + z64 * s_rb + om * s_rm + on * s_rn, mask=mask, other=0.0).to(tl.float32)
    x = _step(x, S0, epi, res, scale)
    x = _step(x, S1, epi, res, scale)
    x = _step(x, S2, epi, res, scale)
    x = _step(x, S3, epi, res, scale)
    tl.store(c_ptr + z64 * s_cb + om * s_cm + on * s_cn, x.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tile_of(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped ordering: GROUP_M row-tiles share each column-tile of B while it is in L2."""
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    first_m = (tile // per_group) * GROUP_M
    group_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + ((tile % per_group) % group_m)
    pid_n = (tile % per_group) // group_m
    return pid_m, pid_n


@triton.jit
def _gemm_tiled(
    a_ptr,
    b_ptr,
    c_ptr,
    bias_ptr,
    epi_ptr,
    res_ptr,
    B,
    M,
    N,
    K,
    s_ab,
    s_am,
    s_ak,
    s_bb,
    s_bk,
    s_bn,
    s_cb,
    s_cm,
    s_cn,
    s_xb,
    s_xm,
    s_xn,
    s_eb,
    s_em,
    s_en,
    s_rb,
    s_rm,
    s_rn,
    scale,
    HAS_BIAS: tl.constexpr,
    S0: tl.constexpr,
    S1: tl.constexpr,
    S2: tl.constexpr,
    S3: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    z = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge read row 0 / column 0 again (wrapped) instead of a masked load: the
    # loads stay unmasked in M and N, and the store's mask drops what they computed.
    rm = (offs_m % M).to(tl.int64)
    rn = (offs_n % N).to(tl.int64)
    a_ptrs = a_ptr + z.to(tl.int64) * s_ab + rm[:, None] * s_am + offs_k[None, :] * s_ak
    b_ptrs = b_ptr + z.to(tl.int64) * s_bb + offs_k[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kk * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    _epilogue(
        acc,
        z,
        offs_m,
        offs_n,
        M,
        N,
        c_ptr,
        bias_ptr,
        epi_ptr,
        res_ptr,
        s_cb,
        s_cm,
        s_cn,
        s_xb,
        s_xm,
        s_xn,
        s_eb,
        s_em,
        s_en,
        s_rb,
        s_rm,
        s_rn,
        scale,
        HAS_BIAS,
        S0,
        S1,
        S2,
        S3,
    )


def _configs() -> list[triton.Config]:
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, stages, warps
        (128, 256, 64, 3, 8),
        (256, 128, 64, 3, 8),
        (128, 128, 64, 4, 4),
        (128, 128, 32, 4, 4),
        (64, 128, 64, 4, 4),
        (64, 64, 64, 4, 4),
        # small M (decode): many programs over N, deep K tiles to keep the loads in flight
        (16, 64, 256, 4, 4),
        (16, 32, 256, 5, 4),
        (32, 64, 128, 4, 4),
        (16, 128, 128, 4, 4),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for bm, bn, bk, s, w in shapes
    ]


def _prune(configs: list, named_args: dict, **_: Any) -> list:
    """Keep the tiles that suit the problem: small-M tiles for decode shapes, no tile far larger than it."""
    m, n = named_args["M"], named_args["N"]
    fp32 = named_args["a_ptr"].dtype == torch.float32
    kept = []
    for c in configs:
        bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        if (m <= 32 and bm > 32) or (m > 64 and bm < 64):
            continue
        if bn > 2 * triton.next_power_of_2(n) and bn > 32:
            continue
        if fp32 and bm * bk + bk * bn > 128 * 64 + 64 * 128:  # fp32 tiles twice the bytes: shared memory
            continue
        kept.append(c)
    return kept or configs[-4:]


@functools.cache
def _tiled_tuned():
    return triton.autotune(
        configs=_configs(),
        key=["M", "N", "K", "s_ak", "s_bn", "PRECISION"],
        prune_configs_by={"early_config_prune": _prune},
    )(_gemm_tiled)


# -------------------------------------------------------------------------------- SM90: TMA, persistent
def _tma_fits(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """TMA needs SM90, a unit inner stride, 16-byte aligned row strides and base addresses; this kernel
    takes one GEMM (no batch) with A row-major and B row- or column-major."""
    if a.device.type != "cuda" or torch.cuda.get_device_capability(a.device) < (9, 0) or a.shape[0] != 1:
        return False
    if a.shape[2] == 0:  # a descriptor cannot describe an empty K: the tiled kernel writes the bias alone
        return False
    if os.environ.get("GEMMGUARD_KERNELS_TMA", "1") == "0" or a.dtype == torch.float32:
        return False
    size = a.element_size()

    def ok(t: torch.Tensor) -> bool:
        s = t.stride()
        inner = (s[2] == 1 and (s[1] * size) % 16 == 0) or (s[1] == 1 and (s[2] * size) % 16 == 0)
        return inner and t.data_ptr() % 16 == 0

    return a.stride(2) == 1 and ok(a) and ok(b)


@functools.cache
def _set_allocator() -> None:
    # Device-side tensor descriptors live in a scratch buffer the launcher asks for through this hook.
    def alloc(size: int, alignment: int, stream: Any) -> torch.Tensor:
        return torch.empty(size, device="cuda", dtype=torch.int8)

    triton.set_allocator(alloc)


@triton.jit
def _gemm_tma(
    a_ptr,
    b_ptr,
    c_ptr,
    bias_ptr,
    epi_ptr,
    res_ptr,
    B,
    M,
    N,
    K,
    s_ab,
    s_am,
    s_ak,
    s_bb,
    s_bk,
    s_bn,
    s_cb,
    s_cm,
    s_cn,
    s_xb,
    s_xm,
    s_xn,
    s_eb,
    s_em,
    s_en,
    s_rb,
    s_rm,
    s_rn,
    scale,
    HAS_BIAS: tl.constexpr,
    S0: tl.constexpr,
    S1: tl.constexpr,
    S2: tl.constexpr,
    S3: tl.constexpr,
    PRECISION: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[s_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    if B_KMAJOR:  # B stored column-major: read N x K tiles of B^T and transpose them in registers
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[s_bn, 1], block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[s_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_of(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            off_k = kk * BLOCK_K
            a = a_desc.load([off_m, off_k])  # TMA zero-fills what lies past the edge of the tensor
            if B_KMAJOR:
                b = b_desc.load([off_n, off_k]).T
            else:
                b = b_desc.load([off_k, off_n])
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        offs_m = off_m + tl.arange(0, BLOCK_M)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        _epilogue(
            acc,
            tl.program_id(1),
            offs_m,
            offs_n,
            M,
            N,
            c_ptr,
            bias_ptr,
            epi_ptr,
            res_ptr,
            s_cb,
            s_cm,
            s_cn,
            s_xb,
            s_xm,
            s_xn,
            s_eb,
            s_em,
            s_en,
            s_rb,
            s_rm,
            s_rn,
            scale,
            HAS_BIAS,
            S0,
            S1,
            S2,
            S3,
        )


def _tma_configs() -> list[triton.Config]:
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, stages, warps
        (128, 256, 64, 3, 8),
        (128, 128, 64, 4, 8),
        (128, 128, 64, 4, 4),
        (64, 128, 64, 4, 4),
        (16, 64, 256, 4, 4),
        (16, 32, 256, 5, 4),
        (32, 64, 128, 4, 4),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for bm, bn, bk, s, w in shapes
    ]


@functools.cache
def _tma_tuned():
    return triton.autotune(
        configs=_tma_configs(), key=["M", "N", "K", "B_KMAJOR"], prune_configs_by={"early_config_prune": _prune}
    )(_gemm_tma)


@functools.cache
def _sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _launch_tma(args: tuple, flags: dict, device: torch.device) -> None:
    _set_allocator()
    a, b = args[0][0], args[1][0]  # drop the batch of one: the descriptors are 2-D
    a_ptr_args = (a, b, *args[2:])
    b_kmajor = b.stride(0) == 1 and b.stride(1) != 1
    sms = _sms(device.index if device.index is not None else torch.cuda.current_device())
    m, n = args[7], args[8]

    def grid(meta: dict) -> tuple[int]:
        return (min(sms, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)

    _tma_tuned()[grid](*a_ptr_args, **flags, B_KMAJOR=b_kmajor, NUM_SMS=sms)


# ------------------------------------------------------------------ decode shapes: split K, then the epilogue
def _split_k_pays(m: int, n: int, k: int, batch: int, a: torch.Tensor) -> bool:
    """A few rows and a long K (decode: 16 x 4096 x 4096) leave most SMs idle with one program per tile:
    splitting K over several programs per tile streams B from every SM."""
    if os.environ.get("GEMMGUARD_KERNELS_SPLIT_K", "1") == "0" or a.device.type != "cuda" or interpreting():
        return False
    tiles = triton.cdiv(m, 16) * triton.cdiv(n, 64) * batch
    return m <= 64 and k >= 1024 and tiles < 2 * _sms(a.device.index or 0)


@triton.jit
def _gemm_split_k(
    a_ptr,
    b_ptr,
    ws_ptr,
    M,
    N,
    K,
    s_ab,
    s_am,
    s_ak,
    s_bb,
    s_bk,
    s_bn,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """One K slice of one output tile, added into a float32 workspace (batch, M, N)."""
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    z = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    k_tiles = tl.cdiv(K, BLOCK_K)
    per = tl.cdiv(k_tiles, SPLIT_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = split * per * BLOCK_K + tl.arange(0, BLOCK_K)
    rm = (offs_m % M).to(tl.int64)
    rn = (offs_n % N).to(tl.int64)
    a_ptrs = a_ptr + z * s_ab + rm[:, None] * s_am + offs_k[None, :] * s_ak
    b_ptrs = b_ptr + z * s_bb + offs_k[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(split * per, tl.minimum((split + 1) * per, k_tiles)):
        k_left = K - kk * BLOCK_K
        a = tl.load(a_ptrs, mask=tl.arange(0, BLOCK_K)[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=tl.arange(0, BLOCK_K)[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ws = ws_ptr + z * M * N + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.atomic_add(ws, acc, mask=mask, sem="relaxed")


@triton.jit
def _epilogue_of_sums(
    ws_ptr,
    c_ptr,
    bias_ptr,
    epi_ptr,
    res_ptr,
    M,
    N,
    s_cb,
    s_cm,
    s_cn,
    s_xb,
    s_xm,
    s_xn,
    s_eb,
    s_em,
    s_en,
    s_rb,
    s_rm,
    s_rn,
    scale,
    HAS_BIAS: tl.constexpr,
    S0: tl.constexpr,
    S1: tl.constexpr,
    S2: tl.constexpr,
    S3: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    z = tl.program_id(1)
    offs_m = tl.program_id(0) // tl.cdiv(N, BLOCK_N) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) % tl.cdiv(N, BLOCK_N) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ws = ws_ptr + z.to(tl.int64) * M * N + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    acc = tl.load(ws, mask=mask, other=0.0)
    _epilogue(
        acc,
        z,
        offs_m,
        offs_n,
        M,
        N,
        c_ptr,
        bias_ptr,
        epi_ptr,
        res_ptr,
        s_cb,
        s_cm,
        s_cn,
        s_xb,
        s_xm,
        s_xn,
        s_eb,
        s_em,
        s_en,
        s_rb,
        s_rm,
        s_rn,
        scale,
        HAS_BIAS,
        S0,
        S1,
        S2,
        S3,
    )


def _split_configs() -> list[triton.Config]:
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, stages, warps
        (16, 64, 128, 4, 4, 4),
        (16, 64, 256, 2, 4, 4),
        (16, 32, 256, 2, 4, 4),
        (16, 128, 128, 8, 4, 4),
        (16, 64, 128, 8, 3, 4),
        (32, 64, 128, 4, 4, 4),
    ]
    return [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "GROUP_M": 8}, num_stages=s, num_warps=w
        )
        for bm, bn, bk, sk, s, w in shapes
    ]


@functools.cache
def _split_tuned():
    # Every config adds into the workspace: the autotuner zeroes it before each of its timing runs.
    return triton.autotune(
        configs=_split_configs(), key=["M", "N", "K", "s_ak", "s_bn", "PRECISION"], reset_to_zero=["ws_ptr"]
    )(_gemm_split_k)


def _launch_split_k(args: tuple, flags: dict, out: torch.Tensor) -> None:
    a, b, c, bias, epi, res, batch, m, n, k = args[:10]
    s_a, s_b, s_c = args[10:13], args[13:16], args[16:19]
    ws = torch.zeros((batch, m, n), device=a.device, dtype=torch.float32)

    def grid(meta: dict) -> tuple[int, int, int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), batch, meta["SPLIT_K"])

    _split_tuned()[grid](a, b, ws, m, n, k, *s_a, *s_b, PRECISION=flags["PRECISION"])
    steps = {key: flags[key] for key in ("HAS_BIAS", "S0", "S1", "S2", "S3")}
    grid2 = (triton.cdiv(m, 16) * triton.cdiv(n, 128), batch)
    _epilogue_of_sums[grid2](
        ws, c, bias, epi, res, m, n, *s_c, *args[19:28], args[28], **steps, BLOCK_M=16, BLOCK_N=128
    )
