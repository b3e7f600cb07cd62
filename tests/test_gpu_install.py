"""One GPU install path: README's "GPU install" lines are the ones scripts/gpu_validate.sh runs, the extras
they name exist in pyproject.toml with the packages the probes expect, and the pytest header says, for each
backend that cannot run here, what is missing and the fix."""

import pathlib
import re

import pytest
import torch

from pytest_gemmguard.backends import base

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = pathlib.Path(__file__).parent.parent


def readme_steps(readme: str) -> list[str]:
    """The command lines of the first bash block under '## GPU install'."""
    section = readme.split("\n## GPU install\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README's GPU install section has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def script_steps(script: str) -> list[str]:
    """The lines of gpu_validate.sh's install_steps heredoc."""
    body = re.search(r"install_steps\(\) \{.*?cat <<'STEPS'\n(.*?)\nSTEPS\n", script, re.S)
    assert body, "scripts/gpu_validate.sh has no install_steps heredoc"
    return body.group(1).splitlines()


def _same_steps(readme: str, script: str) -> bool:
    return readme_steps(readme) == script_steps(script)


def test_gpu_validate_runs_exactly_the_readme_install_lines():
    readme = (ROOT / "README.md").read_text()
    script = (ROOT / "scripts" / "gpu_validate.sh").read_text()
    assert readme_steps(readme) == script_steps(script)
    assert "done < <(install_steps)" in script  # and runs them, one by one
    # The planted drift: one changed README line and the check must fail.
    drifted = readme.replace("'.[gpu,cutlass,cutedsl]'", "'.[gpu,cutlass]'", 1)
    assert drifted != readme and not _same_steps(drifted, script)


def test_no_readme_line_installs_a_bare_torch():
    for line in readme_steps((ROOT / "README.md").read_text()):
        for install in re.findall(r"pip install ([^|&;]*)", line):
            if re.search(r"(^|\s)torch\b", install):
                assert "+cu" in install and "--index-url" in install, line


def test_the_extras_exist_and_bring_what_the_probes_look_for():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = re.search(r"pip install -e '\.\[([a-z,]+)\]'", "\n".join(readme_steps((ROOT / "README.md").read_text())))
    assert named and set(named.group(1).split(",")) <= set(extras)
    for module, (extra, dist) in base.EXTRAS.items():
        names = [re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0] for req in extras[extra]]
        assert dist in names, f"{module}: extra {extra!r} lacks {dist} ({extras[extra]})"


def test_a_missing_module_names_the_extra_that_brings_it(monkeypatch):
    monkeypatch.setitem(base.EXTRAS, "gemmguard_no_such_module", ("cutlass", "nvidia-cutlass"))
    probe = base.missing_module("gemmguard_no_such_module", "nvidia-cutlass")
    assert probe is not None and not probe.available
    assert probe.line() == (
        "unavailable: Python module 'gemmguard_no_such_module' is not installed; "
        "fix: pip install 'pytest-gemmguard[cutlass]' (brings nvidia-cutlass; README, GPU install)"
    )
    assert base.missing_module("gemmguard_other_module", "some-dist").fix == "pip install some-dist"


HEADER_CONFTEST = """
from pytest_gemmguard import backends
from pytest_gemmguard.backends.aten import AtenBackend
from pytest_gemmguard.backends.base import Probe


class NeedsExtra(AtenBackend):
    name = "needs-extra"

    def probe(self):
        missing = "Python module 'gemmguard_absent' is not installed"
        return Probe(False, missing, "pip install 'pytest-gemmguard[cutlass]'")


backends.register(NeedsExtra())
"""

CASE_FILE = """
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], shapes=[(4, 4, 4)], max_examples=1)
def test_mm(gemm):
    gemm.check()
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the header of a CPU-only torch")
def test_the_header_lists_each_unavailable_backend_with_its_fix(pytester):
    pytester.makeconftest(HEADER_CONFTEST)
    pytester.makepyfile(CASE_FILE)
    result = pytester.runpytest_inprocess("--gemm-backends=aten", "--collect-only", "-q", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "gemmguard: unavailable here: needs-extra; fix: pip install 'pytest-gemmguard[cutlass]'" in out, out
    cpu_only = re.search(
        r"gemmguard: unavailable here: ([^;]+); fix: install a CUDA build of torch \(README, GPU install\)", out
    )
    assert cpu_only, out
    assert {"triton", "cutlass", "cutedsl", "cutedsl[quack]"} <= set(cpu_only.group(1).split(", "))
    assert "aten" not in cpu_only.group(1) and "cpp" not in cpu_only.group(1)
