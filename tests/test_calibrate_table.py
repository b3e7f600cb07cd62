"""scripts/gpu_calibrate.py's verdict on each case over the bound: which are explained, which are not.

The GPU calibration (issue 10) is judged by its count of unexplained cases, so the rule that counts them is
tested here on rows like the ones the H200 wrote (2026-12-02 21:30, docs/validation/correctness.md).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "gpu_calibrate.py")


@pytest.fixture(scope="module")
def calibrate():
    spec = importlib.util.spec_from_file_location("gpu_calibrate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(**fields) -> dict:
    return {"case": "addmm 13×2×3696 tf32 contiguous epilogue=relu", "op": "addmm", "dtype": "tf32",
            "eager-case": 0.0097, "triton": float("inf"), "triton_report": "gemmguard: wrong", **fields}  # fmt: skip


def _verdict(calibrate, capsys, row: dict) -> tuple[str, str]:
    calibrate.table([row], "triton", 1.0, "test")
    out = capsys.readouterr().out
    over = next(line for line in out.splitlines() if line.startswith("OVER"))
    total = next(line for line in out.splitlines() if line.startswith("TOTAL"))
    return over, total


def test_static_compile_right_explains_a_dynamic_failure(calibrate, capsys):
    over, total = _verdict(calibrate, capsys, _row(triton_static=0.03, triton_static_none=""))
    assert "dynamic-shape kernel wrong: the static compile is right" in over
    assert "0 of the 1 unexplained" in total


def test_static_compile_unsupported_explains_it_when_eager_is_right(calibrate, capsys):
    row = _row(triton_static=None, triton_static_none="unsupported: Inductor found no valid choice")
    over, total = _verdict(calibrate, capsys, row)
    assert "where a static compile has no triton kernel (unsupported: Inductor found no valid choice)" in over
    assert "0 of the 1 unexplained" in total


@pytest.mark.parametrize(
    "fields, shown",
    [
        # The static compile raised: nothing says the dynamic kernel is the one at fault.
        ({"triton_static": None, "triton_static_none": "RuntimeError: boom"}, "static compile: RuntimeError: boom"),
        # Unsupported statically, but eager is wrong too on these inputs: the oracle itself is in question.
        ({"triton_static": None, "triton_static_none": "unsupported: no choice", "eager-case": 3.0}, "unexplained"),
        # A row written before the reason was recorded.
        ({"triton_static": None}, "unexplained"),
        # Wrong statically too.
        ({"triton_static": float("inf"), "triton_static_none": ""}, "static compile inf"),
    ],
)
def test_everything_else_stays_unexplained(calibrate, capsys, fields, shown):
    over, total = _verdict(calibrate, capsys, _row(**fields))
    assert "[unexplained" in over and shown in over
    assert "1 of the 1 unexplained" in total
