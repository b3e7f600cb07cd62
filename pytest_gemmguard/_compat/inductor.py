"""Inductor internals gemmguard relies on, in one place (torch 2.11-2.13 tested):

- `GraphLowering.save_output_code`: the hook through which every compiled graph's Python wrapper passes
  (provenance reads it);
- `NoValidChoicesError`, named by type through Dynamo's and Inductor's exception wrappers;
- the CUDA code cache's `compile` classmethod (`CUTLASSCodeCache` or `CUDACodeCache`), wrapped to time nvcc;
- `torch._functorch.config.enable_autograd_cache`, switched off with Inductor's FX graph cache;
- `torch._inductor.config` read and written key by key (`get_config_copy`, dotted `setattr`), for compile/isolation.py.
- autotuning's choices (compile/candidates.py): the algorithm selector's list of preprocessing functions, which
  sees every `ChoiceCaller` of a selection at lowering time (`V.graph.current_node` is the FX node being
  lowered), and `ChoiceCaller.benchmark(*inputs, out=...)`, which in-process autotuning calls once per
  choice with Inductor's example tensors.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

NO_VALID_CHOICES = "NoValidChoicesError"


def check() -> None:
    """Raise RuntimeError naming torch's version when an internal used here has moved."""
    import torch
    from torch._inductor import codecache
    from torch._inductor.graph import GraphLowering

    missing = []
    if not hasattr(GraphLowering, "save_output_code"):  # None until someone hooks it
        missing.append("torch._inductor.graph.GraphLowering.save_output_code")
    if not any("compile" in getattr(codecache, c, type).__dict__ for c in ("CUTLASSCodeCache", "CUDACodeCache")):
        missing.append("torch._inductor.codecache.{CUTLASS,CUDA}CodeCache.compile")
    if not hasattr(torch._functorch.config, "enable_autograd_cache"):
        missing.append("torch._functorch.config.enable_autograd_cache")
    if not hasattr(torch._inductor.config, "get_config_copy"):
        missing.append("torch._inductor.config.get_config_copy")
    from torch._inductor import select_algorithm

    if not hasattr(select_algorithm, "get_algorithm_selector_cache") or not hasattr(
        select_algorithm.get_algorithm_selector_cache(), "preprocessing_fns"
    ):
        missing.append("torch._inductor.select_algorithm.get_algorithm_selector_cache().preprocessing_fns")
    if not hasattr(select_algorithm.ChoiceCaller, "benchmark"):
        missing.append("torch._inductor.select_algorithm.ChoiceCaller.benchmark")
    try:
        from torch._inductor.exc import NoValidChoicesError
    except ImportError:
        from torch._inductor.select_algorithm import NoValidChoicesError  # noqa: F401
    if missing:
        raise RuntimeError(f"torch {torch.__version__} moved Inductor internals gemmguard uses: {', '.join(missing)}")


# Inductor's compile path imports torch.utils.mkldnn (compile_fx -> post_grad -> pre_grad ->
# torch.fx.experimental.optimization), whose ScriptModules torch 2.13 still defines with torch.jit.script_method,
# deprecated in that release: 14 DeprecationWarnings in every run about torch's own code, which no user of
# gemmguard wrote or can change. Only those are silenced, only while gemmguard imports that path (compile_fx).
TORCH_OWN_DEPRECATION = r"`torch\.jit\.script_method` is "

# Inductor's own notices while gemmguard compiles, which no user can act on: TF32 available but off (gemmguard
# turns it off for a float32 case on purpose) and TypedStorage deprecated (Inductor's autotuning calls `.storage()`).
# Seen in a GPU run of README's examples; silenced only inside gemmguard's compile.
INDUCTOR_OWN_NOTICES = ("TensorFloat32 tensor cores for float32 matrix multiplication", "TypedStorage is deprecated")

# cutlass_api, whose kernels Inductor's NVGEMM backend (torch 2.11-2.13) lists and builds, still spells names that
# cutlass-dsl 4.8 deprecated: 134,675 DeprecationWarnings in one GPU run of README's main job (H100). Silenced inside
# gemmguard's compile only, and only where cutlass_api's own code is the caller.
THIRD_PARTY_DEPRECATIONS = r"cutlass_api(\.|$)"


