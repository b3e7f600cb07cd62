"""Compile every supported kernel variant for sm_90a without a GPU (CUTE_DSL_ARCH), to catch API errors.

CUTE_DSL_ARCH=sm_90a python scripts/cute_compile_check_cpu.py [quick]
"""

import os
import sys
import traceback

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
# The checkout's kernel, not an installed gemmguard's: this script checks the tree it sits in.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch

from pytest_gemmguard.kernels import cute_gemm as cg

quick = "quick" in sys.argv
cases = []
for cfg in (cg.CFG_LARGE, cg.CFG_MID, cg.CFG_DECODE):
    for ak in (True, False):
        for bk in (True, False):
            cases.append((torch.bfloat16, torch.bfloat16, ak, bk, cfg, None, None, None, ()))
cases += [
    (torch.float16, torch.float16, True, False, cg.CFG_MID, None, None, None, ()),
    (torch.bfloat16, torch.float32, True, False, cg.CFG_MID, None, None, None, ()),
    (torch.bfloat16, torch.bfloat16, True, False, cg.CFG_MID, torch.bfloat16, None, None, ()),
    (
        torch.bfloat16,
        torch.bfloat16,
        True,
        False,
        cg.CFG_LARGE,
        torch.float32,
        torch.bfloat16,
        torch.bfloat16,
        ("bias", "relu", "gelu", "silu", "sigmoid", "tanh", "scale", "residual", "cast"),
    ),
    (
        torch.float16,
        torch.float32,
        True,
        True,
        cg.CFG_DECODE,
        torch.float16,
        torch.float32,
        torch.float32,
        ("gelu", "scale", "residual"),
    ),
    (torch.bfloat16, torch.bfloat16, False, True, cg.CFG_MID, None, torch.float32, None, ("bias", "silu"), False),
]
# opt-in variants (env_flags()): decode split-K in every layout + with a long chain, the raster-16 large config
for ak in (True, False):
    for bk in (True, False):
        cases.append((torch.bfloat16, torch.bfloat16, ak, bk, cg.CFG_DECODE_SK, None, None, None, ()))
cases += [
    (
        torch.float16,
        torch.float32,
        True,
        False,
        cg.CFG_DECODE_SK,
        torch.float16,
        torch.float32,
        torch.bfloat16,
        ("bias", "gelu", "scale", "residual", "cast"),
    ),
    (torch.bfloat16, torch.bfloat16, True, False, cg.CFG_LARGE_G16, None, None, None, ()),
    (torch.bfloat16, torch.bfloat16, True, True, cg.CFG_LARGE_G16, torch.bfloat16, None, None, ("gelu",)),
]
# GEMMGUARD_CUTE_BRANCH_EPI=1: the branch_epi twin of each default config, plain and with chains
for cfg in (cg.CFG_LARGE, cg.CFG_MID, cg.CFG_DECODE, cg.CFG_LARGE_G16):
    be = cg.CONFIGS[cfg.name + "_be"]
    cases.append((torch.bfloat16, torch.bfloat16, True, False, be, None, None, None, ()))
cases += [
    (
        torch.bfloat16,
        torch.bfloat16,
        True,
        True,
        cg.CONFIGS[cg.CFG_LARGE.name + "_be"],
        torch.float32,
        torch.bfloat16,
        torch.bfloat16,
        tuple(cg.STEP_NAMES),
    ),
    (torch.float16, torch.float32, False, True, cg.CONFIGS[cg.CFG_DECODE.name + "_be"], None, None, None, ()),
    (torch.bfloat16, torch.bfloat16, True, False, cg.CONFIGS[cg.CFG_MID.name + "_be"], None, None, None, (), False),
]
# GEMMGUARD_CUTE_A_ROWS: the decode configs loading only A's rows (K-major A), B either way, and with a chain
for name in ("64x32x128_w1_s8_be", "64x128x64_w1_s8_sk"):
    for rows in cg.A_ROWS:
        for bk in (True, False):
            cfg = cg.CONFIGS[f"{name}_a{rows}"]
            cases.append((torch.bfloat16, torch.bfloat16, True, bk, cfg, None, None, None, ()))
a16 = cg.CONFIGS["64x32x128_w1_s8_be_a16"]
cases.append((torch.float16, torch.float16, True, False, a16, torch.float16, None, None, ("gelu",)))
# the SM80-class path (pytest_gemmguard/kernels/cute_gemm_sm80.py; strides are runtime values, so no layout variants):
# (operand dtype, out dtype, bias, epi_bias, residual, steps)
sm80 = [
    (torch.bfloat16, torch.bfloat16, None, None, None, ()),
    (torch.float16, torch.float32, None, None, None, ()),
    (torch.bfloat16, torch.bfloat16, torch.float32, torch.bfloat16, torch.bfloat16, tuple(cg.STEP_NAMES)),
]
# the split-K epilogue kernels: (out dtype, bias, epi_bias, residual, steps)
epilogues = [
    (torch.bfloat16, None, None, None, ()),
    (torch.float16, None, None, None, ()),
    (torch.float32, None, None, None, ()),
    (torch.bfloat16, torch.bfloat16, None, None, ("gelu",)),
    (torch.bfloat16, torch.float32, torch.bfloat16, None, ("bias", "relu", "scale")),
    (torch.bfloat16, None, None, torch.bfloat16, ("silu", "residual", "cast")),
    (torch.float32, torch.float16, torch.float32, torch.float32, tuple(cg.STEP_NAMES)),
]
if quick:
    cases = cases[:1]
    epilogues = epilogues[:1]


def compiled(what: str, compile_fn, args: tuple, shown: tuple) -> bool:
    """Compile one variant; print ok, or FAIL with the first line of the error and its traceback."""
    try:
        compile_fn(*args)
        print("ok  ", what, shown, flush=True)
        return True
    except Exception as e:
        print("FAIL", what, shown, type(e).__name__, str(e).splitlines()[0] if str(e) else "", flush=True)
        traceback.print_exc()
        return False


jobs = [(c[4].name, cg.compile_variant, c, c[:4] + c[5:]) for c in cases]  # the config by name only
jobs += [("sm80", cg.compile_sm80, c, c) for c in (sm80 if not quick else ())]
jobs += [("split-K epilogue", cg.compile_epilogue, e, e) for e in epilogues]
bad = sum(not compiled(*job) for job in jobs)
print(cg.cold_compile_seconds())
print("failures:", bad)
sys.exit(1 if bad else 0)
