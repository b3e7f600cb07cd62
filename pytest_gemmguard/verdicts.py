"""Verdicts on a change: a record of what every example of a run concluded, and the comparison of a head run with
its base's record. Torch-free.

A gate that blocks a pull request on an upstream bug the author cannot act on gets switched off. So a failure is
judged against the base: the head run reads the base's record (`--gemm-base-verdicts`), draws the same cases
(the record's seed; no example database), and a failure the base has too is *pre-existing* (reported, never
blocking), one the base lacks is *new* (red), a case the base failed and the head passes is *fixed*, and a case
the base's backend ran that the head's refuses is *coverage lost* (red). Base and head may run in different
environments (the pull request that upgrades torch): a record is plain JSON with the versions it ran on.

A run that writes a record (`--gemm-verdicts`) keeps going past a failure, so the record covers the whole draw
and the head, which continues past a pre-existing failure, meets only cases the base judged too.

    {"gemmguard_verdicts": 1, "seed": 7, "facts": {"torch": "2.13.0+cpu", ...},
     "results": [{"test": "tests/test_x.py::test_any[aten]", "backend": "aten",
                  "case": "mm 8×16×32 float32 contiguous epilogue=none", "outcome": "verified"}, ...]}

Outcomes: verified, unsupported, wrong-result, raises, known:<entry id> (a known failure), pre-existing.
"""

from __future__ import annotations

import glob
import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import files
from .errors import GemmUsageError

FORMAT = 1
KEY = "gemmguard_verdicts"
PASS = "verified"
UNSUPPORTED = "unsupported"
FAILURES = ("wrong-result", "raises", "pre-existing")  # and every "known:<id>"
PACKAGES = ("torch", "triton", "pytest-gemmguard", "hypothesis", "nvidia-cutlass", "nvidia-cutlass-dsl")
_RANK = {UNSUPPORTED: 0, PASS: 1}  # the worst outcome of a case seen twice (a shrink step, a rerun) is kept


def is_failure(outcome: str) -> bool:
    return outcome in FAILURES or outcome.startswith("known:")


def _rank(outcome: str) -> int:
    return _RANK.get(outcome, 2)


def facts() -> dict[str, str | None]:
    """The environment a record was made in (package metadata: nothing imported)."""
    from .known import installed_versions

    return {**installed_versions(PACKAGES), "python": platform.python_version()}


@dataclass
class Record:
    """The outcome of every (test, case) a run judged."""

    seed: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    results: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (test, case) -> row

    def add(self, test: str, backend: str, case: str, outcome: str) -> None:
        old = self.results.get((test, case))
        if old is None or _rank(outcome) > _rank(old["outcome"]):
            self.results[(test, case)] = {"test": test, "backend": backend, "case": case, "outcome": outcome}

    def outcome(self, test: str, case: str) -> str | None:
        row = self.results.get((test, case))
        return None if row is None else row["outcome"]

    def failed(self, test: str, case: str) -> bool:
        outcome = self.outcome(test, case)
        return outcome is not None and is_failure(outcome)

    def ran(self, test: str, case: str) -> bool:
        """The backend ran its own kernel on the case (right or wrong): what a refusal on the head would lose."""
        outcome = self.outcome(test, case)
        return outcome is not None and outcome != UNSUPPORTED and outcome != "raises"

    def merge(self, other: Record) -> None:
        for row in other.results.values():
            self.add(row["test"], row["backend"], row["case"], row["outcome"])

    def to_json(self) -> dict[str, Any]:
        rows = sorted(self.results.values(), key=lambda r: (r["test"], r["case"]))
        return {KEY: FORMAT, "seed": self.seed, "facts": self.facts, "results": rows}

    def save(self, path: str) -> str:
        return files.write_json_atomic(path, self.to_json())


