"""mkdocs hook: the options reference and the environment variables page are generated from gemmguard's one
settings table (`pytest_gemmguard.validate`: CORE, BENCH; the backends' own environment variables,
`pytest_gemmguard.backends.settings`: BACKEND_ENV) when the site is built, so a setting
added, renamed or re-defaulted there shows in the docs without anyone editing them.

A page asks for a table with a marker line of its own: `<!-- settings: options -->` or
`<!-- settings: environment -->`. An unknown marker fails the build (one line naming the page and the marker).
tests/test_docs.py builds the site and checks every setting is on the built pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pytest_gemmguard import parsers, validate
from pytest_gemmguard.backends.settings import BACKEND_ENV
from pytest_gemmguard.validate import Setting

MARKER = re.compile(r"^<!-- settings: ([a-z]+) -->$", re.M)


def _code(text: str) -> str:
    return "`" + text + "`"  # Python-Markdown's tables keep a `|` inside a code span in its cell


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # outside a code span a bare `|` would end the cell


def default_text(s: Setting) -> str:
    """The default as a user would write it (`on`, `600`, `auto`), or `-` where the setting is unset."""
    value = s.default
    if s.parse is parsers.on_off:
        return _code("on" if value else "off")
    if value is None and s.parse is parsers.workers:
        return _code("auto")  # workers() reads 'auto' as None: decided per backend when the run starts
    if s.is_flag or value is None:
        return "-"
    if isinstance(value, bool):
        return _code("true" if value else "false")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        value = ",".join(value)
    return _code(str(value))


def _option(s: Setting) -> str:
    if s.flag is None:
        return "-"
    return _code(s.flag if s.is_flag or s.metavar is None else f"{s.flag}={s.metavar}")


def options_table(settings: Iterable[Setting]) -> str:
    """One row per setting: the flag, its ini key, environment variable and `[tool.gemmguard]` key, default, help."""
    rows = [
        "| option | ini key | environment | `[tool.gemmguard]` | default | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for s in settings:
        places = [_option(s)] + [_code(v) if v else "-" for v in (s.ini, s.env, s.table)]
        rows.append("| " + " | ".join([*places, default_text(s), _cell(s.help)]) + " |")
    return "\n".join(rows)


def environment_table(settings: Iterable[Setting], backend_env: dict[str, tuple[Any, str]]) -> str:
    rows = ["| variable | same as | meaning |", "|---|---|---|"]
    for s in settings:
        if s.env:
            rows.append(f"| {_code(s.env)} | {_option(s)} | {_cell(s.help)} |")
    for name, (_, meaning) in backend_env.items():
        rows.append(f"| {_code(name)} | - (read by its backend) | {_cell(meaning)} |")
    return "\n".join(rows)


def render(kind: str, page: str = "") -> str:
    settings = (*validate.CORE, *validate.BENCH)
    if kind == "options":
        core = options_table(validate.CORE)
        bench = options_table(validate.BENCH)
        return f"### Checking (`gemmguard`)\n\n{core}\n\n### Measuring (`gemmguard_bench`)\n\n{bench}"
    if kind == "environment":
        return environment_table(settings, BACKEND_ENV)
    raise ValueError(f"{page}: unknown settings marker {kind!r} (options or environment)")


def substitute(markdown: str, page: str = "") -> str:
    return MARKER.sub(lambda m: render(m.group(1), page), markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return substitute(markdown, page.file.src_path)