@contextlib.contextmanager
def quiet_compile() -> Iterator[None]:
    with warnings.catch_warnings():
        for message in INDUCTOR_OWN_NOTICES:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=THIRD_PARTY_DEPRECATIONS)
        yield


def compile_fx() -> Callable[..., Any]:
    """Inductor's `compile_fx`, imported with torch's own deprecation warnings of its import (above) silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TORCH_OWN_DEPRECATION, category=DeprecationWarning)
        from torch._inductor.compile_fx import compile_fx as inductor_compile_fx
    return inductor_compile_fx


# Inductor precompiles the C++ headers of its CPU kernels into `codecache._HEADER_DIR`, fixed when codecache is
# imported, from the *default* cache directory ($TMPDIR/torchinductor_<user>): TORCHINDUCTOR_CACHE_DIR does not
# move it, so each run left about 150 MB of .gch files in the user's own Inductor cache. `_precompile_header`
# remembers the paths it returned (functools.cache), so its memory is cleared with each move.
HEADER_DIRS = ("_HEADER_DIR", "_HEADER_LOCK_DIR")


def move_precompiled_headers(directory: str) -> Callable[[], None]:
    """Point Inductor's precompiled C++ headers (and their lock files) at `directory`; returns the undo."""
    from torch._inductor import codecache

    if not all(hasattr(codecache, name) for name in HEADER_DIRS):
        return lambda: None
    old = {name: getattr(codecache, name) for name in HEADER_DIRS}
    forget = getattr(getattr(codecache, "_precompile_header", None), "cache_clear", lambda: None)
    codecache._HEADER_DIR, codecache._HEADER_LOCK_DIR = directory, os.path.join(directory, "locks")
    forget()

    def undo() -> None:
        for name, value in old.items():
            setattr(codecache, name, value)
        forget()

    return undo


# torch's structured trace (what tlparse reads) goes to the logger "torch.__trace": always at DEBUG, never
# propagating, and torch makes its records only while that logger has a handler. pytest's log capture attaches
# its handlers to every logger that does not propagate, so a failing test's captured log held about a hundred
# empty "DEBUG torch.__trace" lines per compile. While gemmguard compiles and runs a case, pytest's handlers are
# taken off that one logger (torch's own, TORCH_TRACE's, and any of the user's stay) and put back after.
TRACE_LOGGER = "torch.__trace"


@contextlib.contextmanager
def trace_log_kept_from_pytest() -> Iterator[None]:
    """Keep torch's structured trace records out of pytest's log capture while the block runs."""
    import logging

    log = logging.getLogger(TRACE_LOGGER)
    taken = [h for h in log.handlers if type(h).__module__.startswith("_pytest.")]
    for handler in taken:
        log.removeHandler(handler)
    try:
        yield
    finally:
        for handler in taken:
            if handler not in log.handlers:
                log.addHandler(handler)


@contextlib.contextmanager
def captured_output_code() -> Iterator[list[str]]:
    """Collect the generated wrapper code of every graph Inductor compiles inside the block."""
    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    previous = GraphLowering.save_output_code
    GraphLowering.save_output_code = staticmethod(codes.append)  # type: ignore[assignment]
    try:
        yield codes
    finally:
        GraphLowering.save_output_code = previous  # type: ignore[assignment]


def is_no_valid_choices(chain: list[BaseException]) -> bool:
    """Whether Inductor gave up for want of a valid choice somewhere in this exception chain (it arrives
    wrapped in Dynamo's and Inductor's own exception types, sometimes only as text)."""
    return any(type(e).__name__ == NO_VALID_CHOICES or NO_VALID_CHOICES in str(e) for e in chain)


def no_choice_existed(chain: list[BaseException]) -> bool:
    """Whether that was for want of any choice at all (the backend's own filter: the same on every run of
    the case), not because the choices offered all failed to compile or benchmark (which a busy machine,
    another process's memory or a flaky build can cause, and another run need not repeat)."""
    return any("No choices exist" in str(e) for e in chain)


@contextlib.contextmanager
def patched_config(options: dict[str, Any]) -> Iterator[None]:
    """Inductor options patched globally (Dynamo reads some, such as `freezing`, while tracing, before
    Inductor's own patches apply). Where they switch the FX graph cache off, AOTAutograd's cache goes too:
    it sits above Inductor's and would serve the same graph."""
    import torch
    import torch._inductor.config as inductor_config

    with contextlib.ExitStack() as stack:
        stack.enter_context(inductor_config.patch(options))
        if options.get("fx_graph_cache") is False:
            stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
        yield