def load(path: str) -> Record:
    """Read a record; a missing, corrupt or foreign file is one GemmUsageError line saying what to do."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise GemmUsageError(f"{path}: no such verdict record; write one with --gemm-verdicts={path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = f"not a readable verdict record ({exc})"
        raise GemmUsageError(f"{path}: {why}; write it again with --gemm-verdicts") from None
    if not isinstance(doc, dict) or doc.get(KEY) != FORMAT:
        what = f"not a gemmguard verdict record (format {FORMAT})"
        raise GemmUsageError(f"{path}: {what}; write one with --gemm-verdicts")
    rows = doc.get("results")
    seed = doc.get("seed")
    if not isinstance(rows, list) or not (seed is None or isinstance(seed, int)):
        raise GemmUsageError(f"{path}: a verdict record needs a 'results' list and an integer 'seed'")
    record = Record(seed, dict(doc.get("facts") or {}))
    for i, row in enumerate(rows, 1):
        fields = ("test", "backend", "case", "outcome")
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in fields):
            raise GemmUsageError(f"{path}: result {i} needs the strings test, backend, case and outcome")
        record.add(row["test"], row["backend"], row["case"], row["outcome"])
    return record


# ---------------------------------------------------------------- a run's record, across pytest-xdist workers


def part_path(path: str, worker: str) -> str:
    return f"{path}.{worker}.part"


def merge_parts(path: str, own: Record) -> Record:
    """The controller's record with every worker's part (written beside `path`) merged in; the parts removed."""
    for part in sorted(glob.glob(glob.escape(path) + ".*.part")):
        own.merge(load(part))
        own.seed = own.seed if own.seed is not None else load(part).seed
        os.unlink(part)
    return own


# ---------------------------------------------------------------- comparing base and head


@dataclass(frozen=True)
class Change:
    test: str
    backend: str
    case: str
    base: str | None  # the base's outcome (None: the base did not judge this case)
    head: str


@dataclass
class Comparison:
    new: list[Change] = field(default_factory=list)  # failing on head only (or not judged by the base)
    pre_existing: list[Change] = field(default_factory=list)  # failing on both
    fixed: list[Change] = field(default_factory=list)  # failing on base, right on head
    coverage_lost: list[Change] = field(default_factory=list)  # ran on base, refused on head

    @property
    def blocking(self) -> bool:
        return bool(self.new or self.coverage_lost)

    def lines(self) -> list[str]:
        out = [
            f"gemmguard verdicts: {len(self.new)} new, {len(self.coverage_lost)} coverage lost, "
            f"{len(self.pre_existing)} pre-existing, {len(self.fixed)} fixed"
        ]
        for title, changes in (
            ("new failure", self.new),
            ("coverage lost", self.coverage_lost),
            ("pre-existing (not blocking)", self.pre_existing),
            ("fixed", self.fixed),
        ):
            for c in changes:
                was = c.base or "not judged by the base"
                out.append(f"  {title}: {c.test}: {c.case}: {was} -> {c.head}")
        return out


def compare(base: Record, head: Record) -> Comparison:
    result = Comparison()
    for (test, case), row in sorted(head.results.items()):
        was, now = base.outcome(test, case), row["outcome"]
        change = Change(test, row["backend"], case, was, now)
        if is_failure(now):
            if now.startswith("known:") and (was is None or not is_failure(was)):
                continue  # a known upstream bug that this draw met on the head only: the entry explains it
            (result.pre_existing if was is not None and is_failure(was) else result.new).append(change)
        elif now == PASS and was is not None and is_failure(was):
            result.fixed.append(change)
        elif now == UNSUPPORTED and base.ran(test, case):
            result.coverage_lost.append(change)
    return result


def facts_line(record: Record) -> str:
    shown = ", ".join(f"{k} {v}" for k, v in record.facts.items() if v)
    return shown or "no versions recorded"


def changed_facts(base: Record, head: Record) -> Mapping[str, tuple[Any, Any]]:
    """The packages whose versions differ between the two records (an upgrade pull request)."""
    keys = dict.fromkeys([*base.facts, *head.facts])
    return {k: (base.facts.get(k), head.facts.get(k)) for k in keys if base.facts.get(k) != head.facts.get(k)}
