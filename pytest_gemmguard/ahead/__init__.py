"""Compile-ahead: worker processes compile the upcoming cases into the session's caches while the test process
checks the current one. The pool (pool.py), how it spends the machine (policy.py), the worker process
(worker.py, run as `python -m pytest_gemmguard.ahead.worker`) and what travels to it (travel.py: a test's own
function)."""
