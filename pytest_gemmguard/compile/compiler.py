"""Compile a function through exactly one Inductor GEMM backend, and prove which kernels ran.

`Compiler.compile(backend, fn, inputs)` returns a `CompiledGemm`. Calling it runs the compiled code
and returns the output together with the provenance of every compiled graph that ran *during that
call*, so a verdict never rests on a graph compiled for some other input.

Reuse across Hypothesis examples is left to Dynamo's own cache and guards: the same function object
compiled with the same (long-lived) backend object hits Dynamo's cache exactly when its guards say the
compiled code is valid for the new inputs (shapes, strides, dtypes), and recompiles otherwise. Frozen
weights (the CPP backend) are graph constants, which guards do not cover, so those compiles are keyed
by the weights' content (frozen.py) instead.

One backend is active at a time (`use`): switching takes the previous backend's process changes out
(isolation.py) and undoes its `prepare`, so `--gemm-backends=all` gives each backend the verdicts it
gets alone, whatever ran before it.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._compat import inductor
from ..backends import Backend
from ..backends.provenance import GraphProvenance, attribute, count_gemm_nodes, no_own_kernel_reason, parse_launches
from ..errors import BackendCrashed, CompileTimeout, Unsupported
from . import candidates, isolation
from .frozen import content_key, frozen_module
from .timeout import time_limit

# Recompiling for every new shape is the point in static mode: never let Dynamo give up and run eager.
RECOMPILE_LIMIT = 100_000


@dataclass
class CallRecord:
    """What happened during one call of a compiled function."""

    graphs: list[GraphProvenance] = field(default_factory=list)
    compiled: int = 0  # graphs compiled (not reused) during the call
    compile_s: float = 0.0


class _Recorder(threading.local):
    def __init__(self) -> None:
        self.current: CallRecord | None = None


_recorder = _Recorder()


# What a kernels-only cache (--gemm-kernel-cache) turns off: every cache that keeps a decision (the FX graph
# cache holds a graph with its autotune winner, AOTAutograd's cache the same one level up, the autotune-result
# cache the winners and tuned configs). What stays is keyed by generated source: C++/CUDA libraries and
# Triton binaries, so a second run rebuilds nothing and still measures and picks as a first run does.
FRESH_DECISIONS = {"fx_graph_cache": False, "autotune_local_cache": False}


class _InductorThrough:
    """A Dynamo backend: Inductor restricted to one GEMM backend, wrapping each graph with provenance."""

    def __init__(self, backend: Backend, claimers: dict[str, Callable], kernels_only: bool = False) -> None:
        self.backend = backend
        self.claimers = claimers
        self.kernels_only = kernels_only

    def __call__(self, gm, example_inputs):
        compile_fx = inductor.compile_fx()

        started = time.perf_counter()
        # Every autotune candidate is judged while the graph compiles (when run/check.py asks, for its case's
        # dtype), on the graph's real inputs where its GEMMs read them (candidates.py).
        dtype = candidates.judging_dtype()
        with (
            inductor.captured_output_code() as codes,
            candidates.graph_inputs(example_inputs),
            candidates.watch(dtype, enabled=dtype is not None) as seen,
            inductor.patched_config(FRESH_DECISIONS if self.kernels_only else {}),
            inductor.quiet_compile(),
        ):
            compiled = compile_fx(gm, example_inputs, config_patches=self.backend.inductor_options())
        code = _graph_code(codes)
        launches = parse_launches(code)
        owners = attribute(launches, self.claimers, prefer=self.backend.name)
        prov = GraphProvenance(count_gemm_nodes(gm), launches, owners, code, tuple(seen), candidates.judging_owner())
        record = _recorder.current
        if record is not None:
            record.compiled += 1
            record.compile_s += time.perf_counter() - started

        def run(*args):
            if _recorder.current is not None:
                _recorder.current.graphs.append(prov)
            return compiled(*args)

        return run


_BENCHMARK_MODULE = re.compile(r"^\s+benchmark_\w+(?:, \w+)* = args$", re.M)


def _graph_code(codes: list[str]) -> str:
    """The graph's own wrapper code. While autotuning, Inductor also saves the code of subgraphs it
    compiles only to benchmark a choice (decompose-K: buffers named benchmark_*); those never run."""
    return "\n".join(c for c in codes if not _BENCHMARK_MODULE.search(c))


@dataclass
class CompiledGemm:
    """A function compiled through one backend; calling it returns (output, CallRecord)."""

    backend: Backend
    dynamic: bool
    _call: Callable[..., Any]
    _runtime_positions: tuple[int, ...]
    _compiler: Compiler
    timeout_s: float | None = None  # None: the compiler's own limit

    def __call__(self, *inputs) -> tuple[Any, CallRecord]:
        runtime = [inputs[i] for i in self._runtime_positions]
        return self._compiler._run(self.backend, self._call, runtime, self.timeout_s)

    @contextlib.contextmanager
    def hot(self, inputs: Sequence[Any]) -> Iterator[Callable[[], Any]]:
        """For timing: a zero-argument callable that runs the compiled code on `inputs` without the
        per-call bookkeeping, under the options it was compiled with. Raises on exit if a call
        recompiled: the timed code would then not be the code that was checked."""
        runtime = [inputs[i] for i in self._runtime_positions]
        call = self._call
        record = CallRecord()
        self._compiler.use(self.backend)
        with _dynamo_limits(), inductor.patched_config(self.backend.inductor_options()), torch.no_grad():
            _recorder.current = record
            try:
                yield lambda: call(*runtime)
            finally:
                _recorder.current = None
        if record.compiled:
            raise RuntimeError(f"gemmguard: {self.backend.name} recompiled while being timed; timings discarded")


class Compiler:
    """One per test session: owns the isolated cache directory and the long-lived Dynamo backends.

    Nothing happens on the machine until the first compile: the cache directory is made and the
    environment pointed at it then (`activate`), so a session that runs no GEMM test leaves no trace."""

    def __init__(
        self, cache_dir: str | None = None, timeout_s: float = 600.0, dynamic: bool = False, kernels_only: bool = False
    ) -> None:
        self.timeout_s = timeout_s
        self.dynamic = dynamic
        self.kernels_only = kernels_only  # cache_dir keeps kernels only: see FRESH_DECISIONS
        self._own_dir = cache_dir is None
        self.cache_dir: str | None = cache_dir
        self._saved_env: dict[str, str | None] = {}
        self._headers_back: Callable[[], None] = lambda: None  # undoes the move of the precompiled headers
        self._active = False
        self._dynamo_backends: dict[str, _InductorThrough] = {}
        self._frozen: dict[tuple, Callable] = {}
        self._prepared: dict[str, Callable[[], None] | None] = {}  # backend -> undo of its prepare()
        self._warmed: set[str] = set()  # backends whose warm_up this process has started
        self._warming: threading.Thread | None = None  # a warm_up still running (see warm)
        self._current: str | None = None  # the backend whose process changes are in place (see use)
        self._baseline: isolation.Snapshot | None = None  # the process before any backend's use
        self._footprints: dict[str, isolation.Footprint] = {}  # what each inactive backend changed
        self._prepare_env: dict[str, set[str]] = {}  # variables each active backend's prepare changed
        self.stats = {"compiles": 0, "reused_calls": 0, "compile_s": 0.0}

    # The user's own Inductor/Triton caches are never read or written: point both at our directory.
    def activate(self) -> None:
        if self._active:
            return
        if self.cache_dir is None:
            self.cache_dir = tempfile.mkdtemp(prefix="gemmguard-inductor-")
        os.makedirs(self.cache_dir, exist_ok=True)
        # kernels/cute_gemm.py keeps its compiled variants under GEMMGUARD_CUTE_CACHE_DIR: the same policy
        for var, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"),
                         ("GEMMGUARD_CUTE_CACHE_DIR", "cute_gemm")):  # fmt: skip
            if var == "GEMMGUARD_CUTE_CACHE_DIR" and os.environ.get(var, "").lower() == "off":
                continue  # the user's "no disk cache" holds under gemmguard too
            self._saved_env[var] = os.environ.get(var)
            os.environ[var] = os.path.join(self.cache_dir, sub)
        # Inductor's precompiled C++ headers ignore TORCHINDUCTOR_CACHE_DIR (_compat/inductor.py): moved too.
        self._headers_back = inductor.move_precompiled_headers(os.path.join(self.cache_dir, "precompiled_headers"))
        self._active = True

    def use(self, backend: Backend | None) -> None:
        """Make `backend` the active one (None: none, the process as the session found it): the previous
        backend's `prepare` is undone and what its use changed (isolation.Footprint) is taken out; this
        one's footprint, if it ran before, is put back (the same module objects) and it is prepared."""
        if self._warming is not None:  # never switch backends while a warm_up imports (isolation.py)
            self.settle()
        name = backend.name if backend is not None else None
        if name == self._current:
            return
        if self._baseline is None:
            if backend is None:
                return  # no backend ever ran: nothing to take out
            self.activate()  # the baseline holds gemmguard's own cache directories, which are no backend's doing
            self._baseline = isolation.take()
        if self._current is not None:
            footprint = isolation.capture(self._baseline, self._prepare_env.pop(self._current, ()))
            undo = self._prepared.pop(self._current, None)
            if undo is not None:
                undo()
            footprint.remove(self._baseline)
            self._footprints[self._current] = footprint
            self._current = None
        if backend is not None:
            env = dict(os.environ)
            footprint = self._footprints.pop(backend.name, None)
            if footprint is not None:  # first, so that its prepare finds the process as it left it
                footprint.apply()
            self._prepared[backend.name] = backend.prepare()
            self._prepare_env[backend.name] = {k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)}
            self._current = backend.name

    def warm(self, backend: Backend) -> bool:
        """Start `backend`'s one-time setup (Backend.warm_up) in a thread, once per process, with the backend in
        use, so what it imports is that backend's (isolation.py). Whatever uses the compiler next waits for it
        first (settle): nothing switches backends or compiles beside it. True when a setup started."""
        setup = getattr(backend, "warm_up", lambda: None)() if backend.name not in self._warmed else None
        if setup is None:
            return False
        self._warmed.add(backend.name)
        self.activate()
        self.use(backend)

        def run() -> None:
            with contextlib.suppress(Exception):  # the compile meets the same failure and reports it
                setup()

        self._warming = threading.Thread(target=run, name=f"gemmguard-warm-{backend.name}", daemon=True)
        self._warming.start()
        return True

    def settle(self) -> float:
        """Wait for a warm_up still running (at most the compile time limit); returns the seconds waited."""
        thread, self._warming = self._warming, None
        if thread is None:
            return 0.0
        started = time.perf_counter()
        thread.join(self.timeout_s or None)
        if thread.is_alive():
            raise CompileTimeout(f"a backend's one-time setup (warm_up) ran past {self.timeout_s:.0f} s")
        return time.perf_counter() - started

    def deactivate(self) -> None:
        with contextlib.suppress(CompileTimeout):  # a setup still hung at the end: its daemon thread dies with us
            self.settle()
        self.use(None)
        self._footprints.clear()
        self._baseline = None
        for var, old in self._saved_env.items():
            if old is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = old
        self._saved_env.clear()
        self._headers_back()
        if self._own_dir and self.cache_dir is not None:
            import shutil

            shutil.rmtree(self.cache_dir, ignore_errors=True)
        self._active = False

    def _claimers(self) -> dict[str, Callable]:
        from .. import backends

        return {name: backends.get(name).claims for name in backends.names()}

    def compile(
        self, backend: Backend, fn: Callable, inputs: Sequence[Any], weight_positions: Sequence[int] = ()
    ) -> CompiledGemm:
        """Prepare `fn` for compiling through `backend` (the compile itself happens on first call)."""
        self.activate()
        self.use(backend)
        n = len(inputs)
        if backend.freezes_weights and weight_positions:
            frozen = {i: inputs[i] for i in weight_positions}
            key = (backend.name, fn, self.dynamic, content_key(frozen.values()))
            if key not in self._frozen:
                module = frozen_module(fn, n, frozen)
                # A fresh Dynamo backend per module: Dynamo never shares compiled code across
                # backends, so constants frozen for one weight can never serve another.
                dyn_backend = _InductorThrough(backend, self._claimers(), self.kernels_only)
                self._frozen[key] = torch.compile(module, backend=dyn_backend, dynamic=self.dynamic)
            runtime = tuple(i for i in range(n) if i not in frozen)
            return CompiledGemm(backend, self.dynamic, self._frozen[key], runtime, self)
        if backend.name not in self._dynamo_backends:
            self._dynamo_backends[backend.name] = _InductorThrough(backend, self._claimers(), self.kernels_only)
        compiled = torch.compile(fn, backend=self._dynamo_backends[backend.name], dynamic=self.dynamic)
        return CompiledGemm(backend, self.dynamic, compiled, tuple(range(n)), self)

    def compile_fresh(
        self,
        backend: Backend,
        fn: Callable,
        inputs: Sequence[Any],
        weight_positions: Sequence[int] = (),
        dynamic: bool | None = None,
    ) -> CompiledGemm:
        """`compile`, never served by an earlier compile: a Dynamo backend of its own. Inside
        `inductor.patched_config({"fx_graph_cache": False})` no cache below Dynamo answers either: the graph is lowered
        again (crosscheck/confirm.py). `dynamic` overrides the session's shapes (crosscheck/sizes.py)."""
        self.activate()
        self.use(backend)
        n, dynamic = len(inputs), self.dynamic if dynamic is None else dynamic
        dyn_backend = _InductorThrough(backend, self._claimers(), self.kernels_only)
        if backend.freezes_weights and weight_positions:
            frozen = {i: inputs[i] for i in weight_positions}
            module = frozen_module(fn, n, frozen)
            runtime = tuple(i for i in range(n) if i not in frozen)
            compiled = torch.compile(module, backend=dyn_backend, dynamic=dynamic)
            return CompiledGemm(backend, dynamic, compiled, runtime, self)
        compiled = torch.compile(fn, backend=dyn_backend, dynamic=dynamic)
        return CompiledGemm(backend, dynamic, compiled, tuple(range(n)), self)

    def _run(
        self, backend: Backend, call: Callable, runtime: list, timeout_s: float | None = None
    ) -> tuple[Any, CallRecord]:
        self.use(backend)
        record = CallRecord()
        _recorder.current = record
        try:
            with (
                _dynamo_limits(),
                inductor.patched_config(backend.inductor_options()),
                torch.no_grad(),
                time_limit(self.timeout_s if timeout_s is None else timeout_s, backend.name),
            ):
                out = call(*runtime)
        finally:  # a compile that raised took its time too
            _recorder.current = None
            self.stats["compiles"] += record.compiled
            self.stats["compile_s"] += record.compile_s
        if record.compiled == 0:
            self.stats["reused_calls"] += 1
        return out, record


