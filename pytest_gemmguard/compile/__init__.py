"""Compiling a case through exactly one backend: the compiler with per-call provenance (compiler.py), what a
backend changed in the process taken out and put back (isolation.py), every autotune candidate judged
(candidates.py), the compile time limit (timeout.py) and frozen weights (frozen.py)."""
