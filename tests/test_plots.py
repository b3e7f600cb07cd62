"""runtime.png and compile.png (--gemm-plots, bench/plots.py), issue 41: a linear axis of absolute medians let
one case's 35 ms error bar hide every 0.2 ms median, and showed no verdict. Now: ratios on log axes with
their 95% intervals, one colour per verdict, the threshold drawn.

A real benchmark run on the CPU (a baseline, then a planted 2x slowdown of one case against it) writes the
PNGs; the same measurements, read back from the run's JSON report, are drawn again here so the figure's
content is checked through matplotlib's objects: the drawing is a pure function of the measurements.
"""

import dataclasses
import json
import sys

import pytest

pytest.importorskip("matplotlib")

from pytest_gemmguard.bench import baseline as baseline_file
from pytest_gemmguard.bench import export, plots
from pytest_gemmguard.bench.measurement import Measurement

BENCH_TEST = """
import os

def test_mm(gemm_benchmark):
    if os.environ.get("GG_PLANT") == "1":
        gemm_benchmark.instrument = lambda timed: (lambda: (timed(), timed()))
    gemm_benchmark(shape=(192, 192, 192))

def test_relu_with_a_name_long_enough_to_need_wrapping_in_the_label(gemm_benchmark):
    gemm_benchmark(lambda a, b: (a @ b).relu(), op="mm", shape=(128, 256, 64), dtype="float32")
"""

PYPROJECT = """
[tool.gemmguard]
runtime_regression = "20%"
max_time_s = 0.5
cpu_threads = 1
"""

COMMON = ("-p", "no:cacheprovider", "--gemm-backends=aten", "--gemm-cold-compile=off")


def _lines_of(ax, colour):
    """The y positions of the points drawn in `colour` on `ax` (errorbar's data lines)."""
    from matplotlib.colors import same_color

    ys = []
    for line in ax.lines:
        if line.get_marker() == "o" and same_color(line.get_color(), colour):
            ys += list(line.get_ydata())
    return ys


@pytest.fixture(scope="module")
def drawn_once():
    """pytester drops, at its teardown, the modules first imported after its setup, while matplotlib's
    package keeps its attributes pointing at them: a figure drawn after that mixes two copies of matplotlib.
    Drawing one figure before pytester's setup (a module fixture is set up first) imports all of it."""
    import io

    plots.figure(plots.runtime_chart([_measurement("test_warm", "ok")])).savefig(io.BytesIO(), format="png")


