"""The counts behind the results table, as plain data.

While tests run, each backend's examples are counted (verified, unsupported, failed, fused) with their
seconds (compile_s, check_s) and why examples were unsupported. A test's share of those counts travels on
its pytest report (`since`), and the table is built from reports alone (`add_share`, `add_outcome`), so it
is the same whether tests ran here or in pytest-xdist workers, whose controller never runs a test.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)  # (backend, what) -> examples or seconds
    reasons: Counter = field(default_factory=Counter)  # (backend, reason) -> examples
    outcomes: dict = field(default_factory=lambda: defaultdict(Counter))  # backend -> test outcomes
    compiler: Counter = field(default_factory=Counter)  # compiles, compile_s, reused_calls
    gpus: dict = field(default_factory=lambda: defaultdict(Counter))  # GPU label -> test outcomes (--gemm-gpus)

    # ------------------------------------------------------------ while examples run

    def add(self, backend: str, what: str, amount: float = 1) -> None:
        self.counts[(backend, what)] += amount

    def note_unsupported(self, backend: str, reason: str) -> None:
        self.add(backend, "unsupported")
        self.reasons[(backend, reason)] += 1

    def snapshot(self) -> Tally:
        return Tally(Counter(self.counts), Counter(self.reasons))

    def since(self, before: Tally) -> dict:
        """What was added after `before`, as JSON-able lists (a test's share, put on its report)."""
        return {
            "counts": [[*key, n - before.counts[key]] for key, n in self.counts.items() if n != before.counts[key]],
            "reasons": [[*key, n - before.reasons[key]] for key, n in self.reasons.items() if n != before.reasons[key]],
        }

    # ------------------------------------------------------------ from reports

    def add_outcome(self, backend: str, outcome: str, gpu: str | None = None) -> None:
        self.outcomes[backend][outcome] += 1
        if gpu:
            self.gpus[gpu][outcome] += 1

    def add_share(self, share: dict) -> None:
        for backend, what, n in share.get("counts", ()):
            self.counts[(backend, what)] += n
        for backend, reason, n in share.get("reasons", ()):
            self.reasons[(backend, reason)] += n
        self.compiler.update(share.get("compiler", {}))

    def ran_anything(self) -> bool:
        """Whether any backend verified or failed at least one example, or any test passed or failed."""
        if any(self.counts[(b, w)] for (b, w) in list(self.counts) if w in ("verified", "failed")):
            return True
        return any(c["passed"] or c["failed"] or c["error"] for c in self.outcomes.values())
