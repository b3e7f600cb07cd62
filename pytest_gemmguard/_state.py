"""What the checking and measuring plugins share, kept on `config.stash` behind accessors.

Neither plugin imports the other: both reach the shared state through this module, which is torch-free.
Work that needs torch (probing backends for `auto`, building the compiler) happens on first use, so a
pytest run in which no GEMM test runs never imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from .errors import GemmUsageError
from .report.tally import Tally

SHARE_PROPERTY = "gemmguard"  # a test's share of the tally, on its report (survives pytest-xdist)
BACKEND_PROPERTY = "gemm_backend"  # the backend a test ran on, on its report
GPU_PROPERTY = "gemm_gpu"  # the GPU a pytest-xdist worker was given (--gemm-gpus), on its GEMM tests' reports
OUTCOME_PROPERTY = "gemmguard_outcome"  # unsupported | unavailable | failed | error | xfailed | xpassed


@dataclass
class SharedState:
    settings: dict[str, Any]  # the core plugin's resolved settings (validate.CORE)
    table: dict[str, Any]  # [tool.gemmguard] of pyproject.toml
    tally: Tally = field(default_factory=Tally)  # the results table's counts, from the tests' reports
    selected: list[str] | None = None  # resolved on first use ('auto' needs probes)
    explicit: set[str] = field(default_factory=set)  # backends the user named (not through auto/all)
    session: Any = None  # session.GemmSession, built on first use
    known: Any = None  # known.KnownFailures, read when the core plugin configures
    base: Any = None  # verdicts.Record of the base (--gemm-base-verdicts), read when the core plugin configures
    record: Any = None  # verdicts.Record this run writes (--gemm-verdicts)
    gpus: list | None = None  # the GPUs the xdist controller gives its workers (gpus.plan), on first use
    header_shown: bool = False


_KEY = pytest.StashKey[SharedState]()


def ensure(config: pytest.Config) -> SharedState:
    """The shared state, made from the core settings on first call, whichever plugin's configure runs first
    (pytest orders the two entry points as it likes). Raises pytest.UsageError on a bad setting."""
    state = config.stash.get(_KEY, None)
    if state is not None:
        return state
    from . import validate

    try:
        config.getoption(validate.CORE[0].flag)
    except ValueError:  # the core plugin's options were never added: it is not loaded
        raise pytest.UsageError(
            "gemmguard: the core plugin is not loaded (pytest_gemmguard.plugin); load it with "
            "-p pytest_gemmguard.plugin, or pip install the package so its entry points load both halves"
        ) from None
    try:
        table = validate.read_pyproject(str(config.rootpath))
        settings = validate.resolve(config, validate.CORE, table)
    except GemmUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings["cache_dir"] and settings["kernel_cache"]:
        raise pytest.UsageError(
            "gemmguard: --gemm-cache-dir and --gemm-kernel-cache name two caches for one run; give one "
            "(--gemm-kernel-cache keeps kernels only, --gemm-cache-dir everything Inductor keeps)"
        )
    state = SharedState(settings, table)
    state.explicit = {n for n in settings["backends"] if n not in ("auto", "all")}
    config.stash[_KEY] = state
    return state


def get(config: pytest.Config) -> SharedState | None:
    return config.stash.get(_KEY, None)


def selected(config: pytest.Config) -> list[str]:
    """The backends under test, with 'auto' and 'all' expanded (probing: this imports torch)."""
    state = ensure(config)
    if state.selected is None:
        from . import backends

        known = backends.names()
        out: list[str] = []
        for name in state.settings["backends"]:
            if name == "auto":
                # gemmguard's own kernels (kernels/) are asked for by name: 'auto' means Inductor's backends.
                out += [b for b in known if getattr(backends.get(b), "in_auto", True) and backends.probe(b).available]
            elif name == "all":
                out += known
            else:
                out.append(name)
        state.selected = list(dict.fromkeys(out))
    return state.selected


def session(config: pytest.Config) -> Any:
    """The session's GemmSession (compiler, options, tally), built on first use."""
    state = ensure(config)
    if state.session is None:
        from .compile.compiler import Compiler
        from .run.session import GemmSession, Options

        s = state.settings
        compiler = Compiler(
            cache_dir=s["cache_dir"] or s["kernel_cache"],
            timeout_s=s["compile_timeout"],
            dynamic=s["dynamic"],
            kernels_only=bool(s["kernel_cache"]),
        )
        options = Options(s["max_examples"], s["seed"], s["replay"], s["repro_dir"], all_choices=s["all_choices"])
        options.compile_workers = s["compile_workers"]
        options.shrink_s = s["shrink_s"] or None
        options.memory_limit = s["memory_limit"]
        options.profile = s["profile"]
        options.fewer_threads = s["fewer_threads"]
        options.differential = tuple(selected(config))
        verbosity = config.get_verbosity()
        if verbosity >= 1:  # every example, but a failure's shrinking steps like the line below
            options.progress = Throttled(lambda line: live_line(config, line), PROGRESS_EVERY_S, every_example=True)
        elif verbosity == 0:  # a long GPU run must not sit silent for minutes: a line every 30 s at most
            options.progress = Throttled(lambda line: live_line(config, line), PROGRESS_EVERY_S)
        # The session counts examples as they run; state.tally is built from the reports (the two must stay
        # apart: a test's share goes from the first to the second on its report).
        known = _known(state.known, s["known_shipped"])
        state.session = GemmSession(compiler, options, known, bool(s["known_strict"]))
        state.session.base, state.session.record = state.base, state.record
    return state.session


PROGRESS_EVERY_S = 30.0


def _known(own: Any, shipped: bool) -> Any:
    """The known failures a session applies: the user's file (read at configure) over gemmguard's shipped
    database, unless that is switched off (--gemm-known-shipped=off)."""
    if not shipped:
        return own
    from . import known

    database = known.load_shipped()
    return own.merged_over(database) if own is not None else database


class Throttled:
    """Passes on a progress line when `every_s` have gone by since the last one it passed (the first at
    once), and at once the first line of a test's failure; the steps of its shrinking that follow are
    throttled like any line (one every `every_s` says the shrinking goes on). With `every_example` (pytest -v)
    every line passes until the test's first failure, and its shrinking's steps are throttled as above.
    `new_test` starts the next test afresh."""

    def __init__(self, write: Callable[[str], None], every_s: float, every_example: bool = False) -> None:
        self.write, self.every_s, self.last = write, every_s, -float("inf")
        self.every_example, self.failed = every_example, False  # failed: this test had a failure

    def new_test(self) -> None:
        self.failed = False

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        first_failure = "FAILED" in line and not self.failed
        if first_failure or now - self.last >= self.every_s or (self.every_example and not self.failed):
            self.last = now
            self.write(line)
        if first_failure and "kept going" not in line:  # --gemm-verdicts goes on past a failure: no shrinking
            self.failed = True


def live_line(config: pytest.Config, line: str) -> None:
    """Write a progress line to the terminal while a test runs (past pytest's output capture)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"    gemmguard {line}")
