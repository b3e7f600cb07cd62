"""The OpenMP runtimes loaded in this process (GNU libgomp, Intel's libiomp5, LLVM's libomp), through ctypes.

gemmguard needs one thing of them: to make every parallel region run on one thread for a while, without changing
the thread count torch reports. Lowering torch's count (`torch.set_num_threads`) is no use for that: Dynamo guards
on it and recompiles, so the kernel built for the old count never runs at the new one. Setting OpenMP's
max-active-levels to 0 leaves that count alone and gives every parallel region a team of one thread, as a caller
already inside a parallel region, or another library that lowered OpenMP's limits, would."""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from contextlib import contextmanager

# A shared library's file name: libgomp.so.1, libgomp-a34b3233.so.1 (torch's bundled copy), libiomp5.so, libomp.so.
RUNTIME_FILE = re.compile(r"/lib(?:g|i|)omp[^/]*\.so[^/]*$")
MAPS = "/proc/self/maps"


def runtime_paths(maps: str = MAPS) -> list[str]:
    """The OpenMP runtimes mapped into this process (Linux: read from /proc/self/maps); [] where none is, or
    where the system has no /proc."""
    try:
        with open(maps) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    paths = (parts[-1] for parts in (line.split() for line in lines) if len(parts) >= 6)
    return sorted({path for path in paths if RUNTIME_FILE.search(path)})


def _runtimes() -> list[ctypes.CDLL]:
    libs = []
    for path in runtime_paths():
        try:
            lib = ctypes.CDLL(path)
            lib.omp_get_max_active_levels, lib.omp_set_max_active_levels  # noqa: B018 - both must exist
        except (OSError, AttributeError):
            continue
        libs.append(lib)
    return libs


@contextmanager
def one_thread_teams() -> Iterator[int]:
    """Within the block every OpenMP parallel region of this process runs on one thread; yields how many runtimes
    were switched (0: none is loaded, and nothing changed). Restored on the way out."""
    libs = _runtimes()
    saved = [lib.omp_get_max_active_levels() for lib in libs]
    for lib in libs:
        lib.omp_set_max_active_levels(0)
    try:
        yield len(libs)
    finally:
        for lib, levels in zip(libs, saved, strict=True):
            lib.omp_set_max_active_levels(levels)


def check() -> None:
    """Raise RuntimeError where the switch no longer works: torch's OpenMP runtime is loaded, so it must be found,
    switched to teams of one and restored."""
    import sys

    import torch

    if not sys.platform.startswith("linux") or not torch.backends.openmp.is_available():
        return  # runtime_paths() reads Linux's /proc: elsewhere the CPU check runs once, as before
    torch.ones(1).add_(1)  # the runtime is mapped once torch is imported; make sure of it
    libs = _runtimes()
    if not libs:
        raise RuntimeError(f"no OpenMP runtime found in {MAPS} although torch {torch.__version__} uses OpenMP")
    before = [lib.omp_get_max_active_levels() for lib in libs]
    with one_thread_teams():
        inside = [lib.omp_get_max_active_levels() for lib in libs]
    after = [lib.omp_get_max_active_levels() for lib in libs]
    if any(inside) or after != before:
        raise RuntimeError(f"OpenMP's max-active-levels did not switch ({before} -> {inside} -> {after})")
