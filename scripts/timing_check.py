"""How good is gemmguard's runtime measurement on this machine, and what slowdown does it catch? (issue 4)

    python scripts/timing_check.py --out DIR [--device cuda|cpu] [--shapes 256,1024,4096] [--rounds 10]
        [--max-time 0.2] [--rel-ci 0.002] [--true-time 0.4] [--true-reps 3] [--no-agreement]
        [--peak] [--peak-backends aten,triton] [--deadline 140] [--cpu-threads N]

Per square shape, `mm` compiled through the `aten` backend with gemmguard's own compile path:

  agreement (GPU, unless --no-agreement): gemmguard's median (CUDA events, L2 flush) against a bare
     `triton.testing.do_bench` of the same callable, and its CUDA-graph replay against `do_bench_cudagraph`.
  planted slowdowns: the same GEMM with K padded by zeros (A gets `pad` zero columns, B `pad` zero rows: the
     product is unchanged, the work grows by pad/K, and pads are multiples of 32 so the operands keep their
     alignment and the library its kernel class). A real kernel slowdown, with no extra launch: the old
     plant, a `torch.cuda._sleep` kernel after each call, cost a launch's worth of microseconds (a nominal 1%
     measured +13.6% at 1024^3). When the shape is timed by CUDA-graph replay (launch-bound shapes, where one
     extra K tile is already +10-30%), `share` of every `graph_calls` calls in the graph run the padded GEMM
     and the rest the normal one; a sample is one replay divided by `graph_calls`, so every sample is slowed
     by the same mean amount, as by a uniform regression, now adjustable in steps of 1/20 of one padded call.
     The shares are chosen from the measured cost of the all-padded plant to aim at 1, 2, 3, 5% slowdowns.
  true size of each plant: the planted and the unplanted callable timed side by side in one loop (the
     unplanted one as time_callable's reference, so both by the same method), `--true-reps` times with no CI
     stop, i.e. to the sample or time cap; the median of the ratios is the plant's true size.
  verdicts: `--rounds` rounds, each one gemmguard measurement (eager torch.mm as the in-run reference, timed
     interleaved with it in pairs, the method of the first measurement forced for all, sampling past
     --max-time up to 3x while the noise is above what a --noise-threshold verdict needs) of the unplanted
     callable and of every plant, in a rotating order. A/A: every ordered pair of distinct unplanted
     measurements through the fixture's three-way rule (verdict.judge: ratio of median paired ratios beyond
     the threshold AND significant at alpha=0.01 given both runs' noise; inconclusive when that noise hides
     the threshold); detection: every planted measurement against every unplanted one. Rates at thresholds
     1%, 2%, 5%; inconclusive comparisons are counted apart (neither alarms nor detections).
     Pairs share measurements, so they are not independent trials: the rates are exact for these
     measurements, their uncertainty is that of `rounds` independent ones.

--peak: the denominator of % of peak as the fixture measures it (BenchContext.peak_tflops, twice, to see its
repeatability) with the per-shape detail of peak.library_peak, the old way (one 8192^3 GEMM, events) for
comparison, and the compiled 4096^3 mm of each --peak-backends timed like the fixture times it, with its %
of peak and whether the fixture would warn that it beat the peak.

--deadline S: stop starting new work S seconds after start and print what was measured (rates count the
comparisons actually made). Logs JSON lines to DIR/timing_check.jsonl, prints a table last.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import os
import statistics as st
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

STARTED = time.monotonic()
THRESHOLDS = [0.01, 0.02, 0.05]  # --thresholds replaces them (the CPU gate uses 20%)
TARGETS = (0.01, 0.02, 0.03, 0.05)  # plant sizes aimed at; the measured size is what gets reported
ALPHA = 0.01
RELIABLE = 0.95  # "detected reliably": at least this share of comparisons


@dataclasses.dataclass(frozen=True)
class Plant:
    """K padded by `pad` zeros in `share` of every `period` calls (share == period: every call)."""

    pad: int
    share: int = 1
    period: int = 1

    @property
    def label(self) -> str:
        return f"K+{self.pad}" + ("" if self.share == self.period else f" {self.share}/{self.period}")


class ShapeRig:
    """One square shape: the compiled unplanted mm, compiled K-padded variants, the eager reference."""

    def __init__(self, shape: int, dtype: str, device: str, compiler: Any) -> None:
        from pytest_gemmguard import backends
        from pytest_gemmguard.cases.case import GemmCase, build_inputs, case_function
        from pytest_gemmguard.compile.compiler import run_checked

        self.shape, self.dtype, self.device, self.compiler = shape, dtype, device, compiler
        self.backend = backends.get("aten")
        case = GemmCase("mm", shape, shape, shape, dtype=dtype)
        self.flat = build_inputs(case, device).flat
        self.fn = case_function("mm", "none", dtype)
        started = time.perf_counter()
        self.compiled = compiler.compile(self.backend, self.fn, self.flat, (1,))
        self.expected, _ = run_checked(self.compiled, self.flat)
        self.compile_s = time.perf_counter() - started
        self._stack = contextlib.ExitStack()
        self.hot_padded: dict[int, Callable[[], Any]] = {}
        self.max_abs_diff: dict[int, float] = {}

    def reference(self) -> Any:
        return self.fn(*self.flat)

    def prepare(self, pads: list[int]) -> None:
        """Compile the mm on K-padded operands for every pad (result checked against the unpadded one),
        then open the timing contexts of all variants: every compile happens before any `hot` context is
        open, so each context's recompile guard sees only the timed calls."""
        import torch

        from pytest_gemmguard.compile.compiler import run_checked

        variants = [(self.compiled, self.flat, None)]
        for pad in pads:
            a, b = self.flat
            a_pad = torch.cat([a, torch.zeros(a.shape[0], pad, dtype=a.dtype, device=a.device)], dim=1)
            b_pad = torch.cat([b, torch.zeros(pad, b.shape[1], dtype=b.dtype, device=b.device)], dim=0)
            flat = (a_pad.contiguous(), b_pad.contiguous())
            compiled = self.compiler.compile(self.backend, self.fn, flat, (1,))
            out, _ = run_checked(compiled, flat)
            # Zeros add nothing, but the library may split K differently: only rounding may differ.
            self.max_abs_diff[pad] = float((out.float() - self.expected.float()).abs().max())
            variants.append((compiled, flat, pad))
        for compiled, flat, pad in variants:
            hot = self._stack.enter_context(compiled.hot(flat))
            if pad is None:
                self.hot = hot
            else:
                self.hot_padded[pad] = hot

    def planted(self, plant: Plant) -> Callable[[], Any]:
        slow = self.hot_padded[plant.pad]
        if plant.share >= plant.period:
            return slow
        normal, counter = self.hot, itertools.count()

        # Any `period` consecutive calls (one captured graph) contain exactly `share` padded ones.
        def mixed() -> Any:
            return slow() if next(counter) % plant.period < plant.share else normal()

        return mixed

    def close(self) -> None:
        self._stack.close()


