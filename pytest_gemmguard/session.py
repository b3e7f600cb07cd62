"""Session-wide state of the checking half: the compiler, the run's options and the tally."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import backends
from .compile import Compiler
from .errors import BackendUnavailable
from .tally import Tally


@dataclass
class Options:
    max_examples: int | None = None  # overrides every gemm case's budget
    seed: int | None = None
    replay: str | None = None  # "version:blob" from a failure report
    repro_dir: str = "gemmguard-repro"
    all_choices: bool = True  # check every autotune candidate, not only the winner (candidates.py)
    progress: Callable[[str], None] | None = None  # live lines for long runs (the plugin wires -v)
    default_examples: dict = field(default_factory=lambda: {"cpu": 12, "cuda": 25})


class GemmSession:
    """The compiler, the options, the known failures and the tally of one test session (one per pytest
    config)."""

    def __init__(self, compiler: Compiler, options: Options, known: Any = None, known_strict: bool = False) -> None:
        self.compiler = compiler
        self.options = options
        self.tally = Tally()
        self.known = known  # known.KnownFailures, or None without a known-failures file
        self.known_strict = known_strict

    def progress(self, message: str) -> None:
        """A live line for long work (shown with pytest -v)."""
        if self.options.progress is not None:
            self.options.progress(message)


def require_backend(backend: str) -> None:
    """Raise BackendUnavailable, with the probe's reason and fix, when `backend` cannot run here (the
    plugin turns it into a skip, or a failure where the user named the backend explicitly)."""
    probe = backends.probe(backend)
    if not probe.available:
        raise BackendUnavailable(backend, probe.line())
