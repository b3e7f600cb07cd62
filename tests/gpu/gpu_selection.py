"""What the GPU tests share: which GPU backends a run selected (a test of one that was not selected, or is not
available on this machine, skips) and which kernels a compile launched, each with its owning backend."""

from __future__ import annotations

import pytest

from pytest_gemmguard import backends

GPU_BACKENDS = ("aten", "triton", "cutlass", "cutedsl", "cutedsl[quack]")


def skip_unless_gpu_backend(name: str) -> None:
    if name not in GPU_BACKENDS:
        pytest.skip(f"{name} is not a GPU GEMM backend")


def skip_unless_selected(request: pytest.FixtureRequest, name: str) -> None:
    from pytest_gemmguard import _state

    if name not in _state.selected(request.config):
        pytest.skip(f"backend {name} not selected (--gemm-backends)")
    probe = backends.probe(name)
    if not probe.available:
        pytest.skip(f"gemmguard: backend {name} {probe.line()}")


def _describe(owner: str, launch) -> str:
    return backends.get(owner).describe_kernel(launch) if owner in backends.names() else launch.name


def kernels_launched(record) -> list[dict[str, str]]:
    out = []
    for graph in record.graphs:
        owners = dict(graph.owners)
        for launch in graph.launches:
            owner = owners.get(launch.name, "")
            out.append({"name": launch.name, "kind": launch.kind, "owner": owner, "what": _describe(owner, launch)})
    return out
