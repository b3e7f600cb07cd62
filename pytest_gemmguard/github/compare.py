"""The benchmark verdict over base/head rounds: one row per measured case, which fails the gate only when its
measurement failed in every round, or (under --gemm-inconclusive=fail, the default) when no round could tell:
every compared round inconclusive. Inconclusive is its own verdict, never counted as a regression."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from ..errors import GemmguardError


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
    verdict: str  # failed | unstable | ok | inconclusive | no baseline

    @property
    def failed(self) -> bool:
        return self.verdict == "failed"


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
    if statuses and all(s == "failed" for s in statuses):
        return "failed"
    if "failed" in statuses:
        return "unstable"
    if any(s == "ok" for s in statuses):
        return "ok"  # a round that could have seen the threshold and did not
    if "inconclusive" in statuses:
        return "inconclusive"
    return "no baseline"


def inconclusive_policy(head_reports: Sequence[dict | None]) -> str:
    """The --gemm-inconclusive the head ran with ('fail' unless a report says 'warn'; older reports: fail)."""
    said = {r.get("inconclusive", "fail") for r in head_reports if r}
    return "warn" if said == {"warn"} else "fail"


def judge_rounds(head_reports: Sequence[dict | None], base_entries: Sequence[dict] = ()) -> list[BenchRow]:
    """One row per measured case over the rounds' head reports (gemmguard-report JSON). A case fails the gate
    only when its measurement failed in every round: each round is the plugin's own verdict (threshold and
    one-sided Mann-Whitney against that round's base), and base and head were measured alternately, so
    drift of the machine cannot fail every round of one side."""
    keys: dict[str, dict] = {}
    per_round: list[dict[str, dict]] = []
    for report in head_reports:
        found = {m["key"]: m for m in (report or {}).get("measurements", [])}
        per_round.append(found)
        for key, m in found.items():
            keys.setdefault(key, m)
    rows = []
    for key, first in keys.items():
        statuses, changes, broken = [], [], []
        last = None
        for found in per_round:
            m = found.get(key)
            if m is None:
                statuses.append("missing")
                changes.append(None)
                continue
            last = m
            statuses.append(m.get("status", "measured"))
            runtime = (m.get("compared") or {}).get("runtime")
            changes.append(runtime["ratio"] - 1 if runtime and runtime.get("ratio") is not None else None)
            broken = m.get("broken") or broken
        base = [e[key]["median_s"] for e in base_entries if key in e and e[key].get("median_s")]
        m = last or first
        rows.append(
            BenchRow(
                key=key,
                test=m.get("test", ""),
                backend=m.get("backend", ""),
                case=_case_id(m),
                statuses=statuses,
                changes=changes,
                head_ms=m["median_s"] * 1e3 if m.get("median_s") else None,
                base_ms=(sorted(base)[len(base) // 2] * 1e3) if base else None,
                broken=list(broken),
                verdict=_verdict(statuses),
            )
        )
    return rows
