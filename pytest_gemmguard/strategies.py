"""Hypothesis strategies for GEMM cases, usable on their own (public; they live in cases/strategies.py with the
case space they draw from):

    from hypothesis import given
    from pytest_gemmguard import strategies as gs

    @given(gs.gemm_cases(device="cpu", ops=["mm"]))
    def test_something(case): ...
"""

from .cases.strategies import SizeLimits, cases_in, dims, epilogue_chains, every_case, gemm_cases, regime_tour

__all__ = ["SizeLimits", "cases_in", "dims", "epilogue_chains", "every_case", "gemm_cases", "regime_tour"]
