"""The action's install step (`python -m pytest_gemmguard.github install`), run from the source tree as the action
runs it: torch from PyTorch's CPU index alone where none is installed, never on a GPU runner, the project, and
gemmguard at the action's own version, built from a copy so the action's checkout stays clean; a self-hosted
runner gets a venv of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import actrun
import pytest

from pytest_gemmguard.errors import GemmUsageError
from pytest_gemmguard.github import install

ROOT = Path(__file__).resolve().parent.parent
VERSION = install.source_version(ROOT)


def _cli(*args: str, cwd: Path, python: str = sys.executable, env: dict | None = None) -> subprocess.CompletedProcess:
    """The action's own call: the source tree on PYTHONPATH, nothing else."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GEMMGUARD_", "RUNNER_", "GITHUB_"))}
    full.update(PYTHONPATH=str(ROOT), **(env or {}))
    command = [python, "-m", "pytest_gemmguard.github", "install", f"--source={ROOT}", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=full, timeout=600)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A fresh venv with nothing in it: no torch, no gemmguard."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return str(venv / "bin" / "python")


def test_a_cpu_runner_without_torch_gets_the_cpu_build_from_its_index_alone(tmp_path, bare_python):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '0'\n")
    proc = _cli("--dry-run", "--venv=", "--torch=2.13.0", "--torch-index=https://example.invalid/cpu",
                cwd=tmp_path, python=bare_python)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    torch_line, project_line, gemmguard_line = lines
    assert "torch==2.13.0 --index-url https://example.invalid/cpu" in torch_line
    assert "extra-index-url" not in proc.stdout  # one index for torch, PyPI for the rest: never mixed
    assert project_line.endswith(f"-e {tmp_path}")
    assert f"pytest-gemmguard {VERSION}, the action's own version" in gemmguard_line
    assert gemmguard_line.endswith(f"'{ROOT}[plots]'")
    # No pyproject.toml and no setup.py: there is no project to install.
    (tmp_path / "pyproject.toml").unlink()
    proc = _cli("--dry-run", "--venv=", cwd=tmp_path, python=bare_python)
    assert "the project" not in proc.stdout and "--index-url https://download.pytorch.org/whl/cpu" in proc.stdout


def test_a_gpu_runner_without_torch_is_one_line_never_a_pip_guess(tmp_path, bare_python):
    with pytest.raises(GemmUsageError, match="NVIDIA GPU and no torch: install a CUDA build of torch"):
        install.plan(python=bare_python, torch="2.13.0", torch_index=install.CPU_INDEX, project="auto",
                     workspace=tmp_path, gpu=True)  # fmt: skip
    # A GPU runner that has torch keeps it: no torch step at all.
    steps = install.plan(python=sys.executable, torch="2.13.0", torch_index=install.CPU_INDEX, project="",
                         workspace=tmp_path, gpu=True)  # fmt: skip
    assert steps == []