def _round_to(x: float, step: int) -> int:
    return max(step, round(x / step) * step)


def true_size(rig: ShapeRig, plant: Plant, opts: Any, reps: int) -> dict:
    """Planted vs unplanted, side by side in one timing loop, `reps` times; ratios of medians."""
    from pytest_gemmguard.bench.timing import time_callable

    ratios = []
    for _ in range(reps):
        t = time_callable(rig.planted(plant), rig.device, rig.hot, opts)
        ratios.append(t.estimate.value)  # the median paired ratio: planted and unplanted timed interleaved
    # method: "cuda-graph" proves the mixed plant was captured (else its samples would be bimodal)
    return {"ratio": st.median(ratios), "min": min(ratios), "max": max(ratios), "n": t.summary.n, "method": t.method}


def mixed_pad(k: int) -> int:
    """Launch-bound shapes: the pad of the mixed plants, a quarter of K (whole 64-wide K tiles)."""
    return _round_to(k / 4, 64)


def every_call_pads(k: int) -> list[int]:
    """Compute-bound shapes: pads of about TARGETS * K, multiples of 32."""
    return sorted({_round_to(t * k, 32) for t in TARGETS})


def choose_plants(rig: ShapeRig, mixed: bool, opts_true: Any, reps: int, period: int) -> tuple[list, dict]:
    k = rig.shape
    sizes: dict[Plant, dict] = {}
    if mixed:
        # The all-padded plant's measured cost per call sets the shares that aim at TARGETS.
        full = Plant(mixed_pad(k), period, period)
        sizes[full] = true_size(rig, full, opts_true, reps)
        per_call = max(sizes[full]["ratio"] - 1, 1e-3)
        shares = sorted({min(period, max(1, round(t * period / per_call))) for t in TARGETS})
        plants = [Plant(full.pad, j, period) for j in shares]
        plants.append(Plant(k, period, period))  # about 2x the work: the plant CI uses
    else:
        plants = [Plant(p) for p in every_call_pads(k)] + [Plant(k)]
    for p in plants:
        if p not in sizes:
            sizes[p] = true_size(rig, p, opts_true, reps)
    return plants, sizes


