"""Merge gpu_validate.sh result directories into one Markdown results file.

    python scripts/gpu_report.py --doc docs/gpu-validation.md DIR [DIR ...]

Each DIR holds env.json, junit-<backend>.xml, pytest-<backend>.log/.rc.json, gpu-log-<backend>.jsonl
and bench.jsonl, as scripts/gpu_validate.sh writes them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter

ORDER = ["aten", "triton", "cutlass", "cutedsl", "cutedsl[quack]"]


def _jsonl(path: str) -> list[dict]:
    rows = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def junit_counts(path: str) -> tuple[Counter, list[str]]:
    counts: Counter = Counter()
    failures: list[str] = []
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if failed is not None:
            counts["failed"] += 1
            failures.append(
                f"{name}: {(failed.get('message') or '').splitlines()[0][:200] if failed.get('message') else ''}"
            )
        elif skipped is not None:
            message = skipped.get("message") or ""
            if "gemmguard: unsupported" in message or "unsupported by" in message:
                counts["unsupported"] += 1
            elif "gemmguard: backend" in message:
                counts["unavailable"] += 1
            else:
                counts["not applicable"] += 1
        else:
            counts["passed"] += 1
    return counts, failures


def results_row(log: str, backend: str) -> str | None:
    """The plugin's own per-backend summary line (examples verified, fused, compile s)."""
    if not os.path.exists(log):
        return None
    text = open(log, errors="replace").read()
    at = text.find("gemmguard results")
    if at < 0:
        return None
    for line in text[at:].splitlines():
        if line.startswith(f"{backend} "):
            return line
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--doc", default="docs/gpu-validation.md")
    parser.add_argument("--notes", default=None, help="Markdown appended at the end (findings)")
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args()

    envs, counts, failures, bench, logs, rcs, plugin_rows = [], {}, {}, [], {}, {}, {}
    for d in args.dirs:
        if os.path.exists(os.path.join(d, "env.json")):
            envs.append(json.load(open(os.path.join(d, "env.json"))))
        for path in sorted(glob.glob(os.path.join(d, "junit-*.xml"))):
            f = re.sub(r"^junit-|\.xml$", "", os.path.basename(path))  # file-safe name (cutedsl-quack)
            rc_path = os.path.join(d, f"pytest-{f}.rc.json")
            rc = json.load(open(rc_path)) if os.path.exists(rc_path) else {}
            b = rc.get("backend", f)  # the backend's own name (cutedsl[quack])
            if rc:
                rcs[b] = rc
            try:
                counts[b], failures[b] = junit_counts(path)
            except ET.ParseError as exc:
                counts[b], failures[b] = Counter(), [f"junit unreadable: {exc}"]
            plugin_rows[b] = results_row(os.path.join(d, f"pytest-{f}.log"), b)
            logs[b] = _jsonl(os.path.join(d, f"gpu-log-{f}.jsonl"))
        bench += _jsonl(os.path.join(d, "bench.jsonl"))
    names = [b for b in ORDER if b in counts] + [b for b in counts if b not in ORDER]
    env = envs[-1] if envs else {}

    out = ["# gemmguard on the GPU: validation results", ""]
    out.append(f"Run {', '.join(sorted({e.get('date_utc', '?') for e in envs}))} by `scripts/gpu_validate.sh`.")
    out.append("")
    out.append(f"- Card: {env.get('gpu', '?')} (compute capability {env.get('capability', '?')})")
    out.append(
        f"- Python {env.get('python')}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), "
        f"triton {env.get('triton')}, nvcc: {env.get('nvcc')}"
    )
    packages = ["nvidia-cutlass", "nvidia-cutlass-dsl", "cutlass_api", "quack-kernels", "nvidia-cutlass-operators"]
    merged = {p: next((e.get(p) for e in envs if e.get(p)), None) for p in packages}
    out.append("- Added for the run: " + ", ".join(f"{p} {v}" for p, v in merged.items() if v))
    out.append("")
    out.append("## Tests per backend (pytest over `examples/` and `tests/gpu/`)")
    out.append("")
    out.append(
        "One pytest process per backend (`--gemm-backends=<b>`), run side by side. *passed/unsupported/failed* "
        "count test items; *n/a* are checks that belong to another backend. The last column is gemmguard's own "
        "summary row for the backend (tests passed, unsupported, failed, unavailable | examples verified, "
        "unsupported, failed, fused, compile s, cases/min)."
    )
    out.append("")
    out.append("| backend | passed | unsupported | failed | n/a | rc, wall s | gemmguard summary row |")
    out.append("|---|---|---|---|---|---|---|")
    for b in names:
        c = counts[b]
        rc = rcs.get(b, {})
        rc_text = f"{rc.get('rc', '?')}, {rc.get('wall_s', '?')}" + (" (timed out)" if rc.get("rc") == 124 else "")
        row = " ".join((plugin_rows.get(b) or "–").split()).replace("|", "/")
        out.append(
            f"| {b} | {c['passed']} | {c['unsupported']} | {c['failed']} | {c['not applicable']} | {rc_text} | "
            f"`{row}` |"
        )
    if any(failures.values()):
        out += ["", "Failures:", ""]
        for b in names:
            out += [f"- {b}: {f}" for f in failures[b]]
    out += ["", "## Cold compile and speed (bf16, `triton.testing.do_bench` median)", ""]
    out.append(
        "Per backend: fresh Inductor cache and Dynamo reset, so the compile is cold apart from Python imports. "
        "Each result was checked (provenance and float64 oracle) before timing. Eager is PyTorch eager "
        "(cuBLAS) on the same inputs in the same process."
    )
    out.append("")
    out.append("| backend | case | status | cold compile s | nvcc s (builds) | ms | TFLOP/s | eager TFLOP/s | kernel |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in bench:
        nvcc = f"{r['nvcc_s']} ({r.get('nvcc_builds')})" if "nvcc_s" in r else "–"
        kernel = "; ".join(r.get("kernels", [])) or r.get("error", "")
        out.append(
            f"| {r['backend']} | {r.get('case', '')} | {r.get('status')} | {r.get('cold_compile_s', '–')} | {nvcc} | "
            f"{r.get('ms', '–')} | {r.get('tflops', '–')} | {r.get('eager_tflops', '–')} | {kernel} |"
        )
    out += ["", "## Kernels the GPU tests saw", ""]
    for b in names:
        seen = []
        for rec in logs.get(b, []):
            for k in rec.get("kernels", []):
                if k.get("owner") == b and k["what"] not in seen:
                    seen.append(k["what"])
        extra = []
        for rec in logs.get(b, []):
            if "decompose_k" in rec:
                extra.append(
                    f"K-heavy case {rec.get('case')}: decompose-K {'won' if rec['decompose_k'] else 'did not win'}"
                )
            if rec.get("nvcc_builds") and (rec.get("nvcc_s") or 0) > 0.5:
                extra.append(f"{rec.get('case')}: nvcc {rec['nvcc_s']:.1f} s over {rec['nvcc_builds']} builds")
            if rec.get("probe"):
                extra.append(f"probe: {rec['probe']}")
        out.append(f"- **{b}**: " + ("; ".join(f"`{s}`" for s in seen) or "none recorded"))
        out += [f"  - {e}" for e in dict.fromkeys(extra)]
    out += ["", "## Reproduce", ""]
    out.append(
        "On the GPU machine (no package index): `../shared/tools/gpu-wheels build` here, then one run carrying "
        "`.gpu/a` that stages it and validates the backends that need no CuteDSL wheels, and one right after "
        "carrying `.gpu/b` and `.gpu/cutlass_api_src` (NVIDIA/cutlass `python/cutlass_api`, never committed):"
    )
    out.append("")
    out.append("```")
    out.append("mkdir -p /tmp/stage && cp .gpu/a/* /tmp/stage/")
    out.append("scripts/gpu_validate.sh --backends aten,triton,cutlass")
    out.append("scripts/gpu_validate.sh --backends cutedsl")
    out.append("python scripts/gpu_report.py --doc docs/gpu-validation.md RESULTS_1 RESULTS_2")
    out.append("```")
    out.append("")
    out.append("On a machine with every package installed, `scripts/gpu_validate.sh` alone does all four backends.")
    out.append("")
    if args.notes and os.path.exists(args.notes):
        out += [*open(args.notes).read().rstrip().splitlines(), ""]
    os.makedirs(os.path.dirname(args.doc) or ".", exist_ok=True)
    with open(args.doc, "w") as f:
        f.write("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