def test_an_installed_gemmguard_of_another_version_is_replaced_by_the_actions(tmp_path):
    # This checkout's own editable install: the same tree, nothing to do (gemmguard's own CI).
    assert install.gemmguard_step(sys.executable, ROOT, "plots") is None
    # A project that brought another release: the action's version is installed over it, saying so.
    other = tmp_path / "site"
    (other / "pytest_gemmguard").mkdir(parents=True)
    (other / "pytest_gemmguard" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([str(venv / "bin" / "python"), "-c", where], capture_output=True, text=True, check=True)
    site = site.stdout.strip()
    Path(site, "other.pth").write_text(f"{other}\n")
    step = install.gemmguard_step(str(venv / "bin" / "python"), ROOT, "")
    assert step is not None and step.command[-1] == str(ROOT)


def test_a_bad_source_tree_is_one_line(tmp_path):
    proc = _cli("--venv=", "--project=", cwd=tmp_path, env={})
    assert proc.returncode == 0, proc.stdout  # the real tree is fine (and already installed here)
    bad = subprocess.run(
        [sys.executable, "-m", "pytest_gemmguard.github", "install", f"--source={tmp_path}"],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stdout.strip().endswith(f"{tmp_path} is not a gemmguard source tree (no __init__.py with a version)")


def test_a_venv_that_cannot_be_made_says_why_in_the_error(tmp_path):
    """`python -m venv` keeps ensurepip's output to itself; a CI job once went red with only "ensurepip returned
    non-zero exit status 1" to read. The error now carries the failing command and the last lines it printed."""
    (tmp_path / "a-file").write_text("")
    where = tmp_path / "a-file" / "venv"  # under a plain file: venv cannot make it
    with pytest.raises(GemmUsageError) as err:
        install.make_venv(where)
    first, *said = str(err.value).splitlines()
    assert first.startswith(f"gemmguard: making the job's venv {where} failed (exit 1): ")
    assert any("Not a directory" in line or "File exists" in line for line in said), said


def test_the_jobs_venv_borrows_the_pip_it_sees_instead_of_bootstrapping_one(tmp_path):
    python = install.make_venv(tmp_path / "venv")
    pip = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, check=True).stdout
    assert not (tmp_path / "venv" / "bin" / "pip").exists()  # no ensurepip: nothing of pip's own in the venv
    assert str(tmp_path / "venv") not in pip, pip


def test_the_suite_run_inside_a_job_leaves_the_jobs_files_alone(tmp_path):
    """Inside a GitHub Actions job (this repository's CI, or act) the suite once appended a test's temporary venv
    to the job's $GITHUB_PATH, and the job's later steps ran that venv's python. The suite's conftest takes the
    job's file variables away from every test."""
    job_path, summary = tmp_path / "github_path", tmp_path / "step_summary"
    job_path.write_text("")
    summary.write_text("")
    env = {**os.environ, "GITHUB_PATH": str(job_path), "GITHUB_STEP_SUMMARY": str(summary)}
    test = "tests/test_github_install.py::test_the_jobs_venv_borrows_the_pip_it_sees_instead_of_bootstrapping_one"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", test],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert job_path.read_text() == "" and summary.read_text() == ""


@pytest.mark.slow
def test_the_install_puts_the_actions_version_in_a_venv_of_its_own_and_leaves_its_tree_clean(tmp_path):
    """For real, as on a runner: the job's python (a venv that sees torch through a path line, as the act tests'
    venvs do), a user's project with a pyproject.toml. The step makes a venv under RUNNER_TEMP that sees the job
    python's packages, hands it to later steps through GITHUB_PATH, and installs the project and gemmguard
    there; the job's python gets nothing, and the action's tree is left as it was."""
    job_python = str(actrun.make_venv(tmp_path / "job") / "bin" / "python")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "gemmlib"\nversion = "0.1.0"\n[tool.setuptools]\npy-modules = ["gemmlib"]\n'
    )
    (project / "gemmlib.py").write_text("X = 1\n")
    github_path = tmp_path / "github_path"
    github_path.write_text("")
    env = {"RUNNER_TEMP": str(tmp_path / "runner-temp"), "GITHUB_PATH": str(github_path)}
    venv = tmp_path / "runner-temp" / "gemmguard-venv"
    before = sorted(p.name for p in ROOT.iterdir())
    proc = _cli(cwd=project, python=job_python, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"gemmguard: installing into {venv}, never into the machine's python" in proc.stdout
    assert "gemmguard: install torch" not in proc.stdout  # the job's python has torch: the venv sees it
    assert f"gemmguard: install pytest-gemmguard {VERSION}" in proc.stdout
    assert github_path.read_text() == f"{venv / 'bin'}\n"
    assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text()
    python = str(venv / "bin" / "python")
    probe = "import gemmlib, torch, pytest_gemmguard as g; print(g.__file__)"
    where = subprocess.run([python, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(venv)), where.stdout  # the installed copy, not this checkout
    for name in ("gemmlib", "pytest_gemmguard"):  # and nothing went into the job's python
        assert subprocess.run([job_python, "-c", f"import {name}"], cwd=tmp_path, capture_output=True).returncode
    assert sorted(p.name for p in ROOT.iterdir()) == before  # no build/ or *.egg-info left in the action's tree
    # A second call in the same job finds the venv and has nothing to do.
    again = _cli("--project=", cwd=project, python=job_python, env=env)
    assert again.returncode == 0 and f"pytest-gemmguard {VERSION} is installed" in again.stdout, again.stdout
