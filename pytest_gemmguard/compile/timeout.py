"""A wall-clock limit on one compile (or run), by SIGALRM: Inductor's compile cannot be interrupted
any other way from inside the process. Only the main thread can take the signal; elsewhere no limit."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from ..errors import CompileTimeout


@contextlib.contextmanager
def time_limit(seconds: float, backend: str) -> Iterator[None]:
    """Raise CompileTimeout in the block once `seconds` have passed (0: no limit)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise CompileTimeout(f"{backend}: compile/run exceeded the {seconds:g} s limit (--gemm-compile-timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
