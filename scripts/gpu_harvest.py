"""Issue 15 on a GPU: the harvested Llama-3-8B-shaped suite, docs/harvest/llama3_8b.json (batch 1 and 8,
sequence 512: 16 distinct GEMMs), checked through each backend, then each GEMM benchmarked.

    python -m pytest -p no:cacheprovider scripts/gpu_harvest.py --gemm-backends=triton,cutedsl -v \
        -k checks                                                     # the suite: oracle + provenance
    python -m pytest -p no:cacheprovider scripts/gpu_harvest.py --gemm-backends=triton,cutedsl -v \
        -k benchmark --gemm-cold-compile=off --gemm-report-md=harvest-bench.md   # the benchmark table

Max-autotune compiles of 16 large GEMMs take minutes per backend: run one backend per command if a
command has a time limit. The file needs no transformers; regenerate it with the command in
docs/harvest.md.
"""

import pathlib

import pytest

from pytest_gemmguard import gemm_case
from pytest_gemmguard.harvest import load_harvest

HARVEST = pathlib.Path(__file__).resolve().parent.parent / "docs" / "harvest" / "llama3_8b.json"
GEMMS = load_harvest(HARVEST)


@gemm_case(harvested=str(HARVEST))
def test_llama3_8b_checks(gemm):
    gemm.check()


@pytest.mark.parametrize("g", GEMMS, ids=str)
def test_llama3_8b_benchmark(gemm_benchmark, g):
    m = gemm_benchmark(**g.bench_kwargs())
    print(f"\n{g.describe()}: {m.tflops:.1f} TFLOP/s, {m.pct_peak:.1f}% of peak ({m.kernels})")
    assert m.method.startswith("cuda") and m.kernels