def agreement(rig: ShapeRig, args: Any) -> dict:
    """gemmguard's timers against triton's on the same callable (GPU)."""
    import triton.testing

    from pytest_gemmguard.bench.timing import TimingOptions, time_callable

    ours, theirs = [], []
    ev = TimingOptions(max_time_s=args.max_time, rel_ci=0.002, cuda_graph=False)
    for _ in range(5):
        ours.append(time_callable(rig.hot, rig.device, None, ev).summary.median)
        theirs.append(triton.testing.do_bench(rig.hot, return_mode="median") * 1e-3)
    gr = TimingOptions(max_time_s=args.max_time, rel_ci=0.002, cuda_graph=True)
    ours_g = [time_callable(rig.hot, rig.device, None, gr).summary.median for _ in range(3)]
    theirs_g = [triton.testing.do_bench_cudagraph(rig.hot, return_mode="median") * 1e-3 for _ in range(3)]
    return {
        "do_bench_us": st.median(theirs) * 1e6,
        "events_us": st.median(ours) * 1e6,
        "vs_do_bench": st.median(ours) / st.median(theirs),
        "vs_do_bench_cudagraph": st.median(ours_g) / st.median(theirs_g),
    }


def _verdicts(current: Any, baseline: Any) -> tuple[float, dict[float, str]]:
    """The fixture's three-way verdict (verdict.judge on the median paired ratios) at every threshold."""
    from pytest_gemmguard.bench import verdict

    v = verdict.judge(current.estimate, baseline.estimate, 0.0, ALPHA)
    return v.ratio, {th: dataclasses.replace(v, threshold=th).verdict for th in THRESHOLDS}


def _rates(pairs: list[tuple[Any, Any]]) -> dict:
    hits = dict.fromkeys(THRESHOLDS, 0)
    unclear = dict.fromkeys(THRESHOLDS, 0)
    ratios = []
    for cur, base in pairs:
        ratio, verdict = _verdicts(cur, base)
        ratios.append(ratio)
        for th in THRESHOLDS:
            hits[th] += verdict[th] == "regression"
            unclear[th] += verdict[th] == "inconclusive"
    n = len(pairs)
    return {
        "comparisons": n,
        "hits": {f"{th:.0%}": hits[th] for th in THRESHOLDS},
        "inconclusive": {f"{th:.0%}": unclear[th] for th in THRESHOLDS},
        "rate": {f"{th:.0%}": hits[th] / n if n else None for th in THRESHOLDS},
        "median_ratio": st.median(ratios) if ratios else None,
        "max_ratio": max(ratios) if ratios else None,
        "ratio_cv_pct": 100 * st.pstdev(ratios) / st.mean(ratios) if len(ratios) > 1 else None,
    }


