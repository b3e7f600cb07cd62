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
class Outcomes:
    """Test-level outcomes per backend, as pytest reported them."""

    by_backend: dict = field(default_factory=lambda: defaultdict(Counter))

    def add(self, backend: str, outcome: str) -> None:
        self.by_backend[backend][outcome] += 1


def results_table(selected: list[str], outcomes: Outcomes, tally, stats: dict, dynamic: bool) -> list[str]:
    """Per backend: tests passed / unsupported / failed / unavailable; examples verified; compile time."""
    head = (
        f"{'backend':9s} {'passed':>6s} {'unsup.':>6s} {'failed':>6s} {'unavail':>7s} | "
        f"{'verified':>8s} {'unsup.':>6s} {'failed':>6s} {'fused':>5s} {'compile s':>9s} {'cases/min':>9s}"
    )
    lines = [head, "-" * len(head)]
    for name in selected:
        t = outcomes.by_backend.get(name, Counter())
        verified = tally.verified[name]
        busy = tally.check_s[name]
        rate = f"{60 * verified / busy:9.1f}" if busy > 0 and verified else f"{'-':>9s}"
        lines.append(
            f"{name:9s} {t['passed']:6d} {t['unsupported']:6d} {t['failed']:6d} {t['unavailable']:7d} | "
            f"{verified:8d} {tally.unsupported[name]:6d} {tally.failed[name]:6d} {tally.fused[name]:5d} "
            f"{tally.compile_s[name]:9.1f} {rate}"
        )
    mode = "dynamic" if dynamic else "static"
    lines.append(
        f"compiles: {stats['compiles']} ({stats['compile_s']:.1f} s), calls served by a reused compile: "
        f"{stats['reused_calls']}; shapes {mode}"
    )
    for name in selected:
        for reason, count in tally.reasons.get(name, Counter()).most_common(3):
            lines.append(f"unsupported by {name} ({count}x): {reason}")
    return lines
