"""The action's install step: torch where none is installed, the user's project, and gemmguard at the action's
own version, so a workflow pins one thing (the action's ref) and gets the matching package.

Standard library only: it runs from the action's own checkout (`PYTHONPATH=<action source>`) before anything
is installed. The order matters:

1. torch. A runner that already has torch keeps it (a GPU runner's CUDA build is the machine's business: one
   with an NVIDIA GPU and no torch is an error, never a pip guess). Elsewhere the CPU build is installed from
   PyTorch's CPU index *alone* (`--index-url`, never `--extra-index-url`): mixing that index with PyPI for every
   package is the dependency-confusion pattern of the 2022 torchtriton incident.
2. The project (`pip install -e .` where it has a pyproject.toml or setup.py, or the command given). Its
   dependencies resolve against the torch already there.
3. gemmguard from the action's own source tree, unless that same version is already installed: the project may
   have pulled another release, and the action's inputs and the plugin's options must match.

Everything goes into a venv under RUNNER_TEMP that sees the machine's packages (a GPU runner's CUDA torch) but
never writes into them: on a self-hosted runner a pull request's `pip install -e .` must not outlive its job in
the runner's own Python, and a hosted runner's system Python refuses pip (PEP 668).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from ..errors import GemmUsageError

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# What the package build needs from the action's tree: copied out first, so building never writes build/ or
# *.egg-info into the action's checkout (which act, and a runner's action cache, share between jobs).
_SOURCE_PARTS = ("pyproject.toml", "README.md", "LICENSE", "pytest_gemmguard")


@dataclasses.dataclass
class Step:
    why: str
    command: list[str]
    shell: bool = False  # the project's own install command, run through bash as the user wrote it


def source_version(source: Path) -> str:
    """The version of the gemmguard source tree the action runs from (its one version line)."""
    init = source / "pytest_gemmguard" / "__init__.py"
    try:
        match = re.search(r'^__version__ = "([^"]+)"', init.read_text(), re.M)
    except OSError:
        match = None
    if match is None:
        raise GemmUsageError(f"gemmguard: {source} is not a gemmguard source tree (no {init.name} with a version)")
    return match.group(1)


def _env(python: str) -> dict[str, str]:
    """The environment of every probe and pip call: `python`'s bin first, and without the PYTHONPATH that put
    the action's source tree on the path of this process (it would make the tree look installed)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _probe(python: str, code: str) -> str | None:
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=_env(python), cwd="/")
    return proc.stdout.strip() if proc.returncode == 0 else None


def installed_gemmguard(python: str) -> tuple[str, str] | None:
    """(version, package directory) of the pytest_gemmguard `python` imports, or None."""
    said = _probe(python, "import os, pytest_gemmguard as g; print(g.__version__, os.path.dirname(g.__file__))")
    if not said:
        return None
    version, _, where = said.partition(" ")
    return version, where


def has_gpu() -> bool:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "-L"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _pip(python: str) -> list[str]:
    return [python, "-m", "pip", "install", "--disable-pip-version-check"]


def plan(*, python: str, torch: str, torch_index: str, project: str, workspace: Path, gpu: bool) -> list[Step]:
    """torch (where `python` has none) and the project, in that order."""
    steps: list[Step] = []
    pip = _pip(python)
    if _probe(python, "import torch; print(torch.__version__)") is None:
        if gpu:
            raise GemmUsageError(
                "gemmguard: this runner has an NVIDIA GPU and no torch: install a CUDA build of torch for its "
                "python first (README, GPU install); the action installs only the CPU build, on CPU runners"
            )
        spec = "torch" if torch in ("", "latest") else f"torch=={torch}"
        steps.append(Step(f"torch (CPU build, from {torch_index} alone)", [*pip, spec, "--index-url", torch_index]))
    if project == "auto":
        if (workspace / "pyproject.toml").is_file() or (workspace / "setup.py").is_file():
            steps.append(Step("the project", [*pip, "-e", str(workspace)]))
    elif project.strip():
        steps.append(Step("the project", ["bash", "-c", project], shell=True))
    return steps


