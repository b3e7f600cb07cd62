"""Calibrate the bound of a test's own function (`gemm.check(fn)`, pytest_gemmguard/oracle/function.py) on the
functions users write around a GEMM, compiled the way gemmguard compiles them.

For each function, dtype and backend, N cases with fresh seeds (`--seed`, default: from the clock) are run
through gemmguard's own compile path: `compile.Compiler` (Inductor under max-autotune, restricted to the one
backend, `max_autotune_gemm_backends = ATEN` or `TRITON`), `compile.run_checked` (provenance: the backend's
own kernels did the GEMMs, else the case is counted unsupported) and `precision.math_precision` (TF32 only for
tf32, no half-precision reductions). Each output is judged by `oracle.judge` against `oracle.function.bound`.

Cheap per case: the cases of one dtype share `--shapes` static shapes, each in turn with every `--layouts`
storage of x and the weights (contiguous, transposed, noncontiguous, offset, as gemmguard's cases store them):
one compile per shape, layout and backend, and the functions share the GEMM shapes, so Inductor's autotune cache
answers after the first; with `--dynamic` one dynamic-shape compile serves every drawn shape. The float64 bounds are
computed once per case, shared by the backends, in `--jobs` CPU processes while nothing else waits on them.
Half of the cases with a bias or a residual get one that cancels the product (bias ~ -(x @ w.T) on one row,
the residual on every element), where a kernel that stores the product before adding errs most.

Planted defects, on the same cases and bounds (eager, on the CPU; backend-independent): a lost slice of K
(the first K/16 columns of x zeroed, at least one), partial sums kept in bfloat16 (16 elements of K at a time:
counted where K >= 256, a single chunk being exact), one wrong element (+ 0.25 * (1 + |y|)). The table gives
how many were caught (over the bound).

    PYTHONPATH=$PWD python3 scripts/calibrate_fn_bound.py --device cuda --cases 50 --backends aten triton

Columns: cases run, unsupported, over the bound, max ratio (error / bound), over where eager PyTorch is over
too on the same inputs, and the worst case (M x N x K, layout, case seed, whether it cancelled), which
`--seed RUN_SEED --only CASE_SEED --functions NAME --dtypes DTYPE` runs again. Then the GEMM kernels each
backend ran, and the planted defects caught. `--out FILE` writes every case as a JSON line. Exit status 1
when any case is over the bound.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch

F = torch.nn.functional


# Every function takes (x, w, extra): x (M, K), w (N, K) as nn.Linear keeps it, and extra as FUNCTIONS says.
def linear_relu(x, w, bias):
    return torch.relu(F.linear(x, w, bias))


def linear_gelu(x, w, bias):
    return F.gelu(F.linear(x, w, bias))


def addmm_relu(x, w, bias):  # the H100 user test that failed on aten (issue 37)
    return torch.relu(torch.addmm(bias, x, w.t()))


def gelu_of_linear(x, w, _unused):
    return F.gelu(F.linear(x, w))


def residual(x, w, r):
    return x @ w.t() + r


def gated_silu(x, w1, w2):
    return F.silu(x @ w1.t()) * (x @ w2.t())


def softmax_of_matmul(x, w, _unused):
    return torch.softmax(x @ w.t() / math.sqrt(x.shape[-1]), dim=-1)


# name: (function, what its third input is: "bias" (N,), "residual" (M, N), "weight" (N, K) or "none")
FUNCTIONS = {
    "linear+relu": (linear_relu, "bias"),
    "linear+gelu": (linear_gelu, "bias"),
    "addmm+relu": (addmm_relu, "bias"),
    "gelu(linear)": (gelu_of_linear, "none"),
    "residual": (residual, "residual"),
    "gated silu": (gated_silu, "weight"),
    "softmax(mm)": (softmax_of_matmul, "none"),
}
STORAGE = {"float16": torch.float16, "bfloat16": torch.bfloat16, "tf32": torch.float32, "float32": torch.float32}
K_CYCLE = (1024, 64, 7, 300, 1, 2048, 33, 512)


def draw_shapes(rng: random.Random, count: int, first: int = 0) -> list[tuple[int, int, int]]:
    """`count` (M, N, K): M up to 64, N 2 to 96, K from a cycle that starts large (the accumulation defect needs
    K >= 256) and takes in K = 1 and odd sizes."""
    return [(rng.randint(1, 64), rng.randint(2, 96), K_CYCLE[(first + i) % len(K_CYCLE)]) for i in range(count)]


def make_inputs(name: str, dtype: str, shape: tuple[int, int, int], seed: int, cancel: bool) -> list[torch.Tensor]:
    """The case's inputs on the CPU, in its storage dtype, from its seed alone."""
    m, n, k = shape
    g = torch.Generator().manual_seed(seed)
    store = STORAGE[dtype]
    x = torch.randn(m, k, generator=g).to(store)
    w = torch.randn(n, k, generator=g).to(store)
    kind = FUNCTIONS[name][1]
    product = x.double() @ w.double().t()
    noise = 1 + 2.0**-6 * torch.randn(m, n, generator=g, dtype=torch.float64)
    if kind == "bias":
        row = int(torch.randint(m, (1,), generator=g))
        extra = (-product[row] * noise[row]).to(store) if cancel else torch.randn(n, generator=g).to(store)
    elif kind == "residual":
        extra = (-product * noise).to(store) if cancel else torch.randn(m, n, generator=g).to(store)
    elif kind == "weight":
        extra = torch.randn(n, k, generator=g).to(store)
    else:
        extra = torch.zeros(1, dtype=store)
    return [x, w, extra]


