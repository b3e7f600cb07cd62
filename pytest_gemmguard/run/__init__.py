"""The checking half's run of a test: `@gemm_case` (decorator.py), the Hypothesis loop around the test
(explore.py) from its plan (plan.py), the `Gemm` the test receives (gemm.py) and what the run keeps of that example
(example.py), one check of one case (check.py), the session's compiler, options and known failures (session.py),
and `--gemm-replay` (replay.py).

Importing this package imports no torch (the plugin's validators read replay.py without it)."""

RUNNER_FIXTURE = "_gemmguard_runner"  # the fixture @gemm_case's wrapper asks for and the plugin provides
