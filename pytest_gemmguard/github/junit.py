"""Test results out of pytest's JUnit XML (either junit_family): each test's outcome, the backend it ran on,
the file and line to annotate, and the first lines of gemmguard's failure report."""

from __future__ import annotations

import dataclasses
import os
import re
import xml.etree.ElementTree as ET

from ..errors import GemmguardError

MAX_REPORT_LINES = 12  # at most this many lines of gemmguard's failure report (header through repro)


@dataclasses.dataclass
class TestResult:
    __test__ = False  # not a pytest test class, whatever its name

    nodeid: str
    file: str  # relative to the root the tests ran in ("" when unknown)
    line: int  # 1-based line to annotate (0 when unknown)
    outcome: str  # passed | failed | error | skipped | unsupported | unavailable | xfailed
    backend: str | None
    title: str = ""  # first line of the failure (gemmguard's report header when there is one)
    report: list[str] = dataclasses.field(default_factory=list)  # the report's further lines, for the annotation
    replay: str = ""  # gemmguard's `pytest ... --gemm-replay=...` line


_FRAME = re.compile(r"^(?P<path>[^\s:][^:]*\.py):(?P<line>\d+): ")
# gemmguard's own report, which stands in place of a traceback, names the test's line: "  test:     t.py:7 in ..."
_TEST_LINE = re.compile(r"^\s*test:\s+(?P<path>[^\s:][^:]*\.py):(?P<line>\d+) in ")
# "pytest_gemmguard.errors.GemmMismatch: " before the message: a dotted name ending in a class name.
_EXC_PREFIX = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*: ")
_AFTER_REPORT = re.compile(r"(Falsifying example|Failing test case|Explanation:|You can reproduce|gemmguard reproduce)")


def _test_file(classname: str, root: str) -> str:
    """'tests.test_x.TestY' -> 'tests/test_x.py' when that file exists under root (the module part of the id)."""
    parts = classname.split(".") if classname else []
    for cut in range(len(parts), 0, -1):
        candidate = "/".join(parts[:cut]) + ".py"
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return "/".join(parts) + ".py" if parts else ""


def _def_line(root: str, path: str, name: str) -> int:
    """The line of `def name` in the file: where to point when no traceback frame is in the test's file (a
    report gemmguard wrote itself, such as a crash or a timeout, has no traceback)."""
    base = name.split("[", 1)[0]
    try:
        with open(os.path.join(root, path), encoding="utf-8") as fh:
            for number, text in enumerate(fh, 1):
                if re.match(rf"\s*(async\s+)?def\s+{re.escape(base)}\b", text):
                    return number
    except OSError:
        pass
    return 0


def _frame_line(text: str, path: str, root: str) -> int:
    """The deepest traceback frame in the test's own file: the line of the test that failed (for a
    @gemm_case test, its `gemm.check()` call; JUnit XML of junit_family xunit2 carries no line at all)."""
    want = os.path.normpath(os.path.join(root, path))
    found = 0
    for raw in text.splitlines():
        m = _FRAME.match(raw) or _TEST_LINE.match(raw)
        if m and os.path.normpath(os.path.join(root, m.group("path"))) == want:
            found = int(m.group("line"))
    return found


def _exception_lines(text: str) -> list[str]:
    """The exception message of a pytest long report: its last run of 'E   ' lines, prefix and type removed."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for raw in text.splitlines():
        if raw.startswith("E ") or raw == "E":
            current.append(raw[1:])
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    if not blocks:
        lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
        if lines and lines[0].startswith("gemmguard: "):
            return lines  # gemmguard's report in place of a traceback: all of it is the message
        return lines[-1:]
    lines = blocks[-1]
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    lines = [x[indent:].rstrip() for x in lines]
    if lines:
        lines[0] = _EXC_PREFIX.sub("", lines[0], count=1)
    return lines


def _report(lines: list[str]) -> tuple[str, list[str], str]:
    """Title, report lines and replay line out of an exception message. gemmguard's failure report starts
    with 'gemmguard: ' and ends with its '  repro:' line; Hypothesis's explanation after it is dropped (its
    shrunk case is in the report)."""
    start = next((i for i, x in enumerate(lines) if x.startswith("gemmguard: ")), 0)
    body: list[str] = []
    for text in lines[start:]:
        if _AFTER_REPORT.match(text):
            break
        if text.strip():
            body.append(text)
        if text.startswith("  repro:"):
            break
    body = body[:MAX_REPORT_LINES] or ["(no message)"]
    replay = next((x.removeprefix("gemmguard reproduce: ") for x in lines if x.startswith("gemmguard reproduce:")), "")
    return body[0], body[1:], replay


def _backend(testcase: ET.Element) -> str | None:
    """The backend a gemmguard test ran on: the plugin records it as a user property, which JUnit keeps (a
    test id's brackets can hold any parameters, so they are not read)."""
    for prop in testcase.iter("property"):
        if prop.get("name") == "gemm_backend":
            return prop.get("value")
    return None


def _skip_outcome(skipped: ET.Element) -> str:
    message = skipped.get("message", "") + " " + (skipped.text or "")
    if skipped.get("type") == "pytest.xfail":
        return "xfailed"
    if "gemmguard: unsupported" in message:
        return "unsupported"
    if "gemmguard: backend" in message:
        return "unavailable"
    return "skipped"


def read_junit(path: str, root: str = ".") -> list[TestResult]:
    """Every test case of a pytest JUnit XML file; a missing or corrupt file raises GemmguardError."""
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError) as exc:
        raise GemmguardError(f"gemmguard: cannot read JUnit XML {path}: {exc}") from None
    results = []
    for case in tree.iter("testcase"):
        name, classname = case.get("name", ""), case.get("classname", "")
        file = _test_file(classname, root)
        module = file[:-3].replace("/", ".") if file else ""
        classes = classname[len(module) + 1 :].split(".") if classname.startswith(module + ".") else []
        nodeid = "::".join([file, *[c for c in classes if c], name]) if file else name
        result = TestResult(nodeid, file, 0, "passed", _backend(case))
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        if failure is not None or error is not None:
            node = failure if failure is not None else error
            result.outcome = "failed" if failure is not None else "error"
            text = node.text or node.get("message", "")
            result.title, result.report, result.replay = _report(_exception_lines(text))
            result.line = _frame_line(text, file, root) or _def_line(root, file, name) or 1
        elif skipped is not None:
            result.outcome = _skip_outcome(skipped)
            result.title = skipped.get("message", "")
        if not result.line and file:  # a test that passed here may still fail the gate (a benchmark vs the base)
            result.line = _def_line(root, file, name)
        results.append(result)
    return results
