"""gemmguard's own GEMMs (pytest_gemmguard/kernels/), guarded through the public API like any backend.

The inner test files use `@gemm_case` and `gemm.check()` only, run with `--gemm-backends=triton[kernels]`
or `cutedsl[kernels]`. On a GPU the kernels run for real; on a CPU machine with triton installed the Triton
one runs through Triton's interpreter (TRITON_INTERPRET=1: float16 and float32; the interpreter misreads
bfloat16, which the backend then reports unsupported). The CuteDSL one needs an SM80+ GPU and
nvidia-cutlass-dsl. Without what a kernel needs its tests skip, saying so.
"""

import importlib.util
import re

import pytest

pytest.importorskip("triton", reason="triton is not installed: the triton[kernels] GEMM cannot run here")
import torch

ON_GPU = torch.cuda.is_available()
SM80 = ON_GPU and torch.cuda.get_device_capability() >= (8, 0)
# backend -> (its custom op, the kernel file, why it cannot run here or "")
KERNELS = {
    "triton[kernels]": ("kernels_triton_gemm", "triton_gemm", ""),
    "cutedsl[kernels]": ("kernels_cute_gemm", "cute_gemm", "" if SM80 and importlib.util.find_spec("cutlass")
                         else "the cutedsl[kernels] GEMM needs an SM80+ GPU and nvidia-cutlass-dsl"),
}  # fmt: skip

# The part of the case space each kernel claims. The Triton kernel takes every shape, stride and dtype of
# the default space; the CuteDSL one takes fp16/bf16 operands whose rows are 16-byte aligned for TMA (about
# 1 in 300 cases of the default space, whose sizes are mostly small and odd), so its tests draw from that
# part, with float32 beside it so that what it refuses is seen to be named, never passed. M stays ragged:
# the planted ragged-tile bug must have rows to break; a batched decode shape takes the split-K path.
SPACES = {
    "triton[kernels]": {"any": "", "fused": 'ops=["addmm", "linear", "bmm", "baddbmm"], '},
    "cutedsl[kernels]": {
        "any": 'ops=["mm", "addmm", "linear", "bmm"], dtypes=["bfloat16", "float16", "float32"], layouts=['
               '"contiguous", "transposed_a", "transposed_b", "transposed_ab"], shapes=[(8, 64, 64), (1, 64, 128), '
               '(40, 128, 64), (130, 256, 128), (96, 64, 64), (200, 128, 256), (16, 4096, 4096), '
               '(2, 8, 64, 1024), (3, 40, 128, 64)], ',
        "fused": 'ops=["addmm", "linear"], dtypes=["bfloat16", "float16"], layouts=["contiguous", "transposed_b"], '
                 'shapes=[(8, 64, 64), (40, 128, 64), (130, 256, 128), (256, 512, 256)], ',
    },
}  # fmt: skip


@pytest.fixture(params=list(KERNELS))
def kernel(request):
    op, module, missing = KERNELS[request.param]
    if missing:
        pytest.skip(missing)
    return request.param, op, module


USER_FILE = """
from pytest_gemmguard import gemm_case

@gemm_case({any}max_examples={n})
def test_any_gemm(gemm):
    gemm.check()

@gemm_case({fused}epilogues=["relu", "bias+gelu", "scale+tanh+cast", "residual+silu", "sigmoid"], max_examples={n})
def test_fused_epilogues(gemm):
    gemm.check()
"""


def user_file(backend: str, n: int, fused: bool = True) -> str:
    text = USER_FILE.format(n=n, **SPACES[backend])
    return text if fused else text.split("@gemm_case(" + SPACES[backend]["fused"] + "epilogues")[0]


# A defect of the class a hand-written kernel has: the mask of a ragged last row tile is off by one, so
# the last row of a GEMM whose M is not a multiple of 16 comes out zero.
PLANTED = """
import pytest
from pytest_gemmguard.backends import kernel_swap

@pytest.fixture(autouse=True)
def ragged_row_bug():
    real = kernel_swap.load_kernels("{module}").gemm

    def wrong(a, b, **kw):
        out = real(a, b, **kw)
        if a.shape[-2] % 16:
            out[..., -1, :] = 0
        return out

    kernel_swap.plant("{op}", wrong)
    yield
    kernel_swap.plant("{op}", None)
"""


