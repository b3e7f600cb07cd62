"""How good is gemmguard's runtime measurement on this machine? (issue 4)

    python scripts/timing_check.py --out DIR [--device cuda|cpu] [--shapes 4096,1024,256]
        [--aa-reruns 30] [--reruns 10] [--max-time 0.3] [--cpu-threads N]

For each square shape, compiled through the `aten` backend with gemmguard's own compile path:
  1. agreement: gemmguard's median (CUDA events, L2 flush) against a bare `triton.testing.do_bench`
     (return_mode="median") of the same callable, measured alternately 5 times each, and its CUDA-graph
     replay against `do_bench_cudagraph` (GPU only);
  2. A/A: one baseline measurement, then `reruns` fresh measurements of the unchanged callable, each
     compared with the baseline by `stats.compare` (reference-normalised, Mann-Whitney alpha=0.01);
     the false-alarm rate at thresholds 1%, 2%, 5%;
  3. planted slowdowns: the same, with extra work after each call worth 1%, 2%, 3%, 5%, 10%, 100% of the
     median (GPU: `torch.cuda._sleep`, calibrated; CPU: a busy wait), detection rate per threshold.
Logs JSON lines to DIR/timing_check.jsonl and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

THRESHOLDS = (0.01, 0.02, 0.05)
PLANTS = (0.01, 0.02, 0.03, 0.05, 0.10, 1.0)


def _compiled(shape: int, dtype: str, device: str):
    from pytest_gemmguard import backends
    from pytest_gemmguard.cases import GemmCase, build_inputs, case_function
    from pytest_gemmguard.compile import Compiler, run_checked

    case = GemmCase("mm", shape, shape, shape, dtype=dtype)
    backend = backends.get("aten")
    inputs = build_inputs(case, device)
    fn = case_function("mm", "none", dtype)
    compiler = Compiler()
    compiler.activate()
    compiled = compiler.compile(backend, fn, inputs.flat, (1,))
    started = time.perf_counter()
    _, record = run_checked(compiled, inputs.flat)
    return compiled, inputs.flat, fn, time.perf_counter() - started, record


def _planter(device: str, median_s: float):
    """extra(fraction) -> a callable that adds about fraction * median_s of work."""
    if device == "cuda":
        import torch

        cycles = 2_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        per_s = cycles / (start.elapsed_time(end) * 1e-3)

        def extra(fraction: float):
            n = max(1, int(fraction * median_s * per_s))
            return lambda: torch.cuda._sleep(n)

        return extra

    def extra(fraction: float):
        wait = fraction * median_s

        def spin():
            until = time.perf_counter() + wait
            while time.perf_counter() < until:
                pass

        return spin

    return extra


def check_shape(shape: int, dtype: str, device: str, opts, args) -> dict:
    import statistics as st

    from pytest_gemmguard.bench import stats
    from pytest_gemmguard.bench.timing import TimingOptions, time_callable

    compiled, flat, fn, compile_s, _ = _compiled(shape, dtype, device)
    row: dict = {"shape": shape, "dtype": dtype, "compile_s": round(compile_s, 2)}

    def ref():
        return fn(*flat)

    with compiled.hot(flat) as hot:
        base = time_callable(hot, device, ref, opts)
        row.update(method=base.method, median_us=base.summary.median * 1e6, n=base.summary.n)
        row["ci_pct"] = 100 * base.summary.rel_halfwidth
        if device == "cuda":
            import triton.testing

            ours, theirs = [], []
            ev = TimingOptions(max_time_s=args.max_time, rel_ci=0.002, cuda_graph=False)
            for _ in range(5):
                ours.append(time_callable(hot, device, None, ev).summary.median)
                theirs.append(triton.testing.do_bench(hot, return_mode="median") * 1e-3)
            row.update(do_bench_us=st.median(theirs) * 1e6, events_us=st.median(ours) * 1e6)
            row["vs_do_bench"] = st.median(ours) / st.median(theirs)
            # Graph replay against triton's own graph-replay timer (the fair pair for launch-bound calls).
            gr = TimingOptions(max_time_s=args.max_time, rel_ci=0.002, cuda_graph=True)
            ours_g = [time_callable(hot, device, None, gr).summary.median for _ in range(3)]
            theirs_g = [triton.testing.do_bench_cudagraph(hot, return_mode="median") * 1e-3 for _ in range(3)]
            row["vs_do_bench_cudagraph"] = st.median(ours_g) / st.median(theirs_g)
        ref_med = base.ref_summary.median if base.ref_summary else None
        extra = _planter(device, base.summary.median)

        def verdicts(target, reruns):
            hits = dict.fromkeys(THRESHOLDS, 0)
            ratios = []
            for _ in range(reruns):
                t = time_callable(target, device, ref, opts)
                cur_ref = t.ref_summary.median if t.ref_summary else None
                for th in THRESHOLDS:
                    c = stats.compare(t.samples, base.samples, th, 0.01, cur_ref, ref_med)
                    hits[th] += c.regression
                ratios.append(c.ratio)
            return {f"{int(th * 100)}%": hits[th] / reruns for th in THRESHOLDS}, ratios

        row["aa"], aa_ratios = verdicts(hot, args.aa_reruns)
        row["aa_ratio_cv_pct"] = 100 * st.pstdev(aa_ratios) / st.mean(aa_ratios)
        row["aa_max_ratio"] = max(aa_ratios)
        row["planted"] = {}
        for frac in PLANTS:
            work = extra(frac)

            def slowed(h=hot, w=work):
                h()
                w()

            rates, ratios = verdicts(slowed, args.reruns)
            row["planted"][f"{frac * 100:g}%"] = {"detected": rates, "median_ratio": st.median(ratios)}
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--device", default=None)
    ap.add_argument("--shapes", default="4096,1024,256")
    ap.add_argument("--reruns", type=int, default=10, help="measurements per planted slowdown")
    ap.add_argument("--aa-reruns", type=int, default=30, help="A/A measurements")
    ap.add_argument("--max-time", type=float, default=0.3, help="time cap per measurement (s)")
    ap.add_argument("--cpu-threads", type=int, default=None, help="torch threads while timing on the CPU")
    args = ap.parse_args()

    import torch

    from pytest_gemmguard.bench import baseline, fixture
    from pytest_gemmguard.bench.timing import TimingOptions

    if args.cpu_threads:  # for the whole run: Dynamo guards on the thread count
        torch.set_num_threads(args.cpu_threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = fixture.default_dtype(device)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "timing_check.jsonl"), "w")
    fp = baseline.fingerprint(device)
    log.write(json.dumps({"fingerprint": fp, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}) + "\n")
    opts = TimingOptions(max_time_s=args.max_time, rel_ci=0.002, cuda_graph="auto", cpu_threads=args.cpu_threads)
    rows = []
    for shape in [int(s) for s in args.shapes.split(",")]:
        row = check_shape(shape, dtype, device, opts, args)
        log.write(json.dumps(row) + "\n")
        log.flush()
        rows.append(row)
        torch._dynamo.reset()

    print(f"\n{fp.get('gpu') or fp['cpu']}; torch {fp['torch']}; triton {fp.get('triton')}; {dtype}")
    print("shape  method       median us  ±CI%   vs do_bench  vs graph  A/A false alarms @1/2/5%   ratio CV%")
    for r in rows:
        vs = f"{r['vs_do_bench']:.3f}" if "vs_do_bench" in r else "-"
        vg = f"{r['vs_do_bench_cudagraph']:.3f}" if "vs_do_bench_cudagraph" in r else "-"
        aa = "/".join(f"{v:.2f}" for v in r["aa"].values())
        print(
            f"{r['shape']:5d}  {r['method']:11s} {r['median_us']:10.2f}  {r['ci_pct']:5.2f}   {vs:>10s}  {vg:>8s}"
            f"   {aa:>24s}   {r['aa_ratio_cv_pct']:.2f}"
        )
    print("planted slowdown: detection rate at thresholds 1/2/5% (measured ratio)")
    for r in rows:
        cells = [
            f"{k}: {'/'.join(f'{v:.2f}' for v in p['detected'].values())} ({p['median_ratio']:.3f})"
            for k, p in r["planted"].items()
        ]
        print(f"{r['shape']:5d}  " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
