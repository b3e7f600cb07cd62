"""Hypothesis internals gemmguard relies on (6.100-6.170 tested):

- `inner_test._hypothesis_internal_add_digest`: the example-database key of a @given test, set so each
  (test, backend) replays its own earlier failures;
- the `@reproduce_failure('VERSION', b'BLOB')` note Hypothesis adds to a failure, turned into a
  `--gemm-replay=VERSION:BLOB` line;
- `hypothesis.control.current_build_context().is_final`: whether the running example is the one Hypothesis
  will report (the shrunk failure's last run, an explicit example, a replay);
- `hypothesis.errors.FlakyFailure` holding the failure it saw first (an ExceptionGroup), for a failure that did not
  repeat when Hypothesis ran its example again;
- `hypothesis.internal.conjecture.engine.MAX_SHRINKING_SECONDS`: how long the shrinker may work on a failure
  (read when shrinking starts; no public setting bounds it), and `hypothesis.reporting.with_reporter`, to say
  in gemmguard's words when that limit stopped it (Hypothesis's own message speaks of five minutes and asks
  for a bug report).
- `hypothesis.internal.conjecture.providers._get_local_constants`, `CONSTANTS_CACHE` and `Constants`
  (Hypothesis 6.131.1 and later; before 6.131.9 the pool is a dict): now and then an integer draw takes a
  literal found in the "local" modules loaded at that moment (not site-packages: gemmguard's own modules in
  a checkout, generated code). Which modules are loaded changes as a session compiles, so a seeded draw made
  at collection and the test's own draw later could differ (the H200 run m2 of 2026-12-04: the user file's
  `test_any` drew other cases from its 10th example); `fixed_constants` keeps that pool empty while
  gemmguard draws.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

_BLOB = re.compile(r"@reproduce_failure\('([^']+)', b'([^']*)'\)")


def check() -> None:
    """Raise RuntimeError naming Hypothesis's version when an internal used here has moved."""
    import hypothesis
    from hypothesis import given, strategies

    @given(strategies.integers())
    def probe(x: int) -> None:
        pass

    inner = getattr(getattr(probe, "hypothesis", None), "inner_test", None)
    if inner is None:
        raise RuntimeError(f"hypothesis {hypothesis.__version__}: @given tests lost .hypothesis.inner_test")
    from hypothesis import control

    if not hasattr(control, "current_build_context"):
        raise RuntimeError(f"hypothesis {hypothesis.__version__}: hypothesis.control lost current_build_context")


def is_final_example() -> bool:
    """True when the running example is one Hypothesis will report, or when no Hypothesis test is running."""
    import hypothesis
    from hypothesis import control

    if not hypothesis.currently_in_test_context():
        return True
    return bool(getattr(control.current_build_context(), "is_final", True))


def set_database_key(test: Any, key: bytes) -> None:
    """Key the example database of a @given `test` by `key` (default: the function's own qualified name,
    which every backend's run of one test shares)."""
    test.hypothesis.inner_test._hypothesis_internal_add_digest = key


def flaky_inners(exc: BaseException, wanted: tuple[type[BaseException], ...]) -> list[BaseException]:
    """Where `exc` is Hypothesis's FlakyFailure (the example it reports failed once and then passed, failed
    differently, or was rejected, when run again), the exceptions of the `wanted` types it holds, first raised
    first; else none."""
    from hypothesis.errors import FlakyFailure

    if not isinstance(exc, FlakyFailure):
        return []
    found, pending = [], list(exc.exceptions)
    while pending:
        inner = pending.pop(0)
        if isinstance(inner, wanted):
            found.append(inner)
        pending.extend(getattr(inner, "exceptions", ()))
    return found


def replay_blob(exc: BaseException) -> tuple[str, str] | None:
    """(version, blob) from the reproduce_failure note Hypothesis attached to `exc`, if any."""
    for note in getattr(exc, "__notes__", []):
        m = _BLOB.search(note)
        if m:
            return m.group(1), m.group(2)
    return None


def explore_phases(shrink: bool) -> list[Any]:
    """The phases of gemmguard's explore run: never `explain`, which reruns a failure under a tracer (a compile
    each) to list lines of gemmguard's own source that only failing examples ran; `shrink` only if asked."""
    from hypothesis import Phase

    return [phase for phase in Phase if phase.name != "explain" and (shrink or phase.name != "shrink")]


@contextlib.contextmanager
def shrink_time_limit(seconds: float | None) -> Iterator[bool]:
    """Bound Hypothesis's shrinking of a failure to `seconds` (None: leave Hypothesis's own limit) while the
    block runs. Yields whether the bound is in force (False where this Hypothesis has no such limit)."""
    from hypothesis.internal.conjecture import engine

    old = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if seconds is None or not isinstance(old, (int, float)):
        yield False
        return
    from hypothesis import reporting

    outer = reporting.current_reporter()

    def translated(text: object) -> None:
        if isinstance(text, str) and "working to shrink" in text:
            text = (
                f"gemmguard: shrinking stopped at its {seconds:g} s limit (--gemm-shrink-time); the failure below "
                "is the smallest case found by then, and a rerun resumes shrinking from the example database"
            )
        outer(text)

    engine.MAX_SHRINKING_SECONDS = seconds
    try:
        with reporting.with_reporter(translated):
            yield True
    finally:
        engine.MAX_SHRINKING_SECONDS = old


@contextlib.contextmanager
def fixed_constants() -> Iterator[None]:
    """While the block runs, Hypothesis draws no literals from the modules this process happens to have
    loaded (its global constants stay): a seed then gives the same cases whatever ran before. A no-op on a
    Hypothesis without local constants. The patch is process-wide while it lasts; gemmguard draws in the
    main thread only (pytest-xdist runs tests in processes, not threads)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # before 6.125: no providers module, no local constants
        providers = None
    original = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if original is None or not hasattr(cache, "clear"):
        yield
        return
    if hasattr(providers, "Constants"):  # 6.131.9 and later
        empty: Any = providers.Constants()
    else:  # 6.131.1-6.131.8: a dict of one collection per choice type
        empty = {name: () for name in ("integer", "float", "bytes", "string")}

    # The cache holds (global, local) pools per constraint, filled from whatever pool was current: cleared on
    # the way in and out, so neither gemmguard's draws nor the user's own Hypothesis tests see the other's.
    cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.clear()
