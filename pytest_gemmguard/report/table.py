"""Terminal output: the capability matrix in the header and the per-backend results table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from .. import backends
from ..cases import memory
from .tally import Tally


def capability_matrix(selected: list[str]) -> list[str]:
    """One line per backend selected or runnable here: whether it runs and, if not, why and how to fix it. A
    backend neither selected nor runnable is named once, in its fix's line (`unavailable_fixes`)."""
    lines = []
    for name in backends.names():
        probe = backends.probe(name)
        if name not in selected and not probe.available:
            continue
        mark = "*" if name in selected else " "
        lines.append(f" {mark} {name:8s} {probe.line()}")
    return lines


def unavailable_fixes() -> list[str]:
    """One header line per fix, naming the backends it would make runnable here (the same probe lines as the
    matrix, gathered: what is missing on this machine and how to get it)."""
    by_fix: dict[str, list[str]] = {}
    for name in backends.names():
        probe = backends.probe(name)
        if not probe.available:
            by_fix.setdefault(probe.fix or probe.reason, []).append(name)
    return [f"gemmguard: unavailable here: {', '.join(names)}; fix: {fix}" for fix, names in by_fix.items()]


def results_table(selected: list[str], summary: Tally, dynamic: bool, all_choices: bool = False) -> list[str]:
    """Per backend: tests passed / unsupported / failed / unavailable; examples verified; compile time; then
    tests that ended in their own error (never counted as the backend's failure); then the autotune
    candidates checked besides the winners (--gemm-all-choices)."""
    width = max([9, *(len(n) for n in selected)])
    tests = f"{'passed':>6s} {'unsup.':>6s} {'failed':>6s} {'unavail':>7s}"
    cases = f"{'verified':>8s} {'unsup.':>6s} {'failed':>6s} {'fused':>5s} {'compile s':>9s} {'cases/min':>9s}"
    ends = f"{'test error':>10s} {'xfail':>5s} {'xpass':>5s}"
    # The same words count tests on the left and the examples (cases checked) in the middle: say which is which.
    label = "examples (cases checked)"
    groups = f"{'':{width}s} {'tests':^{len(tests)}s} | {label:^{len(cases)}s} | {'tests':^{len(ends)}s}"
    head = f"{'backend':{width}s} {tests} | {cases} | {ends}"
    lines = [groups.rstrip(), head, "-" * len(head)]
    for name in selected:
        t, n = summary.outcomes.get(name, Counter()), summary.of(name)
        # Verified cases per minute of the examples' wall time (waits, unsupported cases and checks included).
        busy = n.example_s or n.check_s
        rate = f"{60 * n.verified / busy:9.1f}" if busy > 0 and n.verified else f"{'-':>9s}"
        lines.append(
            f"{name:{width}s} {t['passed']:6d} {t['unsupported']:6d} {t['failed']:6d} {t['unavailable']:7d} | "
            f"{n.verified:8d} {n.unsupported:6d} {n.failed:6d} {n.fused:5d} "
            f"{n.compile_s:9.1f} {rate} | {t['error']:10d} {t['xfailed']:5d} {n.xpassed:5d}"
        )
    c = summary.compiler
    lines.append(
        f"compiles: {int(c['compiles'])} ({c['compile_s']:.1f} s), calls served by a reused compile: "
        f"{int(c['reused_calls'])}; shapes {'dynamic' if dynamic else 'static'}"
    )
    if all_choices:
        for name in selected:
            n = summary.of(name)
            checked, wrong, unchecked = n.candidates, n.candidates_wrong, n.candidates_unchecked
            right, unsettled = n.candidates_unconfirmed, n.candidates_unsettled
            if not (checked or wrong or unchecked or right or unsettled):
                continue  # autotuning offered no choice beside the winner (ATen on the CPU): nothing to say
            lines.append(
                f"{name}: autotune candidates checked: {checked}, wrong: {wrong}, not checked: {unchecked} "
                "(--gemm-all-choices; a candidate is checked where its shape is first autotuned)"
            )
            if right:
                lines.append(
                    f"{name}: {right} of the wrong-looking candidates were right when compiled alone on the case's "
                    "inputs: autotuning's benchmark inputs, not a wrong result (not failures)"
                )
            if unsettled:
                lines.append(
                    f"{name}: {unsettled} wrong-looking candidates could not be confirmed (not offered again, not "
                    "alone, their compile raised, or over 3 per case): not failures; -v shows each"
                )
    else:
        lines.append("autotune candidates: only the winners were checked (--gemm-all-choices=off)")
    for name in selected:
        chunked = summary.of(name).chunked
        if chunked:
            lines.append(
                f"{name}: {chunked} verified example{'s' if chunked != 1 else ''} judged in row chunks (a tensor past "
                f"{memory.CHUNK_ELEMENTS} elements): the winner alone, no autotune candidates, thread teams or "
                "other sizes"
            )
    for name in selected:
        n = summary.of(name)
        if n.dynamic_compiles:
            lines.append(
                f"{name}: {n.dynamic_compiles} verified case{'s' if n.dynamic_compiles != 1 else ''} compiled again "
                f"with dynamic shapes ({n.dynamic_s:.1f} s), {n.dynamic_judged} reused at another M and right at both "
                "(the rest ran no kernel of the backend or recompiled)"
            )
    for name in selected:
        ahead, own = summary.of(name).compiled_ahead, summary.of(name).compiled_ahead_fn
        if ahead:
            of_which = f" ({own} with the test's own function)" if own else ""
            lines.append(
                f"{name}: {ahead} examples compiled ahead by worker processes{of_which} (--gemm-compile-workers)"
            )
    lines += time_lines(summary, selected)
    for name in selected:
        like_eager = summary.of(name).failed_like_eager
        if like_eager:
            lines.append(
                f"{name}: {like_eager} of its failed examples are wrong like eager PyTorch "
                "(eager is outside the bound too: look at the library first)"
            )
    for name in selected:
        mine = Counter({reason: k for (backend, reason), k in summary.reasons.items() if backend == name})
        for reason, count in mine.most_common(3):
            lines.append(f"unsupported by {name} ({count}x): {reason}")
    return lines


