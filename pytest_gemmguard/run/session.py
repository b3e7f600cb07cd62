"""Session-wide state of the checking half: the compiler, the run's options and the tally."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import backends
from ..compile.compiler import Compiler
from ..errors import BackendUnavailable
from ..report.tally import Tally


@dataclass
class Options:
    max_examples: int | None = None  # overrides every gemm case's budget
    seed: int | None = None
    replay: str | None = None  # "version:blob" from a failure report
    repro_dir: str = "gemmguard-repro"
    all_choices: bool = True  # check every autotune candidate, not only the winner (compile/candidates.py)
    shrink_s: float | None = 60.0  # Hypothesis's shrinking of one failing test, at most (None: its own limit)
    progress: Callable[[str], None] | None = None  # live lines for long runs (the plugin wires them)
    default_examples: dict = field(default_factory=lambda: {"cpu": 12, "cuda": 25})
    compile_workers: int | None = None  # compile-ahead processes; None: ahead/policy.py's auto_workers()
    # The run's backends: a failure's inputs go through the others that can run here (crosscheck/differential.py).
    differential: tuple[str, ...] = ()
    memory_limit: str | int = "auto"  # --gemm-memory-limit: 'auto' (what is free), 'off', or bytes (cases/memory.py)
    # --gemm-fewer-threads: which CPU backends' compiled code runs again with one thread per OpenMP team
    # (crosscheck/threads.py)
    fewer_threads: str = "auto"
    profile: str = "default"  # --gemm-profile: the sizes drawn ('big': cases/big.py)


class GemmSession:
    """The compiler, the options, the known failures and the tally of one test session (one per pytest
    config)."""

    def __init__(self, compiler: Compiler, options: Options, known: Any = None, known_strict: bool = False) -> None:
        self.compiler = compiler
        self.options = options
        self.tally = Tally()
        self.known = known  # known.KnownFailures, or None without a known-failures file
        self.known_strict = known_strict
        # Known entries this session already warned about as XPASS, or saw explain a failure (known/KnownTracker).
        self.known_noted: set[str] = set()
        self.base: Any = None  # verdicts.Record of the base: failures it has too are pre-existing (known/verdicts.py)
        self.record: Any = None  # verdicts.Record this run writes (--gemm-verdicts), or None
        self.pool: Any = None  # ahead.pool.AheadPool, started by the first test that uses it
        self.plans: dict = {}  # (test id, backend) -> plan.Plan, made once per session
        self.taken: dict[tuple[str, str], list[str]] = {}  # (backend, op) -> the first few cases it ran
        self.confirmations: dict = {}  # (case, backend, candidate) -> what crosscheck/confirm.py's compile returned
        self._gpu_free: dict[str, int | None] = {}  # device -> free bytes when compile-ahead was first sized

    def pool_for(self, backend: str) -> Any:
        """The compile-ahead pool for `backend`'s correctness checks, or None where it does not apply: a
        replay (one example), or no workers (`auto` on a small machine: ahead/policy.py's auto_workers). A backend that
        freezes weights (cpp) compiles again in the test process (its FX graph cache is off) but finds the
        kernels the worker built in the session's code cache, and a case the worker found unsupported for
        good is not compiled again at all."""
        from ..ahead.policy import auto_workers
        from ..ahead.pool import AheadPool

        if self.options.replay or self.options.profile == "big":  # big: a worker would hold a case's gigabytes too
            return None
        workers = self.options.compile_workers
        if workers is None:
            device = backends.get(backend).device()
            gpu = device.startswith("cuda")
            workers = auto_workers(cpu_backend=not gpu, gpu_memory=self._free_gpu_memory(device) if gpu else None)
        if workers < 1:
            return None
        if self.pool is None:
            self.compiler.activate()  # the workers inherit the session's cache directories
            self.pool = AheadPool(workers, self.progress, log_dir=self.compiler.cache_dir)
        return self.pool

    def _free_gpu_memory(self, device: str) -> int | None:
        """Free bytes on `device` when first asked (before any worker holds some), None where unknown."""
        if device not in self._gpu_free:
            try:
                import torch

                self._gpu_free[device] = torch.cuda.mem_get_info(torch.device(device))[0]
            except Exception:  # no CUDA, or a driver that cannot say: no bound from it
                self._gpu_free[device] = None
        return self._gpu_free[device]

    def quiet(self) -> Any:
        """A context in which no compile-ahead worker runs (for timing)."""
        import contextlib

        return self.pool.paused() if self.pool is not None else contextlib.nullcontext()

    def close(self) -> None:
        """End of session: stop the compile-ahead workers, then drop the compiler's state and caches."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.compiler.deactivate()

    def progress(self, message: str) -> None:
        """A live line for long work (every line with pytest -v; without it one every 30 s, _state.Throttled)."""
        if self.options.progress is not None:
            self.options.progress(message)


def require_backend(backend: str) -> None:
    """Raise BackendUnavailable, with the probe's reason and fix, when `backend` cannot run here (the
    plugin turns it into a skip, or a failure where the user named the backend explicitly)."""
    probe = backends.probe(backend)
    if not probe.available:
        raise BackendUnavailable(backend, probe.line())
