"""pytest wiring of the measuring half: options, the `gemm_budget` marker, the `gemm_benchmark` fixture,
selecting benchmark tests, saving the baseline, the summary table and the report files.

Registered from plugin.py: `add_options(parser)` is called from its `pytest_addoption` (a plugin
registered during configure is too late for addoption), and this module is registered at the end of its
`pytest_configure` (`config.pluginmanager.register(bench_plugin, "gemmguard-bench")`); `pytest_configure`
is a historic hook, so this module's own `pytest_configure` still runs.

Under pytest-xdist every worker loads the baseline itself and compares there, so a regression fails the
test where it ran. Each worker's measurements ride to the controller on the test's report (a user
property holding the measurement as JSON, the way the correctness tally travels), and only the controller
saves the baseline (one atomic write) and writes the report files. Timings taken by parallel workers share
the machine; the GPU lock keeps two timers off one GPU, but nothing keeps compiles off the CPU cores, so
the summary warns when measurements were taken under -n.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..errors import GemmUsageError

_CTX = pytest.StashKey["Any"]()
_NOTES = pytest.StashKey["list[str]"]()
FIXTURE = "gemm_benchmark"
MEASUREMENT_PROPERTY = "gemmguard_measurement"  # user property: one Measurement.as_dict() as JSON (xdist)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers this controller runs (0 when not distributing)."""
    if _is_worker(config) or not config.pluginmanager.has_plugin("dsession"):
        return 0
    return int(getattr(config.option, "numprocesses", 0) or 0) or len(getattr(config.option, "tx", None) or [])


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmguard-bench", "GEMM benchmarks, budgets and baselines (gemmguard)")
    group.addoption(
        "--gemm-baseline",
        default=None,
        metavar="PATH",
        help="compare gemm_benchmark results with this baseline JSON; real regressions fail",
    )
    group.addoption(
        "--gemm-save-baseline",
        default=None,
        metavar="PATH",
        help="write (or update) a baseline JSON with this run's gemm_benchmark results",
    )
    group.addoption(
        "--gemm-baseline-force",
        action="store_true",
        default=False,
        help="use a baseline recorded on other hardware/software anyway (and let saving replace one)",
    )
    group.addoption(
        "--gemm-bench-only", action="store_true", default=False, help="run only tests that use gemm_benchmark"
    )
    group.addoption(
        "--gemm-no-bench", action="store_true", default=False, help="deselect tests that use gemm_benchmark"
    )
    group.addoption(
        "--gemm-cold-compile",
        choices=("on", "off"),
        default=None,
        help="measure cold/warm compile time in a fresh subprocess per case (default on; "
        "[tool.gemmguard] cold_compile)",
    )
    group.addoption(
        "--gemm-compile-samples",
        default=None,
        metavar="N",
        help="cold compiles per case, each in a fresh process with empty caches (default 1; [tool.gemmguard] "
        "compile_samples). With >= 5 here and in the baseline a compile-time regression must also be "
        "significant (one-sided Mann-Whitney, alpha 0.01); with fewer a slowdown is reported, never failed",
    )
    group.addoption(
        "--gemm-bench-time",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time cap per measured case (default 2; [tool.gemmguard] max_time_s)",
    )
    group.addoption(
        "--gemm-cpu-threads",
        type=int,
        default=None,
        metavar="N",
        help="torch threads while timing on the CPU (1 makes timings repeatable on a shared machine; "
        "[tool.gemmguard] cpu_threads)",
    )
    group.addoption("--gemm-report-json", default=None, metavar="PATH", help="write the benchmark JSON report here")
    group.addoption(
        "--gemm-report-md",
        default=None,
        metavar="PATH",
        help="write the benchmark Markdown summary here ($GITHUB_STEP_SUMMARY is appended to)",
    )
    group.addoption("--gemm-plots", default=None, metavar="DIR", help="draw runtime.png and compile.png here")


def _device(config: pytest.Config) -> str:
    from .. import backends, plugin

    selected = config.stash.get(plugin._SELECTED, [])
    for name in selected:
        try:
            if backends.get(name).device().startswith("cuda") and backends.probe(name).available:
                return "cuda"
        except Exception:
            continue
    return "cpu"


