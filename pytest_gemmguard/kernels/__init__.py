"""gemmguard's own GEMMs: `triton_gemm` (Triton) and `cute_gemm` (CuteDSL, with its SM80-class path in
`cute_gemm_sm80`), run inside Inductor's graph by the backends `triton[kernels]` and `cutedsl[kernels]`
(backends/triton_kernels.py, backends/cutedsl_kernels.py, through backends/kernel_swap.py).

They ship in the wheel, so an installed gemmguard runs them as a checkout does. Each module imports its
GPU library (triton, cutlass) only when its backend loads it, never through this package: importing
`pytest_gemmguard.kernels` costs nothing on a machine that has neither.
"""
