import os

import pytest

# The CPU suite runs with both real CPU backends; tests that spawn pytest pass their own options.
os.environ.setdefault("GEMMGUARD_BACKENDS", "aten,cpp")
# Run as a step of a GitHub Actions job (this repository's CI, or act), the suite must not write to that job's
# files: the action's install code appends its venv to $GITHUB_PATH, and a test calling it in-process handed its
# temporary venv to every later step of the job. A test that needs one of these sets its own.
for _job_file in ("GITHUB_PATH", "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"):
    os.environ.pop(_job_file, None)
pytest_plugins = ["pytester"]


TIMING_ALONE = "python -m pytest tests -m timing"


def pytest_configure(config):
    config.addinivalue_line("markers", "act: runs a workflow with act in host mode (leave out with -m 'not act')")
    config.addinivalue_line(
        "markers",
        "slow: builds or installs something, or runs pytest in a fresh process (leave out with -m 'not slow')",
    )
    config.addinivalue_line(
        "markers",
        "timing: asserts on measured time (an A/A comparison green, a planted slowdown red), so it runs alone: "
        f"left out under pytest-xdist (-n), run afterwards with `{TIMING_ALONE}`",
    )


def _under_xdist(config) -> bool:
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


def pytest_report_header(config):
    if _under_xdist(config):
        return f"timing tests left out beside other workers (they measure time): run them alone with `{TIMING_ALONE}`"
    return None


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist: the timing tests go (a test that measures time beside another worker's compiles
    measures that worker: an A/A comparison there went red), and the longest tests (act runs, then fresh
    processes) are handed out first, so no worker is left with one of them at the end while the other idles.
    Every worker sorts the same way, as xdist requires."""
    if not _under_xdist(config):
        return
    timing = [item for item in items if item.get_closest_marker("timing")]
    if timing:
        config.hook.pytest_deselected(items=timing)
    kept = [item for item in items if not item.get_closest_marker("timing")]
    kept.sort(key=lambda item: 0 if item.get_closest_marker("act") else 1 if item.get_closest_marker("slow") else 2)
    items[:] = kept


@pytest.fixture(scope="session", autouse=True)
def _one_kernel_cache(tmp_path_factory):
    """Every gemmguard run of the suite (in-process, in a subprocess, under act) keeps its compiled kernels in one
    directory (--gemm-kernel-cache): each run still lowers and autotunes every graph afresh, but a C++ kernel
    another test already built is loaded, not rebuilt by g++ (most of a CPU compile). A test about the default
    cache, or one that names another, drops the variable (`no_kernel_cache`). GEMMGUARD_KERNEL_CACHE given from
    outside wins."""
    if os.environ.get("GEMMGUARD_KERNEL_CACHE"):
        yield
        return
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one cache for all workers: Inductor writes its entries atomically
        root = root.parent
    (root / "kernels").mkdir(exist_ok=True)
    os.environ["GEMMGUARD_KERNEL_CACHE"] = str(root / "kernels")
    yield
    del os.environ["GEMMGUARD_KERNEL_CACHE"]


@pytest.fixture
def no_kernel_cache(monkeypatch) -> str | None:
    """The run as a user without a kernel cache has it: a fresh Inductor cache, or the one the test names. Returns
    the suite's cache, for a later run of the same test that asserts only outcomes and may name it."""
    suite = os.environ.get("GEMMGUARD_KERNEL_CACHE")
    monkeypatch.delenv("GEMMGUARD_KERNEL_CACHE", raising=False)
    return suite


@pytest.fixture(scope="session", autouse=True)
def _inductor_imported():
    """pytester's in-process runs drop modules first imported inside them, and torch cannot register
    its operator libraries twice (nor can Hypothesis's strategies be two classes at once): import
    everything a compile or a drawn case touches once, out here. gemmguard itself loads lazily (its plugins
    import no torch), so its modules are imported here too."""
    import importlib
    import pkgutil

    import hypothesis.strategies  # noqa: F401
    import torch

    import pytest_gemmguard

    for module in pkgutil.walk_packages(pytest_gemmguard.__path__, "pytest_gemmguard."):
        # __main__ is a command, not a module to import; gemmguard's own kernels import their GPU library
        # (triton) at their top, and their backends load them only where it is installed.
        if not module.name.endswith("__main__") and not module.name.startswith("pytest_gemmguard.kernels."):
            importlib.import_module(module.name)
    import torch._inductor.config as inductor_config
    import torch._inductor.custom_graph_pass

    weight = torch.nn.Linear(8, 8)
    for backends in ("ATEN", "CPP"):
        torch._dynamo.reset()
        with (
            torch.no_grad(),
            inductor_config.patch(max_autotune=True, max_autotune_gemm_backends=backends, freezing=True),
        ):
            torch.compile(weight)(torch.randn(4, 8))
    torch._dynamo.reset()
    _draw_once()


def _draw_once() -> None:
    """matplotlib too: a test that runs --gemm-plots inside pytester would otherwise be the first to import its
    drawing modules, which pytester then drops while matplotlib keeps pointing at them, and a later figure
    (tests/test_plots.py, test_trend.py) mixes two copies (seen in CI, not alone). Drawing what the plots draw
    (log axes, intervals, bands, text, a legend) into a PNG imports all of it here, where nothing drops it."""
    import io

    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    figure = Figure(figsize=(3, 2))
    axes = figure.add_subplot()
    axes.set_xscale("log")
    axes.errorbar([1.0, 2.0], [0, 1], xerr=[[0.1, 0.2], [0.1, 0.2]], fmt="o", color="tab:red", label="x")
    axes.axvline(1.05, linestyle="--")
    axes.axvspan(0.95, 1.05, alpha=0.2)
    axes.fill_between([1, 2], [0, 0], [1, 1], alpha=0.1)
    axes.set_yticks([0, 1], labels=["a\nb", "c"])
    axes.text(1.5, 0.5, "1.5x")
    axes.legend(loc="best")
    figure.suptitle("t")
    figure.savefig(io.BytesIO(), format="png")


@pytest.fixture
def plugin_args() -> list[str]:
    """`-p` for both plugins where gemmguard runs from a tree rather than installed (the H200 machine): a
    pytester subprocess there has no entry points to load them by (seen: "unrecognized arguments")."""
    import importlib.metadata

    installed = {e.value for e in importlib.metadata.entry_points(group="pytest11")}
    wanted = ("pytest_gemmguard.plugin", "pytest_gemmguard.bench.plugin")
    return [arg for name in wanted if name not in installed for arg in ("-p", name)]
