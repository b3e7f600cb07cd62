"""Inductor internals gemmguard relies on, in one place (torch 2.11-2.13 tested):

- `GraphLowering.save_output_code`: the hook through which every compiled graph's Python wrapper passes
  (provenance reads it);
- `NoValidChoicesError`, named by type through Dynamo's and Inductor's exception wrappers;
- the CUDA code cache's `compile` classmethod (`CUTLASSCodeCache` or `CUDACodeCache`), wrapped to time nvcc;
- `torch._functorch.config.enable_autograd_cache`, switched off with Inductor's FX graph cache;
- `torch._inductor.config` read and written key by key (`get_config_copy`, dotted `setattr`), for isolation.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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
    try:
        from torch._inductor.exc import NoValidChoicesError
    except ImportError:
        from torch._inductor.select_algorithm import NoValidChoicesError  # noqa: F401
    if missing:
        raise RuntimeError(f"torch {torch.__version__} moved Inductor internals gemmguard uses: {', '.join(missing)}")


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
    import warnings

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
    import warnings

    import torch._inductor.config as config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setattr(config, key, value)
