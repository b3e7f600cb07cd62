"""`trend`: the gate's benchmark results kept across pushes to main, so a slow drift that no single pull
request shows (each one +2%, inside the noise of its own comparison) adds up where someone sees it.

    python -m pytest_gemmguard.github trend --history HISTORY.json [--add BENCH.json] [--commit SHA]
        [--keep 100] [--window 5] [--threshold 10%] [--metric ratio|time] [--plot trend.png] [--fail-on-drift]

`--add` takes the gate's benchmark verdict (the action's `bench` output, OUT/bench/verdict.json; its rounds'
reports, head-N.json, are read beside it) or a gemmguard JSON report (--gemm-report-json) and appends one entry:
the commit, the date and per case the ratio of the compiled kernel to the in-run reference with its 95%
interval, and the absolute median time. A rerun of the same commit replaces its entry; the last `--keep`
entries are kept; the file is written atomically. A history that is not JSON or not a gemmguard history is
refused with one line and left as it was.

Drift: per case, the median of the first `--window` entries of the history against the median of the last
`--window` ones. A case drifted when they differ by more than `--threshold` and the U test calls the two
windows different (alpha 5%): both, as the runtime verdict asks both of one comparison, so a noisy flat history
is not flagged by one lucky window. The ratio to the reference is the default measure: it is what the gate
judges, and it carries over from one runner to the next; `--metric time` judges the absolute median instead,
which sees a slowdown of both sides (of the user's own function) but only on runners of one kind.

Torch-free, standard library only; `--plot` needs matplotlib (the `plots` extra).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
from typing import Any

from ..errors import GemmUsageError
from ..files import write_atomic, write_json_atomic
from .commands import workflow_command
from .drift import METRICS, describe, drift, summary_markdown

FORMAT = "gemmguard-trend"
VERSION = 1


def read_history(path: str) -> dict:
    """The history at `path`, or a new empty one where there is no file. Anything else that is not a history
    of this version raises GemmUsageError (one line); the file is never touched here."""
    keep = "fix or delete it; it was left as it was"
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        return {"format": FORMAT, "version": VERSION, "entries": []}
    except (OSError, UnicodeDecodeError) as exc:
        raise GemmUsageError(f"gemmguard: cannot read the trend history {path} ({exc}); {keep}") from None
    except json.JSONDecodeError as exc:
        raise GemmUsageError(f"gemmguard: the trend history {path} is corrupt (not JSON: {exc}); {keep}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), list):
        raise GemmUsageError(f"gemmguard: {path} is not a gemmguard trend history (no format={FORMAT!r}); {keep}")
    if doc.get("version") != VERSION:
        raise GemmUsageError(
            f"gemmguard: the trend history {path} has version {doc.get('version')!r}; this gemmguard reads "
            f"version {VERSION}; {keep}"
        )
    bad = [i for i, e in enumerate(doc["entries"]) if not _entry_ok(e)]
    if bad:
        raise GemmUsageError(f"gemmguard: the trend history {path} has a malformed entry (number {bad[0] + 1}); {keep}")
    return doc


def _entry_ok(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("commit"), str):
        return False
    cases = entry.get("cases")
    return isinstance(cases, dict) and all(isinstance(c, dict) for c in cases.values())


def _load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise GemmUsageError(f"gemmguard: no benchmark results at {path}: nothing to add") from None
    except (OSError, ValueError) as exc:
        raise GemmUsageError(f"gemmguard: cannot read the benchmark results {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise GemmUsageError(f"gemmguard: {path} is not a gemmguard benchmark verdict or report")
    return doc


def measurements(path: str) -> tuple[list[dict], dict, str]:
    """The measurements of the gate's verdict (its rounds' head reports beside it; per case the round whose
    ratio is the median, so ratio, interval and time come from one real measurement) or of a report; with
    the fingerprint and why nothing may be added ('' when it may)."""
    doc = _load(path)
    if doc.get("format") == "gemmguard-report":
        return list(doc.get("measurements") or []), doc.get("fingerprint") or {}, ""
    if doc.get("format") != "gemmguard-gate-bench":
        raise GemmUsageError(f"gemmguard: {path} is not a gemmguard benchmark verdict or report (format "
                             f"{doc.get('format')!r})")  # fmt: skip
    if doc.get("error"):
        return [], {}, f"the gate's benchmark run did not happen as asked ({doc['error']})"
    rounds: list[dict] = []
    for r in range(1, int(doc.get("rounds") or 0) + 1):
        report = os.path.join(os.path.dirname(os.path.abspath(path)), f"head-{r}.json")
        if os.path.exists(report):
            rounds.append(_load(report))
    if not rounds:
        return [], {}, f"no round reports (head-N.json) beside {path}"
    by_key: dict[str, list[dict]] = {}
    for report in rounds:
        for m in report.get("measurements") or []:
            if _ratio(m) is not None:
                by_key.setdefault(m["key"], []).append(m)
    picked = [sorted(ms, key=_ratio)[(len(ms) - 1) // 2] for ms in by_key.values()]
    return picked, rounds[-1].get("fingerprint") or {}, ""


def _ratio(m: dict) -> float | None:
    value = m.get("ratio") or m.get("ref_ratio")
    if value:
        return float(value)
    return m["median_s"] / m["ref_median_s"] if m.get("ref_median_s") and m.get("median_s") else None


def _label(m: dict) -> str:
    test = str(m.get("test") or "").split("::")[-1] or m.get("backend", "?")
    dims = "x".join(str(d) for d in m.get("shape") or ())
    extra = "".join(f" {v}" for v in (m.get("layout"), m.get("epilogue")) if v not in (None, "contiguous", "none"))
    return f"{test} {m.get('op', '?')} {dims} {m.get('dtype', '?')}{extra}"


def entry(path: str, commit: str, date: str | None = None) -> tuple[dict | None, str]:
    """The history entry of the results at `path`, or None and why none."""
    found, fingerprint, why = measurements(path)
    if why:
        return None, why
    cases = {}
    for m in found:
        ratio = _ratio(m)
        if ratio is None or not m.get("key"):
            continue
        low, high = m.get("ratio_low"), m.get("ratio_high")
        if not (low and high) and m.get("ref_median_s"):
            low, high = m["ci_low_s"] / m["ref_median_s"], m["ci_high_s"] / m["ref_median_s"]
        cases[m["key"]] = {
            "label": _label(m),
            "backend": m.get("backend", ""),
            "ratio": ratio,
            "ratio_low": low,
            "ratio_high": high,
            "median_ms": m["median_s"] * 1e3 if m.get("median_s") else None,
            "ci_ms": [m["ci_low_s"] * 1e3, m["ci_high_s"] * 1e3] if m.get("ci_low_s") else None,
            "status": m.get("status", "measured"),
        }
    if not cases:
        return None, f"{path} holds no measured case"
    when = date or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    device = fingerprint.get("gpu") or fingerprint.get("cpu") or ""
    return {"commit": commit, "date": when, "device": device, "cases": cases}, ""


def add(history: dict, new: dict, keep: int) -> dict:
    """`history` with `new` appended (replacing an entry of the same commit: a rerun), the last `keep` kept."""
    entries = [e for e in history["entries"] if e["commit"] != new["commit"]] + [new]
    return {**history, "entries": entries[-keep:]}


def git_head(cwd: str = ".") -> str:
    proc = subprocess.run(["git", "-C", cwd, "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _fraction(text: str) -> float:
    from ..bench.stats import parse_fraction

    try:
        value = parse_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `trend` command's options (cli.py)."""
    p.add_argument("--history", required=True, help="the history file (gemmguard-trend JSON; made if missing)")
    p.add_argument("--add", default="", help="the gate's benchmark verdict (bench output) or a gemmguard JSON "
                   "report to append; empty: only judge and plot the history")  # fmt: skip
    p.add_argument("--commit", default="", help="the commit measured (default: $GITHUB_SHA, else git's HEAD)")
    p.add_argument("--keep", type=int, default=100, help="entries kept, the newest (default 100)")
    p.add_argument("--window", type=int, default=5, help="entries at each end compared for drift (default 5)")
    p.add_argument("--threshold", type=_fraction, default=0.1, help="drift beyond this change (default 10%%)")
    p.add_argument("--metric", choices=tuple(METRICS), default="ratio", help="ratio (to the in-run reference, "
                   "default) or time (absolute median: same runner kind only)")  # fmt: skip
    p.add_argument("--plot", default="", help="draw the trend to this PNG (needs the plots extra)")
    p.add_argument("--summary", default=os.environ.get("GITHUB_STEP_SUMMARY", ""), help="append Markdown here")
    p.add_argument("--fail-on-drift", action="store_true", help="exit 1 when a case drifted slower")


