"""The measuring half's pytest hooks: options, the `gemm_budget` marker, the `gemm_benchmark` fixture,
selecting benchmark tests, saving the baseline, the summary table and the report files.

Its own `pytest11` entry point (`gemmguard_bench`); it never imports the checking half's plugin: what the
two share (the selected backends, the session's compiler) comes through `pytest_gemmguard._state`.
Loading it imports no torch. Every path and number is validated when pytest starts, and every file it
will write is checked for writability then, so a mistake costs a second, not a whole benchmark run.

Under pytest-xdist every worker loads the baseline itself and compares there, so a regression fails the
test where it ran. Each worker's measurements ride to the controller on the test's report (a user
property holding the measurement as JSON, the way the correctness tally travels), and only the controller
saves the baseline (one atomic write) and writes the report files. Timings taken by parallel workers share
the machine; the GPU lock keeps two timers off one GPU, but nothing keeps compiles off the CPU cores, so
the summary warns when measurements were taken under -n.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest

from .. import _state, validate
from ..errors import BaselineError, GemmUsageError, headline
from ..files import os_error
from . import baseline

FIXTURE = "gemm_benchmark"
MEASUREMENT_PROPERTY = "gemmguard_measurement"  # user property: one Measurement.as_dict() as JSON (xdist)


@dataclass
class _Bench:
    """This config's measuring-half state (the BenchContext itself is built on first use: it needs torch)."""

    settings: dict[str, Any]
    table: dict[str, Any]
    budget: Any
    notes: list[str] = field(default_factory=list)
    ctx: Any = None
    fingerprint: dict | None = None
    loaded: Any = None  # baseline.Baseline, once checked against the fingerprint


