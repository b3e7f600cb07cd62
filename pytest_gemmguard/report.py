"""Terminal output: the capability matrix in the header and the per-backend results table."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from . import backends


def capability_matrix(selected: list[str]) -> list[str]:
    """One line per known backend: whether it runs here and, if not, why and how to fix it."""
    lines = []
    for name in backends.names():
        probe = backends.probe(name)
        mark = "*" if name in selected else " "
        lines.append(f" {mark} {name:8s} {probe.line()}")
    return lines


@dataclass
class Summary:
    """Everything the results table shows, gathered from test reports only (see runner.Tally)."""

    outcomes: dict = field(default_factory=lambda: defaultdict(Counter))  # backend -> test outcomes
    counts: Counter = field(default_factory=Counter)  # (backend, what) -> examples or seconds
    reasons: Counter = field(default_factory=Counter)  # (backend, reason) -> examples
    compiler: Counter = field(default_factory=Counter)  # compiles, compile_s, reused_calls

    def add_outcome(self, backend: str, outcome: str) -> None:
        self.outcomes[backend][outcome] += 1

    def add_share(self, share: dict) -> None:
        for backend, what, n in share.get("counts", ()):
            self.counts[(backend, what)] += n
        for backend, reason, n in share.get("reasons", ()):
            self.reasons[(backend, reason)] += n
        self.compiler.update(share.get("compiler", {}))


def results_table(selected: list[str], summary: Summary, dynamic: bool) -> list[str]:
    """Per backend: tests passed / unsupported / failed / unavailable; examples verified; compile time."""
    head = (
        f"{'backend':9s} {'passed':>6s} {'unsup.':>6s} {'failed':>6s} {'unavail':>7s} | "
        f"{'verified':>8s} {'unsup.':>6s} {'failed':>6s} {'fused':>5s} {'compile s':>9s} {'cases/min':>9s}"
    )
    lines = [head, "-" * len(head)]
    for name in selected:
        t = summary.outcomes.get(name, Counter())

        def n(what: str, backend: str = name) -> float:
            return summary.counts[(backend, what)]

        busy, verified = n("check_s"), int(n("verified"))
        rate = f"{60 * verified / busy:9.1f}" if busy > 0 and verified else f"{'-':>9s}"
        lines.append(
            f"{name:9s} {t['passed']:6d} {t['unsupported']:6d} {t['failed']:6d} {t['unavailable']:7d} | "
            f"{verified:8d} {int(n('unsupported')):6d} {int(n('failed')):6d} {int(n('fused')):5d} "
            f"{n('compile_s'):9.1f} {rate}"
        )
    c = summary.compiler
    lines.append(
        f"compiles: {int(c['compiles'])} ({c['compile_s']:.1f} s), calls served by a reused compile: "
        f"{int(c['reused_calls'])}; shapes {'dynamic' if dynamic else 'static'}"
    )
    for name in selected:
        mine = Counter({reason: k for (backend, reason), k in summary.reasons.items() if backend == name})
        for reason, count in mine.most_common(3):
            lines.append(f"unsupported by {name} ({count}x): {reason}")
    return lines
