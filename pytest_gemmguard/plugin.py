"""The checking half's pytest hooks: options, parametrizing by backend, the fixtures, how each outcome is
reported, and the results table. Its own `pytest11` entry point; the measuring half (bench/plugin.py)
has another, and the two share state only through `_state`.

Loading this module imports no torch, no triton and no backend package: a project that has gemmguard
installed but runs no GEMM test pays nothing. torch comes in when a gemm test is collected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from . import _state, validate
from ._compat.inductor import THIRD_PARTY_DEPRECATIONS
from ._state import BACKEND_PROPERTY, GPU_PROPERTY, OUTCOME_PROPERTY, SHARE_PROPERTY
from .errors import (
    BackendCrashed,
    BackendUnavailable,
    CaseTooLarge,
    CompileTimeout,
    CoverageLost,
    GemmguardError,
    GemmMismatch,
    GemmUsageError,
    KnownFailureFixed,
    MeasurementError,
    NothingVerified,
    ReplayNotReproduced,
    Unsupported,
    UserCodeError,
)
from .report.tally import Tally
from .run import RUNNER_FIXTURE
from .xdist_hooks import pytest_configure_node, pytest_xdist_auto_num_workers, pytest_xdist_setupnodes

__all__ = ["pytest_configure_node", "pytest_xdist_auto_num_workers", "pytest_xdist_setupnodes"]  # hooks, re-exported

# Where each live pytest config's backend registrations start (see backends.release), keyed by its plugin
# manager: pytest_addoption is the one hook that runs before a session's conftests are imported.
_REGISTRY_MARKS: dict[int, int] = {}


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    from . import backends

    _REGISTRY_MARKS[id(pluginmanager)] = backends.mark()
    validate.add_options(parser, "gemmguard", "GEMM backends under test (gemmguard)", validate.CORE)


NO_NUMPY = "Failed to initialize NumPy"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gemm_case: a GEMM case test run once per selected backend (gemmguard)")
    # torch warns on import that it found no NumPy; gemmguard's checks never need it and README's main job installs
    # none, so a new user's first run would show it as their problem. Only that message is silenced.
    config.addinivalue_line("filterwarnings", f"ignore:{NO_NUMPY}:UserWarning")
    # cutlass_api's own uses of names cutlass-dsl deprecated, also outside a compile: NVGEMM's kernel list, built by
    # the warm-up thread, warned 134,596 times in one H100 run. Only DeprecationWarnings its own modules raise.
    config.addinivalue_line("filterwarnings", f"ignore::DeprecationWarning:{THIRD_PARTY_DEPRECATIONS}")
    state = _state.ensure(config)
    path = state.settings["known"]
    if path:
        state.known = _load_known(config, path)
    _verdict_records(config, state)
    config.pluginmanager.register(_SummaryCollector(state.tally), "gemmguard-summary")


def _verdict_records(config: pytest.Config, state: _state.SharedState) -> None:
    """The base's verdict record and this run's (known/verdicts.py); the run's seed follows them."""
    from .known import verdicts

    worker_seed = getattr(config, "workerinput", {}).get("gemmguard_seed")
    try:
        state.base, state.record = verdicts.open_records(state.settings, worker_seed)
    except GemmUsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _load_known(config: pytest.Config, path: str) -> Any:
    """Read the user's known-failures file now (a malformed one is one usage-error line; gemmguard's shipped
    database joins it when the first GEMM test runs, `_state.session`: reading it imports torch). A path from
    pyproject.toml is relative to the rootdir; one from the command line or the environment, to where pytest
    runs."""
    import os

    from . import known

    if config.getoption("--gemm-known") is None and not os.environ.get("GEMMGUARD_KNOWN"):
        path = os.path.join(str(config.rootpath), path)
    try:
        return known.load(path)
    except GemmUsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    state = _state.get(config)
    if state is not None and state.session is not None:
        state.session.close()
    start = _REGISTRY_MARKS.pop(id(config.pluginmanager), None)
    if start is not None:
        from . import backends

        backends.release(start)  # a conftest's registrations and this session's probes end with the session


def _header(config: pytest.Config) -> list[str]:
    from .report.table import capability_matrix, unavailable_fixes

    selected = _state.selected(config)
    compiler = _state.session(config).compiler
    cache = compiler.cache_dir or "a fresh temporary directory, made on the first compile"
    if compiler.kernels_only:
        cache = f"{cache} (kernels only: every graph lowered and autotuned afresh)"
    mode = "dynamic" if compiler.dynamic else "static"
    return [
        f"gemmguard: backends {', '.join(selected) or '(none)'}; shapes {mode}; Inductor cache {cache}",
        "gemmguard: math per case: TF32 only for tf32 cases; fp16/bf16 reduced-precision reductions off",
        *capability_matrix(selected),
        *unavailable_fixes(),
    ]


def pytest_collection_finish(session: pytest.Session) -> None:
    """The capability header, once GEMM tests are known to be in the run (probing imports torch)."""
    state = _state.get(session.config)
    if state is None or not any(_backend_of(item) for item in session.items):
        return
    _queue_ahead(session)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(session.config, "workerinput"):
        return
    for line in _header(session.config):
        reporter.write_line(line)
    state.header_shown = True


