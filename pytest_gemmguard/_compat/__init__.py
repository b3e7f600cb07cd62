"""One adapter per library whose internals gemmguard touches. Nothing else in gemmguard reaches into
Inductor's, Hypothesis's or pytest-benchmark's private names: when one moves, its adapter's `check()`
fails in the suite (tests/test_compat.py) naming the library version, instead of a run breaking somewhere
deep inside."""
