"""The release workflow (.github/workflows/release.yml), proven as far as a machine without GitHub or PyPI can:
linted by GitHub's schemas and actionlint, its hardening checked on the YAML, its tag check run on the right tag
and a wrong one, its build steps run on a copy of this checkout (`python -m build`, `twine check --strict`),
and the wheel they build installed in a fresh venv beside torch's CPU build, where gemmguard's own kernels are
found and README's example passes from a copy of examples/. Only the upload itself cannot be tried here.

The workflow's steps run as GitHub runs them (bash -eo pipefail), taken from the YAML, so a step edited there
is the step tested here; the one substitution is the source of torch's CPU build (PyTorch's index there, this
machine's pip configuration here)."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from actrun import installed_package, load_yaml, run_tool, tool, user_env

import pytest_gemmguard

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
VERSION = pytest_gemmguard.__version__
TORCH_CPU = "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
PUBLISH = "pypa/gh-action-pypi-publish"
KERNEL_FILES = ("triton_gemm", "cute_gemm", "cute_gemm_sm80")
TAG_STEP = "The tag is the package's version"


def _steps(job: str) -> dict[str, str]:
    """A release job's named `run` steps, script by name."""
    return {s["name"]: s["run"] for s in load_yaml(RELEASE)["jobs"][job]["steps"] if "run" in s}


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """A step's script as GitHub runs it, with this environment's Python (setup-python's there) first on PATH."""
    path = f"{Path(sys.executable).parent}:{user_env()['PATH']}"
    command = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script]
    return subprocess.run(
        command, cwd=cwd, env={**user_env(), "PATH": path, **env}, capture_output=True, text=True, timeout=900
    )


# ---------------------------------------------------------------- lint and hardening


