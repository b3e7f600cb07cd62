"""Check and time pytest_gemmguard/kernels/cute_gemm.py (this checkout's) on a Hopper GPU.

    python3 scripts/check_cute.py            # correctness sweep, then timings (~2-4 min)
    python3 scripts/check_cute.py --quick    # a few cases only
    python3 scripts/check_cute.py --optin    # only the switches next to the default (~1 min)
    python3 scripts/check_cute.py --sm80     # only the SM80-class path, forced on a Hopper GPU

The switches section (also at the end of a full run) sets GEMMGUARD_CUTE_SPLIT_K / _BRANCH_EPI / _RASTER / _A_ROWS
in this process per case (cute_gemm reads them at call time) and prints the default beside each.

Every case is caught on its own: a failing case prints one line and the sweep goes on.  Full
tracebacks go to $OUT/check_cute.log when OUT is set (else ./check_cute.log).
"""

import math
import os
import sys
import time
import traceback

# The checkout's kernel, not an installed gemmguard's: this script checks the tree it sits in.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

T_START = time.time()
BUDGET_S = float(os.environ.get("CHECK_CUTE_BUDGET_S", "220"))
LOG_PATH = os.path.join(os.environ.get("OUT") or ".", "check_cute.log")
_log = open(LOG_PATH, "w")


def log(msg=""):
    print(msg, flush=True)
    _log.write(msg + "\n")
    _log.flush()


def log_exc(what):
    tb = traceback.format_exc()
    _log.write(f"---- {what}\n{tb}\n")
    _log.flush()
    last = [ln for ln in tb.strip().splitlines() if ln.strip()][-1]
    return last[:300]


def over_budget():
    return time.time() - T_START > BUDGET_S


OPTIN_ENV = ("GEMMGUARD_CUTE_SPLIT_K", "GEMMGUARD_CUTE_RASTER", "GEMMGUARD_CUTE_BRANCH_EPI", "GEMMGUARD_CUTE_A_ROWS")


def set_env(flags):
    """Set exactly these opt-in switches (the others unset)."""
    for k in OPTIN_ENV:
        os.environ.pop(k, None)
    os.environ.update(flags)


def bench_ms(fn):
    import torch

    try:
        from triton.testing import do_bench

        return do_bench(fn, warmup=25, rep=200, return_mode="median")
    except ImportError:
        pass
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def graph_us(fn, reps=20):
    """Kernel-only time of fn through a CUDA graph of `reps` calls, in us per call."""
    import torch

    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    return bench_ms(g.replay) / reps * 1e3


