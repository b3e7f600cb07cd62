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
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import files
from ..errors import BaseFixed, CoverageLost, GemmUsageError
from .entries import FAILURE_KINDS, REFUSES

FORMAT = 1
KEY = "gemmguard_verdicts"
PASS = "verified"
UNSUPPORTED = "unsupported"
FAILURES = (*FAILURE_KINDS, "pre-existing")  # and every "known:<id>"
PACKAGES = ("torch", "triton", "pytest-gemmguard", "hypothesis", "nvidia-cutlass", "nvidia-cutlass-dsl")
_RANK = {UNSUPPORTED: 0, PASS: 1}  # the worst outcome of a case seen twice (a shrink step, a rerun) is kept


def is_failure(outcome: str) -> bool:
    return outcome in FAILURES or outcome.startswith("known:")


def _rank(outcome: str) -> int:
    return _RANK.get(outcome, 2)


def facts() -> dict[str, str | None]:
    """The environment a record was made in (package metadata: nothing imported)."""
    from . import installed_versions

    return {**installed_versions(PACKAGES), "python": platform.python_version()}


@dataclass
class Record:
    """The outcome of every (test, case) a run judged."""

    seed: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    results: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (test, case) -> row

    def add(self, test: str, backend: str, case: str, outcome: str, device: str | None = None) -> None:
        """`device`: where the backend's kernels ran ("cpu" or "cuda"), which aten's do either way; a proposed
        entry names it (proposals.py)."""
        old = self.results.get((test, case))
        if old is None or _rank(outcome) > _rank(old["outcome"]):
            row = {"test": test, "backend": backend, "case": case, "outcome": outcome}
            self.results[(test, case)] = {**row, "device": device} if device else row

    def outcome(self, test: str, case: str) -> str | None:
        row = self.results.get((test, case))
        return None if row is None else row["outcome"]

    def failed(self, test: str, case: str) -> bool:
        outcome = self.outcome(test, case)
        return outcome is not None and is_failure(outcome)

    def ran(self, test: str, case: str) -> bool:
        """The backend ran its own kernel on the case, right or wrong (not unsupported, not a crash): what a
        refusal on the head would lose."""
        outcome = self.outcome(test, case)
        return outcome is not None and outcome not in (UNSUPPORTED, "raises", REFUSES)

    def merge(self, other: Record) -> None:
        for row in other.results.values():
            self.add(row["test"], row["backend"], row["case"], row["outcome"], row.get("device"))

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
    rows, seed, env = doc.get("results"), doc.get("seed"), doc.get("facts") or {}
    if not isinstance(rows, list) or not (seed is None or isinstance(seed, int)) or not isinstance(env, dict):
        raise GemmUsageError(f"{path}: a verdict record needs a 'results' list, an integer 'seed' and a 'facts' table")
    record = Record(seed, dict(env))
    for i, row in enumerate(rows, 1):
        fields = ("test", "backend", "case", "outcome")
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in fields):
            raise GemmUsageError(f"{path}: result {i} needs the strings test, backend, case and outcome")
        if not isinstance(row.get("device", ""), str):
            raise GemmUsageError(f"{path}: result {i}: device must be a string (cpu or cuda)")
        record.add(row["test"], row["backend"], row["case"], row["outcome"], row.get("device"))
    return record


# ---------------------------------------------------------------- one test's examples


