"""The measuring half of gemmguard: the `gemm_benchmark` fixture and what it stands on.

plugin.py                  pytest options, hooks and the fixture (registered by the main plugin)
fixture.py                 one benchmark: verify, compile, time, record, check budgets
timing.py                  CPU and GPU timers (CUDA events, L2 flush, CUDA-graph replay), kernel and reference
                           interleaved in pairs, sampling until the noise suits the threshold
peak.py                    the library peak behind "% of peak"
stats.py                   medians, confidence intervals, the U test (the compile-time verdict)
verdict.py                 the runtime verdict on paired ratios: regression, ok or inconclusive
coldcompile.py             cold compile time in a fresh subprocess with empty caches
baseline.py                fingerprinted JSON baselines, written atomically
budget.py                  budgets from pyproject.toml and @pytest.mark.gemm_budget
pytest_benchmark_bridge.py results handed to pytest-benchmark's storage and compare
report.py, export.py       terminal table; JSON, Markdown and PNG reports
plots.py                   runtime.png and compile.png: ratios on log axes, coloured by verdict
"""
