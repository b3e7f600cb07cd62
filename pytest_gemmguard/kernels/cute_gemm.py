"""gemmguard's own CuteDSL GEMM (CUTLASS 4 Python DSL), for NVIDIA Hopper (SM90).

    out = epilogue(a @ b + bias)        a: (M,K) or (B,M,K), b: (K,N) or (B,K,N), fp16/bf16

Two paths.  On a GPU of compute capability 8.x, and on Hopper under ``GEMMGUARD_CUTE_ARCH=sm80``, the
SM80-class kernel of kernels/cute_gemm_sm80.py runs (warp-level ``mma.sync``; any layout, plain and
general rather than fast; compiled and checked on the CPU for sm_80 and sm_90a, not yet run on a GPU).
Otherwise the Hopper kernel below; other GPUs are refused by ``takes()``.

Hopper kernel:

* warp specialised and persistent: warpgroup 0 is the producer (one warp issues TMA loads of the
  A and B tiles into a ring of shared-memory stages, guarded by full/empty mbarriers); warpgroups
  1..n are consumers that run warpgroup MMAs (WGMMA, fp32 accumulators) straight out of shared
  memory, then apply the epilogue in fp32 registers and store to global memory with bounds masks.
  Each CTA walks the output tiles ``blockIdx.x, blockIdx.x + gridDim.x, ...`` so that the producer
  already streams the next tile's operands while the consumers finish the previous epilogue.
* tile order: tiles are grouped in bands of ``GROUP_M`` tile rows so neighbouring CTAs share
  A rows and B columns in L2.
* configurations (picked per shape): 128x256x64 with two consumer warpgroups (4 stages),
  128x128x64 with two consumer warpgroups (6 stages), and a decode config 64x32x128 with one
  consumer warpgroup (8 stages) for M <= 64, where the many N tiles keep every SM streaming B.
* switches, read at every call (``env_flags()``), measured on the H200 with ``scripts/check_cute.py
  --optin`` (2026-12-01; 195 opt-in cases, 0 wrong; the current numbers: docs/validation/kernels.md):
  - split-K for decode, ON by default (``GEMMGUARD_CUTE_SPLIT_K=0`` turns it off): M <= 64, K >= 1024,
    and only when the output tiles alone cannot fill the SMs (and, since 2026-12-03, not where loading only
    A's rows applies and the 64x32 tiles fill the SMs: that unsplit kernel is faster, see below): config 64x128x64, one consumer
    warpgroup, 8 stages; the work units are (K slice, tile) pairs, slice-major, walked persistently;
    each unit's fp32 partial sums go by atomic adds into a zeroed fp32 workspace (M, N padded to 4),
    and a second small kernel applies bias + the step chain once and writes the output.  pick_split()
    takes the slice count that minimises waves / slices (16x4096x4096: 32 tiles x 4 slices = 128
    CTAs).  Kernel time (CUDA graph) 16x4096x4096: 19.9 -> 14.5 us (cuBLAS 9.6).  A/B role swap (N
    in the MMA's M) was not done: the decode kernel is bound by streaming B through TMA, not by the
    MMA rows wasted on M = 16.
  - only A's rows, ON by default (``GEMMGUARD_CUTE_A_ROWS=0`` turns it off): in a decode config with M
    <= 32 and A K-major, each stage's TMA loads only the first 8, 16 or 32 rows of A (M rounded up; boxes
    of rows x 64, one per 64-wide K atom), so a box reaches past M by at most 15 rows instead of up to 63:
    TMA's bounds check on a box reaching far past M made every load slow.  Then the unsplit decode kernel beats split-K wherever its 64x32 tiles fill the SMs, and
    split-K is not used there.  Kernel time (CUDA graph) 16x4096x4096: 14.4 (split-K) -> 8.0 us (cuBLAS
    10.3); through gemmguard's fixture 7.15 us against cuBLAS 8.66 (2026-12-03, docs/validation/kernels.md).
  - branch epilogue, ON by default (``GEMMGUARD_CUTE_BRANCH_EPI=0`` turns it off): the epilogue
    converts / applies the chain only inside the full-tile and in-bounds branches; with the old
    epilogue ptxas reports C7514 (WGMMAs serialised) for every config.  4096^3: 254 -> 233 us.
  - ``GEMMGUARD_CUTE_RASTER=16``, off by default: bands of 16 tile rows instead of 8 for the
    large config; 4096^3 faster by kernel time, 8192^3 slower by do_bench: no clear win.
* layouts: A and B may each be K-major or M/N-major (row- or column-major); the output is a new
  row-major tensor.  Ragged M, N and K come from TMA's out-of-bounds zero fill plus epilogue masks.
* epilogue, in order: op-level ``bias`` (any tensor broadcastable to the output, read through its
  strides, so zero strides are fine), then ``steps`` from bias / relu / gelu (erf) / silu /
  sigmoid / tanh / scale / residual / cast.

Compiled variants are keyed on (dtype, layouts, config, epilogue chain, operand dtypes, out dtype,
output alignment), kept in an in-process dict and on disk: CuteDSL's AOT route (``export_to_c`` writes
the host code and cubin as one object file, ``cutlass.runtime.load_module`` loads it back: 3 ms against
1.7 s to compile for sm_90a on the 2-core CPU machine; a cold compile on the H200 took 7.5-11 s; loading
there is not yet measured), one file per variant named by a digest of its key, this file's source,
the CuteDSL version and the target GPU, written atomically.  The directory is
``GEMMGUARD_CUTE_CACHE_DIR`` (``off``: no disk cache); unset, ``~/.cache/gemmguard/cute_gemm``.  Under
gemmguard the directory follows its cache policy: a fresh one per run, or ``--gemm-kernel-cache``'s.
A file that does not load is compiled again and replaced, with one warning.
The scale factor is a runtime argument, so it does not cause recompiles.
Nothing CUDA or CuteDSL is imported at module import time.
"""

import hashlib
import math
import os
import platform
import shutil
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, replace

STEP_NAMES = ("bias", "relu", "gelu", "silu", "sigmoid", "tanh", "scale", "residual", "cast")
GROUP_M = 8
_INT32_MAX = 2**31 - 1

_lock = threading.Lock()
_compiled: dict = {}
_compile_seconds: dict = {}
_sm_count: dict = {}


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class TileConfig:
    bm: int
    bn: int
    bk: int
    consumers: int  # consumer warpgroups; each owns bm // consumers rows of the tile
    stages: int
    split_k: bool = False  # K sliced over several CTAs per tile, fp32 atomics + a separate epilogue kernel
    group_m: int = GROUP_M  # tile rows per raster band
    # epilogue reads the accumulators only inside the full-tile / in-bounds branches: without it
    # ptxas (C7514) serialises the WGMMAs ("non wgmma instructions reading accumulator registers")
    branch_epi: bool = False
    # rows of A a stage loads (8, 16 or 32; 0 = all bm): a decode M below the tile, A K-major.  TMA checks
    # the bounds of a box that reaches past M on every load, and that costs (DeepGEMM issue 35); the A
    # stage's rows past a_rows stay stale and feed only output rows the epilogue never stores
    a_rows: int = 0

    @property
    def name(self) -> str:
        extra = ("_sk" if self.split_k else "") + (f"_g{self.group_m}" if self.group_m != GROUP_M else "")
        extra += "_be" if self.branch_epi else ""
        extra += f"_a{self.a_rows}" if self.a_rows else ""
        return f"{self.bm}x{self.bn}x{self.bk}_w{self.consumers}_s{self.stages}{extra}"


CFG_LARGE = TileConfig(128, 256, 64, 2, 4)
CFG_MID = TileConfig(128, 128, 64, 2, 6)
CFG_DECODE = TileConfig(64, 32, 128, 1, 8)
# switched by env_flags(): decode split-K (on), and a 4096^3 raster variant (bands of 16 tile rows; off)
CFG_DECODE_SK = TileConfig(64, 128, 64, 1, 8, split_k=True)
CFG_LARGE_G16 = TileConfig(128, 256, 64, 2, 4, group_m=16)
_BASE_CONFIGS = (CFG_LARGE, CFG_MID, CFG_DECODE, CFG_DECODE_SK, CFG_LARGE_G16)
_WITH_BE = (*_BASE_CONFIGS, *(replace(c, branch_epi=True) for c in _BASE_CONFIGS if not c.split_k))
A_ROWS = (8, 16, 32)  # divisors of the decode tile's 64 rows
CONFIGS = {
    c.name: c
    for c in (*_WITH_BE, *(replace(c, a_rows=r) for c in _WITH_BE if c.bm == 64 and c.consumers == 1 for r in A_ROWS))
}

