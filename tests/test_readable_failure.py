"""Issue 41, "a failure a person can read": one wrong result printed 1,427 lines (gemmguard's own source before its
report, about 1,270 empty `DEBUG torch.__trace` lines of captured log, three different ways to reproduce). In a
user's own project (README's first example, a planted wrong aten as its conftest.py, pytest run as a user runs
it), the whole output fits one screen, -v or not: the report first, then the test's line that checked, one
reproduce line, and that line reproduces the failure."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import actrun
import pytest
from actrun import plants

ROOT = Path(__file__).resolve().parent.parent
# Lines of the whole run's output, header and results table included; -v adds pytest's own (the test's result
# line, Hypothesis's profile, blank lines) and one progress line per example before the failure.
SCREEN, SCREEN_VERBOSE = 42, 48


def readme_whole_space_example() -> str:
    """README's first example, `@gemm_case()` over the whole case space (its imports and its first test)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Writing gemmguard tests") :]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    source = "\n\n\n@".join(block.split("\n\n\n@")[:2]) + "\n"
    assert "@gemm_case()" in source and "def test_any_gemm(gemm):" in source, source
    return source


def run_pytest(project: Path, plugin_args: list[str], *args: str) -> str:
    # A user's environment with the suite's kernel cache: C++ kernels built once, not in each of the three processes.
    env = actrun.user_env(kernel_cache=os.environ.get("GEMMGUARD_KERNEL_CACHE"))
    command = [sys.executable, "-m", "pytest", *plugin_args, "--gemm-backends=aten", "-p", "no:cacheprovider", *args]
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout + done.stderr


def assert_readable(out: str, screen: int) -> str:
    """The checks of the issue on one run's whole output; returns its reproduce line."""
    lines = out.splitlines()
    assert len(lines) <= screen, f"{len(lines)} lines:\n{out[:6000]}"
    assert "torch.__trace" not in out and "Captured log" not in out, out[-4000:]
    # The report first: right under the test's header line, no traceback through gemmguard before it.
    head = next(i for i, line in enumerate(lines) if re.match(r"_+ test_any_gemm\[aten\] _+$", line))
    assert lines[head + 1] == "gemmguard: aten produced a wrong result", out
    assert not re.search(r"pytest_gemmguard[/\\]\w+\.py|^E |^>", out, re.M), out  # none of gemmguard's frames
    assert "test:     test_readme.py:" in out and "gemm.check()" in out, out  # the test's own line that checked
    # One way to reproduce in pytest's terms, plus the standalone script; none of Hypothesis's own advice.
    (replay,) = [line for line in lines if "--gemm-replay=" in line]
    assert replay.startswith("gemmguard reproduce: pytest 'test_readme.py::test_any_gemm[aten]' --gemm-replay="), replay
    (script,) = [line for line in lines if "repro:    python " in line]
    assert Path(script.split("python ", 1)[1]).is_file(), script
    for hypothesis_said in ("reproduce_failure", "Falsifying", "Failing test case", "Failing explicit", "Explanation"):
        assert hypothesis_said not in out, out
    return replay


@pytest.mark.slow
def test_one_wrong_result_fits_one_screen_and_its_one_line_reproduces_it(tmp_path, plugin_args):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_readme.py").write_text(readme_whole_space_example())
    (project / "conftest.py").write_text(plants.WRONG_ATEN)

    # Seeded so that each run meets its failure the same way: drawn (and shrunk) in one, a tour case in the other.
    drawn = run_pytest(project, plugin_args, "--gemm-seed=7")
    assert not assert_readable(drawn, SCREEN).split("--gemm-replay='", 1)[1].startswith("case:")  # Hypothesis's blob
    verbose = run_pytest(project, plugin_args, "--gemm-seed=2", "-v")
    replay = assert_readable(verbose, SCREEN_VERBOSE)
    # A failing example ends the run's examples at once: one failure line, then the report.
    assert len(re.findall(r"FAILED \(wrong result", verbose)) == 1, verbose

    # The one line, run as printed, fails again on the same case.
    _pytest, test_id, replay_arg = shlex.split(replay.removeprefix("gemmguard reproduce: "))
    again = run_pytest(project, plugin_args, test_id, replay_arg)
    case = re.search(r"^  case: .*$", verbose, re.M).group(0)
    assert case in again and "gemmguard: aten produced a wrong result" in again, again[-4000:]
