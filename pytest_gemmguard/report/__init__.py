"""What a reader sees: the failure report of a wrong result (failure.py), the header's capability matrix and
the results table (table.py) from the run's counts (tally.py), and standalone repro scripts (repro.py).

Importing this package imports no torch (the plugins read tally.py and table.py without it)."""