def _noise(measured: list[Any]) -> dict:
    """The noise of single measurements (log half-width of the median paired ratio's 95% interval)."""
    noise = [t.estimate.noise for t in measured]
    return {
        "median_pct": 100 * st.median(noise),
        "max_pct": 100 * max(noise),
        "pairs": st.median(t.estimate.n for t in measured),
    }


def check_shape(shape: int, dtype: str, device: str, opts: Any, args: Any, compiler: Any, until: float) -> dict:
    from pytest_gemmguard.bench.timing import time_callable

    rig = ShapeRig(shape, dtype, device, compiler)
    row: dict = {"shape": shape, "dtype": dtype, "compile_s": round(rig.compile_s, 2)}
    try:
        with rig.compiled.hot(rig.flat) as hot:
            first = time_callable(hot, device, rig.reference, opts)
        method = first.method
        mixed = method == "cuda-graph" or args.mixed
        rig.prepare([mixed_pad(shape), shape] if mixed else [*every_call_pads(shape), shape])
        # The same method for every measurement of this shape: the plant must not flip the auto rule.
        run = dataclasses.replace(opts, cuda_graph=method == "cuda-graph")
        row.update(method=method, median_us=first.summary.median * 1e6, n=first.summary.n)
        row["ci_pct"] = 100 * first.summary.rel_halfwidth
        if device == "cuda" and args.agreement:
            row.update(agreement(rig, args))
        period = opts.graph_calls if mixed else 1
        opts_true = dataclasses.replace(run, rel_ci=0.0, max_time_s=args.true_time)  # no CI stop: to the cap
        plants, sizes = choose_plants(rig, mixed, opts_true, args.true_reps, period)
        row["pad_max_abs_diff"] = {str(k): v for k, v in rig.max_abs_diff.items()}
        targets: list[tuple[str, Plant | None]] = [("A", None)] + [(p.label, p) for p in plants]
        callables = {label: (rig.hot if p is None else rig.planted(p)) for label, p in targets}
        measured: dict[str, list] = {label: [] for label, _ in targets}
        rounds = 0
        while rounds < args.rounds and (rounds < 2 or time.monotonic() < until):
            order = targets[rounds % len(targets) :] + targets[: rounds % len(targets)]  # rotate: no fixed slot
            for label, _ in order:
                measured[label].append(time_callable(callables[label], device, rig.reference, run))
            rounds += 1
        row["rounds"] = rounds
        unplanted = measured["A"]
        row["aa"] = _rates([(x, y) for x, y in itertools.permutations(unplanted, 2)])
        row["noise"] = _noise(unplanted)
        row["planted"] = []
        for p in plants:
            rates = _rates([(x, y) for x in measured[p.label] for y in unplanted])
            true = sizes[p]
            row["planted"].append({"plant": p.label, "pad": p.pad, "share": p.share, "period": p.period, **rates})
            row["planted"][-1]["true"] = true
        row["smallest_reliable"] = {}
        for th in THRESHOLDS:
            key = f"{th:.0%}"
            ok = None  # smallest true size such that it and every larger plant are detected reliably
            for entry in sorted(row["planted"], key=lambda e: e["true"]["ratio"], reverse=True):
                if entry["rate"][key] is None or entry["rate"][key] < RELIABLE:
                    break
                ok = entry["true"]["ratio"] - 1
            row["smallest_reliable"][key] = ok
    finally:
        rig.close()
    return row