def run_checked(compiled: CompiledGemm, inputs: Sequence[Any]) -> tuple[Any, CallRecord]:
    """Run and insist on provenance: raise Unsupported unless the backend's own kernels did the GEMMs.

    What the backend raises is classified here, once: a timeout stays a timeout; no valid choice, or a
    route's kernel refusing the operands, is Unsupported; anything else is BackendCrashed (the case
    fails with the exception, at once: its size has nothing to do with it)."""
    # A third-party backend need not subclass Backend: the two optional methods are looked up.
    getattr(compiled.backend, "forget_refusals", lambda: None)()
    try:
        out, record = compiled(*inputs)
    except Exception as exc:
        # Dynamo and Inductor wrap what goes wrong inside them; look through the wrappers.
        chain = list(_causes(exc))
        timeout = next((e for e in chain if isinstance(e, CompileTimeout)), None)
        if timeout is not None:
            raise timeout from None
        refused = next((e for e in chain if isinstance(e, Unsupported)), None)
        if refused is not None:  # a route's kernel refused the operands at run time
            raise Unsupported(compiled.backend.name, refused.reason) from None
        if inductor.is_no_valid_choices(chain):
            reason, settled = "Inductor found no valid choice (NoValidChoicesError)", inductor.no_choice_existed(chain)
            raise Unsupported(compiled.backend.name, reason, settled=settled, no_choice=True) from None
        raise BackendCrashed(compiled.backend.name, chain[-1]) from exc
    reason = no_own_kernel_reason(record.graphs, compiled.backend.name)
    if reason is not None:
        why = getattr(compiled.backend, "refusals", list)()
        if why:
            reason += f"; its kernel refused: {'; '.join(why)}"
        raise Unsupported(compiled.backend.name, reason)
    return out, record


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


@contextlib.contextmanager
def _dynamo_limits() -> Iterator[None]:
    import torch._dynamo.config as dc

    patch = {k: RECOMPILE_LIMIT for k in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit")
             if hasattr(dc, k)}  # fmt: skip
    with dc.patch(**patch), inductor.trace_log_kept_from_pytest():  # and torch's trace records out of pytest's log
        yield