SPLIT_K_MAX = 16
SPLIT_K_MIN_K = 1024  # below this K the second launch costs more than the split gains


def env_flags() -> dict:
    """The switches, read at call time (so one process can compare them); the module docstring has
    what each does and what it measured:

    * ``GEMMGUARD_CUTE_SPLIT_K``: split-K in the decode regime (CFG_DECODE_SK), on unless ``0``;
    * ``GEMMGUARD_CUTE_RASTER=16``: the large config walks bands of 16 tile rows (CFG_LARGE_G16), off;
    * ``GEMMGUARD_CUTE_BRANCH_EPI``: every non-split config gets ``branch_epi`` (suffix ``_be``), on
      unless ``0``;
    * ``GEMMGUARD_CUTE_A_ROWS``: a decode config loads only the rows of A that exist, rounded up to 8, 16
      or 32 (``a_rows``, suffix ``_a8``...), when A is K-major; on unless ``0``.
    """
    return {
        "split_k": os.environ.get("GEMMGUARD_CUTE_SPLIT_K", "1") != "0",
        "raster16": os.environ.get("GEMMGUARD_CUTE_RASTER", "") == "16",
        "branch_epi": os.environ.get("GEMMGUARD_CUTE_BRANCH_EPI", "1") != "0",
        "a_rows": os.environ.get("GEMMGUARD_CUTE_A_ROWS", "1") != "0",
    }


def with_a_rows(cfg: TileConfig, m: int, a_kmajor: bool) -> TileConfig:
    """`cfg` loading only the rows of A that exist (TileConfig.a_rows), where that applies: a decode
    config (one consumer warpgroup, 64 rows), M below 64 and within 32, A K-major, the switch on."""
    if not (env_flags()["a_rows"] and a_kmajor and cfg.bm == 64 and cfg.consumers == 1 and not cfg.a_rows):
        return cfg
    rows = next((r for r in A_ROWS if m <= r), 0)
    return replace(cfg, a_rows=rows) if rows else cfg


def pick_split(cfg: TileConfig, m: int, n: int, k: int, batch: int, sms: int = 132) -> int:
    """K slices per output tile for a split-K config: the count that minimises waves / slices (the
    time of one slice is ~1/slices of the whole K), smallest on ties, at least one k-tile a slice."""
    if not cfg.split_k:
        return 1
    tiles = batch * math.ceil(m / cfg.bm) * math.ceil(n / cfg.bn)
    k_tiles = math.ceil(k / cfg.bk)
    best, best_cost = 1, float("inf")
    for s in range(1, min(SPLIT_K_MAX, k_tiles) + 1):
        cost = math.ceil(tiles * s / sms) / s
        if cost < best_cost - 1e-9:
            best, best_cost = s, cost
    return best


def pick_config(m: int, n: int, batch: int, sms: int = 132, k: int | None = None, a_kmajor: bool = False) -> TileConfig:
    cfg = _pick_config(m, n, batch, sms, k, a_kmajor)
    if env_flags()["branch_epi"] and not cfg.split_k:
        cfg = replace(cfg, branch_epi=True)
    return with_a_rows(cfg, m, a_kmajor)