def gemmguard_step(python: str, source: Path, extras: str) -> Step | None:
    """gemmguard from `source`, unless `python` already imports that version (or that very tree: an editable
    install of the checkout the action runs from, as in gemmguard's own CI). Decided after the project is
    installed, since the project may have brought a release of its own."""
    wanted = source_version(source)
    have = installed_gemmguard(python)
    if have is not None and (have[0] == wanted or Path(have[1]).resolve() == (source / "pytest_gemmguard").resolve()):
        return None
    if have is not None:
        print(f"gemmguard: pytest-gemmguard {have[0]} is installed; the action is {wanted}: installing {wanted}")
    target = f"{source}[{extras}]" if extras else str(source)
    return Step(f"pytest-gemmguard {wanted}, the action's own version", [*_pip(python), target])


def _copy_source(source: Path, into: Path) -> Path:
    for name in _SOURCE_PARTS:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.is_file():
            shutil.copy2(src, into / name)
    return into


def make_venv(where: Path) -> str:
    """A venv (made once per job: a second call finds it) that sees the packages of the python running this, its
    torch among them, and installs into itself only. `--system-site-packages` covers a machine's own python;
    where that python is itself a venv, its site directory is added too, with its .pth files run.

    The venv borrows the pip it sees there (pip installs into the python that runs it) and bootstraps its own
    only where none is visible: ensurepip is the slow part of making a venv, and when it fails `venv` keeps its
    output to itself, which left a red job with nothing to read."""
    python = where / "bin" / "python"
    if not python.exists():
        _checked([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(where)],
                 f"making the job's venv {where}")  # fmt: skip
        if sys.prefix != sys.base_prefix:
            parent = sysconfig.get_paths()["purelib"]
            site = _checked([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            "asking the new venv for its site directory").strip()  # fmt: skip
            Path(site, "gemmguard-parent.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
        if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode != 0:
            _checked([str(python), "-m", "ensurepip", "--default-pip"], f"installing pip into {where}")
    github_path = os.environ.get("GITHUB_PATH")
    if github_path:  # the job's later steps find this python first
        with open(github_path, "a", encoding="utf-8") as fh:
            fh.write(f"{where / 'bin'}\n")
    return str(python)


def _checked(command: list[str], what: str) -> str:
    """Run `command`; its stdout, or a GemmUsageError that ends with the last lines it printed."""
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        said = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise GemmUsageError(f"gemmguard: {what} failed (exit {proc.returncode}): {shlex.join(command)}\n{said}")
    return proc.stdout


def _run_step(step: Step, python: str, dry_run: bool) -> None:
    shown = step.command[-1] if step.shell else shlex.join(step.command)
    print(f"gemmguard: install {step.why}: {shown}", flush=True)
    if dry_run:
        return
    if subprocess.run(step.command, env=_env(python)).returncode != 0:
        raise GemmUsageError(f"gemmguard: installing {step.why} failed (pip's output is above)")


def run(
    *,
    source: Path,
    torch: str = "2.13.0",
    torch_index: str = CPU_INDEX,
    project: str = "auto",
    workspace: Path | None = None,
    extras: str = "plots",
    venv: Path | None = None,
    dry_run: bool = False,
) -> int:
    """Install what the gate needs into `venv` (None: into the python running this), saying each step before it
    runs. Returns 0, or raises GemmUsageError."""
    workspace = workspace or Path.cwd()
    python = sys.executable
    if venv is not None:
        print(f"gemmguard: installing into {venv}, never into the machine's python", flush=True)
        if not dry_run:
            python = make_venv(venv)
    for step in plan(python=python, torch=torch, torch_index=torch_index, project=project, workspace=workspace,
                     gpu=has_gpu()):  # fmt: skip
        _run_step(step, python, dry_run)
    last = gemmguard_step(python, source, extras)
    if last is None:
        print(f"gemmguard: pytest-gemmguard {source_version(source)} is installed")
        return 0
    with tempfile.TemporaryDirectory(prefix="gemmguard-src-") as tmp:
        if not dry_run:  # built from a copy: see _SOURCE_PARTS
            copy = str(_copy_source(source, Path(tmp)))
            last.command[-1] = last.command[-1].replace(str(source), copy, 1)
        _run_step(last, python, dry_run)
    return 0