def place(inputs: list[torch.Tensor], layout: str, kind: str, device: str) -> list[torch.Tensor]:
    """The inputs on `device`, x and the weights stored as `layout` says (as gemmguard's cases store A and B):
    contiguous; transposed (column-major); noncontiguous (every other column of a wider buffer); offset (three
    elements into their storage). The values are the same, so the case's bound is too."""

    def store(t: torch.Tensor) -> torch.Tensor:
        t = t.to(device)
        if layout == "transposed":
            return t.t().contiguous().t()
        if layout == "noncontiguous":
            wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=device)
            wide[..., ::2] = t
            return wide[..., ::2]
        if layout == "offset":
            out = torch.zeros(t.numel() + 3, dtype=t.dtype, device=device)[3:].view(t.shape)
            return out.copy_(t)
        return t

    x, w, extra = inputs
    return [store(x), store(w), store(extra) if kind == "weight" else extra.to(device)]


LAYOUTS = ("contiguous", "transposed", "noncontiguous", "offset")


class _AccumulateInBf16(torch.overrides.TorchFunctionMode):
    """A planted defect: every GEMM of fn keeps its partial sums in bfloat16, 16 elements of K at a time."""

    MATMULS = (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm)

    @staticmethod
    def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        acc = torch.zeros(*a.shape[:-1], b.shape[-1], dtype=torch.bfloat16)
        for start in range(0, a.shape[-1], 16):
            acc = (acc.float() + a[..., start : start + 16].float() @ b[..., start : start + 16, :].float()).bfloat16()
        return acc.float()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.MATMULS:
            a, b = args[0], args[1]
            return self.product(a, b).to(a.dtype)
        if func is F.linear:
            x, w = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            y = self.product(x, w.t())
            return (y if bias is None else y + bias.float()).to(x.dtype)
        if func is torch.addmm:
            bias, a, b = args[:3]
            return (self.product(a, b) + bias.float()).to(a.dtype)
        return func(*args, **kwargs)


def _ratio(out: torch.Tensor, expected: torch.Tensor, tol: torch.Tensor) -> float:
    from pytest_gemmguard import oracle

    return oracle.judge(out, expected, tol, out.dtype).max_ratio


