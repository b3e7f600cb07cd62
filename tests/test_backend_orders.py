"""Backends that cannot harm each other, proven in every order: for each ordered pair (A, B) of this device's
backends, a fresh process runs a fixed case set through A, then B (tests/backend_orders.py), and B's verdicts
must be the ones B gets alone in a process of its own, with nothing left changed after each switch.

On the CPU that is aten and cpp; on a CUDA machine the five GPU backends (20 ordered pairs; a backend that
cannot run here is skipped with its reason, and `test_at_least_two_backends_ran` fails unless two ran, so
the file never passes by skipping). On the H200, `-n 8` (pytest-xdist) runs the processes side by side.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from pytest_gemmguard import backends

ROOT = pathlib.Path(__file__).parent.parent
DRIVER = pathlib.Path(__file__).parent / "backend_orders.py"
GPU = ["aten", "triton", "cutlass", "cutedsl", "cutedsl[quack]"]
CPU = ["aten", "cpp"]
DEVICE_BACKENDS = GPU if torch.cuda.is_available() else CPU
PAIRS = [(a, b) for a in DEVICE_BACKENDS for b in DEVICE_BACKENDS if a != b]
RAN = ("verified", "failed")  # the backend's own kernel ran (right or wrong)

_runs: dict[tuple[str, ...], dict] = {}


def _run(order: list[str]) -> dict:
    """The driver's result for backends run in `order` in one fresh process (each order run once)."""
    key = tuple(order)
    if key not in _runs:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        env.setdefault("GEMMGUARD_CUTLASS_CONFIGS", "1")  # one nvcc build per CUTLASS GEMM is enough here
        proc = subprocess.run(
            [sys.executable, str(DRIVER), ",".join(order)],
            capture_output=True,
            text=True,
            timeout=590,
            env=env,
            cwd=ROOT,
        )
        assert proc.returncode == 0, f"driver for {order} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
        _runs[key] = json.loads(proc.stdout.strip().splitlines()[-1])
    return _runs[key]


def _require(name: str) -> None:
    probe = backends.probe(name)
    if not probe.available:
        pytest.skip(f"{name} {probe.line()}")


def _id(pair: tuple[str, str]) -> str:
    return "-then-".join(name.replace("[", "-").replace("]", "") for name in pair)


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[_id(p) for p in PAIRS])
def test_a_backend_gets_the_verdicts_it_gets_alone_whatever_ran_before(first, second):
    _require(first)
    _require(second)
    alone = _run([second])["runs"][0]
    after_first, then_second = _run([first, second])["runs"]
    assert after_first["changes"] == [], f"{first} left the process changed: {after_first['changes']}"
    assert then_second["verdicts"] == alone["verdicts"], (
        f"{second} after {first}: {then_second['verdicts']}; alone: {alone['verdicts']}"
    )
    assert then_second["changes"] == [], f"{second} (after {first}) left: {then_second['changes']}"
    assert any(v in RAN for v in alone["verdicts"].values()), f"{second} ran no kernel of its own: {alone}"


def test_at_least_two_backends_ran():
    """The pairs above skip unavailable backends; this fails unless at least two backends really ran."""
    available = [b for b in DEVICE_BACKENDS if backends.probe(b).available]
    ran = [b for b in available if any(v in RAN for v in _run([b])["runs"][0]["verdicts"].values())]
    skipped = {b: backends.probe(b).line() for b in DEVICE_BACKENDS if b not in available}
    assert len(ran) >= 2, f"only {ran} ran a kernel of their own; unavailable here: {skipped}"