def optin_section(cg, make, reference):
    """Default path next to each opt-in path: correctness on the decode shapes, then timings."""
    import torch

    dev = "cuda"
    # the defaults until 2026-12-01
    before = {"GEMMGUARD_CUTE_SPLIT_K": "0", "GEMMGUARD_CUTE_BRANCH_EPI": "0", "GEMMGUARD_CUTE_A_ROWS": "0"}
    modes = [
        ("default", {}),
        ("before", before),
        ("no split-K", {"GEMMGUARD_CUTE_SPLIT_K": "0"}),
        ("all rows", {"GEMMGUARD_CUTE_A_ROWS": "0"}),  # the default until 2026-12-03
    ]
    large_modes = [
        ("default", {}),
        ("before", before),
        ("raster16", {"GEMMGUARD_CUTE_RASTER": "16"}),
    ]
    log(
        "\n== switches: the default (A's rows only, split-K where tiles cannot fill the GPU, the branch epilogue) "
        "vs all three off (before), GEMMGUARD_CUTE_SPLIT_K=0 and GEMMGUARD_CUTE_A_ROWS=0 (decode), "
        "GEMMGUARD_CUTE_RASTER=16 (large)"
    )
    decode = [(1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (16, 4096, 11008), (7, 4104, 3080)]
    decode += [(24, 1000, 1000), (32, 520, 4200), (13, 256, 136)]  # a_rows 32 with a ragged K; 32 exactly; a_rows 16
    decode_modes = modes
    chains = [
        ("plain", None, (), None),
        ("out fp32", None, (), torch.float32),
        ("bias(N)+gelu", "N", ("gelu",), None),
        ("bias(M,1)+bias+relu+scale", "M1", ("bias", "relu", "scale"), None),
        ("silu+residual+cast", None, ("silu", "residual", "cast"), None),
    ]
    fails = ran = 0
    cases = [(m, n, k, decode_modes) for m, n, k in decode]
    cases += [(m, n, k, large_modes) for m, n, k in ((333, 520, 264), (4096, 4096, 4096))]
    for m, n, k, case_modes in cases:
        for dtype, b_col in ((torch.bfloat16, False), (torch.float16, False), (torch.bfloat16, True)):
            for ci, (cname, bias_kind, steps, out_dtype) in enumerate(chains):
                if (dtype != torch.bfloat16 or b_col or m * n * k >= 4096**3) and ci not in (0, 2):
                    continue
                a, b = make((), m, n, k, dtype, b_col)
                bias = {
                    "N": lambda: torch.randn(n, device=dev, dtype=dtype),
                    "M1": lambda: torch.randn(m, 1, device=dev, dtype=torch.float32),
                }.get(bias_kind, lambda: None)()
                epi_bias = torch.randn(n, device=dev, dtype=dtype) if "bias" in steps else None
                residual = torch.randn(m, n, device=dev, dtype=dtype) if "residual" in steps else None
                ref = reference(a, b, bias, steps, epi_bias, residual, 0.37)
                tol = (2e-2 if dtype == torch.bfloat16 else 5e-3) / (2 if out_dtype == torch.float32 else 1)
                cols = []
                for mode, flags in case_modes:
                    set_env(flags)
                    try:
                        cfg = cg.pick_config(m, n, 1, cg._sms(a.device), k, a_kmajor=True)
                        split = cg.pick_split(cfg, m, n, k, 1, cg._sms(a.device))
                        out = cg.gemm(
                            a,
                            b,
                            bias=bias,
                            steps=steps,
                            epi_bias=epi_bias,
                            residual=residual,
                            scale=0.37,
                            out_dtype=out_dtype,
                        )
                        torch.cuda.synchronize()
                        err = ((out.double() - ref).abs().max() / (ref.abs().max() + 1)).item()
                        ok = err <= tol and not math.isnan(err) and out.dtype == (out_dtype or dtype)
                        fails += not ok
                        ran += 1
                        cols.append(f"{mode} {cfg.name} split={split}: {'ok ' if ok else 'BAD'} {err:.1e}")
                    except Exception:
                        fails += 1
                        cols.append(f"{mode}: ERR {log_exc(f'optin {mode} {m}x{n}x{k} {cname}')}")
                set_env({})
                label = f"{m}x{n}x{k} {str(dtype)[6:]} B={'col' if b_col else 'row'} {cname}"
                log(f"  {label:52} | " + " | ".join(cols))
                if over_budget() and m * n * k >= 4096**3:
                    break
    log(f"  opt-in correctness: {ran} ran, {fails} failed/errored")

    log("\n  timing (bf16, B row-major): do_bench median ms, and CUDA-graph kernel-only us; cuBLAS = torch.mm")
    log(f"  {'shape':>16} {'mode':>9} {'config':>22} {'split':>5} {'ms':>8} {'graph us':>9} {'% cuBLAS (graph)':>17}")
    timing = [
        (1, 4096, 4096, modes),
        (8, 4096, 4096, modes),
        (16, 4096, 4096, modes),
        (32, 4096, 4096, modes),
        (64, 4096, 4096, modes),
        (16, 4096, 11008, modes),
        (4096, 4096, 4096, large_modes),
        (8192, 8192, 8192, large_modes),
    ]
    for m, n, k, tmodes in timing:
        try:
            a, b = make((), m, n, k, torch.bfloat16, False)
            t_ref = graph_us(lambda: torch.mm(a, b))
            log(
                f"  {f'{m}x{n}x{k}':>16} {'cuBLAS':>9} {'':>22} {'':>5} {bench_ms(lambda: torch.mm(a, b)):8.4f} {t_ref:9.1f}"
            )
            for mode, flags in tmodes:
                set_env(flags)
                cfg = cg.pick_config(m, n, 1, cg._sms(a.device), k, a_kmajor=True)
                split = cg.pick_split(cfg, m, n, k, 1, cg._sms(a.device))
                t_ms = bench_ms(lambda: cg.gemm(a, b))
                t_g = graph_us(lambda: cg.gemm(a, b))
                log(
                    f"  {f'{m}x{n}x{k}':>16} {mode:>9} {cfg.name:>22} {split:5d} {t_ms:8.4f} {t_g:9.1f} "
                    f"{100 * t_ref / t_g:16.1f}%"
                )
        except Exception:
            log(f"  {m}x{n}x{k} ERR {log_exc(f'optin timing {m}x{n}x{k}')}")
        finally:
            set_env({})


def sm80_section(cg, reference):
    """The SM80-class path (GEMMGUARD_CUTE_ARCH=sm80 on a Hopper GPU): correctness over layouts the TMA path
    refuses (odd K, storage offsets, strided columns, a broadcast batch) and the usual ones, then timings."""
    import torch

    dev = "cuda"
    os.environ["GEMMGUARD_CUTE_ARCH"] = "sm80"
    log("\n== SM80-class path (GEMMGUARD_CUTE_ARCH=sm80): correctness, tolerance as above")

    def layout(t, kind):  # t: (..., R, C); the same values in another memory layout
        if kind == "transposed":
            return t.transpose(-1, -2).contiguous().transpose(-1, -2)
        if kind == "offset":
            flat = torch.empty(t.numel() + 3, device=dev, dtype=t.dtype)
            view = flat[3:].view(t.shape)
            view.copy_(t)
            return view
        if kind == "strided":
            wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], device=dev, dtype=t.dtype)
            view = wide[..., ::2]
            view.copy_(t)
            return view
        return t

    shapes = [
        ((), 1, 1, 1),
        ((), 7, 13, 5),
        ((), 127, 136, 72),
        ((), 333, 520, 264),
        ((3,), 40, 24, 56),
        ((), 16, 4096, 4096),
    ]
    chains = [
        ("plain", None, ()),
        ("bias(N)+gelu", "N", ("gelu",)),
        ("silu+residual+cast", None, ("silu", "residual", "cast")),
    ]
    fails = ran = 0
    for bshape, m, n, k in shapes:
        for dtype in (torch.bfloat16, torch.float16):
            for kind_a, kind_b in (
                ("contiguous", "contiguous"),
                ("transposed", "contiguous"),
                ("contiguous", "transposed"),
                ("offset", "offset"),
                ("strided", "strided"),
                ("contiguous", "broadcast"),
            ):
                for cname, bias_kind, steps in (
                    chains if kind_a == "contiguous" and kind_b == "contiguous" else chains[:1]
                ):
                    label = f"{'x'.join(map(str, (*bshape, m, n, k))):>16} {str(dtype)[6:]:8} A {kind_a:10} B {kind_b:10} {cname}"
                    try:
                        a = layout(torch.randn(*bshape, m, k, device=dev, dtype=dtype), kind_a)
                        if kind_b == "broadcast":
                            if not bshape:
                                continue
                            b = torch.randn(k, n, device=dev, dtype=dtype).expand(*bshape, k, n)
                        else:
                            b = layout(torch.randn(*bshape, k, n, device=dev, dtype=dtype), kind_b)
                        bias = torch.randn(n, device=dev, dtype=dtype) if bias_kind == "N" else None
                        residual = torch.randn(*bshape, m, n, device=dev, dtype=dtype) if "residual" in steps else None
                        why = cg.takes(a, b, bias=bias, steps=steps, residual=residual)
                        if why:
                            fails += 1
                            log(f"REFUSED {label}: {why}")
                            continue
                        out = cg.gemm(a, b, bias=bias, steps=steps, residual=residual, scale=0.37)
                        torch.cuda.synchronize()
                        ref = reference(a, b, bias, steps, None, residual, 0.37)
                        err = ((out.double() - ref).abs().max() / (ref.abs().max() + 1)).item()
                        ok = err <= (2e-2 if dtype == torch.bfloat16 else 5e-3) and not math.isnan(err)
                        fails += not ok
                        ran += 1
                        log(f"{'ok  ' if ok else 'BAD '} {label}: rel err {err:.2e}")
                    except Exception:
                        fails += 1
                        log(f"ERR  {label}: {log_exc(label)}")
    log(f"  SM80-class correctness: {ran} ran, {fails} failed/errored/refused")
    log("  timing (bf16, row-major): CUDA-graph kernel-only us, cuBLAS = torch.mm")
    for m, n, k in ((16, 4096, 4096), (4096, 4096, 4096)):
        try:
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
            t_ref, t_k = graph_us(lambda: torch.mm(a, b)), graph_us(lambda: cg.gemm(a, b))
            log(f"  {f'{m}x{n}x{k}':>16} cuBLAS {t_ref:9.1f}  sm80 {t_k:9.1f}  ({100 * t_ref / t_k:.1f}% of cuBLAS)")
        except Exception:
            log(f"  {m}x{n}x{k} ERR {log_exc('sm80 timing')}")
    os.environ.pop("GEMMGUARD_CUTE_ARCH", None)
    return fails


