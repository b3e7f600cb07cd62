"""`python -m pytest_gemmguard.github trend` (issue 38, "Trend"): the benchmark results of main kept in a
history file across pushes, so a slow drift across many pull requests shows.

Real files throughout: benchmark results written in the formats the plugin and the gate write (a gemmguard
JSON report; the gate's verdict with its rounds' reports beside it), added one push at a time through the
command line, with the history read back from disk. A slow drift planted across 20 entries is flagged, a noisy
flat history is not, and a history that is corrupt or someone else's is refused and left byte for byte.
"""

import hashlib
import json
import math
import os
import random
import subprocess
import sys

import pytest

from pytest_gemmguard.github import cli, trend

CASES = {
    "slow": ("tests/test_bench.py::test_mm[aten]", "aten", (192, 192, 192)),
    "flat": ("tests/test_bench.py::test_linear[cpp]", "cpp", (128, 256, 64)),
}


def _measurement(name, ratio, noise=0.01):
    test, backend, shape = CASES[name]
    ref = 1e-4
    return {
        "key": f"{test} | case | {name}", "test": test, "backend": backend, "op": "mm", "shape": list(shape),
        "dtype": "float32", "layout": "contiguous", "epilogue": "none", "fn": "case", "status": "ok",
        "median_s": ratio * ref, "ci_low_s": ratio * ref * 0.97, "ci_high_s": ratio * ref * 1.03,
        "ref_median_s": ref, "ratio": ratio, "ratio_low": ratio * (1 - noise), "ratio_high": ratio * (1 + noise),
    }  # fmt: skip


def _report(path, ratios):
    doc = {
        "format": "gemmguard-report", "version": 1, "fingerprint": {"cpu": "test cpu"},
        "measurements": [_measurement(name, r) for name, r in ratios.items()],
    }  # fmt: skip
    path.write_text(json.dumps(doc))
    return str(path)


def _trend(capsys, *args):
    rc = cli.main(["trend", *map(str, args)])
    return rc, capsys.readouterr().out


def _history(tmp_path, capsys, series, *extra):
    """Push each entry of `series` (a list of {case: ratio}) as one commit; returns the last run's output."""
    history = tmp_path / "history.json"
    for i, ratios in enumerate(series):
        bench = _report(tmp_path / "report.json", ratios)
        rc, out = _trend(capsys, "--history", history, "--add", bench, "--commit", f"{i:02d}" + "ab" * 19, *extra)
        assert rc == 0, out
    return history, out


def _slow_drift(seed=1, n=20):
    """Ratio to the reference +1.5% per push (+33% over 20), each with 3% noise; a flat case with 8%."""
    rng = random.Random(seed)
    return [
        {"slow": 1.2 * (1.015**i) * math.exp(rng.gauss(0, 0.03)), "flat": 0.9 * math.exp(rng.gauss(0, 0.08))}
        for i in range(n)
    ]


