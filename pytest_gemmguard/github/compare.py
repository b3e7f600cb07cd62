"""The benchmark verdict over base/head rounds: one row per case, which fails the gate when its measurement
failed in every round that measured it, when its compiled time itself regressed in every round (a slowdown
of the measured function that slows eager as much, which the ratio to eager cannot see), when the base measured
it and the head's same test did not (coverage lost), or (under --gemm-inconclusive=fail, the default) when no
round could tell: every compared round inconclusive. Inconclusive is its own verdict, never a regression."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence

from ..bench.verdict import Estimate, RuntimeVerdict, estimate_of, judge_over_rounds
from ..errors import GemmguardError
from .junit import TestResult

LOST, GONE = "coverage lost", "not on head"  # a case the base measured and the head did not: fails / warns


@dataclasses.dataclass
class BenchRow:
    key: str
    test: str
    backend: str
    case: str
    statuses: list[str]  # one per round: ok | no baseline | failed | inconclusive | measured | missing
    changes: list[float | None]  # runtime ratio to the baseline (reference-normalised) minus 1, per round
    head_ms: float | None
    base_ms: float | None
    broken: list[str]
    verdict: str  # failed | unstable | ok | inconclusive | no baseline | coverage lost | not on head
    times: list[float | None] = dataclasses.field(default_factory=list)  # compiled time head/base - 1, per round
    eager: list[float | None] = dataclasses.field(default_factory=list)  # the reference's time head/base - 1

    @property
    def failed(self) -> bool:
        return self.verdict in ("failed", LOST)

    @property
    def measured(self) -> int:
        """How many rounds measured this case on the head."""
        return sum(s != "missing" for s in self.statuses)

    def rounds(self, status: str) -> str:
        """'failed in 2 of 2 rounds', counting only the rounds that measured the case."""
        told = f"{status} in {self.statuses.count(status)} of {self.measured} round{'s' * (self.measured != 1)}"
        missing = len(self.statuses) - self.measured
        return told + (f" that measured it ({missing} of {len(self.statuses)} did not)" if missing else "")


def read_report(path: str) -> dict | None:
    """A JSON report gemmguard wrote (None when there is none); a corrupt one raises GemmguardError."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise GemmguardError(f"gemmguard: cannot read {path}: {exc}") from None


def _case_id(m: dict) -> str:
    dims = "x".join(str(d) for d in m.get("shape", ()))
    fn = "" if m.get("fn", "case") == "case" else f"-{m['fn']}"
    return f"{m.get('op')}-{dims}-{m.get('dtype')}-{m.get('layout')}-{m.get('epilogue')}{fn}"


def _verdict(statuses: Sequence[str]) -> str:
    measured = [s for s in statuses if s != "missing"]  # a round that did not measure the case says nothing
    if measured and all(s == "failed" for s in measured):
        return "failed"
    if "failed" in measured:
        return "unstable"
    if any(s == "ok" for s in measured):
        return "ok"  # a round that could have seen the threshold and did not
    if "inconclusive" in measured:
        return "inconclusive"
    return "no baseline"


def inconclusive_policy(head_reports: Sequence[dict | None]) -> str:
    """The --gemm-inconclusive the head ran with ('fail' unless a report says 'warn'; older reports: fail)."""
    said = {r.get("inconclusive", "fail") for r in head_reports if r}
    return "warn" if said == {"warn"} else "fail"


def _estimate(entry: Mapping) -> Estimate | None:
    """The absolute estimate of a measurement or baseline entry: its median seconds and their 95% interval."""
    try:
        value, low, high = float(entry["median_s"]), float(entry["ci_low_s"]), float(entry["ci_high_s"])
    except (KeyError, TypeError, ValueError):
        return None
    return Estimate(value, low, high, int(entry.get("n") or 0), paired=False) if value > 0 else None


def _change(now: float | None, then: float | None) -> float | None:
    return now / then - 1 if now and then else None


def _over_rounds(
    pairs: Sequence[tuple[dict, dict] | None], estimate: Callable[[Mapping], Estimate | None]
) -> tuple[list[tuple[int, dict, dict]], list[RuntimeVerdict] | None, float]:
    """One quantity (`estimate` of a measurement or a baseline entry) judged over the rounds where both sides
    measured the case: those rounds (index, head, base), their verdicts (None where a round lacks the estimate
    or a threshold to judge by, or with fewer than two rounds: judge_over_rounds) and the threshold."""
    both = [(r, *p) for r, p in enumerate(pairs) if p]
    runtime = [(h.get("compared") or {}).get("runtime") or {} for _, h, _ in both]
    estimates = [(estimate(h), estimate(b)) for _, h, b in both]
    if not both or any(rt.get("threshold") is None for rt in runtime) or any(None in e for e in estimates):
        return both, None, 0.0
    threshold, alpha = runtime[0]["threshold"], runtime[0].get("alpha", 0.01)
    return both, judge_over_rounds([e[0] for e in estimates], [e[1] for e in estimates], threshold, alpha), threshold


