"""The documentation: the site builds with warnings as errors (a broken link or anchor, a page left out of the
nav), its options and environment pages list every setting of `pytest_gemmguard/validate.py` as that table
says it (they are generated from it by docs/hooks/settings_tables.py) and every GEMMGUARD_ variable gemmguard
reads, and every relative link in README.md leads to a file that exists."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gemmguard import parsers, validate
from pytest_gemmguard.backends.settings import BACKEND_ENV
from pytest_gemmguard.validate import Setting

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = (*validate.CORE, *validate.BENCH)


def _hook():
    spec = importlib.util.spec_from_file_location("settings_tables", ROOT / "docs" / "hooks" / "settings_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail("mkdocs-material is not installed: pip install -e '.[dev]'", pytrace=False)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # material's notice about MkDocs 2, not a build warning
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config)]
    command += ["--site-dir", str(site)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page)).strip()


def table_rows(page_html: str) -> list[list[str]]:
    """Every row of every table on a built page, as the text of its cells."""
    rows = re.findall(r"<tr>(.*?)</tr>", page_html, re.S)
    return [[_text(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)] for row in rows]


def expected_row(s: Setting) -> list[str]:
    """The option reference's row of one setting, from the table itself: where it comes from, and its help."""
    option = "-" if s.flag is None else s.flag if s.is_flag or s.metavar is None else f"{s.flag}={s.metavar}"
    return [option, s.ini or "-", s.env or "-", s.table or "-", s.help]


def undocumented(settings, page_html: str) -> list[str]:
    rows = [[*row[:4], row[5]] for row in table_rows(page_html) if len(row) == 6]
    return [s.name for s in settings if expected_row(s) not in rows]


def test_the_site_builds_with_warnings_as_errors(site):
    for page in ("index.html", "tutorial/index.html", "reference/options/index.html", "findings/index.html"):
        assert (site / page).is_file(), page
    assert not (site / "hooks").exists()


def test_a_broken_link_fails_the_build(tmp_path):
    # The planted defect: a copy of the docs whose home page links a page that does not exist.
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    with (copy / "docs" / "index.md").open("a") as fh:
        fh.write("\n[gone](how-to/no-such-page.md)\n")
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stdout + done.stderr


def test_the_options_reference_is_the_settings_table(site):
    page = (site / "reference" / "options" / "index.html").read_text()
    assert undocumented(SETTINGS, page) == []
    for s in SETTINGS:  # and each row shows the setting's default as the hook renders it
        row = next(r for r in table_rows(page) if len(r) == 6 and [*r[:4], r[5]] == expected_row(s))
        assert row[4] == _hook().default_text(s).strip("`"), s.name
    # Drift must show: a setting the page does not have, and one whose help changed since the build.
    planted = Setting("planted", parsers.text, None, "a setting added after the build", flag="--gemm-planted")
    changed = Setting(**{**vars(validate.CORE[0]), "help": "a help text that changed"})
    assert undocumented([planted, changed], page) == ["planted", "backends"]


def test_every_gemmguard_variable_is_on_the_environment_page(site):
    page = _text((site / "reference" / "environment" / "index.html").read_text())
    read = set()
    for folder in ("pytest_gemmguard", ".github"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".yml", ".yaml", ".sh"):
                read |= set(re.findall(r"GEMMGUARD_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    read.discard("GEMMGUARD_EOF")  # a heredoc delimiter of github/commands.py, not a variable
    assert {s.env for s in SETTINGS if s.env} | set(BACKEND_ENV) <= read
    missing = sorted(name for name in read if name not in page)
    assert missing == [], f"not on docs/reference/environment.md: {missing}"
    assert "GEMMGUARD_PLANTED_NEW" not in page  # a variable added to the code alone would be missing


def test_an_unknown_settings_marker_fails_the_build():
    hook = _hook()
    assert "--gemm-backends" in hook.substitute("<!-- settings: options -->")
    with pytest.raises(ValueError, match="unknown settings marker 'nope'"):
        hook.substitute("<!-- settings: nope -->", "page.md")


def broken_links(markdown: str, base: Path) -> list[str]:
    """Relative link targets of a Markdown text that name no file or folder under `base`."""
    targets = re.findall(r"\]\(([^)\s]+)\)", markdown)
    local = [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    return [t for t in local if t and not (base / t).exists()]


def test_every_readme_link_resolves():
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"\]\(docs/", readme), "README links no docs page"
    assert broken_links(readme, ROOT) == []
    assert broken_links(readme + "\n[gone](docs/no-such-page.md#x)\n", ROOT) == ["docs/no-such-page.md"]


def test_the_readme_stays_short():
    # The manual lives in docs/; README is what it is, install, a first test, the gate and the links.
    assert len((ROOT / "README.md").read_bytes()) <= 8 * 1024