def test_a_planted_slow_drift_across_20_pushes_is_flagged_and_the_flat_case_is_not(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    summary = tmp_path / "summary.md"
    history, out = _history(tmp_path, capsys, _slow_drift(), "--summary", summary)
    lines = [x for x in out.splitlines() if x.startswith("gemmguard trend: test_")]
    assert len(lines) == 1, out
    assert lines[0].startswith("gemmguard trend: test_mm[aten] mm 192x192x192 float32: ratio to the reference ")
    assert "slower" in lines[0] and "first 5 against the last 5 of its 20 entries" in lines[0]
    change = float(lines[0].split("(")[1].split("%")[0])
    assert 20 < change < 45, lines[0]  # the planted +33%, give or take the noise
    warnings = [x for x in out.splitlines() if x.startswith("::warning ")]
    assert len(warnings) == 1 and "title=gemmguard trend%3A drift::" in warnings[0] and "test_mm[aten]" in warnings[0]
    assert "test_mm[aten]" in summary.read_text().split("## gemmguard trend")[-1]

    doc = json.loads(history.read_text())
    assert doc["format"] == "gemmguard-trend" and len(doc["entries"]) == 20
    last = doc["entries"][-1]
    assert last["commit"].startswith("19") and last["date"] and last["device"] == "test cpu"
    case = last["cases"]["tests/test_bench.py::test_mm[aten] | case | slow"]
    assert case["ratio_low"] < case["ratio"] < case["ratio_high"] and case["median_ms"] > 0

    # --fail-on-drift makes it the job's verdict.
    rc, _ = _trend(capsys, "--history", history, "--fail-on-drift")
    assert rc == 1


# Flat, but its first and last five entries' medians differ by 14% by chance: the two windows overlap, so the
# U test (p about 0.4) keeps the threshold alone from calling it drift.
UNLUCKY = [0.80, 1.10, 0.82, 1.12, 0.84, 0.85, 1.05, 0.9, 1.1, 0.95, 1.0, 0.88, 1.08, 0.92, 1.02, 0.97, 0.80, 1.12,
           0.95, 0.96]  # fmt: skip


@pytest.mark.parametrize("seed", [*range(5), "unlucky windows"])
def test_a_noisy_flat_history_is_not_flagged(tmp_path, capsys, seed):
    if seed == "unlucky windows":
        series = [{"slow": 1.2, "flat": v} for v in UNLUCKY]
    else:  # 6% noise on each entry (lognormal), a flat history seen through a noisy runner
        rng = random.Random(seed)
        series = [{"slow": 1.2 * math.exp(rng.gauss(0, 0.06)), "flat": 0.9 * math.exp(rng.gauss(0, 0.06))}
                  for _ in range(20)]  # fmt: skip
    _, out = _history(tmp_path, capsys, series, "--fail-on-drift")
    assert "gemmguard trend: no drift beyond 10% in 2 case(s) over 20 entries" in out, out
    assert not [x for x in out.splitlines() if x.startswith("::")]


def test_keep_drops_the_oldest_and_a_rerun_replaces_its_commit(tmp_path, capsys):
    history, out = _history(tmp_path, capsys, _slow_drift(n=14), "--keep", 12)
    doc = json.loads(history.read_text())
    assert [e["commit"][:2] for e in doc["entries"]] == [f"{i:02d}" for i in range(2, 14)]
    assert "12 entries kept of at most 12" in out
    bench = _report(tmp_path / "again.json", {"slow": 5.0, "flat": 5.0})
    _trend(capsys, "--history", history, "--add", bench, "--commit", doc["entries"][-1]["commit"], "--keep", 12)
    again = json.loads(history.read_text())["entries"]
    assert [e["commit"] for e in again] == [e["commit"] for e in doc["entries"]]  # the same commits, once each
    assert again[-1]["cases"]["tests/test_bench.py::test_mm[aten] | case | slow"]["ratio"] == 5.0
    # Too few entries to judge: said, not guessed.
    rc, out = _trend(capsys, "--history", tmp_path / "new.json", "--add", bench, "--commit", "abc")
    assert rc == 0 and "a case is judged once it has 10 entries" in out


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"format": "gemmguard-trend", "version": 1, "entries": [{"commit": "a", "ca', "is corrupt (not JSON"),
        ('{"format": "gemmguard-baseline", "version": 3, "entries": {}}', "is not a gemmguard trend history"),
        ('{"format": "gemmguard-trend", "version": 7, "entries": []}', "has version 7"),
        ('{"format": "gemmguard-trend", "version": 1, "entries": [{"commit": "a", "cases": []}]}', "malformed entry"),
    ],
)
def test_a_corrupt_or_foreign_history_is_refused_in_one_line_and_left_untouched(tmp_path, capsys, text, says):
    history = tmp_path / "history.json"
    history.write_text(text)
    before, mtime = _digest(history), os.stat(history).st_mtime_ns
    bench = _report(tmp_path / "report.json", {"slow": 1.0})
    rc, out = _trend(capsys, "--history", history, "--add", bench, "--commit", "abc", "--plot", tmp_path / "t.png")
    assert rc == 2
    (line,) = out.splitlines()
    assert line.startswith("::error title=gemmguard::gemmguard: ") and says in line and "left as it was" in line
    assert _digest(history) == before and os.stat(history).st_mtime_ns == mtime
    assert sorted(os.listdir(tmp_path)) == ["history.json", "report.json"]  # no temporary file, no plot


def test_bad_benchmark_input_is_one_line(tmp_path, capsys):
    history = tmp_path / "history.json"
    for content, says in ((None, "no benchmark results at"), ("{", "cannot read the benchmark results"),
                          ('{"format": "other"}', "is not a gemmguard benchmark verdict or report")):  # fmt: skip
        bench = tmp_path / "bench.json"
        if content is not None:
            bench.write_text(content)
        rc, out = _trend(capsys, "--history", history, "--add", bench, "--commit", "abc")
        assert rc == 2 and len(out.splitlines()) == 1 and says in out, out
    assert not history.exists()
    rc, out = _trend(capsys, "--history", history, "--keep", 6)
    assert rc == 2 and "--keep=6: must be at least twice --window=5" in out


def test_the_gates_verdict_is_read_with_its_rounds_the_median_round_kept(tmp_path, capsys):
    bench_dir = tmp_path / "gemmguard-report" / "bench"
    bench_dir.mkdir(parents=True)
    for r, ratio in enumerate((1.30, 1.10, 1.20), start=1):
        _report(bench_dir / f"head-{r}.json", {"slow": ratio})
    verdict = {"format": "gemmguard-gate-bench", "version": 1, "rounds": 3, "rows": [], "error": ""}
    (bench_dir / "verdict.json").write_text(json.dumps(verdict))
    history = tmp_path / "history.json"
    rc, out = _trend(capsys, "--history", history, "--add", bench_dir / "verdict.json", "--commit", "abc")
    assert rc == 0, out
    (case,) = json.loads(history.read_text())["entries"][0]["cases"].values()
    assert case["ratio"] == pytest.approx(1.20) and case["ratio_low"] == pytest.approx(1.20 * 0.99)
    # A gate whose benchmarks did not run as asked adds nothing.
    (bench_dir / "verdict.json").write_text(json.dumps({**verdict, "error": "gemmguard: the base crashed"}))
    rc, out = _trend(capsys, "--history", history, "--add", bench_dir / "verdict.json", "--commit", "def")
    assert rc == 0 and "nothing added" in out and "the base crashed" in out
    assert len(json.loads(history.read_text())["entries"]) == 1


def test_the_plot_shows_each_case_per_commit_on_a_log_axis_the_drift_thick(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from pytest_gemmguard.github.trend_plot import figure

    history, _ = _history(tmp_path, capsys, _slow_drift())
    # The command line, as a workflow step runs it: a fresh process, torch-free.
    png = tmp_path / "trend.png"
    proc = subprocess.run([sys.executable, "-m", "pytest_gemmguard.github", "trend", "--history", str(history),
                           "--plot", str(png)], capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0 and f"drew {png}" in proc.stdout, proc.stdout + proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    doc = trend.read_history(str(history))
    drifts, _ = trend.drift(doc, 5, 0.1)
    fig = figure(doc, drifts, 5)
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    lines = {line.get_gid(): line for line in ax.lines if line.get_gid()}
    assert sorted(g.split(":")[0] for g in lines) == ["case", "drift"]
    thick = lines["drift:tests/test_bench.py::test_mm[aten] | case | slow"]
    assert thick.get_linewidth() > lines["case:tests/test_bench.py::test_linear[cpp] | case | flat"].get_linewidth()
    assert list(thick.get_ydata()) == [e["cases"][thick.get_gid()[6:]]["ratio"] for e in doc["entries"]]
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()][:2] == ["00ababa", "01ababa"]
    assert "lower = faster" in fig._suptitle.get_text()