_KEY = pytest.StashKey[_Bench]()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers this controller runs (0 when not distributing)."""
    if _is_worker(config) or not config.pluginmanager.has_plugin("dsession"):
        return 0
    return int(getattr(config.option, "numprocesses", 0) or 0) or len(getattr(config.option, "tx", None) or [])


def pytest_addoption(parser: pytest.Parser) -> None:
    title = "GEMM benchmarks, budgets and baselines (gemmguard)"
    validate.add_options(parser, "gemmguard-bench", title, validate.BENCH)


def _check_settings(s: dict[str, Any]) -> None:
    from .stats import MIN_TEST_SAMPLES

    if s["min_samples"] < MIN_TEST_SAMPLES:
        # Fewer samples than the significance test needs would make the runtime verdict silently never fail.
        raise GemmUsageError(
            f"[tool.gemmguard] min_samples={s['min_samples']!r}: must be >= {MIN_TEST_SAMPLES}, what the "
            "significance test needs"
        )
    if s["bench_only"] and s["no_bench"]:
        raise GemmUsageError("--gemm-bench-only and --gemm-no-bench exclude each other")
    if s["plots"] and importlib.util.find_spec("matplotlib") is None:
        raise GemmUsageError("--gemm-plots needs matplotlib, not installed here: pip install 'pytest-gemmguard[plots]'")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gemm_budget(compile_s=None, runtime_ms=None, runtime_regression='5%', compile_regression='20%', "
        "alpha=0.01): performance budget of a gemm_benchmark test (gemmguard)",
    )
    from . import budget

    table = _state.ensure(config).table  # [tool.gemmguard], read once for both plugins
    try:
        settings = validate.resolve(config, validate.BENCH, table)
        _check_settings(settings)
        base_budget = budget.Budget().merged(table, "[tool.gemmguard] in pyproject.toml")
        if settings["runtime_regression"] is not None:
            base_budget = base_budget.merged({"runtime_regression": settings["runtime_regression"]}, "the run")
    except (GemmUsageError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    bench = _Bench(settings, table, base_budget)
    config.stash[_KEY] = bench
    if not _is_worker(config):  # reports get no config argument: a collector object per config holds it
        config.pluginmanager.register(_Gatherer(config), "gemmguard-bench-gather")
    try:
        _check_files(config, bench)
    except BaselineError as exc:
        raise pytest.UsageError(str(exc)) from None


def _check_files(config: pytest.Config, bench: _Bench) -> None:
    """Refuse a corrupt, foreign or missing-when-required baseline now, not after the whole run. Comparing
    fingerprints needs torch, so it happens here only when a baseline option was given."""
    s = bench.settings
    path, save = s["baseline"], s["save_baseline"]
    if path:
        doc = baseline.read(path)  # BaselineError when corrupt or not a baseline
        if doc is None and s["require_baseline"]:
            raise BaselineError(
                f"gemmguard: --gemm-baseline={path} does not exist and --gemm-require-baseline is set "
                f"(record one with --gemm-save-baseline={path})"
            )
        if doc is None:
            bench.notes.append(
                f"gemmguard: no baseline at {path}: regressions not checked (record one with "
                f"--gemm-save-baseline={path}; --gemm-require-baseline makes this an error)"
            )
        else:
            bench.loaded = baseline.load(path, _fingerprint(config, bench), force=s["baseline_force"])
            if bench.loaded is not None and bench.loaded.forced:
                bench.notes.append(
                    f"gemmguard: baseline {path} is from other hardware/software; compared anyway (forced)"
                )
    if save:
        doc = baseline.read(save)
        if doc is not None and baseline.mismatch(doc, _fingerprint(config, bench)):
            if not s["baseline_force"]:
                raise BaselineError(
                    f"gemmguard: not saving to {save}: it holds a baseline from other hardware/software "
                    "(--gemm-baseline-force to replace it)"
                )


def _device(config: pytest.Config) -> str:
    from .. import backends

    for name in _state.selected(config):
        try:
            if backends.get(name).device().startswith("cuda") and backends.probe(name).available:
                return "cuda"
        except Exception:
            continue
    return "cpu"


def _fingerprint(config: pytest.Config, bench: _Bench) -> dict:
    if bench.fingerprint is None:
        bench.fingerprint = baseline.fingerprint(_device(config))
    return bench.fingerprint


def _context(config: pytest.Config) -> Any:
    """The BenchContext, built on the first benchmark (it needs torch and the session's compiler)."""
    bench = config.stash[_KEY]
    if bench.ctx is None:
        from .context import BenchContext, Settings
        from .timing import TimingOptions

        s = bench.settings
        timing = TimingOptions(
            max_time_s=s["max_time_s"], rel_ci=s["rel_ci"], min_samples=s["min_samples"], cpu_threads=s["cpu_threads"]
        )
        settings = Settings(
            cold_compile=s["cold_compile"],
            compile_samples=s["compile_samples"],
            verify=s["verify"],
            reference=s["reference"],
            inconclusive=s["inconclusive"],
            timing=timing,
        )
        bench.ctx = BenchContext(_state.session(config), settings, bench.budget, bench.loaded)
        bench.ctx.fingerprint = _fingerprint(config, bench)
    return bench.ctx


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    s = config.stash[_KEY].settings
    only, none = s["bench_only"], s["no_bench"]
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
    """Measure a GEMM through the backend under test: see `bench.fixture.GemmBenchmark`."""
    from .fixture import GemmBenchmark

    ctx = _context(request.config)
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


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outermost: sees the report after skips are made
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A failed benchmark says why at once: a run cut by a time limit ends before pytest's failure reports."""
    report = (yield).get_result()
    if call.when == "call" and report.failed and call.excinfo and FIXTURE in getattr(item, "fixturenames", ()):
        if item.config.get_verbosity() >= 0:
            exc = call.excinfo.value
            said = headline(exc, 400) or "(no message)"
            said += "".join(f"; {x.strip()}" for x in str(exc).splitlines() if x.strip().startswith("broken:"))
            _state.live_line(item.config, f"benchmark {item.nodeid}: FAILED ({call.excinfo.typename}: {said})")


class _Gatherer:
    """On the xdist controller (and harmlessly in a serial run, whose reports carry no measurements):
    gather the workers' measurements from their reports. The teardown report carries every property a
    test added (and is the one JUnit XML reads), so each is taken from there, once per test."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown" or not report.user_properties:
            return
        measured = [value for name, value in report.user_properties if name == MEASUREMENT_PROPERTY]
        if not measured:
            return
        from .measurement import Measurement

        ctx = _context(self.config)
        ctx.results.extend(Measurement.from_dict(json.loads(value)) for value in measured)


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    bench = config.stash.get(_KEY, None)
    if bench is not None and bench.ctx is not None:
        machine_info["gemmguard"] = bench.ctx.fingerprint


def _save_baseline(config: pytest.Config, bench: _Bench, ctx: Any, session: pytest.Session) -> None:
    save = bench.settings["save_baseline"]
    # An inconclusive measurement was too noisy to judge: it must not replace the entry it was judged against.
    kept = {m.key: m.as_dict() for m in ctx.results if m.status not in ("failed", "inconclusive")}
    dropped = sum(m.status == "failed" for m in ctx.results)
    unclear = sum(m.status == "inconclusive" for m in ctx.results)
    if not kept:  # rewriting the file would change nothing but its date
        bench.notes.append(
            f"gemmguard: nothing saved to baseline {save}"
            + (f"; {dropped} over budget not saved" if dropped else "")
            + (f"; {unclear} inconclusive not saved" if unclear else "")
        )
        return
    try:
        total = baseline.save(save, ctx.fingerprint, kept, force=bench.settings["baseline_force"])
        bench.notes.append(
            f"gemmguard: saved {len(kept)} measurements to baseline {os.path.abspath(save)} ({total} entries)"
            + (f"; {dropped} over budget not saved" if dropped else "")
            + (f"; {unclear} inconclusive not saved" if unclear else "")
        )
        noisy = _noisy(ctx.results, bench.budget)
        if noisy:
            bench.notes.append(
                f"gemmguard: warning: {len(noisy)} baseline measurement(s) too noisy to detect their threshold "
                f"(comparisons against them will be inconclusive; record them on a quieter machine): {', '.join(noisy)}"
            )
    except (BaselineError, OSError) as exc:
        # Keep what was measured: a run's measurements are worth more than the minutes they took.
        reason = os_error(exc) if isinstance(exc, OSError) else str(exc)
        rescue = os.path.join(tempfile.mkdtemp(prefix="gemmguard-rescue-"), os.path.basename(save) or "baseline.json")
        try:
            baseline.save(rescue, ctx.fingerprint, kept, force=True)
            kept_in = f"measurements kept in {rescue}"
        except OSError as again:  # the temporary directory's disk is full too
            kept_in = f"nor could its measurements be kept in {rescue} ({os_error(again)})"
        bench.notes.append(f"gemmguard: could not write baseline {save} ({reason}); {kept_in}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _noisy(results: list, budget: Any) -> list[str]:
    """'key (noise, detects)' of each saved measurement whose own noise hides the (session) threshold: a
    baseline measured under noise is no baseline, and says so when it is written, not only when used."""
    from .verdict import noise_target

    target = noise_target(budget.runtime_regression, budget.alpha)
    return [
        f"{m.key} (+-{100 * m.noise:.1f}%, detects +{100 * m.detect:.0f}%)"
        for m in results
        if m.status not in ("failed", "inconclusive") and m.noise is not None and m.noise > target
    ]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from . import export

    config = session.config
    bench = config.stash.get(_KEY, None)
    if bench is None or _is_worker(config):
        return  # a worker's measurements went to the controller on the reports; the controller saves and reports
    s = bench.settings
    ctx = bench.ctx
    results = ctx.results if ctx is not None else []
    workers = _xdist_workers(config)
    if workers and results:
        on_gpu = any(m.device.startswith("cuda") for m in results)
        used = {m.gpu.get("uuid") for m in results if m.gpu}  # --gemm-gpus: each worker on its own GPU
        bench.notes.append(
            f"gemmguard: warning: {len(results)} measurement(s) were taken by {workers} pytest-xdist workers "
            "sharing this machine: "
            + (
                "a lock kept timers off the same GPU"
                + (f" (they timed on {len(used)} GPUs at once, one timer per GPU)" if len(used) > 1 else "")
                + ", but other workers' compiles shared the host"
                if on_gpu
                else "their timings and compiles ran on the same CPU cores at once and disturb each other"
            )
            + "; record baselines and gate tight budgets without -n"
        )
    if s["save_baseline"] and results and exitstatus == pytest.ExitCode.INTERRUPTED:
        # Ctrl-C after some measurements: a partial run must not become (part of) the reference.
        bench.notes.append(
            f"gemmguard: the run was interrupted after {len(results)} measurement(s): baseline "
            f"{s['save_baseline']} left as it was"
        )
    elif s["save_baseline"] and results:
        _save_baseline(config, bench, ctx, session)
    elif s["save_baseline"]:
        bench.notes.append(f"gemmguard: nothing measured: baseline {s['save_baseline']} not written")
    untested = [m for m in results if m.compared.get("compile", {}).get("tested") is False]
    unclear = [m for m in results if m.status == "inconclusive"]
    if unclear:
        how = (
            "failed as inconclusive"
            if s["inconclusive"] == "fail"
            else "passed with a warning (--gemm-inconclusive=warn)"
        )
        bench.notes.append(
            f"gemmguard: {len(unclear)} runtime comparison(s) inconclusive, {how}: too noisy to tell a slowdown of "
            "the threshold from none; not regressions (see each one's noise and smallest detectable change)"
        )
    if untested:
        from .stats import MIN_TEST_SAMPLES

        possible = [m for m in untested if m.compared["compile"].get("possible")]
        keys = ", ".join(m.key for m in possible)
        flagged = f"; possible compile regressions, not failed: {keys}" if possible else ""
        bench.notes.append(
            f"gemmguard: compile time of {len(untested)} case(s) not tested for significance (fewer than "
            f"{MIN_TEST_SAMPLES} cold compiles on a side; --gemm-compile-samples={MIN_TEST_SAMPLES} or more, for "
            f"this run and the baseline's, lets a compile regression fail the build){flagged}"
        )
    fingerprint = ctx.fingerprint if ctx is not None else {}
    # A report that cannot be written is a note naming it and the OS error, its text kept in a temporary file;
    # the tables below still print, and the run fails.
    written, failed = export.write_reports(s, results, fingerprint, bench.notes, bench.loaded)
    if failed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if written:
        bench.notes.append(f"gemmguard: wrote {', '.join(written)}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    bench = config.stash.get(_KEY, None)
    if bench is None:
        return
    results = bench.ctx.results if bench.ctx is not None else []
    if not results and not bench.notes:
        return
    from .report import bench_table

    terminalreporter.section("gemmguard benchmarks")
    if results:
        for line in bench_table(results):
            terminalreporter.write_line(line)
    for note in bench.notes:
        terminalreporter.write_line(note)
