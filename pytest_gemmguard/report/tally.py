"""The counts behind the results table, as plain data.

While tests run, each backend's examples are counted (`Counts`: verified, unsupported, failed, fused, the autotune
candidates judged, the examples compiled ahead) with their seconds (compile_s, check_s, ...) and why examples were
unsupported. A test's share of those counts travels on its pytest report (`since`), and the table is built from
reports alone (`add_share`, `add_outcome`), so it is the same whether tests ran here or in pytest-xdist workers,
whose controller never runs a test.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass
class Counts:
    """One backend's examples, by how they ended, and where their time went."""

    verified: int = 0
    unsupported: int = 0
    failed: int = 0  # a wrong result no known failure or base explains (run/explore.py counts, after the check)
    failed_like_eager: int = 0  # of those, wrong where eager PyTorch is outside the bound too
    xfailed: int = 0  # a known failure, or one the base has too
    xpassed: int = 0  # a known failure that did not show
    fused: int = 0  # verified with an epilogue step inside the GEMM's kernel
    candidates: int = 0  # autotune candidates judged besides the winner (--gemm-all-choices)
    candidates_wrong: int = 0
    candidates_unchecked: int = 0
    candidates_unconfirmed: int = 0  # wrong on autotuning's tensors, right compiled alone (crosscheck/confirm.py)
    candidates_unsettled: int = 0  # wrong-looking, and no compile could settle it
    chunked: int = 0  # verified in row chunks (cases/memory.py, chunked): the winner alone was judged
    dynamic_compiles: int = 0  # verified cases compiled again with dynamic shapes (crosscheck/sizes.py)
    dynamic_judged: int = 0  # of those, reused at another M without recompiling, and right at both
    dynamic_s: float = 0.0  # that check's compiles and runs, in the test process
    compiled_ahead: int = 0  # by a compile-ahead worker (ahead/)
    compiled_ahead_fn: int = 0  # of those, with the test's own function
    compile_s: float = 0.0  # compiling in the test process
    check_s: float = 0.0  # the verified checks, end to end
    wait_s: float = 0.0  # waiting for compile-ahead workers
    example_s: float = 0.0  # the examples' wall time


COUNTS = tuple(f.name for f in dataclasses.fields(Counts))


@dataclass
class Tally:
    backends: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))  # backend -> its counts
    reasons: Counter = field(default_factory=Counter)  # (backend, reason) -> examples
    outcomes: dict = field(default_factory=lambda: defaultdict(Counter))  # backend -> test outcomes
    compiler: Counter = field(default_factory=Counter)  # compiles, compile_s, reused_calls
    gpus: dict = field(default_factory=lambda: defaultdict(Counter))  # GPU label -> test outcomes (--gemm-gpus)
    # (backend, shipped known-failure id, "passed" | "failed") -> examples it matched (KnownTracker.seen)
    known: Counter = field(default_factory=Counter)

    # ------------------------------------------------------------ while examples run

    def of(self, backend: str) -> Counts:
        """`backend`'s counts, to read or to add to: `tally.of("aten").verified += 1`."""
        return self.backends[backend]

    def note_unsupported(self, backend: str, reason: str) -> None:
        self.of(backend).unsupported += 1
        self.reasons[(backend, reason)] += 1

    def note_known(self, rows: Iterable[Sequence]) -> None:
        """Add (backend, shipped entry id, "passed" | "failed", examples) rows: a test's (KnownTracker.seen), or a
        share's from a pytest-xdist worker."""
        for backend, entry_id, how, n in rows:
            self.known[(backend, entry_id, how)] += n

    def snapshot(self) -> Tally:
        copies = defaultdict(Counts, {b: dataclasses.replace(c) for b, c in self.backends.items()})
        return Tally(copies, Counter(self.reasons), known=Counter(self.known))

    def since(self, before: Tally) -> dict:
        """What was added after `before`, as JSON-able lists (a test's share, put on its report)."""
        counts = []
        for backend, now in self.backends.items():
            then = before.backends.get(backend, Counts())
            for k in COUNTS:
                if getattr(now, k) != getattr(then, k):
                    counts.append([backend, k, getattr(now, k) - getattr(then, k)])
        return {
            "counts": counts,
            "reasons": [[*key, n - before.reasons[key]] for key, n in self.reasons.items() if n != before.reasons[key]],
            "known": [[*key, n - before.known[key]] for key, n in self.known.items() if n != before.known[key]],
        }

    # ------------------------------------------------------------ from reports

    def add_outcome(self, backend: str, outcome: str, gpu: str | None = None) -> None:
        self.outcomes[backend][outcome] += 1
        if gpu:
            self.gpus[gpu][outcome] += 1

    def add_share(self, share: dict) -> None:
        for backend, what, n in share.get("counts", ()):
            counts = self.of(backend)
            setattr(counts, what, getattr(counts, what) + n)
        for backend, reason, n in share.get("reasons", ()):
            self.reasons[(backend, reason)] += n
        self.note_known(share.get("known", ()))
        self.compiler.update(share.get("compiler", {}))

    def ran_anything(self) -> bool:
        """Whether any backend verified or failed at least one example (a known failure that showed again counts:
        its kernel ran, as wrong as known), or any test passed, failed or was xfail."""
        if any(c.verified or c.failed or c.xfailed for c in self.backends.values()):
            return True
        return any(c["passed"] or c["failed"] or c["error"] or c["xfailed"] for c in self.outcomes.values())