@pytest.mark.timing
def test_a_real_run_draws_ratios_on_log_axes_with_a_planted_regression_in_red(pytester, monkeypatch, drawn_once):
    pytester.makepyfile(test_bench=BENCH_TEST)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    base = pytester.path / "baseline.json"
    pytester.runpytest_inprocess(*COMMON, f"--gemm-save-baseline={base}").assert_outcomes(passed=2)
    monkeypatch.setenv("GG_PLANT", "1")
    slow = pytester.runpytest_inprocess(
        *COMMON, f"--gemm-baseline={base}", f"--gemm-plots={pytester.path / 'plots'}",
        f"--gemm-report-json={pytester.path / 'report.json'}",
    )  # fmt: skip
    slow.assert_outcomes(passed=1, failed=1)
    for name in ("runtime.png", "compile.png"):
        assert (pytester.path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    report = json.loads((pytester.path / "report.json").read_text())
    results = [Measurement.from_dict(m) for m in report["measurements"]]
    loaded = baseline_file.load(str(base), report["fingerprint"])
    chart = plots.runtime_chart(results, loaded)
    by_test = {r.label.split("\n")[0]: r for r in chart.rows}
    planted = by_test["test_mm[aten]"]
    assert planted.verdict == "regression" and planted.threshold == pytest.approx(0.2)
    assert planted.points["base"].value > 1.5  # a 2x slowdown, reference-normalised
    assert planted.points["base"].low <= planted.points["base"].value <= planted.points["base"].high
    assert "baseline" in planted.label.split("\n")[-1] and "ms" in planted.label  # the absolute times too
    other = next(r for r in chart.rows if r is not planted)
    assert other.verdict in ("ok", "inconclusive", "improved")
    assert all(len(line) <= plots.LABEL_WIDTH for line in other.label.split("\n")[:-1])

    fig = plots.figure(chart)
    axes = fig.axes
    assert [ax.get_xscale() for ax in axes] == ["log", "log"]
    assert "compiled / eager" in axes[0].get_xlabel() and "baseline" in axes[1].get_xlabel()
    assert "below 1 = faster" in fig._suptitle.get_text()
    # The threshold on the baseline panel: a line at 1 + 20%.
    thresholds = [a for a in axes[1].get_children() if a.get_gid() == "threshold"]
    assert any(list(getattr(a, "get_xdata", lambda: [])()) == [1.2, 1.2] for a in thresholds), thresholds
    # The planted case is drawn in the regression colour on both panels; the other case is not.
    centres = list(axes[0].get_yticks())
    planted_y = centres[chart.rows.index(planted)]
    for ax in axes:
        assert planted_y in _lines_of(ax, plots.COLOURS["regression"])
        assert centres[chart.rows.index(other)] not in _lines_of(ax, plots.COLOURS["regression"])
    assert [t.get_text() for t in axes[0].get_yticklabels()] == [r.label for r in chart.rows]


def _measurement(name, verdict=None, ratio=1.0, noise=0.01, threshold=0.05, **kw):
    """A measurement as the plugin leaves it after comparing with a baseline (`verdict` None: no baseline)."""
    m = Measurement(
        key=name, test=f"tests/test_x.py::{name}[aten]", backend="aten", op="mm", shape=(64, 64, 64),
        dtype="float32", epilogue="none", layout="contiguous", device="cpu", fn="case", median_s=2e-4,
        ci_low_s=1.9e-4, ci_high_s=3.5e-2, n=50, method="cpu", stopped="noise", samples=[2e-4] * 50,
        ref_median_s=1e-4, flops=2 * 64**3, peak_tflops=None, compile_s=1.5, ratio=2.0, ratio_low=1.9,
        ratio_high=2.2,
    )  # fmt: skip
    if verdict is not None:
        m.compared = {"runtime": {"ratio": ratio, "verdict": verdict, "noise": [noise, noise], "threshold": threshold}}
    return dataclasses.replace(m, **kw)


def test_one_colour_per_verdict_each_point_in_its_own():
    results = [
        _measurement("test_slower", "regression", ratio=1.5),
        _measurement("test_noisy", "inconclusive", ratio=1.02, noise=0.2),
        _measurement("test_same", "ok", ratio=1.01),
        _measurement("test_faster", "ok", ratio=0.7),
        _measurement("test_faster_but_unsure", "ok", ratio=0.94, noise=0.2),
        _measurement("test_new"),
        _measurement("test_over_budget", broken=["runtime 0.2 ms (95% CI ..) > budget runtime_ms=0.1 ms"]),
    ]
    chart = plots.runtime_chart(results)
    verdicts = [r.verdict for r in chart.rows]
    assert verdicts == ["regression", "inconclusive", "ok", "improved", "ok", "no baseline", "regression"]
    assert len(set(plots.COLOURS.values())) == len(plots.COLOURS)  # one colour per verdict
    fig = plots.figure(chart)
    centres = list(fig.axes[0].get_yticks())
    for ax in fig.axes:
        for row, y in zip(chart.rows, centres, strict=True):
            if ax is fig.axes[1] and "base" not in row.points:
                continue
            assert y in _lines_of(ax, plots.COLOURS[row.verdict]), (row.label, row.verdict)
            others = [v for v in plots.COLOURS if v != row.verdict]
            assert not any(y in _lines_of(ax, plots.COLOURS[v]) for v in others)
    legend = {t.get_text(): h for t, h in zip(fig.legends[0].texts, fig.legends[0].legend_handles, strict=True)}
    for verdict in plots.COLOURS:
        (handle,) = [h for text, h in legend.items() if text.startswith(verdict + " (")]
        assert handle.get_color() == plots.COLOURS[verdict]


def test_thresholds_that_differ_per_test_are_drawn_per_row_and_a_wide_interval_hides_nothing():
    results = [
        _measurement("test_a", "ok", ratio=1.01, threshold=0.05),
        _measurement("test_b", "ok", ratio=1.02, threshold=0.5, ratio_low=0.02, ratio_high=175.0),
    ]
    fig = plots.figure(plots.runtime_chart(results))
    drawn = [a for a in fig.axes[1].get_children() if a.get_gid() == "threshold"]
    spots = sorted(round(float(x), 4) for a in drawn for seg in a.get_segments() for x, _ in seg)
    assert spots == sorted(round(v, 4) for t in (0.05, 0.5) for v in (1 + t, 1 + t, 1 / (1 + t), 1 / (1 + t)))
    # The picture: a 0.2 ms median beside a 35 ms interval. On the log axis the wide interval spans
    # its decades and the narrow one still reads: the axis holds both, each point inside its own interval.
    lo, hi = fig.axes[0].get_xlim()
    assert fig.axes[0].get_xscale() == "log" and lo <= 0.02 and hi >= 175


def test_compile_chart_draws_seconds_and_the_ratio_with_its_threshold():
    m = _measurement("test_c", cold_compile_s=3.0, cold_compile_samples=[2.8, 3.0, 3.1, 3.3, 2.9])
    m.compared = {"compile": {"ratio": 1.6, "tested": True, "regression": True, "threshold": 0.2}}
    fresh = _measurement("test_d", compile_s=0.0)  # a reused compile: no time to draw
    chart = plots.compile_chart([m, fresh])
    assert [r.verdict for r in chart.rows] == ["regression", "no baseline"]
    assert chart.rows[0].points["s"].low == 2.8 and "s" not in chart.rows[1].points
    assert "reused" in chart.rows[1].label
    fig = plots.figure(chart)
    assert [ax.get_xscale() for ax in fig.axes] == ["log", "log"]
    assert any(a.get_gid() == "threshold" for a in fig.axes[1].get_children())


def test_without_matplotlib_the_run_stops_with_one_line_naming_the_extra(pytester, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it fails, as where it is not installed
    assert "pytest-gemmguard[plots]" in export.plots(str(pytester.path), [_measurement("test_x")])
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--gemm-plots={pytester.path / 'p'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gemm-plots needs matplotlib, not installed here: pip install 'pytest-gemmguard[plots]'" in (
        result.stderr.str()
    )
    assert not (pytester.path / "p").exists()