def peak_check(device: str, dtype: str) -> tuple[dict, Any]:
    """The fixture's peak, a second measurement with its per-shape detail, and the old single-size peak."""
    import torch

    from pytest_gemmguard.bench.context import BenchContext, Settings
    from pytest_gemmguard.bench.peak import library_peak
    from pytest_gemmguard.bench.timing import TimingOptions, time_callable
    from pytest_gemmguard.cases.ops import DTYPES

    settings = Settings()  # the plugin's default timing options
    started = time.perf_counter()
    ctx = BenchContext(None, settings, None)
    out: dict = {"fixture_peak_tflops": ctx.peak_tflops(device, dtype), "fixture_peak_s": time.perf_counter() - started}
    # A second, independent measurement with its per-shape detail: how repeatable the peak is.
    out["detail"] = dataclasses.asdict(library_peak(device, DTYPES[dtype], settings.timing))
    big = 8192 if device == "cuda" else 1024  # the peak as it was measured before: one size, events
    a = torch.randn(big, big, device=device).to(DTYPES[dtype])
    b = torch.randn(big, big, device=device).to(DTYPES[dtype])
    old = TimingOptions(max_time_s=1.0, rel_ci=0.02, cuda_graph=False)
    with torch.no_grad():
        t = time_callable(lambda: torch.mm(a, b), device, opts=old)
    out["old_peak_tflops"] = 2 * big**3 / t.summary.median / 1e12
    out["old_peak_shape"] = big
    out["kernels"] = []
    return out, ctx