def _run(pytester, plugin_args, backend, *args):
    if not ON_GPU:
        pytester._monkeypatch.setenv("TRITON_INTERPRET", "1")
    # One kernel cache for every run of this file: a variant one run compiled (cutedsl[kernels]: 8-11 s each on
    # the H200) is loaded by the next; the plants below wrap the Python entry point, not compiled code.
    cache = f"--gemm-kernel-cache={_KERNEL_CACHE['dir']}"
    return pytester.runpytest_subprocess(
        *plugin_args, f"--gemm-backends={backend}", "-p", "no:cacheprovider", "--gemm-seed=7", cache, *args,
        timeout=900,
    )  # fmt: skip


_KERNEL_CACHE: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _shared_kernel_cache(tmp_path_factory):
    _KERNEL_CACHE["dir"] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    _KERNEL_CACHE.clear()


def _row(text: str, backend: str) -> list[int]:
    """The backend's row of the results table: passed, unsup., failed, unavail | verified, unsup., failed."""
    line = next(ln for ln in text.splitlines() if ln.startswith(backend + " "))
    return [int(x) for x in re.findall(r"\b\d+\b", line.split("|")[0] + line.split("|")[1])[:7]]


def test_the_kernel_is_right_on_the_default_space_and_says_what_it_cannot_run(pytester, plugin_args, kernel):
    backend = kernel[0]
    pytester.makepyfile(test_user=user_file(backend, 25 if ON_GPU else 10))
    result = _run(pytester, plugin_args, backend)
    text = result.stdout.str()
    assert result.ret == 0, text[-3000:]
    passed, _, failed, _, verified, unsupported, wrong = _row(text, backend)
    assert passed == 2 and failed == 0 and wrong == 0
    # Provenance: the kernel really ran (verified cases), and what it cannot take is named, not passed.
    # (The CuteDSL space holds float32 cases on purpose, a third of its draws.)
    assert verified >= ((30 if backend.startswith("triton") else 20) if ON_GPU else 8), text[-2000:]
    assert unsupported > 0 and f"unsupported by {backend}" in text


def test_the_epilogue_runs_inside_the_kernel(pytester, plugin_args, kernel):
    """The pass hands the whole chain to the kernel: the compiled graph's only kernel is the custom op."""
    pytester.makepyfile(
        test_user="""
import torch
from pytest_gemmguard import gemm_case

@gemm_case(ops=["addmm"], dtypes=["float16"], layouts=["contiguous"], epilogues=["bias+gelu+scale",
           "residual+silu+cast"], shapes=[(64, 128, 64), (96, 256, 128)], max_examples=4)
def test_chain(gemm):
    result = gemm.check()
    launches = [k.name for g in result.record.graphs for k in g.launches]
    assert launches == ["{op}"], (launches, [g.code for g in result.record.graphs])
""".replace("{op}", kernel[1])
    )
    result = _run(pytester, plugin_args, kernel[0])
    assert result.ret == 0, result.stdout.str()[-3000:]


def test_a_ragged_tile_bug_in_the_kernel_fails_with_a_shrunk_example(pytester, plugin_args, kernel):
    backend, op, module = kernel
    pytester.makeconftest(PLANTED.replace("{module}", module).replace("{op}", op))
    pytester.makepyfile(test_user=user_file(backend, 12, fused=False))
    result = _run(pytester, plugin_args, backend)
    text = result.stdout.str()
    assert result.ret == 1, text[-3000:]
    assert "wrong result" in text.lower() or "mismatch" in text.lower(), text[-3000:]
    shrunk = re.findall(r"\b(\d+)×(\d+)×(\d+)\b", text)
    assert shrunk and min(int(m) for m, _, _ in shrunk) < 16, text[-3000:]


@pytest.mark.skipif(not ON_GPU, reason="benchmarks time CUDA kernels")
def test_the_benchmark_fixture_times_the_kernel(pytester, plugin_args, kernel):
    pytester.makepyfile(
        test_bench="""
def test_decode(gemm_benchmark):
    m = gemm_benchmark(shape=(16, 4096, 4096), dtype="bfloat16")
    assert m.kernels and "{op}" in str(m.kernels)
""".replace("{op}", kernel[1])
    )
    result = _run(pytester, plugin_args, kernel[0])
    assert result.ret == 0, result.stdout.str()[-3000:]