def time_lines(summary: Tally, selected: list[str]) -> list[str]:
    """Per backend, where its examples' wall time went: waiting for the compile-ahead workers, compiling in
    the test process (a compile the workers' cache served costs little here), and the rest (drawing inputs,
    the oracle, running and judging, confirming candidates, the differential), the dynamic-shape check apart
    (crosscheck/sizes.py: its compile, when no worker made it first)."""
    lines = []
    for name in selected:
        n = summary.of(name)
        total, wait, compile_s, dynamic_s = n.example_s, n.wait_s, n.compile_s, n.dynamic_s
        if total <= 0:
            continue
        rest = max(0.0, total - wait - compile_s - dynamic_s)
        dynamic = f"{dynamic_s:.1f} s in the dynamic-shape check, " if n.dynamic_compiles else ""
        lines.append(
            f"{name}: {total:.1f} s in examples: {wait:.1f} s waiting for compile-ahead workers, {compile_s:.1f} s "
            f"compiling in the test process, {dynamic}{rest:.1f} s drawing, checking and confirming"
        )
    return lines


def gpu_lines(summary: Tally) -> list[str]:
    """Under --gemm-gpus, one line per GPU the workers were given: its tests and how they ended (a GPU that
    failed shows as the one whose tests failed)."""
    lines = []
    for label in sorted(summary.gpus):
        t = summary.gpus[label]
        ends = ", ".join(f"{k} {t[k]}" for k in sorted(t))
        lines.append(f"gemmguard: {label}: {sum(t.values())} GEMM tests ({ends})")
    return lines


def known_lines(tally: Tally, entries: Mapping[str, Any]) -> list[str]:
    """One line per shipped known failure whose cases ran in this session and never failed (KnownTracker.seen):
    its bug did not show here. Not a warning: most entries strike some cases of their class, or some machines,
    and its evidence of where it was right is shown beside it. `entries`: the shipped entries by id."""
    passed, failed = Counter(), Counter()
    for (backend, entry_id, how), n in tally.known.items():
        (passed if how == "passed" else failed)[(backend, entry_id)] += n
    lines = []
    for (backend, entry_id), n in sorted(passed.items()):
        entry = entries.get(entry_id)
        if failed[(backend, entry_id)] or entry is None:
            continue
        right = f"; seen right before on {entry.seen_right[0]}" if entry.seen_right else ""
        lines.append(
            f"{backend}: shipped known failure {entry_id} did not show here ({n} matching example"
            f"{'s' if n != 1 else ''} passed, none failed{right}); if it never shows on {entry.versions_text()}, "
            f"it may be fixed: {entry.link}"
        )
    return lines
