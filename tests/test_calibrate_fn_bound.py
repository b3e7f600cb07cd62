"""scripts/calibrate_fn_bound.py runs here on the CPU as it will on a GPU machine: gemmguard's own compile, the
bound of the test's own function, and the planted defects caught."""

import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "calibrate_fn_bound.py")


def test_the_calibration_runs_on_the_cpu_and_prints_its_table():
    args = ["--device", "cpu", "--functions", "addmm+relu", "--dtypes", "bfloat16", "tf32", "--cases", "4"]
    args += ["--shapes", "1", "--seed", "5", "--jobs", "1"]
    proc = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "# tf32 skipped on cpu" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("addmm+relu    bfloat16  aten"))
    cases, unsupported, over = row[3:6]
    assert (cases, unsupported, over) == ("4", "0", "0"), out
    assert "addmm+relu    bfloat16  defects  caught: lost K 4/4, bf16 acc 4/4, wrong element 4/4" in out, out
