"""Reports of the measurements as files: a JSON report, a Markdown summary, PNG plots.

The JSON report holds every measurement in full (samples included) with the run's fingerprint; the
Markdown summary is the table a CI job can append to its summary page; the plots show runtime and
compile time per case as ratios on log axes with each case's verdict (plots.py). matplotlib is optional
(the `plots` extra): without it `plots` says so and draws nothing.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any

from ..files import os_error, rescue, write_text_atomic
from ..gpus import short
from .report import COUNTED, LEGEND, compile_change, noise, verdict_counts


def write_reports(settings: dict, results: list, fingerprint: dict, notes: list[str], loaded: Any = None) -> tuple:
    """Write the reports `settings` asks for (--gemm-report-json, --gemm-report-md, --gemm-plots); returns the
    paths written and whether any report could not be. One that cannot be written (a full disk) is a note in
    `notes` naming the file and the OS error, and its text is kept in a temporary file, as a baseline's
    measurements are (bench/plugin.py); the reports written after it carry that note."""
    written: list[str] = []
    failed = False
    for what, path in (("JSON report", settings["report_json"]), ("Markdown summary", settings["report_md"])):
        if not path:
            continue
        if what == "JSON report":
            text = json_text(results, fingerprint, settings["baseline"], notes, settings["inconclusive"])
        else:
            text = markdown(results, fingerprint, notes)
        try:
            written.append(write_text_atomic(path, text) if what == "JSON report" else _write_summary(path, text))
        except OSError as exc:
            failed = True
            notes.append(_not_written(what, path, text, exc))
    drawn: list[str] | str = []
    if settings["plots"]:
        try:
            drawn = plots(settings["plots"], results, loaded)
        except OSError as exc:  # PNGs: no text to keep; the tables and the JSON report hold the same numbers
            failed = True
            where = f"{os_error(exc)}: {exc.filename}"
            notes.append(f"gemmguard: could not draw the plots in {os.path.abspath(settings['plots'])} ({where})")
    if isinstance(drawn, str):  # why none were drawn (no matplotlib)
        notes.append(f"gemmguard: {drawn}")
    else:
        written += drawn
    return written, failed


def _not_written(what: str, path: str, text: str, exc: OSError) -> str:
    head = f"gemmguard: could not write the {what} {os.path.abspath(path)} ({os_error(exc)})"
    try:
        kept = rescue(os.path.basename(path) or "report", text)
    except OSError as again:
        return f"{head}, nor keep its text in a temporary file ({os_error(again)}: {again.filename})"
    return f"{head}; its text is kept in {kept}"


def json_text(
    results: list, fingerprint: dict, baseline_path: str | None, notes: list[str], inconclusive: str = "fail"
) -> str:
    """The JSON report. `inconclusive` is the run's --gemm-inconclusive, so the CI gate judges an inconclusive
    measurement as the run did."""
    report = {
        "format": "gemmguard-report",
        "version": 1,
        "inconclusive": inconclusive,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "fingerprint": fingerprint,
        "baseline": baseline_path,
        "notes": notes,
        "measurements": [m.as_dict() for m in results],
    }
    return json.dumps(report, indent=1, allow_nan=False) + "\n"


def _f(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def markdown(results: list, fingerprint: dict, notes: list[str]) -> str:
    on_gpu = any(m.gpu for m in results)  # under --gemm-gpus the rows come from several GPUs: say which
    device = fingerprint.get("gpu") or fingerprint.get("cpu")
    lines = [
        "## gemmguard benchmarks",
        "",
        f"{device}; torch {fingerprint.get('torch')}"
        + (f", CUDA {fingerprint['cuda']}" if fingerprint.get("cuda") else "")
        + (f", triton {fingerprint['triton']}" if fingerprint.get("triton") else ""),
        "",
        "| backend | case | compile s | cold s | warm s | median ms | TFLOP/s | % peak | vs ref | noise/detects "
        "| vs base | compile vs base | verdict |" + (" gpu |" if on_gpu else ""),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|" + ("---|" if on_gpu else ""),
    ]
    for m in results:
        rt = m.compared.get("runtime")
        change = f"{(rt['ratio'] - 1) * 100:+.1f}%" if rt else "–"
        verdict = {"failed": "**failed**", "inconclusive": "**inconclusive**"}.get(m.status, m.status)
        cchange = compile_change(m) if m.compared.get("compile") else "–"
        lines.append(
            f"| {m.backend} | `{m.case_id}` | {m.compile_s:.2f} | {_f(m.cold_compile_s, '.2f')} | "
            f"{_f(m.warm_compile_s, '.2f')} | {m.median_s * 1e3:.4g} | {m.tflops:.3g} | {_f(m.pct_peak, '.1f')} | "
            f"{_f(m.ref_ratio, '.3f')} | {noise(m)} | {change} | {cchange} | {verdict} |"
            + (f" {short(m.gpu)} |" if on_gpu else "")
        )
    if results:
        lines += ["", "| backend | measured | " + " | ".join(COUNTED) + " |", "|---|" + "---:|" * (len(COUNTED) + 1)]
        for name, c in verdict_counts(results).items():
            lines.append(f"| {name} | {c['measured']} | " + " | ".join(str(c[k]) for k in COUNTED) + " |")
        lines += ["", *(f"_{line}_" for line in LEGEND)]
    unclear = [m for m in results if m.status == "inconclusive"]
    if unclear:
        lines += ["", "### Inconclusive (too noisy to tell; not regressions)", ""]
        lines += [f"- {m.backend} `{m.case_id}`: {m.compared['runtime']['describe']}" for m in unclear]
    failures = [(m, b) for m in results for b in m.broken]
    if failures:
        lines += ["", "### Broken budgets", ""]
        lines += [f"- {m.backend} `{m.case_id}`: {b}" for m, b in failures]
    if notes:
        lines += ["", *[f"> {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def _write_summary(path: str, text: str) -> str:
    """Write the Markdown summary; returns the absolute path written. GitHub's job summary file is shared
    with other steps: it is appended to; any other file is replaced atomically."""
    if os.path.abspath(path) == os.path.abspath(os.environ.get("GITHUB_STEP_SUMMARY") or "\0"):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
        return os.path.abspath(path)
    return write_text_atomic(path, text)


def plots(directory: str, results: list, baseline: Any = None) -> list[str] | str:
    """runtime.png and compile.png under `directory` (drawn by plots.py); the paths written, or why none were."""
    try:
        import matplotlib  # noqa: F401  (only whether it is there: plots.py draws without pyplot)
    except ImportError:
        return "matplotlib is not installed (pip install 'pytest-gemmguard[plots]'): no plots drawn"
    if not results:
        return "nothing measured: no plots drawn"
    from . import plots as drawing

    return drawing.write(directory, results, baseline)