def _paired(entry: Mapping) -> Estimate | None:
    """The estimate of the ratio to eager (None for a run without its reference)."""
    found = estimate_of(entry)
    return found if found is not None and found.paired else None


def _ratio_between_runs(row: BenchRow, pairs: Sequence[tuple[dict, dict] | None]) -> str:
    """Hold the plugin's per-round verdicts on the ratio to eager to the between-run spread of that ratio. The
    plugin judges a round by the noise *within* its two runs; the ratio also moves *between* runs (the two sides
    of a round run at different moments, and the reference and the kernel feel a busy shared machine
    differently), which a run's own interval cannot see: an A/A pull request on a shared 2-core runner measured
    +9% and +15% for one unchanged case, each "significant". A round the plugin failed stays failed only where
    the ratio's change is also beyond the threshold plus how far the base's ratio moved between its own runs
    (judge_over_rounds); otherwise the round could not tell: inconclusive. Returns a line for the report where
    it changed a round."""
    if "failed" not in row.statuses:
        return ""
    both, verdicts, _ = _over_rounds(pairs, _paired)
    if verdicts is None:
        return ""
    held = []
    for (r, _, _), v in zip(both, verdicts, strict=True):
        if row.statuses[r] == "failed" and not v.regression:
            row.statuses[r] = "inconclusive"  # beyond the threshold, not beyond the machine's drift
            held.append(f"{(v.ratio - 1) * 100:+.1f}%")
    if not held:
        return ""
    return (
        f"ratio to eager {', '.join(held)} against the base: not beyond the threshold plus how far the base moved "
        f"between its own runs here (+{verdicts[0].threshold * 100:.0f}% in all); more rounds, or a quieter runner, "
        "tell smaller changes"
    )


def _absolute(row: BenchRow, pairs: Sequence[tuple[dict, dict] | None]) -> str:
    """Judge the compiled time itself over the rounds where both sides measured the case (`pairs`: the head's
    measurement and the base's entry, per round), mark the rounds it regressed in as failed, and return the
    line that says so ('' when no round regressed)."""
    row.times = [_change(p[0].get("median_s"), p[1].get("median_s")) if p else None for p in pairs]
    row.eager = [_change(p[0].get("ref_median_s"), p[1].get("ref_median_s")) if p else None for p in pairs]
    both, verdicts, threshold = _over_rounds(pairs, _estimate)
    if verdicts is None or not any(v.regression for v in verdicts):
        return ""  # (None: one round, where a slower function and a slower machine look alike)
    for (r, _, _), v in zip(both, verdicts, strict=True):
        if v.regression:
            row.statuses[r] = "failed"
    changes = ", ".join(f"{(v.ratio - 1) * 100:+.0f}%" for v in verdicts)
    eager = [row.eager[r] for r, _, _ in both]
    eager_said = ", ".join("–" if e is None else f"{e * 100:+.0f}%" for e in eager)
    if not all(v.regression for v in verdicts) or len(verdicts) != row.measured:
        return f"compiled time slower in some rounds only: {changes} (threshold +{threshold * 100:g}%)"
    heads, bases = [h["median_s"] for _, h, _ in both], [b["median_s"] for _, _, b in both]
    who = ("the function itself is slower, eager too" if all(e is not None and e > threshold for e in eager)
           else "the compiled code is slower")  # fmt: skip
    return (
        f"runtime regression in absolute time: {_span(bases)} on the base, {_span(heads)} on the head, "
        f"{changes} in its {len(verdicts)} rounds (threshold +{threshold * 100:g}%; eager {eager_said}): {who}"
    )


def _span(seconds: Sequence[float]) -> str:
    """'0.82 ms', or '0.81..0.84 ms' over rounds that differ."""
    low, high = f"{min(seconds) * 1e3:.3g}", f"{max(seconds) * 1e3:.3g}"
    return f"{low} ms" if low == high else f"{low}..{high} ms"