def peak_kernels(peak: dict, ctx: Any, device: str, dtype: str, names: list[str], compiler: Any, until: float) -> None:
    """The compiled square mm of each backend, timed as fixture._time times it, against the fixture's peak;
    whether the fixture's peak_tflops warns (a kernel above the peak)."""
    import torch

    from pytest_gemmguard import backends
    from pytest_gemmguard.bench.timing import time_callable
    from pytest_gemmguard.cases.case import GemmCase, build_inputs, case_function
    from pytest_gemmguard.compile.compiler import run_checked

    size = 4096 if device == "cuda" else 512
    for name in names:
        if time.monotonic() > until:
            peak["kernels"].append({"backend": name, "skipped": "deadline"})
            continue
        entry: dict = {"backend": name, "shape": size}
        try:
            backend = backends.get(name)
            case = GemmCase("mm", size, size, size, dtype=dtype)
            flat = build_inputs(case, device).flat
            fn = case_function("mm", "none", dtype)
            started = time.perf_counter()
            compiled = compiler.compile(backend, fn, flat, (1,))
            run_checked(compiled, flat)
            entry["compile_s"] = round(time.perf_counter() - started, 2)
            with compiled.hot(flat) as hot:
                t = time_callable(hot, device, lambda fn=fn, flat=flat: fn(*flat), ctx.settings.timing)
            tflops = 2 * size**3 / t.summary.median / 1e12
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                used = ctx.peak_tflops(device, dtype, achieved_tflops=tflops)
            entry.update(
                median_us=t.summary.median * 1e6,
                method=t.method,
                tflops=tflops,
                pct_peak=100 * tflops / used,
                pct_second_peak=100 * tflops / peak["detail"]["tflops"],
                pct_old_peak=100 * tflops / peak["old_peak_tflops"],
                warned=[str(w.message) for w in caught],
            )
        except Exception as exc:  # report and go on: the other measurements stand on their own
            entry["error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:300]
        peak["kernels"].append(entry)
        torch._dynamo.reset()


def _ths() -> str:
    return "/".join(f"{th:.0%}" for th in THRESHOLDS)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def print_tables(fp: dict, dtype: str, args: Any, peak: dict | None, rows: list[dict]) -> None:
    print(f"\n{fp.get('gpu') or fp['cpu']}; torch {fp['torch']}; triton {fp.get('triton')}; {dtype}")
    print(f"wall {time.monotonic() - STARTED:.0f} s; command: {' '.join(sys.argv)}")
    if peak:
        d = peak["detail"]
        per = ", ".join(f"{k} {v:.4g}" for k, v in d["per_shape"].items())
        print(
            f"\npeak (TFLOP/s): fixture {peak['fixture_peak_tflops']:.4g} ({peak['fixture_peak_s']:.1f} s); "
            f"again: {d['tflops']:.4g} ({d['elapsed_s']:.1f} s; {per}; {d['method']})"
        )
        print(f"  old way (one {peak['old_peak_shape']}^3 GEMM, events, 1 s cap): {peak['old_peak_tflops']:.4g}")
        print("  kernel         median us  method        TFLOP/s  %peak  %2nd-peak  %old-peak  fixture warned")
        for k in peak["kernels"]:
            if "tflops" not in k:
                print(f"  {k['backend']:8s} {k.get('skipped') or k.get('error')}")
                continue
            print(
                f"  {k['backend']:8s} {k['shape']}^3 {k['median_us']:9.2f}  {k['method']:12s} {k['tflops']:8.4g}"
                f"  {k['pct_peak']:5.1f}  {k['pct_second_peak']:9.1f}  {k['pct_old_peak']:9.1f}  {bool(k['warned'])}"
            )
    if not rows:
        return
    print(
        f"\nverdict: median paired ratio to the in-run reference > threshold AND significant (alpha {ALPHA}) given "
        f"both runs' noise, else inconclusive if the noise hides the threshold; rel_ci {args.rel_ci}, "
        f"{args.max_time} s per measurement (up to 3x while too noisy for {args.noise_threshold:.0%})"
    )
    print(
        f"shape  method       median us  ±CI%  rounds  A/A false alarms @{_ths()}        A/A ratio CV%  worst A/A"
        f"  noise med/max %  A/A inconclusive @{_ths()}"
    )
    for r in rows:
        if "aa" not in r:
            print(f"{r['shape']:5d}  skipped: {r.get('skipped')}")
            continue
        aa = r["aa"]
        cells = "  ".join(f"{aa['hits'][k]}/{aa['comparisons']}" for k in aa["hits"])
        agree = (
            f"  vs do_bench {r['vs_do_bench']:.3f}, vs graph {r['vs_do_bench_cudagraph']:.3f}"
            if "vs_do_bench" in r
            else ""
        )
        print(
            f"{r['shape']:5d}  {r['method']:11s} {r['median_us']:10.2f}  {r['ci_pct']:4.2f}  {r['rounds']:6d}"
            f"  {cells:30s}  {aa['ratio_cv_pct'] or 0:12.2f}  {aa['max_ratio']:.4f}"
            f"  {r['noise']['median_pct']:6.2f}/{r['noise']['max_pct']:<6.2f}  "
            + "  ".join(f"{aa['inconclusive'][k]}/{aa['comparisons']}" for k in aa["inconclusive"])
            + agree
        )
    print("\nplanted (K padded by zeros): true size = planted/unplanted side by side; detected = share of comparisons")
    print(f"shape  plant          true size (min..max)       measured  detected @{_ths()}   inconclusive @{_ths()}")
    for r in rows:
        for p in r.get("planted", []):
            t = p["true"]
            rate = p["rate"]
            spread = f"({_pct(t['min'] - 1)}..{_pct(t['max'] - 1)})"
            print(
                f"{r['shape']:5d}  {p['plant']:13s} {_pct(t['ratio'] - 1):>7s} {spread:18s}"
                f"  {_pct(p['median_ratio'] - 1):>10s}  "
                + "  ".join(f"{rate[k]:5.2f}" for k in rate)
                + "   "
                + "/".join(str(p["inconclusive"][k]) for k in p["inconclusive"])
            )
        if "smallest_reliable" in r:
            sr = "  ".join(f"@{k}: {_pct(v)}" for k, v in r["smallest_reliable"].items())
            print(f"{r['shape']:5d}  smallest true slowdown detected in >= {RELIABLE:.0%} of comparisons: {sr}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--device", default=None)
    ap.add_argument("--shapes", default="256,1024,4096")
    ap.add_argument("--rounds", "--reruns", type=int, default=10, help="measurements per callable (A and plants)")
    ap.add_argument("--aa-reruns", type=int, default=None, help="accepted for old command lines; see --rounds")
    ap.add_argument("--max-time", type=float, default=0.2, help="time cap per verdict measurement (s)")
    ap.add_argument("--rel-ci", type=float, default=0.002, help="CI stop of verdict measurements (plugin: rel_ci)")
    ap.add_argument("--thresholds", default="0.01,0.02,0.05", help="verdict thresholds the rates are given at")
    ap.add_argument("--noise-threshold", type=float, default=0.02, help="sample on while too noisy for this threshold")
    ap.add_argument("--true-time", type=float, default=0.4, help="time cap per true-size measurement (s)")
    ap.add_argument("--true-reps", type=int, default=3)
    ap.add_argument("--no-agreement", dest="agreement", action="store_false", help="skip the do_bench comparison")
    ap.add_argument("--peak", action="store_true", help="also check the % of peak denominator")
    ap.add_argument("--peak-backends", default="aten", help="compiled kernels to put against the peak")
    ap.add_argument("--deadline", type=float, default=None, help="seconds after start: start no new work")
    ap.add_argument("--mixed", action="store_true", help="mixed plants without CUDA graphs: tests the logic on a CPU")
    ap.add_argument("--dtype", default=None, help="default: the fixture's (bfloat16 where native)")
    ap.add_argument("--cpu-threads", type=int, default=None, help="torch threads while timing on the CPU")
    args = ap.parse_args()
    THRESHOLDS[:] = [float(t) for t in args.thresholds.split(",") if t]

    import torch

    from pytest_gemmguard.bench import baseline, fixture
    from pytest_gemmguard.bench.timing import TimingOptions
    from pytest_gemmguard.compile.compiler import Compiler

    if args.cpu_threads:  # for the whole run: Dynamo guards on the thread count
        torch.set_num_threads(args.cpu_threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = args.dtype or fixture.default_dtype(device)
    deadline = STARTED + (args.deadline if args.deadline else 1e9)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "timing_check.jsonl"), "w")
    fp = baseline.fingerprint(device)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    log.write(json.dumps({"fingerprint": fp, "date": when, "argv": sys.argv}) + "\n")
    compiler = Compiler()
    compiler.activate()
    from pytest_gemmguard.bench.verdict import noise_target

    opts = TimingOptions(
        max_time_s=args.max_time,
        rel_ci=args.rel_ci,
        cuda_graph="auto",
        cpu_threads=args.cpu_threads,
        noise_target=noise_target(args.noise_threshold, ALPHA) if args.noise_threshold > 0 else None,
    )
    peak_backends = [b for b in args.peak_backends.split(",") if b]
    peak, ctx = None, None
    if args.peak:  # the library peak and aten first (cheap); slow-compiling backends after the shapes
        peak, ctx = peak_check(device, dtype)
        peak_kernels(peak, ctx, device, dtype, [b for b in peak_backends if b == "aten"], compiler, deadline)
    shapes = [int(s) for s in args.shapes.split(",") if s]
    late = [b for b in peak_backends if b != "aten"] if args.peak else []
    reserve = 35.0 * len(late)  # a Triton max-autotune compile of 4096^3 took ~13 s plus timing on the H200
    rows = []
    for i, shape in enumerate(shapes):
        now = time.monotonic()
        if now > deadline - reserve:
            rows.append({"shape": shape, "skipped": "deadline"})
            continue
        until = now + (deadline - reserve - now) / (len(shapes) - i)  # an equal share of what is left
        row = check_shape(shape, dtype, device, opts, args, compiler, until)
        log.write(json.dumps(row) + "\n")
        log.flush()
        rows.append(row)
        torch._dynamo.reset()
    if late:
        peak_kernels(peak, ctx, device, dtype, late, compiler, deadline)
    if peak:
        log.write(json.dumps({"peak": peak}) + "\n")
    log.close()
    print_tables(fp, dtype, args, peak, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