def _settings(config: pytest.Config, table: dict[str, Any]):
    from .fixture import Settings
    from .timing import TimingOptions

    cold = config.getoption("--gemm-cold-compile")
    cold_on = (cold == "on") if cold is not None else bool(table.get("cold_compile", True))
    option = config.getoption("--gemm-compile-samples")
    samples = _count(option, "--gemm-compile-samples") if option is not None else None
    if samples is None:
        samples = _count(table.get("compile_samples", 1), "[tool.gemmguard] compile_samples")
    max_time = config.getoption("--gemm-bench-time") or float(table.get("max_time_s", 2.0))
    timing = TimingOptions(
        max_time_s=max_time,
        rel_ci=float(table.get("rel_ci", 0.01)),
        min_samples=_min_samples(table.get("min_samples", 10)),
        cpu_threads=config.getoption("--gemm-cpu-threads") or table.get("cpu_threads"),
    )
    return Settings(
        cold_compile=cold_on,
        compile_samples=samples,
        verify=bool(table.get("verify", True)),
        reference=bool(table.get("reference", True)),
        timing=timing,
    )


def _min_samples(value: Any) -> int:
    """Runtime samples per measurement: at least what the significance test needs, or the runtime verdict
    would silently never fail (an untested slowdown is only reported)."""
    from .stats import MIN_TEST_SAMPLES

    number = _count(value, "[tool.gemmguard] min_samples")
    if number < MIN_TEST_SAMPLES:
        raise GemmUsageError(
            f"[tool.gemmguard] min_samples={value!r}: must be >= {MIN_TEST_SAMPLES}, what the significance test needs"
        )
    return number


