"""A test's own function, sent to a compile-ahead worker (pool.py) so the worker compiles what the test checks.

`gemm.check(fn)` is usually a lambda written in the test (`lambda a, b: torch.tanh(a @ b)`), which pickle
cannot send: pickle names a function by module and qualified name, and a lambda has no name to find. What a
worker needs is the function's code and the values its code reads, so that is what travels:

- its code object (`marshal`: the worker runs the same interpreter, `sys.executable`);
- each global name the code (and any code nested in it) reads, bound in the test's module, and the values its
  closure cells hold: a module goes by its import name, a function defined inside the test by its own code
  (the same way, a few levels deep), anything else by pickle;
- its default arguments, by pickle.

Anything that cannot go that way (a value pickle refuses, a callable object that is not a plain function) keeps
the function at home: `pack` says why, and the worker compiles the case's own GEMM instead, as before. What
arrives is rebuilt as a plain function over a fresh globals dict: it reads the same values, not the same
objects, so a function that mutates a global of its module behaves differently there; the verdict never
depends on it (the test process compiles and checks the case itself; a worker only fills the caches).
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import importlib
import marshal
import pickle
import types
from collections.abc import Callable, Iterator
from typing import Any

MAX_BYTES = 1 << 20


def pack(fn: Callable[..., Any], _depth: int = 0) -> tuple[dict | None, str]:
    """(what a worker needs to rebuild `fn`, "") or (None, why it cannot travel)."""
    if not isinstance(fn, types.FunctionType):
        return None, f"{type(fn).__name__} is not a plain Python function"
    code = fn.__code__
    try:
        spec = {
            name: _value(fn.__globals__[name], _depth)
            for name in sorted(set(_global_names(code)))
            if name in fn.__globals__  # else a builtin, or a name the code never reaches at run time
        }
        cells = [_value(c.cell_contents, _depth) for c in fn.__closure__ or ()]
        rest = _b64(pickle.dumps((fn.__defaults__, fn.__kwdefaults__)))
    except Exception as exc:  # pickle raises many types (PicklingError, TypeError, AttributeError, ...)
        return None, f"a value it reads cannot be pickled ({type(exc).__name__}: {exc})"
    body = _b64(marshal.dumps(code))
    size = len(body) + len(rest) + len(repr((spec, cells)))
    if size > MAX_BYTES:  # a tensor or model it closes over: copied into every queued job, so it stays home
        return None, f"what it reads takes {size / 2**20:.1f} MiB pickled (at most {MAX_BYTES // 2**20} MiB travel)"
    digest = hashlib.sha1(repr((body, spec, cells, rest)).encode()).hexdigest()[:16]
    return {"code": body, "globals": spec, "cells": cells, "rest": rest, "name": fn.__name__, "digest": digest}, ""


def unpack(payload: dict) -> Callable[..., Any]:
    """The function `pack` described, rebuilt in this process (raises if a module or value cannot be had)."""
    scope: dict[str, Any] = {"__builtins__": builtins}
    scope.update({name: _rebuild(value) for name, value in payload["globals"].items()})
    defaults, kwdefaults = pickle.loads(base64.b64decode(payload["rest"]))
    code = marshal.loads(base64.b64decode(payload["code"]))
    closure = tuple(types.CellType(_rebuild(v)) for v in payload["cells"]) or None
    fn = types.FunctionType(code, scope, payload["name"], defaults, closure)
    fn.__kwdefaults__ = kwdefaults
    return fn


def _value(value: Any, depth: int) -> list:
    """One value the function reads: a module by name, a function defined inside a test (which pickle cannot
    name) by its own code, up to a few levels deep, anything else by pickle (which raises if it cannot)."""
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, types.FunctionType) and "<locals>" in value.__qualname__ and depth < 3:
        inner, why = pack(value, depth + 1)
        if inner is None:
            raise TypeError(f"{value.__qualname__}: {why}")
        return ["function", inner]
    return ["pickle", _b64(pickle.dumps(value))]


def _rebuild(value: list) -> Any:
    how, what = value
    if how == "module":
        return importlib.import_module(what)
    if how == "function":
        return unpack(what)
    return pickle.loads(base64.b64decode(what))


def _global_names(code: types.CodeType) -> Iterator[str]:
    """Every name the code and the code nested in it (inner lambdas, comprehensions) may look up globally;
    a superset (attribute names too), narrowed by what the module actually binds."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
