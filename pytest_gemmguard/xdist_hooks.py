"""The checking half's pytest-xdist hooks (optional: pytest calls them only where pytest-xdist is installed): a GPU
for each worker, and one draw across workers. plugin.py imports them, so they are its hooks; they live here so
that the plugin module reads as the run's own hooks."""

from __future__ import annotations

from typing import Any

import pytest

from . import _state
from .errors import GemmUsageError


def _gpu_plan(config: pytest.Config) -> list:
    """The GPUs the workers get (--gemm-gpus; gpus.py), worked out once per controller, torch-free."""
    from . import gpus

    state = _state.ensure(config)
    if state.gpus is None:
        try:
            state.gpus = gpus.plan(state.settings["gpus"])
        except GemmUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    return state.gpus


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` on a machine with GPUs: one worker per GPU (the cores, xdist's own answer, otherwise, and
    whenever PYTEST_XDIST_AUTO_NUM_WORKERS says)."""
    import os

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(_gpu_plan(config)) or None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list) -> None:
    """Give each local worker its GPU in its environment, before its interpreter starts importing (a
    spec the user gave its own CUDA_VISIBLE_DEVICES, or a remote one, is left as it is)."""
    from . import gpus

    plan = _gpu_plan(config)
    given = []
    for spec in specs:
        gpu = gpus.assign(getattr(spec, "id", None), plan)
        if gpu is None or not getattr(spec, "popen", False) or "CUDA_VISIBLE_DEVICES" in spec.env:
            continue
        spec.env.update(gpus.worker_env(gpu))
        given.append(f"{spec.id} -> {gpu.label()}")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if given and reporter is not None:
        reporter.write_line(f"gemmguard: one GPU per worker (--gemm-gpus): {', '.join(given)}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: each worker draws with the controller's seed (a record, or a base's, needs one draw)."""
    state = _state.get(node.config)
    if state is not None and state.settings["seed"] is not None:
        node.workerinput["gemmguard_seed"] = state.settings["seed"]