def test_the_release_workflow_passes_both_linters_and_they_catch_planted_mistakes(tmp_path):
    schemas, actionlint = tool("check-jsonschema"), tool("actionlint")
    for schema in ("vendor.github-workflows", "custom.github-workflows-require-timeout"):
        proc = run_tool(schemas, "--builtin-schema", schema, str(RELEASE))
        assert proc.returncode == 0, f"{schema}: {proc.stdout}{proc.stderr}"
    config = str(ROOT / ".github" / "actionlint.yaml")
    proc = run_tool(actionlint, "-no-color", "-config-file", config, str(RELEASE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The publish job without its timeout, and waiting on a job that does not exist.
    text = RELEASE.read_text()
    untimed, misnamed = tmp_path / "untimed.yml", tmp_path / "misnamed.yml"
    untimed.write_text(text.replace("    timeout-minutes: 10\n", "", 1))
    misnamed.write_text(text.replace("needs: [build, wheel]", "needs: [build, wheels]", 1))
    assert untimed.read_text() != text and misnamed.read_text() != text
    proc = run_tool(schemas, "--builtin-schema", "custom.github-workflows-require-timeout", str(untimed))
    assert proc.returncode == 1 and "'timeout-minutes' is a required property" in proc.stdout, proc.stdout
    proc = run_tool(actionlint, "-no-color", "-config-file", config, str(misnamed))
    assert proc.returncode == 1 and 'needs job "wheels" which does not exist' in proc.stdout, proc.stdout


def hardening_problems(doc: dict, text: str) -> list[str]:
    """What release.yml (`doc` as loaded, `text` as written) breaks of its hardening rules; [] when none."""
    problems = []
    if doc.get("on") != {"push": {"tags": ["v*"]}}:
        problems.append("triggered by more than a pushed version tag")
    if doc.get("permissions") != {"contents": "read"}:
        problems.append("top-level permissions are not contents: read")
    group = doc.get("concurrency", {})
    if "github.ref" not in group.get("group", "") or group.get("cancel-in-progress") is not False:
        problems.append("no concurrency group per tag that lets a release finish")
    jobs = doc["jobs"]
    for name, job in jobs.items():
        if not job.get("timeout-minutes"):
            problems.append(f"job {name} has no timeout")
        granted = job.get("permissions", {})
        if granted and (name, granted) != ("publish", {"id-token": "write"}):
            problems.append(f"job {name} is granted {granted}")
        for step in job["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout@") and step.get("with", {}).get("persist-credentials") is not False:
                problems.append(f"job {name} keeps the checkout's credentials")
            if uses.startswith("actions/setup-python@") and "cache" in step.get("with", {}):
                problems.append(f"job {name} restores a cache into a release")
    publish = jobs.get("publish", {})
    if (publish.get("environment") or {}).get("name") != "pypi":
        problems.append("publish is outside the pypi environment")
    if set(publish.get("needs", [])) != {"build", "wheel"}:
        problems.append("publish does not wait for the build and the wheel's test")
    if not any(step.get("uses", "").startswith(f"{PUBLISH}@") for step in publish.get("steps", [])):
        problems.append(f"publish does not use {PUBLISH}")
    names = [step.get("name") for step in jobs["build"]["steps"]]
    if TAG_STEP not in names or names.index(TAG_STEP) > names.index("Build the sdist and the wheel"):
        problems.append("no tag check before the build")
    for line in text.splitlines():
        m = re.search(r"uses:\s*([^\s#]+)", line)
        if m and not m.group(1).startswith("./"):
            pinned = re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m.group(1))
            if not pinned or not re.search(r"# v\d+\.\d+\.\d+$", line):
                problems.append(f"not pinned by commit with its version beside it: {line.strip()}")
    if "EXTRA_INDEX" in text.upper().replace("-", "_"):
        problems.append("an extra index beside PyPI")
    if TORCH_CPU not in text:
        problems.append("torch's CPU build not from PyTorch's index alone")
    return problems


def test_the_release_workflow_follows_its_hardening_rules():
    text = RELEASE.read_text()
    doc = load_yaml(RELEASE)
    assert hardening_problems(doc, text) == []
    # Each rule can fail: plant one break at a time.
    build_writes = copy.deepcopy(doc)
    build_writes["jobs"]["build"]["permissions"] = {"id-token": "write"}
    assert hardening_problems(build_writes, text) == ["job build is granted {'id-token': 'write'}"]
    no_environment = copy.deepcopy(doc)
    del no_environment["jobs"]["publish"]["environment"]
    assert hardening_problems(no_environment, text) == ["publish is outside the pypi environment"]
    on_branches = copy.deepcopy(doc)
    on_branches["on"]["push"]["branches"] = ["main"]
    assert hardening_problems(on_branches, text) == ["triggered by more than a pushed version tag"]
    untagged = copy.deepcopy(doc)
    untagged["jobs"]["build"]["steps"] = [s for s in doc["jobs"]["build"]["steps"] if s.get("name") != TAG_STEP]
    assert hardening_problems(untagged, text) == ["no tag check before the build"]
    by_tag = re.sub(rf"{PUBLISH}@[0-9a-f]{{40}}", f"{PUBLISH}@release/v1", text)
    assert [p[:30] for p in hardening_problems(doc, by_tag)] == ["not pinned by commit with its "]
    extra = text.replace(TORCH_CPU, "torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu")
    assert hardening_problems(doc, extra) == [
        "an extra index beside PyPI",
        "torch's CPU build not from PyTorch's index alone",
    ]


def test_the_tag_check_passes_the_packages_version_and_stops_any_other_tag_in_one_line():
    step = _steps("build")[TAG_STEP]
    right = _bash(step, ROOT, GITHUB_REF_NAME=f"v{VERSION}")
    assert right.returncode == 0 and right.stdout == right.stderr == "", right
    for tag in ("v9.9.9", VERSION, f"v{VERSION}rc1"):  # another version, no v, a suffix
        wrong = _bash(step, ROOT, GITHUB_REF_NAME=tag)
        assert wrong.returncode == 1 and wrong.stderr == "", wrong
        (line,) = wrong.stdout.splitlines()
        assert line.startswith(f"::error title=release::tag {tag} is not v{VERSION} (pytest_gemmguard.__version__)")


# ---------------------------------------------------------------- the build job's steps, run here


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """What actions/checkout gives the jobs: this checkout's files (committed or not, ignored ones left out)."""
    copy_ = tmp_path_factory.mktemp("release") / "checkout"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():  # a file deleted in the working tree is still listed as cached
            (copy_ / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, copy_ / rel)
    return copy_


@pytest.fixture(scope="module")
def dist(checkout) -> Path:
    """dist/ as the build job leaves it: its build and check steps run in the checkout (the step that installs
    the build tools is the dev extra's work here)."""
    steps = _steps("build")
    for name in ("Build the sdist and the wheel", "Check the distributions"):
        proc = _bash(steps[name], checkout)
        assert proc.returncode == 0, f"{name}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return checkout / "dist"


@pytest.mark.slow
def test_the_build_steps_make_a_checked_sdist_and_wheel_that_carry_the_kernels(dist, tmp_path):
    wheel, sdist = dist / f"pytest_gemmguard-{VERSION}-py3-none-any.whl", dist / f"pytest_gemmguard-{VERSION}.tar.gz"
    assert sorted(dist.iterdir()) == [wheel, sdist]
    inside = zipfile.ZipFile(wheel).namelist()
    for name in [*(f"pytest_gemmguard/kernels/{k}.py" for k in KERNEL_FILES), "pytest_gemmguard/kernels/__init__.py"]:
        assert name in inside, name
    assert "pytest_gemmguard/known/known-failures.toml" in inside
    listing = subprocess.run(["tar", "tzf", str(sdist)], capture_output=True, text=True, check=True).stdout
    for k in KERNEL_FILES:
        assert f"pytest_gemmguard-{VERSION}/pytest_gemmguard/kernels/{k}.py" in listing.splitlines(), k
    # twine check --strict can fail: the same wheel with its README cut out of the metadata.
    check = _steps("build")["Check the distributions"]
    bare = tmp_path / "dist" / wheel.name
    bare.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(bare, "w") as out:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = data.split(b"\n\n", 1)[0] + b"\n"  # the headers only: no long description
            out.writestr(item, data)
    proc = _bash(check, tmp_path)
    assert proc.returncode == 1 and "long_description" in proc.stdout, proc.stdout + proc.stderr


# ---------------------------------------------------------------- the wheel job's steps, run here


@pytest.fixture(scope="module")
def release_venv(checkout, dist) -> Path:
    """RUNNER_TEMP after the wheel job's install steps: a fresh venv (no path into this environment) with
    torch's CPU build and the built wheel, which pip installs with its dependencies."""
    temp = checkout.parent / "runner-temp"
    temp.mkdir()
    steps = _steps("wheel")
    venv_step = steps["A fresh venv with torch's CPU build"]
    assert TORCH_CPU in venv_step
    # This machine cannot reach PyTorch's index: the same CPU build, as this environment has it, comes from
    # what its pip is configured with. The local version (+cpu) keeps pip from taking a CUDA build instead.
    import torch

    assert torch.version.cuda is None, "the test environment's torch is not a CPU build"
    here = venv_step.replace(TORCH_CPU, f"torch=={torch.__version__}")
    for name, script in (
        ("A fresh venv with torch's CPU build", here),
        ("Install the wheel", steps["Install the wheel"]),
    ):
        proc = _bash(script, checkout, RUNNER_TEMP=str(temp))
        assert proc.returncode == 0, f"{name}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    python = temp / "venv" / "bin" / "python"
    package = installed_package(python)
    assert package.is_relative_to(temp / "venv"), package
    # Nothing of this environment or this checkout on the venv's path (no .pth line, no system site-packages).
    seen = subprocess.run([str(python), "-c", "import sys; print(*sys.path, sep='\\n')"], cwd=temp,
                          capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert not [p for p in seen if p.startswith((sys.prefix, str(ROOT)))], seen
    return temp


PROBES = """
import json, os
from pytest_gemmguard import kernel_swap
from pytest_gemmguard.backends import cutedsl_kernels, triton_kernels
from pytest_gemmguard.kernels import cute_gemm  # imports nothing CUDA: the module itself, loaded from the wheel
report = {"paths": {k: str(kernel_swap.kernel_path(k)) for k in KERNELS}, "cute_configs": len(cute_gemm.CONFIGS)}
report["cutedsl"] = cutedsl_kernels.BACKEND.probe().reason
report["triton"] = triton_kernels.BACKEND.probe().reason
os.environ["TRITON_INTERPRET"] = "1"  # no GPU needed: what is missing next is triton itself
report["triton_interpreted"] = triton_kernels.BACKEND.probe().reason
print(json.dumps(report))
"""


def _probes(python: Path) -> dict:
    import json

    script = PROBES.replace("KERNELS", repr(KERNEL_FILES))
    proc = subprocess.run(
        [str(python), "-c", script], cwd=python.parent, capture_output=True, text=True, env=user_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


NO_GPU = ("is a CPU-only build", "no CUDA device visible")


@pytest.mark.slow
def test_the_installed_wheel_s_kernel_backends_find_their_kernels(release_venv):
    """On this CPU machine both backends are unavailable; what they say must be the GPU (or, under Triton's
    interpreter, triton), never the kernel file: the wheel carries it."""
    python = release_venv / "venv" / "bin" / "python"
    kernels = installed_package(python) / "kernels"
    report = _probes(python)
    assert report["paths"] == {k: str(kernels / f"{k}.py") for k in KERNEL_FILES}
    assert report["cute_configs"] > 0
    for backend in ("triton", "cutedsl"):
        assert any(why in report[backend] for why in NO_GPU), report
    assert report["triton_interpreted"] == "Python module 'triton' is not installed", report
    # The check can fail: the same install without its Triton kernel says so, GPU or not.
    aside = release_venv / "triton_gemm.py"
    shutil.move(kernels / "triton_gemm.py", aside)
    try:
        broken = _probes(python)
    finally:
        shutil.move(aside, kernels / "triton_gemm.py")
    missing = "pytest_gemmguard/kernels/triton_gemm.py is missing from this install"
    assert broken["triton"] == broken["triton_interpreted"] == missing, broken
    assert broken["paths"]["triton_gemm"] == "None" and any(why in broken["cutedsl"] for why in NO_GPU), broken


@pytest.mark.slow
def test_readmes_example_passes_from_the_installed_wheel(release_venv, checkout):
    # Fewer examples than README's run draws, to keep CI's time; everything else as the job runs it.
    step = _steps("wheel")["README's example, from a copy of examples/ outside the source tree"]
    proc = _bash(step, checkout, RUNNER_TEMP=str(release_venv), PYTEST_ADDOPTS="--gemm-max-examples=2 --gemm-seed=1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    summary = proc.stdout.splitlines()[-1]
    assert re.search(r"^=+ \d+ passed", summary) and "failed" not in summary, out[-2000:]
    assert (release_venv / "examples" / "test_example_gemms.py").is_file()  # run from the copy, not the checkout