def _pick_config(m: int, n: int, batch: int, sms: int, k: int | None, a_kmajor: bool) -> TileConfig:
    flags = env_flags()
    if m <= 64:
        # Loading only A's rows (a_rows) makes the unsplit decode kernel faster than split-K and than cuBLAS
        # where its tiles fill the SMs (H200 kernel time, N = 4096, 128 tiles: M = 1, 8, 16, 32 at 8.4, 7.8,
        # 8.0, 8.6 us unsplit against 10.9-12.9 split; cuBLAS 9.8-10.7); with fewer tiles split-K stays.
        fills = batch * math.ceil(n / CFG_DECODE.bn) >= 0.9 * sms
        if fills and with_a_rows(CFG_DECODE, m, a_kmajor).a_rows:
            return CFG_DECODE
        # Split-K only for a ragged M: with M a whole decode tile the branch epilogue's full-tile path is
        # faster still (H200 kernel time, 4096x4096: M = 64 9.5 us unsplit vs 14.4 split; M = 16 18.5 vs 14.5).
        if (
            flags["split_k"]
            and m % CFG_DECODE.bm != 0
            and k is not None
            and k >= SPLIT_K_MIN_K
            and batch * m * ((n + 3) // 4 * 4) <= _INT32_MAX  # the padded workspace, 32-bit indexed
            and pick_split(CFG_DECODE_SK, m, n, k, batch, sms) > 1
        ):
            return CFG_DECODE_SK
        return CFG_DECODE
    big_tiles = batch * math.ceil(m / 128) * math.ceil(n / 256)
    if big_tiles >= sms:
        return CFG_LARGE_G16 if flags["raster16"] else CFG_LARGE
    return CFG_MID


# --------------------------------------------------------------------------- operand checks


def _is_int(*xs) -> bool:
    return all(isinstance(x, int) for x in xs)


def _operand_problem(name: str, t) -> str | None:
    """16-byte TMA rule for a 16-bit operand: a unit stride in the last two dims, every other stride
    and the storage offset a multiple of 8 elements."""
    shape, stride = list(t.shape), list(t.stride())
    off = t.storage_offset()
    if not _is_int(*shape, *stride, off):
        return f"operand {name} has symbolic sizes or strides"
    if stride[-1] == 1 or (shape[-1] == 1 and stride[-2] != 1):
        unit = len(shape) - 1
    elif stride[-2] == 1:
        unit = len(shape) - 2
    else:
        return f"operand {name} has no unit stride in its last two dims (strides {tuple(stride)})"
    for i, s in enumerate(stride):
        if i != unit and s % 8:
            return f"operand {name} stride {s} (dim {i}) is not a multiple of 8 elements (16 bytes)"
    if off % 8:
        return f"operand {name} storage offset {off} is not a multiple of 8 elements (16 bytes)"
    if len(shape) == 3 and shape[0] > 1 and stride[0] == 0:
        return f"operand {name} is broadcast over the batch (stride 0): TMA needs a real batch stride"
    span = sum((d - 1) * s for d, s in zip(shape, stride, strict=True)) + 1 + off
    if span > _INT32_MAX:
        return f"operand {name} spans more than 2**31 elements (32-bit indexing)"
    return None


def _unit_dim(t) -> int:
    """Index (within the last two dims, from the end: -1 or -2) of an operand's unit stride."""
    stride = t.stride()
    if stride[-1] == 1 or (t.shape[-1] == 1 and stride[-2] != 1):
        return -1
    return -2


def _broadcast_ok(t, out_shape) -> bool:
    try:
        import torch

        return tuple(torch.broadcast_shapes(tuple(t.shape), tuple(out_shape))) == tuple(out_shape)
    except Exception:
        return False


_device_verdict: dict = {}


def _device_problem(a) -> str | None:
    dev = getattr(a, "device", None)
    if dev is None or dev.type not in ("cuda", "meta"):
        return f"operands are on {getattr(dev, 'type', dev)}, not CUDA"
    key = dev.index if dev.type == "cuda" else "meta"
    if key not in _device_verdict:  # the machine does not change under us: ask once per device
        _device_verdict[key] = _device_problem_uncached(dev)
    return _device_verdict[key]


def _device_problem_uncached(dev) -> str | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return "no CUDA device on this machine"
        index = dev.index if dev.type == "cuda" and dev.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
    except Exception as e:  # pragma: no cover - depends on the machine
        return f"cannot query the CUDA device ({type(e).__name__}: {e})"
    if major not in (8, 9):
        return f"this kernel has an SM90 (Hopper) and an SM80-class path; the device is sm_{major}{minor}"
    try:
        import cutlass
        import cutlass.cute  # noqa: F401
    except Exception as e:
        return f"nvidia-cutlass-dsl is not importable ({type(e).__name__}: {e})"
    return None


def uses_sm80(a) -> bool:
    """Whether gemm() runs `a`'s device on the SM80-class path (kernels/cute_gemm_sm80.py): a GPU of compute
    capability 8.x, or a Hopper one under ``GEMMGUARD_CUTE_ARCH=sm80``."""
    dev = getattr(a, "device", None)
    if dev is None or dev.type not in ("cuda", "meta"):
        return False
    key = ("major", dev.index if dev.type == "cuda" else "meta")
    if key not in _device_verdict:
        try:
            import torch

            index = dev.index if dev.type == "cuda" and dev.index is not None else torch.cuda.current_device()
            _device_verdict[key] = torch.cuda.get_device_capability(index)[0]
        except Exception:
            _device_verdict[key] = None
    major = _device_verdict[key]
    return major == 8 or (major == 9 and os.environ.get("GEMMGUARD_CUTE_ARCH", "").lower() == "sm80")


def _sm80_operand_problem(name: str, t) -> str | None:
    """The SM80-class path reads operands element by element through their strides: any layout goes, as
    long as every offset fits 32 bits."""
    shape, stride, off = list(t.shape), list(t.stride()), t.storage_offset()
    if not _is_int(*shape, *stride, off):
        return f"operand {name} has symbolic sizes or strides"
    if sum((d - 1) * abs(s) for d, s in zip(shape, stride, strict=True)) + 1 + off > _INT32_MAX:
        return f"operand {name} spans more than 2**31 elements (32-bit indexing)"
    if len(shape) == 3 and shape[0] > 65535:
        return f"batch {shape[0]} exceeds the grid's 65535 in z (one CTA row per batch entry)"
    return None


def takes(a, b, *, bias=None, steps=(), epi_bias=None, residual=None, out_dtype=None) -> str | None:
    """None when gemm() can run these operands on this machine; else one line saying why not.

    Looks only at shapes, strides, dtypes and storage offsets (works on FakeTensors/meta tensors)."""
    import torch

    half = (torch.float16, torch.bfloat16)
    if a.dtype not in half or b.dtype != a.dtype:
        return f"operands must be fp16 or bf16 of one dtype (got {a.dtype}, {b.dtype})"
    if a.dim() not in (2, 3) or b.dim() != a.dim():
        return f"operands must both be 2-D or both 3-D (got {a.dim()}-D and {b.dim()}-D)"
    if a.shape[-1] != b.shape[-2]:
        return f"inner dims differ: a {tuple(a.shape)}, b {tuple(b.shape)}"
    if a.dim() == 3 and a.shape[0] != b.shape[0]:
        return f"batch sizes differ: a {tuple(a.shape)}, b {tuple(b.shape)}"
    if not _is_int(*a.shape, *b.shape):
        return "symbolic shapes"
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if k == 0:
        return "K == 0 (nothing for the MMA to do)"
    operand_problem = _sm80_operand_problem if uses_sm80(a) else _operand_problem
    for name, t in (("A", a), ("B", b)):
        why = operand_problem(name, t)
        if why:
            return why
    out_dtype = a.dtype if out_dtype is None else out_dtype
    if out_dtype not in (*half, torch.float32):
        return f"output dtype {out_dtype} is not fp16/bf16/fp32"
    out_shape = (*a.shape[:-1], n)
    if m * n * (a.shape[0] if a.dim() == 3 else 1) > _INT32_MAX:
        return "output has more than 2**31 elements (32-bit indexing)"
    epi_ok = (torch.float16, torch.bfloat16, torch.float32)
    if bias is not None:
        if bias.dtype not in epi_ok:
            return f"bias dtype {bias.dtype} is not fp16/bf16/fp32"
        if not _broadcast_ok(bias, out_shape):
            return f"bias {tuple(bias.shape)} does not broadcast to the output {out_shape}"
    steps = tuple(steps)
    for s in steps:
        if s not in STEP_NAMES:
            return f"epilogue step {s!r} is not supported (supported: {', '.join(STEP_NAMES)})"
    if "bias" in steps:
        if epi_bias is None:
            return "step 'bias' needs epi_bias"
        if epi_bias.dtype not in epi_ok or epi_bias.dim() != 1 or epi_bias.shape[0] != n:
            return f"epi_bias must be a length-{n} fp16/bf16/fp32 vector (got {tuple(epi_bias.shape)} {epi_bias.dtype})"
    if "residual" in steps:
        if residual is None:
            return "step 'residual' needs residual"
        if residual.dtype not in epi_ok:
            return f"residual dtype {residual.dtype} is not fp16/bf16/fp32"
        if not _broadcast_ok(residual, out_shape):
            return f"residual {tuple(residual.shape)} does not broadcast to the output {out_shape}"
    for name, t in (("bias", bias), ("epi_bias", epi_bias), ("residual", residual)):
        if t is not None and not _is_int(*t.shape, *t.stride(), t.storage_offset()):
            return f"{name} has symbolic sizes or strides"
    return _device_problem(a)


# --------------------------------------------------------------------------- the CuteDSL kernel


def _epilogue_apply(v, r, c, l, cfgkey, mBias, mEpiBias, mRes, scale):
    """fp32 epilogue of one accumulator element at output (r, c, l); trace-time Python, so the
    step chain unrolls into straight-line code."""
    import cutlass
    import cutlass.cute as cute

    has_bias, steps = cfgkey
    if has_bias:
        v = v + mBias[(r, c, l)].to(cutlass.Float32)
    for s in steps:
        if s == "bias":
            v = v + mEpiBias[c].to(cutlass.Float32)
        elif s == "relu":
            v = cute.arch.fmax(v, cutlass.Float32(0.0))
        elif s == "gelu":
            v = (
                cutlass.Float32(0.5)
                * v
                * (cutlass.Float32(1.0) + cute.math.erf(v * cutlass.Float32(0.7071067811865476)))
            )
        elif s == "silu":
            v = v / (cutlass.Float32(1.0) + cute.math.exp(-v))
        elif s == "sigmoid":
            v = cutlass.Float32(1.0) / (cutlass.Float32(1.0) + cute.math.exp(-v))
        elif s == "tanh":
            v = cute.math.tanh(v)
        elif s == "scale":
            v = v * scale
        elif s == "residual":
            v = v + mRes[(r, c, l)].to(cutlass.Float32)
        # "cast": the output dtype is chosen separately; nothing to do in registers
    return v


def _epilogue_views(pBias, pEpiBias, pRes, M, N, L, bias_strides, epi_stride, res_strides):
    """The epilogue's operands as tensors, in trace-time Python (each kernel's host call builds them alike):
    bias and residual (M, N, L) with any strides (0 where broadcast), the per-column bias (N,)."""
    import cutlass.cute as cute

    mBias = cute.make_tensor(pBias, cute.make_layout((M, N, L), stride=bias_strides))
    mEpiBias = cute.make_tensor(pEpiBias, cute.make_layout((N,), stride=(epi_stride,)))
    mRes = cute.make_tensor(pRes, cute.make_layout((M, N, L), stride=res_strides))
    return mBias, mEpiBias, mRes


def _build_kernel_class():
    """Define the kernel class lazily (it needs cutlass at class-definition time)."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    import cutlass.pipeline as pipeline
    import cutlass.utils.hopper_helpers as sm90
    from cutlass.cute.nvgpu import cpasync, warpgroup
    from cutlass.memory import SmemAllocator

    try:
        from cutlass.tensor_utils import LayoutEnum
    except ImportError:  # CuteDSL before 4.8 has it only here (deprecated since)
        from cutlass.utils import LayoutEnum

    Int32, Float32 = cutlass.Int32, cutlass.Float32

    class Sm90Gemm:
        """One compiled variant; every attribute is a compile-time constant."""

        def __init__(
            self,
            ab_dtype,
            out_dtype,
            a_kmajor,
            b_kmajor,
            cfg: TileConfig,
            bias_dtype,
            epi_bias_dtype,
            res_dtype,
            steps,
            c_aligned=True,
        ):
            self.c_aligned = c_aligned  # output row/batch strides are multiples of 8: vector stores
            self.ab_dtype = ab_dtype
            self.out_dtype = out_dtype
            self.a_kmajor = a_kmajor
            self.b_kmajor = b_kmajor
            self.cfg = cfg
            self.bias_dtype = bias_dtype
            self.epi_bias_dtype = epi_bias_dtype
            self.res_dtype = res_dtype
            self.has_bias = bias_dtype is not None
            self.steps = tuple(steps)
            self.tile = (cfg.bm, cfg.bn, cfg.bk)
            self.threads = 128 * (1 + cfg.consumers)
            # shared memory: both operand rings (1024-byte aligned for the swizzle) + 2 barriers/stage
            self.a_stage_bytes = cfg.bm * cfg.bk * ab_dtype.width // 8
            self.a_load_bytes = (cfg.a_rows or cfg.bm) * cfg.bk * ab_dtype.width // 8  # what TMA brings
            self.b_stage_bytes = cfg.bn * cfg.bk * ab_dtype.width // 8
            self.smem_bytes = (self.a_stage_bytes + self.b_stage_bytes) * cfg.stages + 3 * 1024 + 16 * cfg.stages

        def _epi(self, v, r, c, l, mBias, mEpiBias, mRes, scale):
            """Epilogue of one in-bounds accumulator element, converted to the output dtype."""
            if cutlass.const_expr(self.has_bias or len(self.steps) > 0):
                v = _epilogue_apply(v, r, c, l, (self.has_bias, self.steps), mBias, mEpiBias, mRes, scale)
            return v.to(self.out_dtype)

        def _unit(self, u, num_tiles, split, k_tiles):
            """Work unit -> (output tile, first k-tile, end k-tile).  Split-K units are slice-major,
            so CTAs running at once work on different tiles; the host keeps split <= k_tiles, so no
            slice is empty."""
            if cutlass.const_expr(self.cfg.split_k):
                s = u // num_tiles
                return u - s * num_tiles, (s * k_tiles) // split, ((s + 1) * k_tiles) // split
            return u, Int32(0), k_tiles

        # ---------------------------------------------------------------- host side

        @cute.jit
        def __call__(
            self,
            pA: cute.Pointer,
            pB: cute.Pointer,
            pC: cute.Pointer,
            pBias: cute.Pointer,
            pEpiBias: cute.Pointer,
            pRes: cute.Pointer,
            M: Int32,
            N: Int32,
            K: Int32,
            L: Int32,
            sA0: Int32,
            sAL: Int32,
            sB0: Int32,
            sBL: Int32,
            sCM: Int32,
            sCL: Int32,
            sBiasM: Int32,
            sBiasN: Int32,
            sBiasL: Int32,
            sEpi: Int32,
            sResM: Int32,
            sResN: Int32,
            sResL: Int32,
            scale: Float32,
            max_ctas: Int32,
            pWs: cute.Pointer,
            sWsM: Int32,
            sWsL: Int32,
            split: Int32,
            stream: cuda.CUstream,
        ):
            # Global views in CuTe's (row, reduction, batch) convention: A (M,K,L), B (N,K,L), C (M,N,L).
            if cutlass.const_expr(self.a_kmajor):
                mA = cute.make_tensor(
                    pA, cute.make_layout((M, K, L), stride=(cute.assume(sA0, divby=8), 1, cute.assume(sAL, divby=8)))
                )
            else:
                mA = cute.make_tensor(
                    pA, cute.make_layout((M, K, L), stride=(1, cute.assume(sA0, divby=8), cute.assume(sAL, divby=8)))
                )
            if cutlass.const_expr(self.b_kmajor):
                mB = cute.make_tensor(
                    pB, cute.make_layout((N, K, L), stride=(cute.assume(sB0, divby=8), 1, cute.assume(sBL, divby=8)))
                )
            else:
                mB = cute.make_tensor(
                    pB, cute.make_layout((N, K, L), stride=(1, cute.assume(sB0, divby=8), cute.assume(sBL, divby=8)))
                )
            if cutlass.const_expr(self.c_aligned):
                mC = cute.make_tensor(
                    pC, cute.make_layout((M, N, L), stride=(cute.assume(sCM, divby=8), 1, cute.assume(sCL, divby=8)))
                )
            else:
                mC = cute.make_tensor(pC, cute.make_layout((M, N, L), stride=(sCM, 1, sCL)))
            mBias, mEpiBias, mRes = _epilogue_views(
                pBias, pEpiBias, pRes, M, N, L, (sBiasM, sBiasN, sBiasL), sEpi, (sResM, sResN, sResL)
            )
            # split-K: the fp32 partial-sum workspace (unused, and pointing anywhere, otherwise)
            mWs = cute.make_tensor(pWs, cute.make_layout((M, N, L), stride=(sWsM, 1, sWsL)))

            a_layout = LayoutEnum.ROW_MAJOR if cutlass.const_expr(self.a_kmajor) else LayoutEnum.COL_MAJOR
            # LayoutEnum speaks of the (rows, K) view: ROW_MAJOR = K contiguous, for A and for B (N,K)
            b_layout = LayoutEnum.ROW_MAJOR if cutlass.const_expr(self.b_kmajor) else LayoutEnum.COL_MAJOR
            cfg = self.cfg
            tiled_mma = sm90.make_trivial_tiled_mma(
                self.ab_dtype,
                self.ab_dtype,
                a_layout.sm90_mma_major_mode(),
                b_layout.sm90_mma_major_mode(),
                Float32,
                (cfg.consumers, 1, 1),
                (cfg.bm // cfg.consumers, cfg.bn),
            )
            sA_layout = sm90.make_smem_layout_a(a_layout, self.tile, self.ab_dtype, cfg.stages)
            sB_layout = sm90.make_smem_layout_b(b_layout, self.tile, self.ab_dtype, cfg.stages)

            if cutlass.const_expr(cfg.a_rows):
                assert cfg.bk in (64, 128), "the producer issues one or two a_rows boxes per stage"
                # boxes of a_rows x 64 (one 128-byte swizzle atom of K), bk // 64 of them per stage
                box = cute.select(sm90.make_smem_layout_a(a_layout, (cfg.a_rows, cfg.bn, 64), self.ab_dtype, 1), [0, 1])
                tma_a, gA_tma = cpasync.make_tiled_tma_atom(
                    cpasync.CopyBulkTensorTileG2SOp(), mA, box, (cfg.a_rows, 64)
                )
            else:
                tma_a, gA_tma = cpasync.make_tiled_tma_atom(
                    cpasync.CopyBulkTensorTileG2SOp(), mA, cute.select(sA_layout, mode=[0, 1]), (cfg.bm, cfg.bk)
                )
            tma_b, gB_tma = cpasync.make_tiled_tma_atom(
                cpasync.CopyBulkTensorTileG2SOp(), mB, cute.select(sB_layout, mode=[0, 1]), (cfg.bn, cfg.bk)
            )

            tiles_m = (M + cfg.bm - 1) // cfg.bm
            tiles_n = (N + cfg.bn - 1) // cfg.bn
            num_tiles = tiles_m * tiles_n * L
            # work units: (K slice, tile) pairs, slice-major; without split-K one unit per tile
            num_units = num_tiles * split if cutlass.const_expr(cfg.split_k) else num_tiles
            grid = cutlass.min(num_units, max_ctas)
            self.kernel(
                tma_a,
                gA_tma,
                tma_b,
                gB_tma,
                mC,
                mBias,
                mEpiBias,
                mRes,
                mWs,
                scale,
                tiled_mma,
                sA_layout,
                sB_layout,
                M,
                N,
                K,
                tiles_m,
                tiles_n,
                num_tiles,
                split,
                num_units,
            ).launch(grid=[grid, 1, 1], block=[self.threads, 1, 1], smem=self.smem_bytes, stream=stream)

        # ---------------------------------------------------------------- device side

        @cute.kernel
        def kernel(
            self,
            tma_a: cute.CopyAtom,
            gA_tma: cute.Tensor,
            tma_b: cute.CopyAtom,
            gB_tma: cute.Tensor,
            mC: cute.Tensor,
            mBias: cute.Tensor,
            mEpiBias: cute.Tensor,
            mRes: cute.Tensor,
            mWs: cute.Tensor,
            scale: Float32,
            tiled_mma: cute.TiledMma,
            sA_layout: cute.ComposedLayout,
            sB_layout: cute.ComposedLayout,
            M: Int32,
            N: Int32,
            K: Int32,
            tiles_m: Int32,
            tiles_n: Int32,
            num_tiles: Int32,
            split: Int32,
            num_units: Int32,
        ):
            cfg = self.cfg
            bm, bn, bk = self.tile
            tidx, _, _ = cute.arch.thread_idx()
            warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
            bid, _, _ = cute.arch.block_idx()
            nblk, _, _ = cute.arch.grid_dim()

            if warp == 0:
                cpasync.prefetch_descriptor(tma_a)
                cpasync.prefetch_descriptor(tma_b)

            smem = SmemAllocator()
            bars = smem.allocate_array(cutlass.Int64, num_elems=2 * cfg.stages, byte_alignment=8)
            sA = smem.allocate_tensor(self.ab_dtype, sA_layout.outer, byte_alignment=1024, swizzle=sA_layout.inner)
            sB = smem.allocate_tensor(self.ab_dtype, sB_layout.outer, byte_alignment=1024, swizzle=sB_layout.inner)

            ring = pipeline.PipelineTmaAsync.create(
                num_stages=cfg.stages,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
                # consumer_release arrives once per consumer warp
                consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 4 * cfg.consumers),
                tx_count=self.a_load_bytes + self.b_stage_bytes,
                barrier_storage=bars,
                cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)),
            )

            # (BM, BK, m, k, l) and (BN, BK, n, k, l) tile views of the TMA coordinate tensors
            gA = cute.local_tile(
                gA_tma, (cfg.a_rows or bm, 64 if cutlass.const_expr(cfg.a_rows) else bk), (None, None, None)
            )
            gB = cute.local_tile(gB_tma, (bn, bk), (None, None, None))
            # with a_rows: the first a_rows rows of each 64-wide K atom of a stage (atoms a == 0, 1)
            sA0 = cute.local_tile(sA, (cfg.a_rows, 64), (0, 0, None)) if cutlass.const_expr(cfg.a_rows) else sA
            tAsA, tAgA = cpasync.tma_partition(
                tma_a, 0, cute.make_layout(1), cute.group_modes(sA0, 0, 2), cute.group_modes(gA, 0, 2)
            )
            tAsA1 = tAsA
            if cutlass.const_expr(cfg.a_rows and bk == 128):
                tAsA1, _ = cpasync.tma_partition(
                    tma_a,
                    0,
                    cute.make_layout(1),
                    cute.group_modes(cute.local_tile(sA, (cfg.a_rows, 64), (0, 1, None)), 0, 2),
                    cute.group_modes(gA, 0, 2),
                )
            tBsB, tBgB = cpasync.tma_partition(
                tma_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2)
            )
            k_tiles = (K + bk - 1) // bk
            group_m = cfg.group_m
            band = group_m * tiles_n
            per_batch = tiles_m * tiles_n

            if warp < 4:
                # ------------------------------------------------------------ producer warpgroup
                cute.arch.setmaxregister_decrease(40)
                if warp == 0:
                    wstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, cfg.stages)
                    for u in cutlass.range(bid, num_units, nblk, unroll=1):
                        t, kt0, kt1 = self._unit(u, num_tiles, split, k_tiles)
                        l = t // per_batch
                        r = t - l * per_batch
                        first_m = (r // band) * group_m
                        rows = cutlass.min(tiles_m - first_m, group_m)
                        in_band = r - (r // band) * band
                        tm = first_m + in_band % rows
                        tn = in_band // rows
                        for kt in cutlass.range(kt0, kt1, unroll=1):
                            ring.producer_acquire(wstate)
                            if cutlass.const_expr(cfg.a_rows):
                                # one tile of M (M < bm): the box row index is 0
                                cute.copy(
                                    tma_a,
                                    tAgA[(None, 0, kt * (bk // 64), l)],
                                    tAsA[(None, wstate.index)],
                                    tma_bar_ptr=ring.producer_get_barrier(wstate),
                                )
                                if cutlass.const_expr(bk == 128):
                                    cute.copy(
                                        tma_a,
                                        tAgA[(None, 0, kt * 2 + 1, l)],
                                        tAsA1[(None, wstate.index)],
                                        tma_bar_ptr=ring.producer_get_barrier(wstate),
                                    )
                            else:
                                cute.copy(
                                    tma_a,
                                    tAgA[(None, tm, kt, l)],
                                    tAsA[(None, wstate.index)],
                                    tma_bar_ptr=ring.producer_get_barrier(wstate),
                                )
                            cute.copy(
                                tma_b,
                                tBgB[(None, tn, kt, l)],
                                tBsB[(None, wstate.index)],
                                tma_bar_ptr=ring.producer_get_barrier(wstate),
                            )
                            ring.producer_commit(wstate)
                            wstate.advance()
                    ring.producer_tail(wstate)
            else:
                # ------------------------------------------------------------ consumer warpgroups
                cute.arch.setmaxregister_increase(232 if cfg.consumers == 2 else 240)
                ctid = tidx - 128
                thr_mma = tiled_mma.get_slice(ctid)
                tCsA = thr_mma.partition_A(sA)
                tCsB = thr_mma.partition_B(sB)
                tCrA = tiled_mma.make_fragment_A(tCsA)
                tCrB = tiled_mma.make_fragment_B(tCsB)
                acc = tiled_mma.make_fragment_C(thr_mma.partition_shape_C((bm, bn)))
                tCcC = thr_mma.partition_C(cute.make_identity_tensor((bm, bn)))
                kblocks = cute.size(tCrA, mode=[2])
                # accumulator pairs are adjacent columns: store them 32 bits (64 for fp32) at a time
                store_atom = cute.make_copy_atom(
                    cute.nvgpu.CopyUniversalOp(), self.out_dtype, num_bits_per_copy=2 * self.out_dtype.width
                )

                rstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, cfg.stages)
                fstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, cfg.stages)
                for u in cutlass.range(bid, num_units, nblk, unroll=1):
                    t, kt0, kt1 = self._unit(u, num_tiles, split, k_tiles)
                    l = t // per_batch
                    r = t - l * per_batch
                    first_m = (r // band) * group_m
                    rows = cutlass.min(tiles_m - first_m, group_m)
                    in_band = r - (r // band) * band
                    tm = first_m + in_band % rows
                    tn = in_band // rows

                    # first k-tile: overwrite the accumulators
                    tiled_mma.set(warpgroup.Field.ACCUMULATE, False)
                    ring.consumer_wait(rstate)
                    warpgroup.fence()
                    for kb in cutlass.range_constexpr(kblocks):
                        cute.gemm(
                            tiled_mma,
                            acc,
                            tCrA[(None, None, kb, rstate.index)],
                            tCrB[(None, None, kb, rstate.index)],
                            acc,
                        )
                        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
                    warpgroup.commit_group()
                    rstate.advance()
                    # later k-tiles: keep one WGMMA batch in flight, free the stage before it
                    for kt in cutlass.range(kt0 + 1, kt1, unroll=1):
                        ring.consumer_wait(rstate)
                        warpgroup.fence()
                        for kb in cutlass.range_constexpr(kblocks):
                            cute.gemm(
                                tiled_mma,
                                acc,
                                tCrA[(None, None, kb, rstate.index)],
                                tCrB[(None, None, kb, rstate.index)],
                                acc,
                            )
                        warpgroup.commit_group()
                        warpgroup.wait_group(1)
                        ring.consumer_release(fstate)
                        fstate.advance()
                        rstate.advance()
                    warpgroup.wait_group(0)
                    ring.consumer_release(fstate)
                    fstate.advance()

                    row0 = tm * bm
                    col0 = tn * bn
                    if cutlass.const_expr(cfg.split_k):
                        # this K slice's partial sums into the fp32 workspace; the epilogue kernel runs later
                        mWs_l = mWs[(None, None, l)]
                        for i in cutlass.range_constexpr(cute.size(acc)):
                            rr = row0 + tCcC[i][0]
                            cc = col0 + tCcC[i][1]
                            if rr < M and cc < N:
                                cute.arch.atomic_add(mWs_l.iterator + cute.crd2idx((rr, cc), mWs_l.layout), acc[i])
                    elif cutlass.const_expr(cfg.branch_epi):
                        # epilogue read of acc only inside the branches (see TileConfig.branch_epi);
                        # every element read there is in bounds, so no clamping
                        gC = cute.local_tile(mC[(None, None, l)], (bm, bn), (tm, tn))
                        tCgC = thr_mma.partition_C(gC)
                        if cutlass.const_expr(self.c_aligned):
                            if row0 + bm <= M and col0 + bn <= N:
                                out = cute.make_rmem_tensor_like(acc, self.out_dtype)
                                for i in cutlass.range_constexpr(cute.size(acc)):
                                    out[i] = self._epi(
                                        acc[i], row0 + tCcC[i][0], col0 + tCcC[i][1], l, mBias, mEpiBias, mRes, scale
                                    )
                                cute.copy(store_atom, out, tCgC)
                            else:
                                for i in cutlass.range_constexpr(cute.size(acc)):
                                    rr = row0 + tCcC[i][0]
                                    cc = col0 + tCcC[i][1]
                                    if rr < M and cc < N:
                                        tCgC[i] = self._epi(acc[i], rr, cc, l, mBias, mEpiBias, mRes, scale)
                        else:
                            for i in cutlass.range_constexpr(cute.size(acc)):
                                rr = row0 + tCcC[i][0]
                                cc = col0 + tCcC[i][1]
                                if rr < M and cc < N:
                                    tCgC[i] = self._epi(acc[i], rr, cc, l, mBias, mEpiBias, mRes, scale)
                    else:
                        # epilogue in fp32 registers, masked store
                        gC = cute.local_tile(mC[(None, None, l)], (bm, bn), (tm, tn))
                        tCgC = thr_mma.partition_C(gC)
                        out = cute.make_rmem_tensor_like(acc, self.out_dtype)
                        for i in cutlass.range_constexpr(cute.size(acc)):
                            rr = row0 + tCcC[i][0]
                            cc = col0 + tCcC[i][1]
                            v = acc[i]
                            if cutlass.const_expr(self.has_bias or len(self.steps) > 0):
                                # out-of-range lanes read a valid element instead (their result is dropped)
                                rs = cutlass.min(rr, M - 1)
                                cs = cutlass.min(cc, N - 1)
                                v = _epilogue_apply(
                                    v, rs, cs, l, (self.has_bias, self.steps), mBias, mEpiBias, mRes, scale
                                )
                            out[i] = v.to(self.out_dtype)
                        if cutlass.const_expr(self.c_aligned):
                            if row0 + bm <= M and col0 + bn <= N:
                                cute.copy(store_atom, out, tCgC)
                            else:
                                for i in cutlass.range_constexpr(cute.size(acc)):
                                    if row0 + tCcC[i][0] < M and col0 + tCcC[i][1] < N:
                                        tCgC[i] = out[i]
                        else:
                            for i in cutlass.range_constexpr(cute.size(acc)):
                                if row0 + tCcC[i][0] < M and col0 + tCcC[i][1] < N:
                                    tCgC[i] = out[i]

    return Sm90Gemm


EPI_THREADS = 256
EPI_COLS = 4  # adjacent output columns per thread of the split-K epilogue kernel


def _build_epilogue_class():
    """The split-K epilogue: out[r, c, l] = epilogue(ws[r, c, l]), one thread per EPI_COLS columns
    of one row, so a warp reads a contiguous run of the fp32 workspace."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute

    Int32, Float32 = cutlass.Int32, cutlass.Float32

    class SplitKEpilogue:
        def __init__(self, out_dtype, bias_dtype, epi_bias_dtype, res_dtype, steps):
            self.out_dtype = out_dtype
            self.has_bias = bias_dtype is not None
            self.steps = tuple(steps)

        @cute.jit
        def __call__(
            self,
            pWs: cute.Pointer,
            pC: cute.Pointer,
            pBias: cute.Pointer,
            pEpiBias: cute.Pointer,
            pRes: cute.Pointer,
            M: Int32,
            N: Int32,
            L: Int32,
            sWsM: Int32,
            sWsL: Int32,
            sCM: Int32,
            sCL: Int32,
            sBiasM: Int32,
            sBiasN: Int32,
            sBiasL: Int32,
            sEpi: Int32,
            sResM: Int32,
            sResN: Int32,
            sResL: Int32,
            scale: Float32,
            stream: cuda.CUstream,
        ):
            mWs = cute.make_tensor(pWs, cute.make_layout((M, N, L), stride=(sWsM, 1, sWsL)))
            mC = cute.make_tensor(pC, cute.make_layout((M, N, L), stride=(sCM, 1, sCL)))
            mBias, mEpiBias, mRes = _epilogue_views(
                pBias, pEpiBias, pRes, M, N, L, (sBiasM, sBiasN, sBiasL), sEpi, (sResM, sResN, sResL)
            )
            col_groups = (N + EPI_COLS - 1) // EPI_COLS
            work = col_groups * M * L
            grid = (work + EPI_THREADS - 1) // EPI_THREADS
            self.kernel(mWs, mC, mBias, mEpiBias, mRes, scale, M, N, col_groups, work).launch(
                grid=[grid, 1, 1], block=[EPI_THREADS, 1, 1], stream=stream
            )

        @cute.kernel
        def kernel(
            self,
            mWs: cute.Tensor,
            mC: cute.Tensor,
            mBias: cute.Tensor,
            mEpiBias: cute.Tensor,
            mRes: cute.Tensor,
            scale: Float32,
            M: Int32,
            N: Int32,
            col_groups: Int32,
            work: Int32,
        ):
            tidx, _, _ = cute.arch.thread_idx()
            bid, _, _ = cute.arch.block_idx()
            w = bid * EPI_THREADS + tidx
            if w < work:
                row = w // col_groups
                c0 = (w - row * col_groups) * EPI_COLS
                l = row // M
                r = row - l * M
                for j in cutlass.range_constexpr(EPI_COLS):
                    c = c0 + j
                    if c < N:
                        v = mWs[(r, c, l)]
                        v = _epilogue_apply(v, r, c, l, (self.has_bias, self.steps), mBias, mEpiBias, mRes, scale)
                        mC[(r, c, l)] = v.to(self.out_dtype)

    return SplitKEpilogue


_kernel_cls = None
_epi_cls = None


def _cls():
    global _kernel_cls
    if _kernel_cls is None:
        _kernel_cls = _build_kernel_class()
    return _kernel_cls


_sm80 = None


def _sm80_cls():
    """cute_gemm_sm80.py's kernel class, loaded by path from beside this file: that works however this
    module itself was loaded (as part of pytest_gemmguard.kernels, or by its own path)."""
    global _sm80
    if _sm80 is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cute_gemm_sm80.py")
        spec = importlib.util.spec_from_file_location("gemmguard_kernels_cute_gemm_sm80", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _sm80 = module.build(_epilogue_apply, _epilogue_views)
    return _sm80


def _epilogue_cls():
    global _epi_cls
    if _epi_cls is None:
        _epi_cls = _build_epilogue_class()
    return _epi_cls


def _cutlass_dtype(torch_dtype):
    import cutlass
    import torch

    return {torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16, torch.float32: cutlass.Float32}[
        torch_dtype
    ]


def variant_key(ab, out, a_kmajor, b_kmajor, cfg, bias_dt, epi_dt, res_dt, steps, c_aligned=True):
    return (
        str(ab),
        str(out),
        a_kmajor,
        b_kmajor,
        cfg.name,
        str(bias_dt),
        str(epi_dt),
        str(res_dt),
        tuple(steps),
        c_aligned,
    )


def _compile(key, ab, out, a_kmajor, b_kmajor, cfg, bias_dt, epi_dt, res_dt, steps, c_aligned):
    """Compile one variant (no GPU needed if CUTE_DSL_ARCH is set).  Returns the compiled callable."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    gemm_cls = _cls()
    cd = _cutlass_dtype
    obj = gemm_cls(
        cd(ab),
        cd(out),
        a_kmajor,
        b_kmajor,
        cfg,
        None if bias_dt is None else cd(bias_dt),
        None if epi_dt is None else cd(epi_dt),
        None if res_dt is None else cd(res_dt),
        steps,
        c_aligned,
    )
    gmem = cute.AddressSpace.gmem

    def p(dt, align=16):
        return make_ptr(dt, 16, gmem, assumed_align=align)

    aux = cutlass.Float32
    z = cutlass.Int32(8)
    args = [
        p(cd(ab)),
        p(cd(ab)),
        p(cd(out)),
        p(cd(bias_dt) if bias_dt is not None else aux, 2),
        p(cd(epi_dt) if epi_dt is not None else aux, 2),
        p(cd(res_dt) if res_dt is not None else aux, 2),
        *[z] * 17,
        cutlass.Float32(1.0),
        z,
        p(cutlass.Float32, 4),
        z,
        z,
        z,
        make_fake_stream(),
    ]
    t0 = time.perf_counter()
    fn = cute.compile(obj, *args)
    _compile_seconds[key] = time.perf_counter() - t0
    return fn


def _compile_epilogue(key, out, bias_dt, epi_dt, res_dt, steps):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    cd = _cutlass_dtype
    obj = _epilogue_cls()(
        cd(out),
        None if bias_dt is None else cd(bias_dt),
        None if epi_dt is None else cd(epi_dt),
        None if res_dt is None else cd(res_dt),
        steps,
    )
    gmem = cute.AddressSpace.gmem
    aux = cutlass.Float32

    def p(dt, align):
        return make_ptr(dt, 16, gmem, assumed_align=align)

    z = cutlass.Int32(8)
    args = [
        p(cutlass.Float32, 4),
        p(cd(out), 2),
        p(cd(bias_dt) if bias_dt is not None else aux, 2),
        p(cd(epi_dt) if epi_dt is not None else aux, 2),
        p(cd(res_dt) if res_dt is not None else aux, 2),
        *[z] * 14,
        cutlass.Float32(1.0),
        make_fake_stream(),
    ]
    t0 = time.perf_counter()
    fn = cute.compile(obj, *args)
    _compile_seconds[key] = time.perf_counter() - t0
    return fn


# --------------------------------------------------------------------------- the disk cache

_fingerprint_text: str | None = None
disk_stats = {"loaded": 0, "compiled": 0, "written": 0, "unreadable": 0}


def cache_dir() -> str | None:
    """Where compiled variants are kept on disk (None: not at all), read at every compile."""
    d = os.environ.get("GEMMGUARD_CUTE_CACHE_DIR", "")
    if d.lower() == "off":
        return None
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gemmguard", "cute_gemm")


def _fingerprint() -> str:
    """What else a compiled file depends on: the kernels' sources, the CuteDSL version, the GPU it targets."""
    global _fingerprint_text
    if _fingerprint_text is None:
        import cutlass

        arch = os.environ.get("CUTE_DSL_ARCH", "")
        if not arch:
            import torch

            cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
            arch = f"sm_{cap[0]}{cap[1]}" if cap else "none"
        digest = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        for name in ("cute_gemm.py", "cute_gemm_sm80.py"):
            with open(os.path.join(here, name), "rb") as f:
                digest.update(f.read())
        source = digest.hexdigest()
        # One target per process (a host mixing 8.x and 9.x GPUs would need the device in the key), and the
        # host code is compiled for this machine's CPU architecture
        _fingerprint_text = f"{source}|{getattr(cutlass, '__version__', '?')}|{arch}|{platform.machine()}"
    return _fingerprint_text


def _on_disk(key, build):
    """build() (a cute.compile), or the same variant loaded from the disk cache; a fresh build is written
    there atomically (a temporary directory beside it, then a rename), so a reader never sees half a file."""
    d = cache_dir()
    if d is None:
        disk_stats["compiled"] += 1
        return build()
    digest = hashlib.sha256(repr((key, _fingerprint())).encode()).hexdigest()[:32]
    path, prefix = os.path.join(d, f"{digest}.o"), f"gg_{digest}"
    if os.path.exists(path):
        try:
            from cutlass import runtime

            fn = getattr(runtime.load_module(path), prefix)
            disk_stats["loaded"] += 1
            return fn
        except Exception as exc:  # a truncated or foreign file: compile again and replace it
            disk_stats["unreadable"] += 1
            warnings.warn(
                f"kernels/cute_gemm.py: {path} did not load ({type(exc).__name__}); compiling it again", stacklevel=3
            )
    fn = build()
    disk_stats["compiled"] += 1
    tmp = None
    try:
        os.makedirs(d, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-", dir=d)
        fn.export_to_c(tmp, "variant", prefix)
        os.replace(os.path.join(tmp, "variant.o"), path)
        disk_stats["written"] += 1
    except Exception as exc:  # a read-only or full disk: the compiled function still serves this process
        warnings.warn(f"kernels/cute_gemm.py: could not keep a compiled variant in {d}: {exc}", stacklevel=3)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return fn


def compile_epilogue(out, bias_dt=None, epi_dt=None, res_dt=None, steps=()):
    """The split-K epilogue kernel for one epilogue chain (compiled once, then from memory or disk)."""
    key = ("splitk_epilogue", str(out), str(bias_dt), str(epi_dt), str(res_dt), tuple(steps))
    with _lock:
        fn = _compiled.get(key)
        if fn is None:
            fn = _on_disk(key, lambda: _compile_epilogue(key, out, bias_dt, epi_dt, res_dt, tuple(steps)))
            _compiled[key] = fn
    return fn


def _compile_sm80(key, ab, out, bias_dt, epi_dt, res_dt, steps):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    cd = _cutlass_dtype
    obj = _sm80_cls()(
        cd(ab),
        cd(out),
        None if bias_dt is None else cd(bias_dt),
        None if epi_dt is None else cd(epi_dt),
        None if res_dt is None else cd(res_dt),
        steps,
    )
    gmem = cute.AddressSpace.gmem
    aux = cutlass.Float32

    def p(dt):
        return make_ptr(dt, 16, gmem, assumed_align=2)

    z = cutlass.Int32(8)
    args = [
        p(cd(ab)),
        p(cd(ab)),
        p(cd(out)),
        p(cd(bias_dt) if bias_dt is not None else aux),
        p(cd(epi_dt) if epi_dt is not None else aux),
        p(cd(res_dt) if res_dt is not None else aux),
        *[z] * 19,
        cutlass.Float32(1.0),
        make_fake_stream(),
    ]
    t0 = time.perf_counter()
    fn = cute.compile(obj, *args)
    _compile_seconds[key] = time.perf_counter() - t0
    return fn


def compile_sm80(ab, out, bias_dt=None, epi_dt=None, res_dt=None, steps=()):
    """One SM80-class variant (any layout: strides are runtime values), compiled once, then from memory or disk."""
    key = ("sm80", str(ab), str(out), str(bias_dt), str(epi_dt), str(res_dt), tuple(steps))
    with _lock:
        fn = _compiled.get(key)
        if fn is None:
            fn = _on_disk(key, lambda: _compile_sm80(key, ab, out, bias_dt, epi_dt, res_dt, tuple(steps)))
            _compiled[key] = fn
    return fn


def compile_variant(ab, out, a_kmajor, b_kmajor, cfg, bias_dt=None, epi_dt=None, res_dt=None, steps=(), c_aligned=True):
    """One compiled variant (compiled once, then from memory or disk)."""
    key = variant_key(ab, out, a_kmajor, b_kmajor, cfg, bias_dt, epi_dt, res_dt, steps, c_aligned)
    with _lock:
        fn = _compiled.get(key)
        if fn is None:
            fn = _on_disk(
                key, lambda: _compile(key, ab, out, a_kmajor, b_kmajor, cfg, bias_dt, epi_dt, res_dt, steps, c_aligned)
            )
            _compiled[key] = fn
    return fn


def cold_compile_seconds() -> dict:
    """Seconds each compiled variant took to compile in this process (key -> s)."""
    return {"|".join(map(str, k)): round(v, 3) for k, v in _compile_seconds.items()}


def _sms(device) -> int:
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _sm_count:
        _sm_count[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _sm_count[idx]


def _epilogue_operands(bias, steps, epi_bias, residual, out_shape, batched):
    """The epilogue's operands as each kernel reads them: bias and residual as (L, M, N) views of the output's
    shape (broadcast by zero strides), epi_bias only where a step reads it (None where none does); then
    their dtypes and the seven strides every kernel takes after the output's (bias M, N, L; epi_bias; residual
    M, N, L; 0 for what is absent)."""

    def view(t):
        t = t.expand(out_shape)
        return t if batched else t.unsqueeze(0)

    def s3(t):
        return [t.stride(1), t.stride(2), t.stride(0)] if t is not None else [0, 0, 0]

    bias3 = view(bias) if bias is not None else None
    res3 = view(residual) if "residual" in steps else None
    epi = epi_bias if "bias" in steps else None
    dtypes = tuple(None if t is None else t.dtype for t in (bias3, epi, res3))
    strides = [*s3(bias3), epi.stride(0) if epi is not None else 0, *s3(res3)]
    return bias3, epi, res3, dtypes, strides


def gemm(a, b, *, bias=None, steps=(), epi_bias=None, residual=None, scale=-1.5, out_dtype=None, config=None):
    """out = epilogue(a @ b + bias).  Raises ValueError (takes()'s reason) when takes() refuses.

    ``config``: optional TileConfig (or its name) to force a tile configuration (benchmarks); without
    it pick_config() chooses, reading the opt-in env switches (env_flags()) at this call."""
    why = takes(a, b, bias=bias, steps=steps, epi_bias=epi_bias, residual=residual, out_dtype=out_dtype)
    if why:
        raise ValueError(why)
    import cutlass
    import cutlass.cute as cute
    import torch
    from cuda.bindings import driver as cuda
    from cutlass.cute.runtime import make_ptr

    steps = tuple(steps)
    out_dtype = a.dtype if out_dtype is None else out_dtype
    batched = a.dim() == 3
    L = a.shape[0] if batched else 1
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    out_shape = (L, M, N) if batched else (M, N)
    out = torch.empty(out_shape, dtype=out_dtype, device=a.device)
    if M == 0 or N == 0 or L == 0:
        return out
    a3 = a if batched else a.unsqueeze(0)
    b3 = b if batched else b.unsqueeze(0)
    c3 = out if batched else out.unsqueeze(0)
    if uses_sm80(a):
        _gemm_sm80(a3, b3, c3, out_shape, batched, bias, steps, epi_bias, residual, scale)
        return out
    a_kmajor = _unit_dim(a) == -1
    b_kmajor = _unit_dim(b) == -2
    # A (M,K): K-major -> stride of M; else stride of K.  B (K,N): K-major -> stride of N; else stride of K.
    sA0 = a3.stride(1) if a_kmajor else a3.stride(2)
    sB0 = b3.stride(2) if b_kmajor else b3.stride(1)

    def bstride(t3, i):  # batch stride; with L == 1 a harmless one past the whole matrix
        if L > 1:
            return t3.stride(0)
        span = max(t3.shape[1] * t3.stride(1), t3.shape[2] * t3.stride(2))
        return (span + 7) // 8 * 8

    if isinstance(config, str):
        config = CONFIGS[config]
    sms = _sms(a.device)
    cfg = config or pick_config(M, N, L, sms, K, a_kmajor)
    if cfg.a_rows and (M > cfg.a_rows or not a_kmajor):  # a forced config: its boxes would miss rows of A
        raise ValueError(f"config {cfg.name} loads {cfg.a_rows} rows of a K-major A; this A has {M} rows"
                         f"{'' if a_kmajor else ' and is M-major'}")  # fmt: skip
    split = pick_split(cfg, M, N, K, L, sms)  # 1 unless cfg.split_k
    ws = None
    if cfg.split_k:
        # fp32 partial sums (also with split == 1, when the config is forced), rows padded to 16 bytes;
        # zeroed here, reduced by atomics, read once by the epilogue kernel
        ws = torch.zeros((L, M, (N + 3) // 4 * 4), dtype=torch.float32, device=a.device)

    bias3, epi, res3, epi_dtypes, epi_strides = _epilogue_operands(bias, steps, epi_bias, residual, out_shape, batched)
    c_aligned = c3.stride(1) % 8 == 0 and c3.stride(0) % 8 == 0
    fn = compile_variant(a.dtype, out_dtype, a_kmajor, b_kmajor, cfg, *epi_dtypes, steps, c_aligned)
    cd = _cutlass_dtype
    gmem = cute.AddressSpace.gmem

    def ptr(t, align):
        return make_ptr(cd(t.dtype), t.data_ptr(), gmem, assumed_align=align)

    def aux(t):
        return ptr(t, 2) if t is not None else make_ptr(cutlass.Float32, out.data_ptr(), gmem, assumed_align=2)

    stream = cuda.CUstream(torch.cuda.current_stream(a.device).cuda_stream)
    fn(
        ptr(a3, 16),
        ptr(b3, 16),
        ptr(c3, 16),
        aux(bias3),
        aux(epi),
        aux(res3),
        M,
        N,
        K,
        L,
        sA0,
        bstride(a3, 0),
        sB0,
        bstride(b3, 0),
        c3.stride(1),
        c3.stride(0),
        *epi_strides,
        float(scale),
        sms,
        make_ptr(cutlass.Float32, (ws if ws is not None else out).data_ptr(), gmem, assumed_align=4),
        ws.stride(1) if ws is not None else 0,
        ws.stride(0) if ws is not None else 0,
        split,
        stream,
    )
    if ws is not None:
        epi_fn = compile_epilogue(out_dtype, *epi_dtypes, steps)
        epi_fn(
            make_ptr(cutlass.Float32, ws.data_ptr(), gmem, assumed_align=4),
            ptr(c3, 2),
            aux(bias3),
            aux(epi),
            aux(res3),
            M,
            N,
            L,
            ws.stride(1),
            ws.stride(0),
            c3.stride(1),
            c3.stride(0),
            *epi_strides,
            float(scale),
            stream,
        )
    return out


def _gemm_sm80(a3, b3, c3, out_shape, batched, bias, steps, epi_bias, residual, scale) -> None:
    """gemm() on the SM80-class path: (L, M, K) and (L, K, N) operand views in any layout into c3."""
    import cutlass
    import cutlass.cute as cute
    import torch
    from cuda.bindings import driver as cuda
    from cutlass.cute.runtime import make_ptr

    bias3, epi, res3, epi_dtypes, epi_strides = _epilogue_operands(bias, steps, epi_bias, residual, out_shape, batched)
    fn = compile_sm80(a3.dtype, c3.dtype, *epi_dtypes, steps)
    gmem = cute.AddressSpace.gmem

    def ptr(t):
        if t is None:  # an operand the chain does not read: any valid address
            return make_ptr(cutlass.Float32, c3.data_ptr(), gmem, assumed_align=2)
        return make_ptr(_cutlass_dtype(t.dtype), t.data_ptr(), gmem, assumed_align=2)

    L, M, K = a3.shape
    N = b3.shape[2]
    fn(
        ptr(a3),
        ptr(b3),
        ptr(c3),
        ptr(bias3),
        ptr(epi),
        ptr(res3),
        M,
        N,
        K,
        L,
        a3.stride(1),
        a3.stride(2),
        a3.stride(0),
        b3.stride(2),  # B as (N, K, L): N's stride, then K's
        b3.stride(1),
        b3.stride(0),
        c3.stride(1),
        c3.stride(0),
        *epi_strides,
        float(scale),
        cuda.CUstream(torch.cuda.current_stream(a3.device).cuda_stream),
    )
