import os

import pytest

# The CPU suite runs with both real CPU backends; tests that spawn pytest pass their own options.
os.environ.setdefault("GEMMGUARD_BACKENDS", "aten,cpp")
pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def _inductor_imported():
    """pytester's in-process runs drop modules first imported inside them, and torch cannot register
    its operator libraries twice: import everything a compile touches once, out here."""
    import torch
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
