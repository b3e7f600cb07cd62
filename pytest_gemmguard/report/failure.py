"""The failure report of a wrong result: what a user reads first when gemmguard goes red."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..compile.candidates import CandidateResult
    from ..compile.compiler import CallRecord
    from ..crosscheck.confirm import Confirmation
    from ..crosscheck.differential import Other
    from ..oracle import Verdict
    from ..run.example import Example


def failure_report(
    example: Example,
    verdict: Verdict,
    record: CallRecord,
    repro_path: str | None,
    route: str = "",
    flags: str = "",
    others: Sequence[Other] | None = None,
) -> str:
    """The report of a wrong result; `others` is the cross-backend differential (crosscheck/differential.py), None where
    none was run (a failure Hypothesis will not report)."""
    case, mismatch = example.case, verdict.mismatch
    via = f" (route {route})" if route and route != example.backend else ""
    lines = [
        f"gemmguard: {example.backend}{via} produced a wrong result",
        f"  case:     {case.describe()}",
        f"            {case!r}",
    ]
    if mismatch is not None and mismatch.kind in ("shape", "dtype"):
        lines.append(f"  output:   {mismatch.detail}")
    elif mismatch is not None:
        lines.append(
            f"  worst:    element {mismatch.index}: got {mismatch.actual:.6g}, expected {mismatch.expected:.6g}, "
            f"|error| {mismatch.error:.3g} vs tolerance {mismatch.tolerance:.3g} ({verdict.max_ratio:.3g}x)"
        )
        what = {"unwritten": " (NaN: element never written)", "nonfinite": " (non-finite)"}.get(mismatch.kind, "")
        lines.append(f"  failing:  {mismatch.bad} of {mismatch.total} elements{what}")
    if verdict.eager_ratio is not None:
        lines.append(f"  eager PyTorch on the same inputs uses {verdict.eager_ratio:.3g}x of the tolerance")
        if verdict.eager_ratio > 1:
            lines += _like_eager(example, verdict)
    if others is not None:
        from ..crosscheck.differential import (
            report_lines,  # here: crosscheck/differential.py needs torch, this module does not
        )

        lines += report_lines(others)
    if flags:
        lines.append(f"  flags:    {flags}")
    kernels = [f"{k} ({b})" for g in record.graphs for k, b in g.owners]
    lines.append(f"  kernels:  {', '.join(kernels) or 'none recorded'}")
    lines.append(f"  repro:    python {repro_path}" if repro_path else "  repro:    not written (see --gemm-repro-dir)")
    return "\n".join(lines)


def shown(exc: BaseException) -> str:
    """What pytest shows for a wrong result, in place of a traceback through gemmguard: the report, the test's own
    line that checked, then gemmguard's notes, whose last is the one reproduce line. Hypothesis's notes are left
    out: its failing example is the report's case, and its @reproduce_failure advice is the reproduce line's."""
    lines = [str(exc)]
    where = test_line(exc)
    if where:
        lines.append(f"  test:     {where}")
    lines += [n for n in getattr(exc, "__notes__", ()) if n.startswith("gemmguard")]
    return "\n".join(lines)


def test_line(exc: BaseException) -> str:
    """'file:line in function: source' of the innermost frame `exc` passed through that is neither gemmguard's
    nor a library's (the test's own call of gemm.check); '' where there is none."""
    import linecache
    import os
    import sysconfig

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pytest_gemmguard/, every subpackage
    skipped = [package + os.sep]
    skipped += [os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "purelib", "platlib")]
    tb, last = exc.__traceback__, None
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if not path.startswith("<") and not os.path.abspath(path).startswith(tuple(skipped)):
            last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    path, lineno = last.tb_frame.f_code.co_filename, last.tb_lineno
    shown_path = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    source = linecache.getline(path, lineno).strip()
    return f"{shown_path}:{lineno} in {last.tb_frame.f_code.co_name}" + (f": {source[:100]}" if source else "")


def _like_eager(example: Example, verdict: Verdict) -> list[str]:
    """Eager PyTorch is outside the bound too on the same inputs. Still a failure (never hidden: for the aten
    backend the compiled code calls the same library as eager), but one whose next step is plain: whose bug it
    is, and how to keep the gate green until it is fixed."""
    eager = verdict.eager_ratio or 0.0
    if verdict.max_ratio > 2 * eager:  # the bound's own factor-2 margin
        return [
            f"  library:  eager PyTorch is outside the bound too on these inputs, but {example.backend} is "
            f"{verdict.max_ratio / eager:.3g}x further off: the backend's own error, with the library's on top"
        ]
    case = example.case
    try:
        from importlib.metadata import version

        major, minor = (int(p) for p in version("torch").split(".")[:2])
        versions = f'{{ torch = ">={major}.{minor},<{major}.{minor + 1}" }}'
    except Exception:  # no torch distribution to name (a source build): the user fills it in
        versions = '{ torch = "..." }'
    via = f'route = "{example.route}", ' if example.route else ""
    return [
        "  library:  eager PyTorch is outside the bound too on these inputs, and this backend is within 2x of it: "
        "wrong like the library (torch or its vendor GEMM), not this backend alone",
        "  next:     the repro script prints eager's error too. If both results are what a correct library may "
        "return, the bound is gemmguard's bug (report it with the script); if not, torch's (report it there).",
        f'            Until then a known-failures entry keeps the gate green: backend = "{example.backend}", {via}'
        f'ops = ["{case.op}"], dtypes = ["{case.dtype}"], versions = {versions}, kind = "wrong-result", '
        "with an id, link and reason of yours, narrowed to the layouts and sizes you saw (README: Known failures)",
    ]


def candidate_report(
    example: Example, found: list[Confirmation], all_seen: list[CandidateResult], record: CallRecord, route: str = ""
) -> str:
    """A wrong autotune candidate that lost: the winner was right, and a compile that picks the candidate was
    wrong on the case's inputs (crosscheck/confirm.py), so the report is about the candidate."""
    case = example.case
    via = f" (route {route})" if route and route != example.backend else ""
    checked = sum(r.checked for r in all_seen)
    confirmed = [c for c in found if c.confirmed]
    lines = [
        f"gemmguard: {example.backend}{via}: {len(found)} of {checked} autotune candidates checked produced a wrong "
        f"result, {len(confirmed)} confirmed by a compile that picks it; the winner that ran was right "
        "(--gemm-all-choices)",
        f"  case:      {case.describe()}",
        f"             {case!r}",
    ]
    for c in found:
        lines.append(f"  wrong:     {c.candidate.line()}")
        lines.append(f"             {'confirmed' if c.confirmed else 'not confirmed'}: {c.line()}")
    kernels = [f"{k} ({b})" for g in record.graphs for k, b in g.owners]
    lines.append(f"  winner:    {', '.join(kernels) or 'none recorded'}: within tolerance on the case's inputs")
    lines.append(
        "  why:       autotuning picks per GPU and shape; where this candidate wins (another GPU, shape or "
        "Inductor version), the compiled code is wrong"
    )
    return "\n".join(lines)