def _count(value: Any, what: str) -> int:
    """An integer >= 1, or a one-line usage error naming where it came from."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise GemmUsageError(f"{what}={value!r}: must be an integer >= 1")
    return number


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gemm_budget(compile_s=None, runtime_ms=None, runtime_regression='5%', compile_regression='20%', "
        "alpha=0.01): performance budget of a gemm_benchmark test (gemmguard)",
    )
    from .. import plugin
    from . import baseline, budget
    from .fixture import BenchContext

    notes: list[str] = []
    config.stash[_NOTES] = notes
    if not _is_worker(config):  # reports get no config argument: a collector object per config holds it
        config.pluginmanager.register(_Gatherer(config), "gemmguard-bench-gather")
    if config.getoption("--gemm-bench-only") and config.getoption("--gemm-no-bench"):
        raise pytest.UsageError("--gemm-bench-only and --gemm-no-bench exclude each other")
    try:
        table = budget.read_pyproject(str(config.rootpath))
        base_budget = budget.Budget().merged(table, "[tool.gemmguard] in pyproject.toml")
        settings = _settings(config, table)
    except (GemmUsageError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    fp = baseline.fingerprint(_device(config))
    loaded = None
    path = config.getoption("--gemm-baseline")
    if path:
        try:
            loaded = baseline.load(path, fp, force=config.getoption("--gemm-baseline-force"))
        except baseline.BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        if loaded is None:
            notes.append(
                f"gemmguard: no baseline at {path}: regressions not checked "
                f"(record one with --gemm-save-baseline={path})"
            )
        elif loaded.forced:
            notes.append(f"gemmguard: baseline {path} is from other hardware/software; compared anyway (forced)")
    save = config.getoption("--gemm-save-baseline")
    if save:
        try:  # refuse a corrupt or foreign file now, not after the whole run
            doc = baseline.read(save)
        except baseline.BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        if (
            doc is not None
            and baseline.fingerprint_diff(doc["fingerprint"], fp)
            and not config.getoption("--gemm-baseline-force")
        ):
            raise pytest.UsageError(
                f"gemmguard: not saving to {save}: it holds a baseline from other hardware/software "
                "(--gemm-baseline-force to replace it)"
            )
    session = config.stash.get(plugin._SESSION, None)
    ctx = BenchContext(session, settings, base_budget, loaded)
    ctx.fingerprint = fp
    config.stash[_CTX] = ctx


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only, none = config.getoption("--gemm-bench-only"), config.getoption("--gemm-no-bench")
    if not (only or none):
        return
    keep, drop = [], []
    for item in items:
        is_bench = FIXTURE in getattr(item, "fixturenames", ())
        (keep if is_bench == bool(only) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def gemm_benchmark(request: pytest.FixtureRequest, gemm_backend: str, benchmark: Any):
    """Measure a GEMM through the backend under test: see `bench.GemmBenchmark`."""
    from .. import plugin
    from .fixture import GemmBenchmark

    ctx = request.config.stash[_CTX]
    if ctx.session is None:
        ctx.session = request.config.stash[plugin._SESSION]
    marker = request.node.get_closest_marker("gemm_budget")
    test_budget = ctx.budget
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("@pytest.mark.gemm_budget takes keyword arguments only (compile_s=..., ...)")
        try:
            test_budget = ctx.budget.merged(marker.kwargs, f"@pytest.mark.gemm_budget on {request.node.nodeid}")
        except GemmUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    bench = GemmBenchmark(ctx, gemm_backend, request.node.nodeid, test_budget, benchmark)
    if _is_worker(request.config):  # the controller saves the baseline and writes reports: send it there
        node = request.node
        bench.publish = lambda m: node.user_properties.append((MEASUREMENT_PROPERTY, json.dumps(m.as_dict())))
    return bench


class _Gatherer:
    """On the xdist controller (and harmlessly in a serial run, whose reports carry no measurements):
    gather the workers' measurements from their reports. The teardown report carries every property a
    test added (and is the one JUnit XML reads), so each is taken from there, once per test."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown" or not report.user_properties:
            return
        ctx = self.config.stash.get(_CTX, None)
        if ctx is None:
            return
        from .fixture import Measurement

        for name, value in report.user_properties:
            if name == MEASUREMENT_PROPERTY:
                ctx.results.append(Measurement.from_dict(json.loads(value)))


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    ctx = config.stash.get(_CTX, None)
    if ctx is not None:
        machine_info["gemmguard"] = ctx.fingerprint


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from . import baseline, export

    config = session.config
    ctx = config.stash.get(_CTX, None)
    if ctx is None:
        return
    if _is_worker(config):
        return  # its measurements went to the controller on the reports; the controller saves and reports
    notes = config.stash[_NOTES]
    workers = _xdist_workers(config)
    if workers and ctx.results:
        on_gpu = any(m.device.startswith("cuda") for m in ctx.results)
        notes.append(
            f"gemmguard: warning: {len(ctx.results)} measurement(s) were taken by {workers} pytest-xdist workers "
            "sharing this machine: "
            + (
                "a lock kept timers off the same GPU, but other workers' compiles shared the host"
                if on_gpu
                else "their timings and compiles ran on the same CPU cores at once and disturb each other"
            )
            + "; record baselines and gate tight budgets without -n"
        )
    save = config.getoption("--gemm-save-baseline")
    if save and ctx.results:
        kept = {m.key: m.as_dict() for m in ctx.results if m.status != "failed"}
        dropped = len(ctx.results) - len(kept)
        try:
            total = baseline.save(save, ctx.fingerprint, kept, force=config.getoption("--gemm-baseline-force"))
            notes.append(
                f"gemmguard: saved {len(kept)} measurements to baseline {save} ({total} entries)"
                + (f"; {dropped} over budget not saved" if dropped else "")
            )
        except (baseline.BaselineError, OSError) as exc:
            notes.append(str(exc))
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif save:
        notes.append(f"gemmguard: nothing measured: baseline {save} not written")
    untested = [m for m in ctx.results if m.compared.get("compile", {}).get("tested") is False]
    if untested:
        from .stats import MIN_TEST_SAMPLES

        possible = [m for m in untested if m.compared["compile"].get("possible")]
        keys = ", ".join(m.key for m in possible)
        flagged = f"; possible compile regressions, not failed: {keys}" if possible else ""
        notes.append(
            f"gemmguard: compile time of {len(untested)} case(s) not tested for significance (fewer than "
            f"{MIN_TEST_SAMPLES} cold compiles on a side; --gemm-compile-samples={MIN_TEST_SAMPLES} or more, for "
            f"this run and the baseline's, lets a compile regression fail the build){flagged}"
        )
    if config.getoption("--gemm-report-json"):
        export.json_report(
            config.getoption("--gemm-report-json"),
            ctx.results,
            ctx.fingerprint,
            config.getoption("--gemm-baseline"),
            notes,
        )
    if config.getoption("--gemm-report-md"):
        export.write_markdown(config.getoption("--gemm-report-md"), ctx.results, ctx.fingerprint, notes)
    if config.getoption("--gemm-plots"):
        drawn = export.plots(config.getoption("--gemm-plots"), ctx.results, ctx.baseline)
        notes.append(f"gemmguard: plots: {', '.join(drawn)}" if isinstance(drawn, list) else f"gemmguard: {drawn}")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    ctx = config.stash.get(_CTX, None)
    if ctx is None:
        return
    notes = config.stash[_NOTES]
    if not ctx.results and not notes:
        return
    from .report import bench_table

    terminalreporter.section("gemmguard benchmarks")
    if ctx.results:
        for line in bench_table(ctx.results):
            terminalreporter.write_line(line)
    for note in notes:
        terminalreporter.write_line(note)