def bound_job(job: tuple) -> dict:
    """In a worker: the case's float64 reference and bound, and the ratios of the planted defects."""
    from pytest_gemmguard.oracle import function as fn_tolerance

    name, dtype, shape, seed, cancel, _layout = job
    fn = FUNCTIONS[name][0]
    x, w, extra = inputs = make_inputs(name, dtype, shape, seed, cancel)
    with torch.no_grad():
        out_dtype = fn(*inputs).dtype
        expected, tol = fn_tolerance.bound(fn, inputs, dtype, out_dtype, lambda: torch.zeros(()))
        lost = x.clone()
        lost[:, : max(1, shape[2] // 16)] = 0
        defects = {"lost K": _ratio(fn(lost, w, extra), expected, tol)}
        if shape[2] >= 256:
            with _AccumulateInBf16():
                defects["bf16 acc"] = _ratio(fn(*inputs), expected, tol)
        wrong = fn(*inputs).clone()
        gen = torch.Generator().manual_seed(seed)
        at = tuple(int(torch.randint(d, (1,), generator=gen)) for d in wrong.shape)
        wrong[at] += 0.25 * (1 + wrong[at].abs())
        defects["wrong element"] = _ratio(wrong, expected, tol)
    return {"expected": expected, "tol": tol, "out_dtype": out_dtype, "defects": defects}


def _init_worker() -> None:
    torch.set_num_threads(1)


def _since(started: float) -> str:
    return f"{time.perf_counter() - started:.0f} s"


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def calibrate(args: argparse.Namespace) -> list[dict]:
    from pytest_gemmguard import backends
    from pytest_gemmguard.compile.compiler import Compiler

    rows: list[dict] = []
    compiler = Compiler(timeout_s=args.compile_timeout, dynamic=args.dynamic)
    live = []
    for name in args.backends:
        probe = backends.probe(name)
        if probe.available:
            live.append(name)
        else:
            print(f"# backend {name} unavailable here: {probe.reason}")
    out_file = open(args.out, "w") if args.out else None
    groups = [(dtype, name, _cases(args, dtype, name)) for dtype in _dtypes(args) for name in args.functions]
    groups = [g for g in groups if g[2]]
    # Spawned, not forked: the parent may hold a CUDA context. The next group's bounds are computed while this
    # group's cases run through the backends.
    pool = ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker)
    try:
        ahead = [pool.submit(bound_job, c) for c in groups[0][2]] if groups else []
        for index, (dtype, name, cases) in enumerate(groups):
            started, futures, bounds = time.perf_counter(), ahead, []
            ahead = [pool.submit(bound_job, c) for c in groups[index + 1][2]] if index + 1 < len(groups) else []
            for i, future in enumerate(futures):
                bounds.append(future.result())
                if (i + 1) % max(50, len(cases) // 4) == 0:
                    _progress(f"  {name} {dtype}: bounds {i + 1}/{len(cases)} ({_since(started)})")
            rows.append(_defect_row(name, dtype, bounds, cases))
            for backend_name in live:
                backend = backends.get(backend_name)
                rows.append(_run_backend(args, compiler, backend, name, dtype, cases, bounds, out_file))
                _progress(_format(rows[-1]))
    finally:
        pool.shutdown(cancel_futures=True)
        compiler.deactivate()
        if out_file is not None:
            out_file.close()
    return rows


def _dtypes(args: argparse.Namespace) -> list[str]:
    from pytest_gemmguard.cases.ops import dtype_unsupported

    kept = []
    for dtype in args.dtypes:
        reason = dtype_unsupported(dtype, args.device)
        if reason:
            print(f"# {dtype} skipped on {args.device}: {reason}")
        else:
            kept.append(dtype)
    return kept


def _cases(args: argparse.Namespace, dtype: str, name: str) -> list[tuple]:
    """The cases of one function and dtype: (name, dtype, (M, N, K), seed, cancel), the same for the same --seed
    whichever other functions and dtypes run (so that --only finds its case again)."""
    shapes = draw_shapes(random.Random(f"{args.seed}|{dtype}"), args.shapes)
    rng = random.Random(f"{args.seed}|{dtype}|{name}")
    has_extra = FUNCTIONS[name][1] in ("bias", "residual")
    cases = []
    for i in range(args.cases):
        shape = draw_shapes(rng, 1, i)[0] if args.dynamic else shapes[i % len(shapes)]
        layout = args.layouts[(i // len(shapes)) % len(args.layouts)]
        cases.append((name, dtype, shape, rng.randrange(2**62), has_extra and i % 2 == 1, layout))
    if args.only is not None:
        cases = [c for c in cases if c[3] == args.only]
    return cases


def _defect_row(name: str, dtype: str, bounds: list[dict], cases: list[tuple]) -> dict:
    caught: dict[str, list[int]] = {}
    for result in bounds:
        for defect, ratio in result["defects"].items():
            tally = caught.setdefault(defect, [0, 0])
            tally[0] += ratio > 1
            tally[1] += 1
    return {"kind": "defects", "function": name, "dtype": dtype, "cases": len(cases), "caught": caught}


def _run_backend(args, compiler, backend, name: str, dtype: str, cases: list, bounds: list, out_file) -> dict:
    """Run every case through one backend, compiled as gemmguard compiles, and judge it by its bound."""
    from pytest_gemmguard import oracle
    from pytest_gemmguard.cases.precision import math_precision
    from pytest_gemmguard.compile.compiler import run_checked
    from pytest_gemmguard.errors import BackendCrashed, CompileTimeout, Unsupported

    fn = FUNCTIONS[name][0]
    row = {"kind": "backend", "function": name, "dtype": dtype, "backend": backend.name, "cases": 0,
           "unsupported": 0, "crashed": 0, "over": 0, "over_like_eager": 0, "max_ratio": 0.0, "worst": None,
           "compile_s": 0.0, "first_error": "", "kernels": set()}  # fmt: skip
    started = time.perf_counter()
    compiled = None
    with math_precision(dtype):
        for i, (case, result) in enumerate(zip(cases, bounds, strict=True)):
            _, _, shape, seed, cancel, layout = case
            inputs = place(make_inputs(name, dtype, shape, seed, cancel), layout, FUNCTIONS[name][1], args.device)
            if compiled is None:
                compiled = compiler.compile(backend, fn, inputs)
            try:
                out, record = run_checked(compiled, inputs)
            except Unsupported:
                row["unsupported"] += 1
                continue
            except (BackendCrashed, CompileTimeout) as exc:
                row["crashed"] += 1
                row["first_error"] = row["first_error"] or str(exc).splitlines()[0][:160]
                continue
            row["compile_s"] += record.compile_s
            row["kernels"].update(f"{k} ({b})" for g in record.graphs for k, b in g.owners)
            expected, tol = result["expected"], result["tol"]
            verdict = oracle.judge(out.cpu(), expected, tol, result["out_dtype"])
            row["cases"] += 1
            eager = None
            if not verdict.ok:
                row["over"] += 1
                with torch.no_grad():
                    eager = oracle.judge(fn(*inputs).cpu(), expected, tol, result["out_dtype"]).max_ratio
                row["over_like_eager"] += eager > 1
            if verdict.max_ratio > row["max_ratio"]:
                row["max_ratio"] = verdict.max_ratio
                row["worst"] = f"{'x'.join(map(str, shape))} {layout} seed {seed}{' cancel' if cancel else ''}"
            if out_file is not None:
                out_file.write(json.dumps({"function": name, "dtype": dtype, "backend": backend.name, "shape": shape,
                                           "layout": layout, "seed": seed, "cancel": cancel,
                                           "ratio": verdict.max_ratio, "eager_ratio": eager}) + "\n")  # fmt: skip
            if (i + 1) % max(50, len(cases) // 4) == 0:
                _progress(f"  {name} {dtype} {backend.name}: {i + 1}/{len(cases)} ({_since(started)})")
    return row


def _format(row: dict) -> str:
    if row["kind"] == "defects":
        parts = [f"{d} {c}/{n}" for d, (c, n) in row["caught"].items()]
        return f"{row['function']:13s} {row['dtype']:9s} {'defects':8s} caught: {', '.join(parts)}"
    line = (f"{row['function']:13s} {row['dtype']:9s} {row['backend']:8s} {row['cases']:6d} {row['unsupported']:6d} "
            f"{row['over']:5d} {row['max_ratio']:9.3g} {row['over_like_eager']:6d}  {row['worst'] or '-'}")  # fmt: skip
    if row["crashed"]:
        line += f"  ({row['crashed']} crashed: {row['first_error']})"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtypes", nargs="+", choices=("float16", "bfloat16", "tf32"),
                        default=["float16", "bfloat16", "tf32"])  # fmt: skip
    parser.add_argument("--backends", nargs="+", default=None, help="default: aten triton (cuda), aten (cpu)")
    parser.add_argument("--functions", nargs="+", choices=sorted(FUNCTIONS), default=list(FUNCTIONS))
    parser.add_argument("--cases", type=int, default=20, help="cases per function, dtype and backend")
    parser.add_argument("--shapes", type=int, default=3, help="static shapes per dtype (ignored with --dynamic)")
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS),
                        help="how x and the weights are stored, in turn over the cases (a compile each)")  # fmt: skip
    parser.add_argument("--dynamic", action="store_true", help="one dynamic-shape compile; a shape per case")
    parser.add_argument("--seed", type=int, default=None, help="default: fresh, from the clock (printed)")
    parser.add_argument("--only", type=int, default=None, help="with the run's --seed: rerun the case of this seed")
    # Half the cores: Inductor compiles in parallel processes of its own meanwhile.
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="CPU workers for bounds")
    parser.add_argument("--compile-timeout", type=float, default=600.0)
    parser.add_argument("--out", default=None, help="write every case as a JSON line")
    args = parser.parse_args(argv)
    if args.backends is None:
        args.backends = ["aten", "triton"] if args.device == "cuda" else ["aten"]
    if args.seed is None:
        args.seed = time.time_ns() % 2**31
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    where = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    shapes = "dynamic shapes" if args.dynamic else f"static shapes per dtype: {args.shapes}"
    print(f"# gemm.check(fn) bound calibration: torch {torch.__version__}, {where}, seed {args.seed}, "
          f"{args.cases} cases per function, {shapes}")  # fmt: skip
    started = time.perf_counter()
    rows = calibrate(args)
    print(f"{'function':13s} {'dtype':9s} {'backend':8s} {'cases':>6s} {'unsup':>6s} {'over':>5s} {'max ratio':>9s} "
          f"{'eager+':>6s}  worst")  # fmt: skip
    for row in rows:
        if row["kind"] == "backend":
            print(_format(row))
    print("GEMM kernels that ran (an mm where the function has addmm or a biased linear: the product is stored and")
    print("Inductor's pointwise kernel adds the bias):")
    for row in rows:
        if row["kind"] == "backend":
            print(f"  {row['function']} {row['dtype']} {row['backend']}: {', '.join(sorted(row['kernels'])) or '-'}")
    print("planted defects (caught = over the bound; bf16 acc where K >= 256):")
    for row in rows:
        if row["kind"] == "defects":
            print(_format(row))
    over = sum(r["over"] for r in rows if r["kind"] == "backend")
    print(f"# {time.perf_counter() - started:.0f} s; {over} cases over the bound (eager+: eager PyTorch over it too)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