def _missing(key: str, entry: dict, rounds: int, base_ms: float | None, heads: Mapping[str, TestResult] | None,
             measured_tests: set[str]) -> BenchRow:  # fmt: skip
    """The row of a case the base measured and no head round did. Lost coverage (the head's same test ran and
    measured nothing: it became unsupported, was skipped or failed) fails; a test the head no longer has, or one
    that measures other cases now, is a change of the benchmark itself, visible in the diff: a warning."""
    test = entry.get("test", "")
    ran = heads.get(test) if heads is not None else None
    if heads is not None and ran is None:
        verdict, why = GONE, "the head has no such test (removed or renamed): not compared"
    elif test in measured_tests:
        verdict, why = GONE, "the head's test measures other cases now: not compared"
    elif ran is None:
        verdict, why = LOST, "coverage lost"
    else:
        verdict = LOST
        why = f"the head's test ended {ran.outcome}{f' ({ran.title})' if ran.title else ''}: coverage lost"
    return BenchRow(key, test, entry.get("backend", ""), _case_id(entry), ["missing"] * rounds, [None] * rounds,
                    None, base_ms, [f"measured on the base, not on the head: {why}"], verdict)  # fmt: skip


def judge_rounds(
    head_reports: Sequence[dict | None],
    base_entries: Sequence[dict] = (),
    head_tests: Sequence[TestResult] | None = None,
    main_rounds: int | None = None,
) -> list[BenchRow]:
    """One row per case over the rounds' head reports (gemmguard-report JSON) and the base's baseline entries
    of the same rounds (base-commit mode; empty otherwise). Each round's status is the plugin's own verdict on
    the ratio to eager (threshold and significance against that round's base), made a failure where the
    compiled time itself regressed (bench.verdict.judge_over_rounds); a case fails only when every round
    that measured it failed: base and head were measured alternately, so drift of the machine cannot fail
    every round of one side. `head_tests` (the head's JUnit results) tell a case whose test ran on the head
    but measured nothing (coverage lost) from one whose test is gone. Rounds after the first `main_rounds` are
    confirmation rounds (rounds.py), which measure only the tests of cases that failed every main round: a row
    they did not measure keeps only its main rounds."""
    keys: dict[str, dict] = {}
    per_round: list[dict[str, dict]] = []
    for report in head_reports:
        found = {m["key"]: m for m in (report or {}).get("measurements", [])}
        per_round.append(found)
        for key, m in found.items():
            keys.setdefault(key, m)
    rows = []
    for key, first in keys.items():
        statuses, changes, broken, pairs = [], [], [], []
        last = None
        for r, found in enumerate(per_round):
            m = found.get(key)
            base = base_entries[r].get(key) if r < len(base_entries) else None
            pairs.append((m, base) if m is not None and base else None)
            if m is None:
                statuses.append("missing")
                changes.append(None)
                continue
            last = m
            statuses.append(m.get("status", "measured"))
            runtime = (m.get("compared") or {}).get("runtime")
            changes.append(runtime["ratio"] - 1 if runtime and runtime.get("ratio") is not None else None)
            broken = m.get("broken") or broken
        m = last or first
        row = BenchRow(key, m.get("test", ""), m.get("backend", ""), _case_id(m), statuses, changes,
                       m["median_s"] * 1e3 if m.get("median_s") else None, _base_ms(key, base_entries),
                       list(broken), "")  # fmt: skip
        drift = _ratio_between_runs(row, pairs)
        absolute = _absolute(row, pairs)
        row.broken += [line for line in (drift, absolute) if line]
        row.verdict = _verdict(row.statuses)
        if main_rounds is not None and all(st == "missing" for st in row.statuses[main_rounds:]):
            for field in (row.statuses, row.changes, row.times, row.eager):
                del field[main_rounds:]
        rows.append(row)
    heads = {t.nodeid: t for t in head_tests} if head_tests is not None else None
    measured_tests = {r.test for r in rows}
    seen: dict[str, dict] = {}
    for entries in base_entries:
        for key, entry in entries.items():
            if key not in keys:
                seen.setdefault(key, entry)
    for key, entry in seen.items():
        rounds = len(head_reports) if main_rounds is None else min(main_rounds, len(head_reports))
        rows.append(_missing(key, entry, rounds, _base_ms(key, base_entries), heads, measured_tests))
    return rows


def _base_ms(key: str, base_entries: Sequence[dict]) -> float | None:
    base = sorted(e[key]["median_s"] for e in base_entries if key in e and e[key].get("median_s"))
    return base[len(base) // 2] * 1e3 if base else None
