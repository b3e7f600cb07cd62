"""pytest-benchmark internals gemmguard relies on (5.x tested): `Metadata`, the fixture's `_add_stats` and
`_mode`. Through them gemmguard hands its measurements to pytest-benchmark, so its table, `--benchmark-json`,
`--benchmark-autosave` / `--benchmark-save` storage and `pytest-benchmark compare` see them.

The `gemm_benchmark` fixture depends on pytest-benchmark's `benchmark` fixture (so `--benchmark-only` and
`--benchmark-skip` treat its tests as benchmarks). Each measurement becomes one pytest-benchmark stats
record: its samples (seconds per call, one round each), named after the test plus the case when a test
measures more than one case, with gemmguard's own numbers (backend, case, TFLOP/s, % of peak, compile
times, reference) in `extra_info`. pytest-benchmark's own timer never runs; the samples are gemmguard's.
"""

from __future__ import annotations

from typing import Any


def check() -> None:
    """Raise RuntimeError naming pytest-benchmark's version when an internal used here has moved."""
    from importlib.metadata import version

    from pytest_benchmark.fixture import BenchmarkFixture
    from pytest_benchmark.stats import Metadata

    # Both are instance attributes set in the fixture's __init__: look for their assignment there.
    assigned = BenchmarkFixture.__init__.__code__.co_names
    missing = [name for name in ("_add_stats", "_mode") if name not in assigned]
    if "fixture" not in Metadata.__init__.__code__.co_varnames or missing:
        raise RuntimeError(f"pytest-benchmark {version('pytest-benchmark')} moved {', '.join(missing)}")


class _Named:
    """What pytest-benchmark's stats record reads from its fixture, for one named measurement."""

    def __init__(self, fixture: Any, name: str, fullname: str, extra_info: dict) -> None:
        self.name = name
        self.fullname = fullname
        self.group = fixture.group
        self.param = fixture.param
        self.params = fixture.params
        self.extra_info = extra_info
        self.cprofile_stats = None
        self.has_error = False


def record(fixture: Any, measurement: Any, first: bool) -> bool:
    """Add `measurement` to pytest-benchmark's session through its `benchmark` fixture object.
    Returns False (and records nothing) when pytest-benchmark is disabled for this run."""
    if fixture is None or getattr(fixture, "disabled", True):
        return False
    from pytest_benchmark.stats import Metadata

    name, fullname = fixture.name, fixture.fullname
    if not first:  # a second case in the same test gets its own row
        suffix = f"[{measurement.case_id}]"
        name, fullname = name + suffix, fullname + suffix
    extra = dict(fixture.extra_info) if first else {}
    extra.update(measurement.extra_info())
    meta = Metadata(
        _Named(fixture, name, fullname, extra),
        iterations=1,
        options={"timer": f"gemmguard:{measurement.method}", "min_rounds": 1, "max_time": None, "warmup": True},
    )
    for sample in measurement.samples:
        meta.stats.update(sample)
    fixture._add_stats(meta)
    fixture._mode = "gemm_benchmark(...)"  # used: pytest-benchmark neither warns nor allows a second use
    if first:
        fixture.stats = meta
        fixture.extra_info.update(extra)
    return True