def _queue_ahead(session: pytest.Session) -> None:
    """Give the compile-ahead pool every GEMM test's cases now, in run order, so its workers never wait for
    the next test to start (not in a pytest-xdist worker: each of those runs only a share of the items, and
    queues each test's cases when it starts; the rule for runs with benchmarks holds there too)."""
    if session.config.option.collectonly:
        return
    from . import backends
    from .run.plan import plan, queue_ahead

    gg = _state.session(session.config)
    benchmarks = any("gemm_benchmark" in getattr(item, "fixturenames", ()) for item in session.items)
    if gg.options.compile_workers is None and benchmarks:
        # auto: a run with benchmarks compiles in the test process only, so no benchmark ever reuses an
        # autotuning decision made while other processes shared the GPU (--gemm-compile-workers=N forces it).
        gg.options.compile_workers = 0
        return
    if hasattr(session.config, "workerinput"):
        return
    for item in session.items:
        backend = _backend_of(item)
        space = getattr(getattr(item, "function", None), "_gemmguard_space", None)
        if not backend or space is None or not backends.probe(backend).available or gg.pool_for(backend) is None:
            continue
        queue_ahead(gg, plan(gg, space, backend, item.nodeid), backend, item.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """A Hypothesis @given put over a `@gemm_case` test (the other way round, the decorator itself refuses):
    one line at collection, not Hypothesis's health check for the runner fixture."""
    inner = getattr(getattr(obj, "hypothesis", None), "inner_test", None)
    if inner is not None and hasattr(inner, "_gemmguard_space"):
        from .run.decorator import given_line

        raise GemmUsageError(given_line(name))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gemm_backend" in metafunc.fixturenames:
        selected = _state.selected(metafunc.config)
        metafunc.parametrize("gemm_backend", selected, ids=selected)


@pytest.fixture
def gemm_backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (the plugin parametrizes this by --gemm-backends)."""
    return request.param  # pragma: no cover - always parametrized


class _Runner:
    """What `@gemm_case`'s wrapper calls: the Hypothesis loop of one test on one backend."""

    def __init__(self, session: Any, backend: str, nodeid: str) -> None:
        self.session, self.backend, self.nodeid = session, backend, nodeid

    def explore(self, test: Callable, space: Any, fixtures: dict) -> None:
        from .run.explore import explore

        explore(self.session, test, space, fixtures, self.backend, self.nodeid)


@pytest.fixture(name=RUNNER_FIXTURE)
def _gemmguard_runner(request: pytest.FixtureRequest, gemm_backend: str) -> _Runner:
    return _Runner(_state.session(request.config), gemm_backend, request.node.nodeid)


class ProvenCompile:
    """`gemm_compile(fn, *, weights=())`: compile through the current backend; each call checks that
    the backend's own GEMM kernels ran (else the test ends as unsupported) and keeps the record."""

    def __init__(self, session: Any, backend: str) -> None:
        self.session, self.backend = session, backend
        self.last_record = None

    def __call__(self, fn: Callable, *, weights: tuple[int, ...] = ()) -> Callable:
        from . import backends
        from .compile.compiler import run_checked

        def run(*inputs):
            compiled = self.session.compiler.compile(backends.get(self.backend), fn, inputs, weights)
            out, self.last_record = run_checked(compiled, inputs)
            return out

        return run


@pytest.fixture
def gemm_compile(request: pytest.FixtureRequest, gemm_backend: str) -> ProvenCompile:
    """Compile any function through the backend under test, with provenance (see ProvenCompile)."""
    from .run.session import require_backend

    require_backend(gemm_backend)
    return ProvenCompile(_state.session(request.config), gemm_backend)


def _backend_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("gemm_backend") if callspec is not None else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from .gpus import my_gpu

    gpu = my_gpu()  # a pytest-xdist worker given its own GPU: each GEMM test's report names it
    for item in items:
        backend = _backend_of(item)
        if backend:
            item.user_properties.append((BACKEND_PROPERTY, backend))
            if gpu is not None:
                item.user_properties.append((GPU_PROPERTY, gpu.label()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    state = _state.get(item.config)
    if state is None or state.session is None or BACKEND_PROPERTY not in dict(item.user_properties):
        yield
        return
    session = state.session
    getattr(session.options.progress, "new_test", lambda: None)()  # -v: each test's examples shown afresh
    tally, stats = session.tally.snapshot(), dict(session.compiler.stats)
    yield
    share = session.tally.since(tally)
    share["compiler"] = {k: v - stats[k] for k, v in session.compiler.stats.items()}
    item.user_properties.append((SHARE_PROPERTY, share))


def _outcome_of(exc: BaseException, backend: str, state: _state.SharedState) -> tuple[str, str | None, bool]:
    """(outcome, one-line text or None to keep pytest's own report, skip?) for what a gemm test raised."""
    if isinstance(exc, Unsupported):
        # Not a pass and not a failure: the backend's own kernel never ran for this case.
        return "unsupported", f"gemmguard: {exc}", True
    if isinstance(exc, BackendUnavailable):
        if backend in state.explicit and not state.settings["allow_unavailable"]:
            why = "it was named in --gemm-backends (pass --gemm-allow-unavailable to skip it instead)"
            return "unavailable", f"gemmguard: {exc}; failing because {why}", False
        return "unavailable", f"gemmguard: {exc}", True
    if isinstance(exc, (CompileTimeout, BackendCrashed, KnownFailureFixed, MeasurementError, CoverageLost)):
        notes = "".join(f"\n{n}" for n in getattr(exc, "__notes__", ()))
        return "failed", f"gemmguard: {exc}{notes}", False
    if isinstance(exc, (NothingVerified, ReplayNotReproduced)):
        return "error", f"gemmguard: {exc}", False  # no traceback: it would point into gemmguard, not the test
    if isinstance(exc, CaseTooLarge):  # the test's error, in one line: what it needs, what is free, how to allow it
        return "error", f"gemmguard: {exc}", False
    if isinstance(exc, (UserCodeError, GemmUsageError)):
        return "error", None, False  # the test's own error: pytest's traceback points into the test
    if isinstance(exc, GemmMismatch):  # gemmguard's report, not a traceback through its internals (report/failure.py)
        from .report.failure import shown

        return "failed", shown(exc), False
    if isinstance(exc, (AssertionError, GemmguardError)):
        return "failed", None, False
    return "error", None, False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    backend = dict(item.user_properties).get(BACKEND_PROPERTY)
    state = _state.get(item.config)
    if backend is None or state is None or call.excinfo is None:
        return
    if call.excinfo.errisinstance(pytest.xfail.Exception):
        report.user_properties = [*report.user_properties, (OUTCOME_PROPERTY, "xfailed")]
        return
    if call.excinfo.errisinstance(pytest.skip.Exception):
        if str(call.excinfo.value).startswith("gemmguard: ") and isinstance(report.longrepr, tuple):
            # gemmguard's own skip (the big profile and listed shapes) names the test's line, not gemmguard's.
            report.longrepr = (str(item.path), (item.location[1] or 0) + 1, report.longrepr[2])
        return
    kind, text, skip = _outcome_of(call.excinfo.value, backend, state)
    report.user_properties = [*report.user_properties, (OUTCOME_PROPERTY, kind)]
    if skip:
        report.outcome = "skipped"
        # pytest keeps a skip's line 1-based in this tuple (its location is 0-based).
        report.longrepr = (str(item.path), (item.location[1] or 0) + 1, text)
    elif text is not None:
        from ._compat.pytest import Report

        report.outcome = "failed"
        report.longrepr = Report(text)


class _SummaryCollector:
    """Registered per pytest config: counts from reports alone, so it works where the summary is
    printed, including the pytest-xdist controller, which never runs a test itself."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        backend = props.get(BACKEND_PROPERTY)
        if not backend:
            return
        if report.when == "call" or report.outcome != "passed":
            self.tally.add_outcome(backend, props.get(OUTCOME_PROPERTY) or report.outcome, props.get(GPU_PROPERTY))
        if report.when == "call" and SHARE_PROPERTY in props:
            self.tally.add_share(props[SHARE_PROPERTY])


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """A test that never reached its examples (skipped, failed in setup) leaves no jobs to compile ahead."""
    state = _state.get(item.config)
    if state is not None and state.session is not None and state.session.pool is not None:
        state.session.pool.forget(item.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run in which GEMM tests were selected but no backend ran anything is not green."""
    state = _state.get(session.config)
    if state is not None and state.record is not None:
        _write_record(session.config, state)
    if state is None or hasattr(session.config, "workerinput") or not state.tally.outcomes:
        return
    if not state.tally.ran_anything() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _write_record(config: pytest.Config, state: _state.SharedState) -> None:
    from .known import verdicts

    worker = getattr(config, "workerinput", {}).get("workerid")
    written = verdicts.write_record(state.record, state.settings["verdicts"], worker)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if written and reporter is not None:
        count, seed = len(state.record.results), state.record.seed
        reporter.write_line(f"gemmguard: verdicts of {count} cases (seed {seed}) written to {written}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = _state.get(config)
    if state is None or not state.tally.outcomes:
        return
    from .report.table import gpu_lines, known_lines, results_table

    terminalreporter.section("gemmguard results")
    if not state.header_shown:  # pytest-xdist: the workers collected, so the header was not printed here
        for line in _header(config):
            terminalreporter.write_line(line)
    dynamic = bool(state.settings["dynamic"])
    all_choices = bool(state.settings["all_choices"])
    for line in results_table(_state.selected(config), state.tally, dynamic, all_choices):
        terminalreporter.write_line(line)
    for line in gpu_lines(state.tally):
        terminalreporter.write_line(line)
    if state.tally.known:
        from .known import load_shipped

        for line in known_lines(state.tally, {e.id: e for e in load_shipped().entries}):
            terminalreporter.write_line(line)
    if not state.tally.ran_anything():
        terminalreporter.write_line(
            "gemmguard: no selected backend ran anything (every GEMM test was unsupported or unavailable): "
            "this run tested nothing, so it does not pass"
        )