def main():
    import torch

    quick = "--quick" in sys.argv
    log(
        f"torch {torch.__version__}, cuda {torch.version.cuda}, device "
        f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}, python {sys.version.split()[0]}"
    )
    try:
        import cutlass

        log(f"cutlass-dsl {getattr(cutlass, '__version__', '?')}")
    except Exception:
        log("cutlass import FAILED: " + log_exc("import cutlass"))
    from pytest_gemmguard.kernels import cute_gemm as cg

    dev = "cuda"
    torch.manual_seed(0)

    def make(shape_b, m, n, k, dtype, b_col):
        a = torch.randn(*shape_b, m, k, device=dev, dtype=dtype)
        if b_col:  # (K,N) with K contiguous
            b = torch.randn(*shape_b, n, k, device=dev, dtype=dtype).transpose(-1, -2)
        else:
            b = torch.randn(*shape_b, k, n, device=dev, dtype=dtype)
        return a, b

    def reference(a, b, bias, steps, epi_bias, residual, scale):
        x = torch.matmul(a.double(), b.double())
        if bias is not None:
            x = x + bias.double()
        for s in steps:
            if s == "bias":
                x = x + epi_bias.double()
            elif s == "relu":
                x = torch.relu(x)
            elif s == "gelu":
                x = 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
            elif s == "silu":
                x = x * torch.sigmoid(x)
            elif s == "sigmoid":
                x = torch.sigmoid(x)
            elif s == "tanh":
                x = torch.tanh(x)
            elif s == "scale":
                x = x * scale
            elif s == "residual":
                x = x + residual.double()
        return x

    if "--sm80" in sys.argv:
        sys.exit(1 if sm80_section(cg, reference) else 0)
    if "--optin" in sys.argv:
        optin_section(cg, make, reference)
        return

    shapes = [
        (1, 8, 8),
        (127, 136, 72),
        (333, 520, 264),
        (16, 4096, 4096),
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        ((3,), 128, 256, 64),
    ]
    if quick:
        shapes = [(127, 136, 72), (16, 4096, 4096), ((3,), 128, 256, 64)]
    chains = [
        ("plain", None, ()),
        ("bias(N)+gelu", "N", ("gelu",)),
        ("bias(M,1)+bias+relu+scale", "M1", ("bias", "relu", "scale")),
        ("silu+residual+cast", None, ("silu", "residual", "cast")),
        ("bias(MN)+sigmoid+tanh", "MN", ("sigmoid", "tanh")),
    ]

    log("\n== correctness: max|err| / (max|ref| + 1); tolerance bf16 2e-2, fp16 5e-3 (out fp32: half that)")
    fails = 0
    ran = 0
    for shp in shapes:
        if isinstance(shp[0], tuple):
            bshape, m, n, k = shp[0], shp[1], shp[2], shp[3]
        else:
            bshape, (m, n, k) = (), shp
        big = m * n * k >= 4096**3
        for dtype in (torch.bfloat16, torch.float16):
            for b_col in (False, True):
                for ci, (cname, bias_kind, steps) in enumerate(chains):
                    # the big shapes get fewer combinations (time budget)
                    if big and (dtype != torch.bfloat16 or ci > 1 or (m == 8192 and (b_col or ci))):
                        continue
                    for out_dtype in (None, torch.float32) if ci == 0 and not big else (None,):
                        if over_budget():
                            log("(time budget reached: skipping the remaining correctness cases)")
                            break
                        label = (
                            f"{'x'.join(map(str, (*bshape, m, n, k))):>18} {str(dtype)[6:]:8} "
                            f"B={'col' if b_col else 'row'} out={str(out_dtype or dtype)[6:]:8} {cname}"
                        )
                        try:
                            a, b = make(bshape, m, n, k, dtype, b_col)
                            out_shape = (*bshape, m, n)
                            bias = None
                            if bias_kind == "N":
                                bias = torch.randn(n, device=dev, dtype=dtype)
                            elif bias_kind == "M1":
                                bias = torch.randn(m, 1, device=dev, dtype=torch.float32)
                            elif bias_kind == "MN":
                                bias = torch.randn(out_shape, device=dev, dtype=dtype)
                            epi_bias = torch.randn(n, device=dev, dtype=dtype) if "bias" in steps else None
                            residual = torch.randn(out_shape, device=dev, dtype=dtype) if "residual" in steps else None
                            scale = 0.37
                            why = cg.takes(
                                a, b, bias=bias, steps=steps, epi_bias=epi_bias, residual=residual, out_dtype=out_dtype
                            )
                            if why:
                                log(f"REFUSED {label}: {why}")
                                continue
                            t0 = time.time()
                            out = cg.gemm(
                                a,
                                b,
                                bias=bias,
                                steps=steps,
                                epi_bias=epi_bias,
                                residual=residual,
                                scale=scale,
                                out_dtype=out_dtype,
                            )
                            torch.cuda.synchronize()
                            dt = time.time() - t0
                            ref = reference(a, b, bias, steps, epi_bias, residual, scale)
                            assert out.shape == ref.shape, f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
                            assert out.dtype == (out_dtype or dtype), f"dtype {out.dtype}"
                            err = ((out.double() - ref).abs().max() / (ref.abs().max() + 1)).item()
                            tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
                            if out_dtype == torch.float32:
                                tol /= 2
                            ok = err <= tol and not math.isnan(err)
                            fails += not ok
                            ran += 1
                            log(f"{'ok  ' if ok else 'BAD '} {label}: rel err {err:.2e} (first call {dt:.2f}s)")
                        except Exception:
                            fails += 1
                            log(f"ERR  {label}: {log_exc(label)}")

    # refusals that must hold
    log("\n== takes() refusals")
    try:
        a = torch.randn(64, 72, device=dev, dtype=torch.bfloat16)
        for what, aa, bb in [
            (
                "misaligned K=7",
                torch.randn(64, 7, device=dev, dtype=torch.bfloat16),
                torch.randn(7, 64, device=dev, dtype=torch.bfloat16),
            ),
            ("dtype mismatch", a, torch.randn(72, 64, device=dev, dtype=torch.float16)),
            ("fp32 operands", a.float(), torch.randn(72, 64, device=dev)),
        ]:
            log(f"  {what}: {cg.takes(aa, bb)!r}")
        log(
            f"  unknown step: {cg.takes(a, torch.randn(72, 64, device=dev, dtype=torch.bfloat16), steps=('softmax',))!r}"
        )
        log(
            f"  meta tensors (should be None or a device reason): "
            f"{cg.takes(torch.empty(64, 72, device='meta', dtype=torch.bfloat16), torch.empty(72, 64, device='meta', dtype=torch.bfloat16))!r}"
        )
    except Exception:
        log("  ERR " + log_exc("refusals"))

    # timings
    log("\n== timing (bf16, B row-major, median of do_bench), vs torch.mm (cuBLAS)")
    bench = bench_ms  # one timer for every table of this script

    log(f"{'shape':>18} {'config':>18} {'ms':>8} {'TFLOP/s':>8} {'cuBLAS ms':>9} {'cuBLAS TF':>9} {'% cuBLAS':>8}")
    timing = [
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        (16, 4096, 4096),
        (4096, 4096, 4096, "128x128x64_w2_s6"),
        (16, 4096, 4096, "128x128x64_w2_s6"),
        (128, 4096, 4096),
        (2048, 2048, 2048),
    ]
    for item in timing:
        m, n, k = item[:3]
        cfg = item[3] if len(item) > 3 else None
        if time.time() - T_START > BUDGET_S + 30:
            log("(time budget reached: skipping the remaining timings)")
            break
        try:
            a, b = make((), m, n, k, torch.bfloat16, False)
            cfg_used = (cg.CONFIGS[cfg] if cfg else cg.pick_config(m, n, 1, cg._sms(a.device), k, a_kmajor=True)).name
            cg.gemm(a, b, config=cfg)
            torch.cuda.synchronize()
            t_ours = bench(lambda: cg.gemm(a, b, config=cfg))
            t_ref = bench(lambda: torch.mm(a, b))
            fl = 2 * m * n * k
            log(
                f"{f'{m}x{n}x{k}':>18} {cfg_used:>18} {t_ours:8.4f} {fl / t_ours / 1e9:8.1f} {t_ref:9.4f} "
                f"{fl / t_ref / 1e9:9.1f} {100 * t_ref / t_ours:7.1f}%"
            )
        except Exception:
            log(f"{f'{m}x{n}x{k}':>18} ERR {log_exc(f'timing {item}')}")

    # kernel-only time through a CUDA graph (removes host launch overhead from small shapes)
    for m, n, k in [(16, 4096, 4096), (4096, 4096, 4096)]:
        try:
            a, b = make((), m, n, k, torch.bfloat16, False)
            cg.gemm(a, b)
            torch.cuda.synchronize()
            reps = 20
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(reps):
                    cg.gemm(a, b)
            g2 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g2):
                for _ in range(reps):
                    torch.mm(a, b)
            t_ours = bench(g.replay) / reps
            t_ref = bench(g2.replay) / reps
            log(
                f"CUDA graph {m}x{n}x{k}: ours {t_ours * 1e3:.1f} us, cuBLAS {t_ref * 1e3:.1f} us, "
                f"{100 * t_ref / t_ours:.1f}% of cuBLAS"
            )
        except Exception:
            log(f"CUDA graph {m}x{n}x{k} ERR {log_exc('graph')}")

    # host overhead of one call (decides small-shape timings)
    try:
        a, b = make((), 16, 4096, 4096, torch.bfloat16, False)
        cg.gemm(a, b)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            cg.gemm(a, b)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        log(f"\nhost time per gemm() call (enqueue only): {(t1 - t0) / 200 * 1e6:.1f} us")
    except Exception:
        log("host overhead ERR " + log_exc("host overhead"))

    optin_section(cg, make, reference)

    log("\n== cold compile seconds per variant")
    for key, s in sorted(cg.cold_compile_seconds().items(), key=lambda kv: -kv[1]):
        log(f"{s:7.2f}s  {key}")
    log(f"disk cache {cg.cache_dir()}: {cg.disk_stats}")
    log(f"\ncorrectness: {ran} ran, {fails} failed/errored; total {time.time() - T_START:.0f}s; log {LOG_PATH}")


if __name__ == "__main__":
    try:
        main()
    except Exception:
        log("FATAL " + log_exc("main"))
        sys.exit(1)
