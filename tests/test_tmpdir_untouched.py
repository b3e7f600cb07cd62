"""gemmguard promises (--gemm-cache-dir, docs/reference/options.md) that the user's own Inductor cache is never
touched: a run of the CPP backend left 147 MB of
Inductor's precompiled C++ headers in $TMPDIR/torchinductor_<user> (issue 41), whose directory Inductor fixes when
it is imported, whatever TORCHINDUCTOR_CACHE_DIR says. A real cpp compile, in the test process and in a
compile-ahead worker, with TMPDIR a fresh directory: nothing of Inductor's may be left there."""

from __future__ import annotations

import pytest

CPP_CASE = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"], shapes=[(16, 24, 40)])
def test_cpp(gemm):
    gemm.check()
"""


@pytest.mark.slow
def test_a_cpp_run_leaves_no_inductor_cache_in_tmpdir(pytester, plugin_args, tmp_path, monkeypatch, no_kernel_cache):
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # the subprocess's tempfile.gettempdir(), and Inductor's default cache
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    pytester.makepyfile(CPP_CASE)
    result = pytester.runpytest_subprocess(
        *plugin_args, "--gemm-backends=cpp", "-p", "no:cacheprovider", "--gemm-compile-workers=1", timeout=600
    )
    result.assert_outcomes(passed=1)
    left = sorted(p.name for p in tmp.iterdir() if p.name.startswith("torchinductor_"))
    size = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
    assert not left, f"{left}: {size} bytes left in TMPDIR"
