"""pytest wiring: options, the capability header, parametrizing by backend, fixtures and the summary.

Knows nothing of how a backend compiles or how the oracle decides; it hands tests to the runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from . import backends
from .bench import plugin as bench_plugin
from .cases import RUNNER_FIXTURE
from .errors import GemmUsageError, Unsupported
from .runner import UNAVAILABLE_PREFIX, require_backend

ENV_BACKENDS = "GEMMGUARD_BACKENDS"
UNSUPPORTED_PREFIX = "gemmguard: unsupported"
_SESSION = pytest.StashKey["Any"]()
_SELECTED = pytest.StashKey["list[str]"]()
_SUMMARY = pytest.StashKey["Any"]()
SHARE_PROPERTY = "gemmguard"  # a test's share of the tally, on its report (survives pytest-xdist)
BACKEND_PROPERTY = "gemm_backend"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmguard", "GEMM backends under test (gemmguard)")
    group.addoption(
        "--gemm-backends",
        default=None,
        help="comma-separated backends: aten, triton, cutlass, cutedsl, cpp; 'auto' (default: all usable "
        f"here) or 'all' (unusable ones are skipped with their reason). Also ini gemm_backends, env {ENV_BACKENDS}.",
    )
    group.addoption("--gemm-max-examples", type=int, default=None, help="examples per gemm case (overrides all)")
    group.addoption("--gemm-seed", type=int, default=None, help="seed for case generation and input values")
    group.addoption("--gemm-replay", default=None, help="replay one failing example: VERSION:BLOB from a report")
    group.addoption(
        "--gemm-dynamic",
        action="store_true",
        default=False,
        help="compile with dynamic shapes (one compile serves many sizes) instead of one static compile per shape",
    )
    group.addoption("--gemm-compile-timeout", type=float, default=600.0, help="seconds per compile (0: none)")
    group.addoption("--gemm-cache-dir", default=None, help="Inductor/Triton cache dir (default: a fresh temp dir)")
    group.addoption("--gemm-repro-dir", default="gemmguard-repro", help="where standalone repro scripts go")
    parser.addini("gemm_backends", "default for --gemm-backends", default=None)
    parser.addini("gemm_max_examples", "default examples per gemm case", default=None)
    bench_plugin.add_options(parser)


def parse_backends(text: str, known: list[str]) -> list[str]:
    """'Triton, aten' -> ['triton', 'aten']; 'auto' / 'all' expand; anything else is a usage error."""
    valid = ", ".join([*known, "auto", "all"])
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not names:
        raise GemmUsageError(f"--gemm-backends is empty; valid: {valid}")
    out: list[str] = []
    for name in names:
        if name == "auto":
            out += [b for b in known if backends.probe(b).available]
        elif name == "all":
            out += known
        elif name in known:
            out.append(name)
        else:
            raise GemmUsageError(f"--gemm-backends: unknown backend {name!r}; valid: {valid}")
    return list(dict.fromkeys(out))


def _positive(value: Any, what: str) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise GemmUsageError(f"{what}={value!r}: must be an integer >= 1")
    return number


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gemm_case: a GEMM case test run once per selected backend (gemmguard)")
    from .compile import Compiler
    from .runner import GemmSession, Options

    source = (
        config.getoption("--gemm-backends") or os.environ.get(ENV_BACKENDS) or config.getini("gemm_backends") or "auto"
    )
    try:
        selected = parse_backends(str(source), backends.names())
        max_examples = _positive(config.getoption("--gemm-max-examples"), "--gemm-max-examples") or _positive(
            config.getini("gemm_max_examples") or None, "gemm_max_examples"
        )
        replay = config.getoption("--gemm-replay")
        if replay is not None and ":" not in replay:
            raise GemmUsageError(f"--gemm-replay={replay!r}: expected VERSION:BLOB as printed in a failure report")
    except GemmUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    compiler = Compiler(
        cache_dir=config.getoption("--gemm-cache-dir"),
        timeout_s=config.getoption("--gemm-compile-timeout"),
        dynamic=config.getoption("--gemm-dynamic"),
    )
    compiler.activate()
    options = Options(max_examples, config.getoption("--gemm-seed"), replay, config.getoption("--gemm-repro-dir"))
    if config.get_verbosity() >= 1:
        options.progress = lambda line: _live_line(config, line)
    from .report import Summary

    config.stash[_SESSION] = GemmSession(compiler, options)
    config.stash[_SUMMARY] = Summary()
    config.pluginmanager.register(_SummaryCollector(config.stash[_SUMMARY]), "gemmguard-summary")
    config.stash[_SELECTED] = selected
    config.pluginmanager.register(bench_plugin, "gemmguard-bench")


def _live_line(config: pytest.Config, line: str) -> None:
    """Write a progress line to the terminal while a test runs (past pytest's output capture)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"    gemmguard {line}")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.compiler.deactivate()


def pytest_report_header(config: pytest.Config) -> list[str]:
    from .report import capability_matrix

    selected = config.stash[_SELECTED]
    session = config.stash[_SESSION]
    mode = "dynamic" if session.compiler.dynamic else "static"
    return [
        f"gemmguard: backends {', '.join(selected) or '(none)'}; shapes {mode}; "
        f"Inductor cache {session.compiler.cache_dir}",
        *capability_matrix(selected),
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gemm_backend" in metafunc.fixturenames:
        selected = metafunc.config.stash[_SELECTED]
        metafunc.parametrize("gemm_backend", selected, ids=selected)


@pytest.fixture
def gemm_backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (the plugin parametrizes this by --gemm-backends)."""
    return request.param  # pragma: no cover - always parametrized


class _Runner:
    def __init__(self, session, backend: str, nodeid: str) -> None:
        self.session, self.backend, self.nodeid = session, backend, nodeid

    def run_cases(self, test: Callable, spec, fixtures: dict) -> None:
        self.session.run_cases(test, spec, fixtures, self.backend, self.nodeid)


@pytest.fixture(name=RUNNER_FIXTURE)
def _gemmguard_runner(request: pytest.FixtureRequest, gemm_backend: str) -> _Runner:
    return _Runner(request.config.stash[_SESSION], gemm_backend, request.node.nodeid)


class ProvenCompile:
    """`gemm_compile(fn, *, weights=())`: compile through the current backend; each call checks that
    the backend's own GEMM kernels ran (else the test ends as unsupported) and keeps the record."""

    def __init__(self, session, backend: str) -> None:
        self.session, self.backend = session, backend
        self.last_record = None

    def __call__(self, fn: Callable, *, weights: tuple[int, ...] = ()) -> Callable:
        from .compile import run_checked

        def run(*inputs):
            compiled = self.session.compiler.compile(backends.get(self.backend), fn, inputs, weights)
            out, self.last_record = run_checked(compiled, inputs)
            return out

        return run


@pytest.fixture
def gemm_compile(request: pytest.FixtureRequest, gemm_backend: str) -> ProvenCompile:
    """Compile any function through the backend under test, with provenance (see ProvenCompile)."""
    require_backend(gemm_backend)
    return ProvenCompile(request.config.stash[_SESSION], gemm_backend)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        backend = getattr(item, "callspec", None) and item.callspec.params.get("gemm_backend")
        if backend:
            item.user_properties.append((BACKEND_PROPERTY, backend))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    session = item.config.stash.get(_SESSION, None)
    if session is None or BACKEND_PROPERTY not in dict(item.user_properties):
        yield
        return
    tally, stats = session.tally.snapshot(), dict(session.compiler.stats)
    yield
    share = session.tally.since(tally)
    share["compiler"] = {k: v - stats[k] for k, v in session.compiler.stats.items()}
    item.user_properties.append((SHARE_PROPERTY, share))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(Unsupported):
        # Not a pass and not a failure: the backend's own kernel never ran for this case.
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"{UNSUPPORTED_PREFIX} {call.excinfo.value}")


class _SummaryCollector:
    """Registered per pytest config: counts from reports alone, so it works where the summary is
    printed, including the pytest-xdist controller, which never runs a test itself."""

    def __init__(self, summary) -> None:
        self.summary = summary

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        backend = props.get(BACKEND_PROPERTY)
        if not backend:
            return
        if report.when == "call" or report.outcome != "passed":
            self.summary.add_outcome(backend, _classify(report))
        if report.when == "call" and SHARE_PROPERTY in props:
            self.summary.add_share(props[SHARE_PROPERTY])


def _classify(report: pytest.TestReport) -> str:
    if report.passed:
        return "passed"
    if report.failed:
        return "failed"
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if "unsupported" in reason:
        return "unsupported"
    if UNAVAILABLE_PREFIX in reason:
        return "unavailable"
    return "skipped"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session, summary = config.stash.get(_SESSION, None), config.stash.get(_SUMMARY, None)
    if session is None or summary is None or not summary.outcomes:
        return
    from .report import results_table

    terminalreporter.section("gemmguard results")
    for line in results_table(config.stash[_SELECTED], summary, session.compiler.dynamic):
        terminalreporter.write_line(line)
