"""pytest_gemmguard/kernels/cute_gemm.py's choice of tile configuration, on the CPU (the module imports nothing CUDA).

The numbers behind each rule were measured on the H200 (docs/validation/kernels.md); these
tests pin the rules, so a change of choice is a decision someone measured, not an accident."""

import os
from pathlib import Path

import pytest

from pytest_gemmguard.kernels import cute_gemm as cg


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    for switch in ("SPLIT_K", "RASTER", "BRANCH_EPI", "A_ROWS"):
        monkeypatch.delenv(f"GEMMGUARD_CUTE_{switch}", raising=False)


def pick(m, n, k, a_kmajor=True, batch=1):
    cfg = cg.pick_config(m, n, batch, 132, k, a_kmajor)
    return cfg.name, cg.pick_split(cfg, m, n, k, batch, 132)


@pytest.mark.parametrize(("m", "rows"), [(1, 8), (8, 8), (9, 16), (16, 16), (17, 32), (32, 32)])
def test_a_decode_m_loads_only_the_rows_of_a_that_exist_and_is_not_split(m, rows):
    # 128 tiles of 64x32 on 132 SMs: unsplit with A's rows measured 7.8-8.6 us against 10.9-12.9 split
    assert pick(m, 4096, 4096) == (f"64x32x128_w1_s8_be_a{rows}", 1)


def test_where_a_rows_does_not_apply_the_choice_is_what_it_was():
    assert pick(16, 4096, 4096, a_kmajor=False) == ("64x128x64_w1_s8_sk", 4)  # TMA boxes along M: all rows
    assert pick(33, 4096, 4096) == ("64x128x64_w1_s8_sk", 4)  # no box size of 8, 16 or 32 holds M
    assert pick(64, 4096, 4096) == ("64x32x128_w1_s8_be", 1)  # a whole tile: no box past M
    assert pick(4096, 4096, 4096)[0] == "128x256x64_w2_s4_be"


def test_few_tiles_keep_split_k_and_still_load_only_a_rows():
    # 16 tiles of 64x32 cannot fill the GPU: split-K stays, its boxes of A as short as M allows
    assert pick(16, 512, 8192) == ("64x128x64_w1_s8_sk_a16", 16)


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv("GEMMGUARD_CUTE_A_ROWS", "0")
    assert pick(16, 4096, 4096) == ("64x128x64_w1_s8_sk", 4)


def test_every_config_a_choice_can_name_is_known_by_name():
    names = {pick(m, n, k, ak)[0] for m in (1, 16, 24, 33, 64, 300) for n in (64, 4096) for k in (64, 4096)
             for ak in (True, False)}  # fmt: skip
    assert names <= set(cg.CONFIGS), names - set(cg.CONFIGS)


# ---------------------------------------------------------------- the disk cache (needs nvidia-cutlass-dsl)

VARIANT = """
import os, sys, time, warnings
os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")  # compile for the H200 without a GPU
sys.path.insert(0, {root!r})
import torch
from pytest_gemmguard.kernels import cute_gemm as cg
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    t = time.perf_counter()
    cg.compile_variant(torch.bfloat16, torch.bfloat16, True, False, cg.CONFIGS["64x32x128_w1_s8_be_a16"])
    print("STATS", cg.disk_stats, round(time.perf_counter() - t, 3), [str(w.message)[:600] for w in seen])
"""


def _variant(tmp_path, cache):
    import ast
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GEMMGUARD_CUTE_CACHE_DIR"}
    env["GEMMGUARD_CUTE_CACHE_DIR"] = str(cache)
    root = str(Path(__file__).parents[1])  # this checkout's kernel, as the test process imports it
    command = [sys.executable, "-c", VARIANT.format(root=root)]
    out = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("STATS ")), None)
    assert line, out.stdout[-2000:] + out.stderr[-3000:]
    stats, rest = line[6:].split("} ", 1)
    seconds, _, warned = rest.partition(" ")
    return ast.literal_eval(stats + "}"), float(seconds), ast.literal_eval(warned)


def test_a_compiled_variant_is_kept_on_disk_and_loaded_by_the_next_process(tmp_path):
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed: the disk cache has nothing to keep")
    cache = tmp_path / "cute"
    first, compile_s, _ = _variant(tmp_path, cache)
    assert first == {"loaded": 0, "compiled": 1, "written": 1, "unreadable": 0}
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == 1 and files[0].endswith(".o"), files  # no temporary directory left behind
    again, load_s, warned = _variant(tmp_path, cache)
    assert again == {"loaded": 1, "compiled": 0, "written": 0, "unreadable": 0} and not warned
    assert load_s < compile_s, (load_s, compile_s)
    # A truncated file is one warning and a fresh compile that replaces it, never an error.
    kept = cache / files[0]
    size = kept.stat().st_size
    kept.write_bytes(kept.read_bytes()[: size // 3])
    mended, _, warned = _variant(tmp_path, cache)
    assert mended == {"loaded": 0, "compiled": 1, "written": 1, "unreadable": 1}
    assert any("did not load" in w for w in warned), warned
    assert kept.stat().st_size == size


def test_off_keeps_nothing(tmp_path):
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")
    stats, _, _ = _variant(tmp_path, "off")
    assert stats == {"loaded": 0, "compiled": 1, "written": 0, "unreadable": 0}
    assert not (tmp_path / "off").exists()


def test_the_sm80_path_takes_layouts_the_tma_path_refuses():
    import torch

    base = torch.zeros(3 + 40 * 24, dtype=torch.bfloat16)
    offset = base[3:].view(40, 24)  # 6 bytes into its storage: TMA needs 16-byte aligned addresses
    odd = torch.zeros(40, 7, dtype=torch.bfloat16)  # rows of 14 bytes
    batch = torch.zeros(24, 16, dtype=torch.bfloat16).expand(3, 24, 16)  # one B for every batch entry
    for t in (offset, odd, batch):
        assert cg._operand_problem("A", t) is not None
        assert cg._sm80_operand_problem("A", t) is None
    huge = torch.empty((2**16, 2**16), dtype=torch.bfloat16, device="meta")  # sizes and strides only
    assert "32-bit" in cg._sm80_operand_problem("A", huge)


def test_the_epilogue_operands_every_kernel_reads():
    import torch

    bias, residual, epi = torch.zeros(6), torch.zeros(4, 6), torch.zeros(6)
    bias3, epi_used, res3, dtypes, strides = cg._epilogue_operands(
        bias, ("bias", "residual"), epi, residual, (4, 6), False
    )
    assert bias3.shape == res3.shape == (1, 4, 6) and epi_used is epi and dtypes == (torch.float32,) * 3
    assert strides == [0, 1, 0, 1, 6, 1, 24]  # bias broadcast over rows; epi_bias; residual row-major
    # Steps that do not read epi_bias or a residual leave them out, with zero strides
    _, epi_used, res3, dtypes, strides = cg._epilogue_operands(None, ("relu",), epi, residual, (4, 6), False)
    assert epi_used is None and res3 is None and dtypes == (None, None, None) and strides == [0] * 7