def run(opts: Any) -> int:
    """The `trend` command (cli.py): add, keep, write, judge drift, plot. 1 with --fail-on-drift and a case
    drifted slower; else 0."""
    if opts.window < 2:
        raise GemmUsageError(f"gemmguard: --window={opts.window}: must be >= 2")
    if opts.keep < 2 * opts.window:
        raise GemmUsageError(f"gemmguard: --keep={opts.keep}: must be at least twice --window={opts.window}, or "
                             "no drift could ever be judged")  # fmt: skip
    if opts.plot:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise GemmUsageError("gemmguard: --plot needs matplotlib, not installed here: "
                                 "pip install 'pytest-gemmguard[plots]'")  # fmt: skip
    history = read_history(opts.history)  # refused before anything else is read or written
    if opts.add:
        commit = opts.commit or os.environ.get("GITHUB_SHA", "") or git_head()
        if not commit:
            raise GemmUsageError("gemmguard: --commit is needed (no GITHUB_SHA, and not in a git checkout)")
        new, why = entry(opts.add, commit)
        if new is None:
            print(f"gemmguard trend: nothing added to {opts.history}: {why}")
        else:
            history = add(history, new, opts.keep)
            write_json_atomic(opts.history, history)
            print(f"gemmguard trend: {commit[:12]} added to {opts.history} ({len(new['cases'])} case(s), "
                  f"{len(history['entries'])} entries kept of at most {opts.keep})")  # fmt: skip
    drifts, judged = drift(history, opts.window, opts.threshold, opts.metric)
    on_github = os.environ.get("GITHUB_ACTIONS") == "true"
    for d in drifts:
        text = describe(d, opts.window, opts.metric)
        print(text)
        if on_github:
            print(workflow_command("warning" if d.slower else "notice", text, title="gemmguard trend: drift"))
    if not drifts:
        n = len(history["entries"])
        print(f"gemmguard trend: no drift beyond {opts.threshold * 100:g}% in {judged} case(s) over {n} entries"
              + (f" (a case is judged once it has {2 * opts.window} entries)" if judged == 0 else ""))  # fmt: skip
    if opts.summary:
        from .commands import append_summary

        append_summary(
            opts.summary, summary_markdown(drifts, opts.window, opts.metric, len(history["entries"]), judged)
        )
    if opts.plot:
        from .trend_plot import figure

        fig = figure(history, drifts, opts.window, opts.metric, opts.threshold)
        write_atomic(opts.plot, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
        print(f"gemmguard trend: drew {os.path.abspath(opts.plot)}")
    return 1 if opts.fail_on_drift and any(d.slower for d in drifts) else 0