def build_nvgemm_kernel_list() -> None:
    """Build the list of NVGEMM kernels Inductor keeps per process (cutlass_api's manifest) now, where this
    torch has one; its first NVGEMM compile would build it otherwise."""
    try:
        from torch._inductor.codegen.nv_universal_gemm import kernel_cache
    except ImportError:
        return
    build = getattr(kernel_cache, "ensure_cache_initialized", None)
    if build is not None:
        build()


def has_config(key: str) -> bool:
    """Whether this torch's Inductor config has the dotted `key` (option names moved between versions)."""
    import torch._inductor.config as config

    obj: Any = config
    for part in key.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def wrap_cuda_build(wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[[], None] | None:
    """Wrap the CUDA code cache's compile (one nvcc build per call) with `wrap`; returns the undo, or None
    when this torch has no such cache."""
    try:
        from torch._inductor import codecache
    except ImportError:
        return None
    for cls_name in ("CUTLASSCodeCache", "CUDACodeCache"):
        cls = getattr(codecache, cls_name, None)
        if cls is not None and "compile" in cls.__dict__:
            original = cls.__dict__["compile"]
            cls.compile = classmethod(wrap(original.__func__))

            def undo(cls: Any = cls, original: Any = original) -> None:
                cls.compile = original

            return undo
    return None


def config_values() -> dict[str, Any]:
    """Every Inductor config key with its value object (not a copy, so a graph pass compares by identity)."""
    import torch._inductor.config as config

    values = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading a deprecated key warns once; a snapshot is not a use
        for key in config.get_config_copy():
            try:
                values[key] = getattr(config, key)
            except AttributeError:  # hidden keys
                continue
    return values


def set_config(key: str, value: Any) -> None:
    """Set one (dotted) Inductor config key, as `config.patch` does."""
    import torch._inductor.config as config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setattr(config, key, value)


def set_compile_threads(threads: int) -> None:
    """The threads autotuning's precompile runs choices' builds on from now on. Inductor reads
    TORCHINDUCTOR_COMPILE_THREADS once a process (select_algorithm.get_num_workers, cached): the cache is
    dropped so the next autotuning reads it again."""
    import torch._inductor.select_algorithm as select_algorithm

    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(threads)
    cache_clear = getattr(getattr(select_algorithm, "get_num_workers", None), "cache_clear", None)
    if cache_clear is not None:
        cache_clear()


# ---------------------------------------------------------------- autotuning's choices (compile/candidates.py)


@dataclass(frozen=True)
class ChoiceFacts:
    """What a report says about one autotune choice, and how its inputs map to the op's."""

    name: str  # the choice's name: extern_kernels.mm, triton_mm_3, ...
    description: str  # its template and config, as Inductor describes it
    kind: str  # "extern", "triton", "subgraph" (inputs in the op's order), or the class name of another kind


def choice_facts(choice: Any) -> ChoiceFacts:
    from torch._inductor.select_algorithm import ExternKernelCaller, TritonTemplateCaller

    if isinstance(choice, ExternKernelCaller):
        kwargs = ", ".join(f"{k}={v}" for k, v in choice.kwargs.items())
        return ChoiceFacts(choice.choice.call_name(), f"extern kernel{f' ({kwargs})' if kwargs else ''}", "extern")
    if isinstance(choice, TritonTemplateCaller):
        # The name is the template's (triton_mm_persistent_tma_4); the description lists its config.
        return ChoiceFacts(choice.name, f"Triton template config: {choice.description}", "triton")
    kind = "subgraph" if type(choice).__name__ == "SubgraphChoiceCaller" else type(choice).__name__
    return ChoiceFacts(str(getattr(choice, "name", "?")), str(getattr(choice, "description", "") or kind), kind)


def lowered_op(node: Any) -> tuple[str, dict[str, Any]]:
    """The aten op being lowered (`mm`, `addmm`, `_scaled_mm`, ...) and its keyword arguments."""
    target = getattr(node, "target", None)
    name = getattr(getattr(target, "_overloadpacket", None), "__name__", None) or str(target)
    return name, dict(getattr(node, "kwargs", {}) or {})


@contextlib.contextmanager
def _preprocessing(rewrite: Callable[[str, dict[str, Any], list[Any]], list[Any]]) -> Iterator[None]:
    """Inside the block, `rewrite(op, op_kwargs, choices)` sees (and returns) the choices of every autotune
    selection lowered, after the preprocessing functions registered before it."""
    from torch._inductor.select_algorithm import get_algorithm_selector_cache
    from torch._inductor.virtualized import V

    def apply(choices: list[Any]) -> list[Any]:
        op, kwargs = lowered_op(V.graph.current_node)
        return rewrite(op, kwargs, choices)

    fns = get_algorithm_selector_cache().preprocessing_fns
    fns.append(apply)
    try:
        yield
    finally:
        if apply in fns:
            fns.remove(apply)


@contextlib.contextmanager
def watched_choices(on_choices: Callable[[str, dict[str, Any], list[Any]], None]) -> Iterator[None]:
    """Call `on_choices(op, op_kwargs, choices)` for every autotune selection lowered inside the block, after
    the preprocessing functions registered before it (so choices another function adds are seen too)."""

    def see(op: str, kwargs: dict[str, Any], choices: list[Any]) -> list[Any]:
        on_choices(op, kwargs, list(choices))
        return choices

    with _preprocessing(see):
        yield


@contextlib.contextmanager
def only_choices(keep: Callable[[str, Any], bool]) -> Iterator[list[int]]:
    """Inside the block, every autotune selection offering a choice that `keep(op, choice)` accepts is cut down
    to those choices; left with one, Inductor takes it without benchmarking. So a compile picks a given
    candidate (crosscheck/confirm.py). Yields a list that gets, per selection cut, how many choices it kept."""
    cut: list[int] = []

    def narrow(op: str, kwargs: dict[str, Any], choices: list[Any]) -> list[Any]:
        kept = [c for c in choices if keep(op, c)]
        if not kept:
            return choices
        cut.append(len(kept))
        return kept

    with _preprocessing(narrow):
        yield cut


@contextlib.contextmanager
def without_choices(drop: Callable[[str, Any], bool]) -> Iterator[list[int]]:
    """Inside the block, every autotune selection loses the choices `drop(op, choice)` accepts (confirm.blame
    compiles a case with a template's candidates withheld). Yields a list that gets, per selection that lost
    any, how many it lost; a selection that would be left with none keeps them all and records 0."""
    removed: list[int] = []

    def withhold(op: str, kwargs: dict[str, Any], choices: list[Any]) -> list[Any]:
        kept = [c for c in choices if not drop(op, c)]
        if len(kept) == len(choices):
            return choices
        removed.append(len(choices) - len(kept) if kept else 0)
        return kept or choices

    with _preprocessing(withhold):
        yield removed


def graph_input_views(choice: Any) -> list[tuple[int, tuple, tuple, int] | None]:
    """For each input of `choice` (at lowering time): (position among the graph's inputs, size, stride,
    storage offset) where it reads a graph input directly or through a view; None where it reads anything
    else (an intermediate buffer, a constant, a prepacked weight)."""
    from torch._inductor.virtualized import V

    graph = V.graph
    names = list(getattr(graph, "graph_input_names", ()))
    views: list[tuple[int, tuple, tuple, int] | None] = []
    for node in getattr(choice, "input_nodes", ()):
        try:
            name = node.get_name()
            layout = node.get_layout()
            # torch 2.13 calls a size's concrete value an optimization hint; 2.11 a size hint.
            hint = getattr(graph.sizevars, "optimization_hint", None) or graph.sizevars.size_hint
            size, stride = (tuple(int(hint(x)) for x in xs) for xs in (layout.size, layout.stride))
            views.append((names.index(name), size, stride, int(hint(layout.offset))))
        except Exception:  # not a graph input, or a layout without concrete sizes: Inductor's values stay
            views.append(None)
    return views


def on_benchmark(choice: Any, before: Callable[[tuple], Any], after: Callable[[tuple, Any, float, Any], None]) -> None:
    """Around each in-process benchmark of `choice`: `token = before(inputs)`, the benchmark, then
    `after(inputs, out, timing, token)` (an instance attribute over the class's method: only this choice
    object, which lives as long as its selection)."""
    original = choice.benchmark

    def benchmark(*args: Any, out: Any) -> Any:
        token = before(args)
        timing = original(*args, out=out)
        after(args, out, timing, token)
        return timing

    choice.benchmark = benchmark
