"""Calibrate the oracle on the GPU: how much of gemmguard's tolerance does an unchanged, correct library use?

Draws cases from the whole default case space (`strategies.gemm_cases("cuda")`, every op, dtype, layout and
epilogue chain) over several seeds and, for each, measures max |error| / tolerance of:

  eager-torch   the case's eager function under torch's own default flags (reduced-precision reductions on)
  eager-case    the same under the flags gemmguard sets for the case (precision.math_precision)
  aten          the case compiled through Inductor's ATEN backend by gemmguard's own check (`--compiled N`)
                (`--backend triton`: that backend instead; the column takes its name)

A backend whose compiles are slow (triton: a max-autotune compile per static shape) is calibrated with
`--dynamic --per-structure K`: each drawn case's structure (op, dtype, layout, epilogue chain) is drawn K
times more over the default shape space, and one dynamic-shape compile serves the K shapes. `--shard I/P`
runs the I-th of P slices (P processes side by side, one file each); `--merge` prints the table of them all.

A correct library must stay under 1 in the columns gemmguard judges (eager-case, aten); eager-torch shows
why gemmguard sets the flags. Prints a table per dtype and op, writes every case to OUT/calibration.jsonl.

    python3 scripts/gpu_calibrate.py --cases 3000 --seeds 6 --compiled 300 --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def draw(n: int, seed: int, device: str, **narrow) -> list:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    from pytest_gemmguard.cases.strategies import gemm_cases

    out: list = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases(device, seed=seed, **narrow))
    def collect(case) -> None:
        out.append(case)

    collect()
    return out


def ones(case) -> tuple[bool, ...]:
    return tuple(d == 1 for d in case.shape)


def same_specialisation(seed_case, drawn: list, k: int) -> list:
    """Up to k distinct drawn cases that one dynamic compile of `seed_case` serves. Dynamo specialises every
    size of 1 (a shape with a 1 where the compiled one had a symbol recompiles), so the group keeps the seed's
    pattern of unit dimensions (the all-ones shape has no other)."""
    seen = {seed_case.shape}
    fitting = []
    for c in drawn:
        if c.shape in seen:
            continue
        seen.add(c.shape)
        if ones(c) == ones(seed_case):
            fitting.append(c)
    return fitting[:k]


KNOWN_FILE = os.path.join(os.path.dirname(__file__), "..", "pytest_gemmguard", "known", "known-failures.toml")


def explain(row: dict, case, col: str, known, versions, static_check, candidates=()) -> None:
    """Why a case is over the bound, when something other than the oracle says so (see main). `candidates`:
    the autotune candidates its failure is confirmed to come from (GemmMismatch.candidates: a losing
    candidate's, or a wrong winner's blamed on a known entry's; a known entry may name them)."""
    from pytest_gemmguard import known as known_mod

    row[f"{col}_case"] = repr(case)
    row[f"{col}_candidates"] = list(candidates)
    entry = known_mod.match(known, col, case, versions, "wrong-result", candidates=candidates)
    if entry is not None:
        row["known"] = entry.id
    elif static_check:
        # The default path's compile, in a session that knows the file: its wrong winner may be blamed on an
        # entry's candidates (confirm.blame). That explains the static failure, not which kernel was wrong in
        # the dynamic one, so it is recorded as its own reason (known_static).
        row[f"{col}_static"], blamed, row[f"{col}_static_none"] = static_check(case)
        if blamed:
            row[f"{col}_static_candidates"] = list(blamed)
            entry = known_mod.match(known, col, case, versions, "wrong-result", candidates=blamed)
            if entry is not None:
                row["known_static"] = entry.id


def dynamic_only(row: dict, col: str) -> bool:
    """A failure of a dynamic-shape compile on a shape where the static compile is unsupported, with eager
    right on the same inputs (the oracle is not what is wrong)."""
    return str(row.get(f"{col}_static_none", "")).startswith("unsupported") and row.get("eager-case", 2) <= 1


def rematch(rows: list, col: str, versions: dict) -> None:
    """Explain each recorded case over the bound again by today's known-failures file, for the package
    versions the rows were measured with (a merge runs elsewhere). A row from before cases and candidates
    were recorded is read from its report; one whose report no longer names every
    confirmed wrong candidate (reports are cut at 2000 characters) stays unexplained, with why."""
    import ast

    from pytest_gemmguard import known as known_mod
    from pytest_gemmguard.cases.case import GemmCase

    known = known_mod.load(KNOWN_FILE)
    for row in rows:
        if row.get(col, 0) <= 1:
            continue
        report = row.get(f"{col}_report", "")
        text = row.get(f"{col}_case") or next((ln.strip() for ln in report.splitlines() if "GemmCase(" in ln), "")
        call = ast.parse(text, mode="eval").body if text else None
        if not isinstance(call, ast.Call):
            continue
        case = GemmCase(**{kw.arg: ast.literal_eval(kw.value) for kw in call.keywords})
        names, count = row.get(f"{col}_candidates"), None
        if names is None:
            names, count = _wrong_candidates(report)
        row.pop("known", None)
        row.pop("known_static", None)
        row.pop("partly_named", None)
        blamed = row.get(f"{col}_static_candidates")
        static_entry = blamed and known_mod.match(known, col, case, versions, "wrong-result", candidates=blamed)
        if static_entry:
            row["known_static"] = static_entry.id
        entry = known_mod.match(known, col, case, versions, "wrong-result", candidates=names)
        if entry is not None and (count is None or count == len(names)):
            row["known"] = entry.id
        elif entry is not None:
            row["partly_named"] = f"{len(names)} of {count} confirmed wrong candidates named, all {entry.id}'s"


def _wrong_candidates(report: str) -> tuple[list[str], int | None]:
    """From a candidate failure's report: the candidates confirmed wrong by a compile that picked them, and
    how many the report's first line says were confirmed (None for a wrong winner's report)."""
    lines = report.splitlines()
    head = re.search(r"(\d+) confirmed by a compile that picks it", lines[0] if lines else "")
    names = [
        line.split()[1]
        for i, line in enumerate(lines[:-1])
        if line.strip().startswith("wrong:") and lines[i + 1].strip().startswith("confirmed:")
    ]
    return names, (int(head.group(1)) if head else None)


def ratio(out, expected, tol) -> float:
    import torch

    err = (out.detach().to(torch.float64) - expected).abs()
    finite = torch.isfinite(expected.to(out.dtype).to(torch.float64))
    return float(torch.where(finite, err / tol, torch.zeros_like(err)).max()) if err.numel() else 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=2000, help="drawn cases in all (split over the seeds)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed-base", type=int, default=1000, help="first seed (another base draws other cases)")
    ap.add_argument("--compiled", type=int, default=0, help="of those, how many to also compile through aten")
    ap.add_argument("--deadline", type=float, default=400.0, help="seconds: start no new case after this")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--backend", default="aten", help="the backend the compiled column checks")
    ap.add_argument("--dynamic", action="store_true", help="dynamic-shape compiles (one serves many shapes)")
    ap.add_argument("--per-structure", type=int, default=1, help="cases drawn per structure (with --dynamic)")
    ap.add_argument("--shard", default="0/1", help="I/P: this process's slice of the drawn cases")
    ap.add_argument("--merge", action="store_true", help="print the table of every calibration*.jsonl in --out")
    ap.add_argument(
        "--rematch",
        metavar="NAME=VERSION,...",
        help="with --merge: explain the cases over the bound by today's known-failures file, for the package "
        "versions the rows were measured with (e.g. torch=2.11.0+cu130,triton=3.6.0)",
    )
    args = ap.parse_args()
    if args.merge:
        import glob

        rows = [
            json.loads(line)
            for f in sorted(glob.glob(os.path.join(args.out, "calibration*.jsonl")))
            for line in open(f)
        ]
        if args.rematch:
            rematch(rows, args.backend, dict(pair.split("=", 1) for pair in args.rematch.split(",")))
        return table(rows, args.backend, 0.0, "merged" + (f", rematched for {args.rematch}" if args.rematch else ""))

    import torch

    from pytest_gemmguard import known as known_mod
    from pytest_gemmguard import oracle
    from pytest_gemmguard.cases.case import build_inputs, case_function
    from pytest_gemmguard.cases.precision import math_precision
    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import BackendCrashed, CandidateMismatch, GemmMismatch, Unsupported
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    started = time.monotonic()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shard, shards = (int(x) for x in args.shard.split("/"))
    per = max(1, args.per_structure)
    cases = []
    # Groups can come out smaller than K (a structure with few shapes of its pattern), so twice the seed
    # cases are drawn and the shard stops grouping once it holds its share of --cases.
    pool = 2 if per > 1 else 1
    for s in range(args.seeds):
        cases += draw(pool * args.cases // args.seeds // per, args.seed_base + s, device)
    cases = cases[shard::shards]
    if per > 1:
        grouped, share = [], -(-args.cases // shards)
        for j, c in enumerate(cases):
            if len(grouped) >= share:
                break
            more = draw(
                4 * per,
                args.seed_base + 4000 + j,
                device,
                ops=[c.op],
                dtypes=[c.dtype],
                layouts=[c.layout],
                epilogues=[c.epilogue],
            )
            grouped += [c, *same_specialisation(c, more, per - 1)]
        cases = grouped
    if args.dynamic:
        # Duck shaping gives equal sizes one symbol, so a later shape whose sizes differ recompiles; the
        # calibration wants one compile per group (the kernels compiled either way are dynamic in M, N, K).
        import torch.fx.experimental._config as fx_config

        fx_config.use_duck_shape = False
    compiler = Compiler(dynamic=args.dynamic, timeout_s=120)
    options = Options(repro_dir=os.path.join(args.out, "repro"))
    options.compile_workers = 0  # shards run side by side already; workers of their own would fight for cores
    # Each case over the bound is explained where it can be: by an entry of the project's known-failures
    # file, or (dynamic compiles) by the same case passing a static compile of its own in this process,
    # which shows that the oracle is right on these inputs and the dynamic-shape kernel is not.
    known = known_mod.load(KNOWN_FILE)
    session = GemmSession(compiler, options, known=known)  # knowing the file, it may blame a wrong winner
    rows = []
    col = args.backend
    versions = known_mod.installed_versions(("torch", "triton", *known.packages()))
    static_session: list = []

    def static_check(case) -> tuple[float | None, tuple[str, ...], str]:
        """(max |error|/tolerance of a static compile, the candidates its wrong winner is blamed on, and
        where it judged nothing, why: "unsupported: ..." or the exception)."""
        if not static_session:
            static_session.append(GemmSession(Compiler(timeout_s=120), options, known=known))
        try:
            return Gemm(case, col, static_session[0], "calibrate-static").check().verdict.max_ratio, (), ""
        except CandidateMismatch:  # the static winner was right, a losing candidate wrong: no wrong winner blamed
            return float("inf"), (), ""
        except GemmMismatch as exc:  # a wrong winner: blamed (exc.candidates) or not
            return float("inf"), exc.candidates, ""
        except Unsupported as exc:  # no static kernel of the backend for this shape: a static run skips it
            return None, (), f"unsupported: {exc.reason}"[:300]
        except Exception as exc:  # crashed or timed out statically: no explanation, and the shard goes on
            return None, (), f"{type(exc).__name__}: {str(exc)[:200]}"

    name = "calibration.jsonl" if shards == 1 else f"calibration-{col}-{shard}.jsonl"
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, name), "w")
    for i, case in enumerate(cases):
        if time.monotonic() - started > args.deadline:
            break
        case_started, compiles_before = time.monotonic(), compiler.stats["compiles"]
        inputs = build_inputs(case, device)
        expected, tol = oracle.case_reference(case, inputs)
        fn = case_function(case.op, case.epilogue, case.dtype)
        row = {"case": case.describe(), "op": case.op, "dtype": case.dtype}
        with torch.no_grad():
            if case.dtype != "tf32":  # torch's defaults: TF32 off for matmul, reduced precision on
                row["eager-torch"] = ratio(fn(*inputs.flat), expected, tol)
            with math_precision(case.dtype):
                row["eager-case"] = ratio(fn(*inputs.flat), expected, tol)
        if i < args.compiled:
            try:
                result = Gemm(case, col, session, "calibrate").check()
                row[col] = result.verdict.max_ratio
            except GemmMismatch as exc:
                row[col] = float("inf")
                row[f"{col}_report"] = str(exc)[:2000]
                names = getattr(exc, "candidates", ())
                explain(row, case, col, known, versions, args.dynamic and static_check, names)
            except (Unsupported, BackendCrashed) as exc:
                row[f"{col}_skip"] = str(exc)[:200]
            except Exception as exc:  # a compile timeout or anything else: recorded, and the next case goes on
                row[f"{col}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        row["s"] = round(time.monotonic() - case_started, 3)  # where a shard's time goes
        row["compiles"] = compiler.stats["compiles"] - compiles_before
        rows.append(row)
        log.write(json.dumps(row, default=str) + "\n")
        log.flush()
    compiler.deactivate()
    elapsed = time.monotonic() - started
    mode = f"{'dynamic' if args.dynamic else 'static'} compiles, {per} per structure, shard {args.shard}"
    return table(rows, col, elapsed, mode)


def table(rows: list, col: str, elapsed: float, mode: str) -> int:
    import torch

    from pytest_gemmguard.cases.ops import DTYPES

    device = "cuda" if torch.cuda.is_available() else "cpu"

    cols = ("eager-torch", "eager-case", col)
    by = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for c in cols:
            if c in row:
                by[(row["dtype"], row["op"])][c].append(row[c])
    print(
        f"# {len(rows)} cases in {elapsed:.0f} s on {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, "
        f"torch {torch.__version__} ({mode}); max |error|/tolerance: max (p99) [cases over 1]"
    )
    print(f"{'dtype':14s} {'op':18s} {'n':>5s}  {'eager-torch':>24s}  {'eager-case':>24s}  {col:>24s}")

    def cell(values: list) -> str:
        if not values:
            return "-"
        values = sorted(values)
        p99 = values[min(len(values) - 1, int(0.99 * len(values)))]
        return f"{values[-1]:.3g} ({p99:.3g}) [{sum(v > 1 for v in values)}]"

    for key in sorted(by):
        got = by[key]
        n = max(len(v) for v in got.values())
        print(
            f"{key[0]:14s} {key[1]:18s} {n:5d}  {cell(got['eager-torch']):>24s}  {cell(got['eager-case']):>24s}  "
            f"{cell(got[col]):>24s}"
        )
    unexplained = 0
    for r in rows:  # each case over the bound, with why (where known) and the first lines of its report
        if r.get(col, 0) > 1:
            static = r.get(f"{col}_static")
            if "known" in r:
                why = f"known failure {r['known']}"
            elif "known_static" in r:
                why = f"the static compile's wrong winner blamed on known failure {r['known_static']}"
            elif "partly_named" in r:
                unexplained += 1
                why = f"unexplained: report cut, {r['partly_named']}"
            elif static is not None and static <= 1:
                why = f"dynamic-shape kernel wrong: the static compile is right ({static:.3g})"
            elif dynamic_only(r, col):
                # The dynamic kernel ran a shape no static compile gives the backend: the default (static)
                # run reports the case unsupported, and eager on the same inputs agrees with the oracle.
                none = r[f"{col}_static_none"]
                why = f"dynamic-shape kernel wrong where a static compile has no {col} kernel ({none})"
            else:
                unexplained += 1
                none = r.get(f"{col}_static_none")
                why = "unexplained" + (f" (static compile {static:.3g})" if static is not None else "")
                why += f" (static compile: {none})" if none else ""
            report = " | ".join(r.get(f"{col}_report", "").splitlines()[:4])
            print(f"OVER {r['case']}: {r[col]:.3g} [{why}] -- {report[:600]}")
    errors = [r for r in rows if f"{col}_error" in r]
    for r in errors[:5]:
        print(f"ERROR {r['case']}: {r[f'{col}_error'][:300]}")
    over = {c: sum(1 for r in rows if r.get(c, 0) > 1) for c in cols}
    compiled = sum(1 for r in rows if col in r)
    skipped = sum(1 for r in rows if f"{col}_skip" in r)
    print(
        f"TOTAL cases {len(rows)}, over the bound: eager-torch {over['eager-torch']}, eager-case "
        f"{over['eager-case']}, {col} {over[col]} of {compiled} checked ({skipped} unsupported, {len(errors)} errors; "
        f"{unexplained} of the {over[col]} unexplained); dtypes {sorted(DTYPES)}"
    )
    compiles = sum(r.get("compiles", 0) for r in rows)
    seconds = sum(r.get("s", 0.0) for r in rows)
    print(f"TIME {seconds:.0f} s in cases, {compiles} compiles ({len(rows) / max(compiles, 1):.1f} cases per compile)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