class Judge:
    """One test on one backend against the base's record (`base`, or None) and into this run's (`record`, or
    None): which failures are pre-existing, which cases are fixed, which lost, and the failures a recording run
    kept going past. run/explore.py calls it for each example and once at the end."""

    def __init__(self, base: Record | None, record: Record | None, test: str, backend: str) -> None:
        from . import backend_device

        self.base, self.record, self.test, self.backend = base, record, test, backend
        self.device = backend_device(backend) if record is not None else None
        self.pre_existing: list[str] = []
        self.fixed: list[str] = []
        self.lost: list[str] = []
        self.kept: list[tuple[BaseException, str]] = []  # (the failure, its case) a recording run went past

    @property
    def keeps_going(self) -> bool:
        """A run that writes a record goes on past a failure, so the record covers the whole draw."""
        return self.record is not None

    def failed_on_base(self, case: str) -> bool:
        """A failure of `case` the base has too: pre-existing (counted as xfail, not failed)."""
        if self.base is None or not self.base.failed(self.test, case):
            return False
        self.pre_existing.append(case)
        return True

    def keep(self, exc: BaseException, case: str) -> None:
        self.kept.append((exc, case))

    def note(self, case: str, outcome: str) -> None:
        """This example's outcome (verified, unsupported, wrong-result, raises, known:<id>, pre-existing)."""
        if self.record is not None:
            self.record.add(self.test, self.backend, case, outcome, self.device)
        if self.base is not None and outcome == PASS and self.base.failed(self.test, case):
            self.fixed.append(case)
        if self.base is not None and outcome == UNSUPPORTED and self.base.ran(self.test, case):
            self.lost.append(case)

    def finish(self) -> None:
        """After the examples: the first failure a recording run kept going past fails the test (unshrunk); a
        case the base ran that this backend refuses fails it as coverage lost; fixed cases are a warning."""
        if self.kept:
            exc, case = self.kept[0]
            more = f"; {len(self.kept) - 1} more failure(s) of this test" if len(self.kept) > 1 else ""
            exc.add_note(f"gemmguard: on {case}; not shrunk: --gemm-verdicts records the whole draw{more}")
            raise exc
        if self.lost:
            raise CoverageLost(
                f"gemmguard: {self.backend} refuses {len(self.lost)} case(s) the base's backend ran "
                f"(--gemm-base-verdicts): {'; '.join(self.lost[:5])}"
            )
        if self.fixed:
            shown = "; ".join(self.fixed[:5])
            warnings.warn(f"gemmguard: {self.backend} fixed {len(self.fixed)} case(s) the base failed: {shown}",
                          BaseFixed, stacklevel=3)  # fmt: skip

    def xfail_reason(self) -> str | None:
        if not self.pre_existing:
            return None
        shown = "; ".join(self.pre_existing[:5])
        return f"gemmguard: pre-existing failure(s), the base's verdicts have them too: {shown}"


# ---------------------------------------------------------------- a run's records, across pytest-xdist workers


def open_records(settings: dict[str, Any], worker_seed: int | None) -> tuple[Record | None, Record | None]:
    """The base's record (--gemm-base-verdicts) and this run's (--gemm-verdicts), from the resolved settings,
    whose seed this sets: the base's (the same draw), the controller's on a pytest-xdist worker (one draw across
    workers), or a fresh one where a record needs a fixed draw. A bad record or seed is a GemmUsageError."""
    import random

    base = load(settings["base_verdicts"]) if settings["base_verdicts"] else None
    if base is not None and base.seed is not None:
        if settings["seed"] is not None and settings["seed"] != base.seed:
            raise GemmUsageError(
                f"--gemm-seed={settings['seed']}: the base record {settings['base_verdicts']} was drawn with seed "
                f"{base.seed}; pass that seed or none, so base and head check the same cases"
            )
        settings["seed"] = base.seed
    if (base is not None or settings["verdicts"]) and settings["seed"] is None:
        settings["seed"] = worker_seed if worker_seed is not None else random.SystemRandom().getrandbits(31)
    record = Record(settings["seed"], facts()) if settings["verdicts"] else None
    return base, record


def write_record(record: Record, path: str, worker: str | None) -> str | None:
    """This run's record: a pytest-xdist worker writes its part beside `path` (None returned), the controller
    merges the parts into the file and returns where it went."""
    if worker is not None:
        record.save(f"{path}.{worker}.part")
        return None
    for part in sorted(glob.glob(glob.escape(path) + ".*.part")):
        record.merge(load(part))
        os.unlink(part)
    return record.save(path)


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


def changed_facts(base: Record, head: Record) -> Mapping[str, tuple[Any, Any]]:
    """The packages whose versions differ between the two records (an upgrade pull request)."""
    keys = dict.fromkeys([*base.facts, *head.facts])
    return {k: (base.facts.get(k), head.facts.get(k)) for k in keys if base.facts.get(k) != head.facts.get(k)}


def report(base: Record, head: Record) -> tuple[Comparison, list[str]]:
    """The comparison and its lines as a reader gets them: what changed in the environment (an upgrade pull
    request), then the counts and every failure by kind."""
    result = compare(base, head)
    lines = [
        f"gemmguard verdicts: {name} {was or 'not installed'} -> {now or 'not installed'}"
        for name, (was, now) in changed_facts(base, head).items()
    ]
    return result, [*lines, *result.lines()]
