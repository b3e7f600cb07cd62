"""Known failures: upstream backend bugs that are already understood. gemmguard ships its own
(`known-failures.toml` in this package, applied in every project unless --gemm-known-shipped=off); a user's
file adds entries and replaces a shipped one of the same id (`KnownFailures.merged_over`).

A failure that an entry describes is reported as xfail with the entry's link instead of failing the run;
an entry whose bug no longer shows (examples it describes ran and all passed) is reported as XPASS, so the
file stays true. Nothing here imports torch: the file is read when pytest starts.

File format (TOML; path from `--gemm-known=FILE` or `known_failures` in `[tool.gemmguard]`)::

    [[known]]
    id = "torch-cpp-offset-frozen-weight"      # required: unique, letters digits . _ -
    backend = "cpp"                             # required: a backend name or a list of them
    route = "nvgemm"                            # optional: the backend's route (cutedsl: nvgemm, quack, ...)
    ops = ["mm", "linear"]                      # optional, each a string or a list: the case must be one of
    dtypes = ["float32"]                        #   these; a key left out matches every value
    layouts = ["offset"]
    epilogues = ["none", "bias+relu"]           #   whole chains, as a case names them; "fused": every
                                                #   chain but none; "relu+*": relu and every chain that
                                                #   begins with it
    m = ">=2"                                   # optional size conditions on m, n, k, batch: an integer
    k = "<=8,%8!=0"                             #   (exactly that) or comma-joined clauses that must all
                                                #   hold: ==N !=N <N <=N >N >=N %D==R %D!=R
    device = "cpu"                              # optional: where the backend's kernels run, cpu or cuda
                                                #   (aten is ATen's CPU code on one machine, cuBLAS on another)
    cpu = ["avx2"]                              # optional: ATen's CPU capability (get_cpu_capability(),
                                                #   lower case: default avx2 avx512 vsx zvector neon sve128
                                                #   sve256); left out, any CPU
    candidates = ["triton_mm_persistent_tma_*"] # optional: the entry then explains only a failure whose every
                                                #   confirmed wrong autotune candidate's name matches one of
                                                #   these patterns (* ? [...]): a losing candidate's (the
                                                #   winner right), or a wrong winner's where the fault follows
                                                #   the named ones both ways (confirm.blame: wrong compiled
                                                #   alone, right when withheld; only where this is the one
                                                #   such entry covering the case); anything else, a wrong
                                                #   candidate of another name included, stays a failure.
                                                #   Patterns should not pin a candidate's number: Inductor
                                                #   numbers choices per compile
    versions = { torch = ">=2.13" }             # required, non-empty: distribution name -> PEP 440
                                                #   specifier set; "" means installed at any version; a
                                                #   package that is not installed never matches. Open from
                                                #   the first version seen until a release is seen fixed
    kind = "wrong-result"                       # required: wrong-result | wrong-with-fewer-threads |
                                                #   wrong-when-reused-across-sizes | raises | refuses | any;
                                                #   wrong-with-fewer-threads: right as compiled, wrong when
                                                #   OpenMP ran each parallel region on one thread (the CPU
                                                #   check of --gemm-fewer-threads); wrong-when-reused-across-
                                                #   sizes: right as compiled for its size, wrong from a
                                                #   dynamic-shape compile autotuned at another M;
                                                #   refuses: no valid choice for a case the backend takes
    link = "docs/findings.md#some-anchor"       # required: http(s) URL, or a path relative to this file
                                                #   (the shipped file: public URLs only)
    reason = "what the bug is, in one line"     # required
    seen = ["mm 5×6×130 float32 offset"]        # optional evidence: cases it failed on, and the
    seen_right = ["mm 5×6×130 float32 contiguous"]  # neighbours seen right

Every key is checked when the file is read: an unknown key, a wrong type, an unknown backend, op, dtype,
layout or epilogue step, a bad size condition or specifier, a missing required key or a duplicate id is a
`GemmUsageError` of one line naming the file, the entry (index and id), the key and the fix.
Versions compare by PEP 440 with pre-releases allowed, so nightlies and source builds match too, except
that `<2.14` leaves out 2.14's own pre-releases (a `2.14.0.dev` nightly) and a `2.13.0a0` source build
sorts before `>=2.13` (write `>=2.13.0a0` to include it).

Use from the runner (one tracker per test and backend)::

    known = load(path)                                  # once per session
    tracker = KnownTracker(known, backend)              # installed versions read once, cached
    # each example: the backend's kernel ran and was right (judged: the autotune candidates judged right)
    tracker.note_pass(case, route=route, judged=example.judged_right)
    # each example that failed: GemmMismatch -> "wrong-result", any other error of the compile/run -> "raises";
    # a GemmMismatch passes the names of the candidates it is confirmed to come from (exc.candidates: a losing
    # candidate's CandidateMismatch, or a wrong winner blamed on an entry's candidates; empty otherwise)
    entry = tracker.note_failure(case, "wrong-result", route=route, candidates=exc.candidates)
    if entry is None: raise                              # a new defect: let Hypothesis shrink and report it
    # after the loop, when nothing unknown failed:
    tracker.xpassed()  -> entries whose cases ran and all passed (XPASS; fail under --gemm-known-strict)
    tracker.xfailed()  -> entries that explained failures (report as xfail with tracker.xfail_reason())

`case` is a GemmCase (or anything with op, m, n, k, batch, dtype, layout, epilogue, with gemmguard's
dtype names: pass `gemm.case`, not `gemm`, whose dtype is a torch dtype). `route` is the route that ran,
for a backend that has several: "nvgemm" or "inductor-cutedsl" for cutedsl's own, "quack" when it fell back
to cutedsl[quack]; None for the others. Note only examples where the backend's own kernel ran: an
unsupported example is neither a pass nor a failure. `match(known, backend, case, versions, kind, route,
candidates)` is the same decision for one case, without a tracker.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from .entries import (
    CPU_FACT,
    CROSSCHECK_KINDS,
    DEVICE_FACT,
    DYNAMIC,
    FAILURE_KINDS,
    FEWER_THREADS,
    KINDS,
    Entry,
    KnownFailures,
    Names,
    default_names,
    parse_size,
)
from .reading import load, load_shipped, parse, shipped_path

__all__ = [
    "CPU_FACT", "CROSSCHECK_KINDS", "DEVICE_FACT", "DYNAMIC", "FAILURE_KINDS", "FEWER_THREADS", "KINDS", "Entry",
    "KnownFailures", "KnownTracker", "Names",
    "backend_device", "blame_patterns", "cpu_capability", "default_names", "installed_versions", "load",
    "load_shipped", "machine_facts", "match", "parse", "parse_size", "shipped_path",
]  # fmt: skip


def match(
    known: KnownFailures,
    backend: str,
    case: Any,
    versions: Mapping[str, str | None],
    kind: str,
    route: str | None = None,
    candidates: Sequence[str] | None = None,
) -> Entry | None:
    """The first entry that explains `case` failing with `kind` on `backend` (and `route`) with these
    package versions, or None: a failure no entry explains is a new defect. `candidates`: the names of the
    autotune candidates the failure is confirmed to come from (GemmMismatch.candidates)."""
    return _first(known.applicable(backend, versions), case, kind, route, candidates)


def blame_patterns(
    known: KnownFailures, backend: str, case: Any, versions: Mapping[str, str | None], route: str | None = None
) -> tuple[str, ...]:
    """The candidate patterns of the one entry that would explain `case` failing with a wrong result, were the
    named candidates to blame: what a wrong winner is tried against (confirm.blame). Empty when no entry
    with candidates covers the case, or more than one does (which entry a proof made against their joint
    names would be for cannot be told: the failure stays a failure)."""
    entries = known.applicable(backend, versions)
    found = [e for e in entries if e.candidates and e.kind in ("wrong-result", "any") and e.covers(case, route)]
    return tuple(found[0].candidates or ()) if len(found) == 1 else ()


def _first(
    entries: Iterable[Entry], case: Any, kind: str, route: str | None, candidates: Sequence[str] | None = None
) -> Entry | None:
    if kind not in FAILURE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(FAILURE_KINDS)}, not {kind!r}")
    return next((e for e in entries if e.explains(kind, candidates) and e.covers(case, route)), None)


@functools.cache
def _installed(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)  # metadata only: reading torch's version must not import torch
    except PackageNotFoundError:
        return None


def installed_versions(names: Iterable[str] = ("torch", "triton")) -> dict[str, str | None]:
    """name -> installed version (None if absent), from package metadata, each read once per process."""
    return {name: _installed(name) for name in names}


def cpu_capability() -> str | None:
    """ATen's CPU capability in lower case ("avx2", "avx512", ...); imports torch, so only when an entry asks."""
    try:
        import torch

        return torch.backends.cpu.get_cpu_capability().lower()
    except (ImportError, AttributeError, RuntimeError):
        return None


def machine_facts(known: KnownFailures, backend: str | None = None) -> dict[str, str | None]:
    """What entries are matched against on this machine: the installed versions of the packages the file
    names, the CPU capability where an entry names one, and the device `backend` runs on where an entry names one."""
    facts = installed_versions(known.packages())
    if any(e.cpus for e in known.entries):
        facts[CPU_FACT] = cpu_capability()
    if backend is not None and any(e.devices for e in known.entries):
        facts[DEVICE_FACT] = backend_device(backend)
    return facts


def backend_device(backend: str) -> str | None:
    """Where `backend`'s kernels run here ("cpu" or "cuda"), or None for a backend gemmguard does not know."""
    from .. import backends

    try:
        device = backends.get(backend).device()
    except (KeyError, ImportError, RuntimeError, AttributeError):  # unknown or broken: a device entry never matches
        return None
    return "cuda" if device.startswith("cuda") else device


class KnownTracker:
    """What one test (one backend) did against the known failures: which entries explained failures and
    which entries' cases ran and passed. Only examples that ran the backend's own kernel count: an
    unsupported example is neither (the bug could not show)."""

    def __init__(self, known: KnownFailures, backend: str, versions: Mapping[str, str | None] | None = None) -> None:
        self.known = known
        self.backend = backend
        self.versions = dict(machine_facts(known, backend) if versions is None else versions)
        self.entries = known.applicable(backend, self.versions)
        # Entries of this backend for other versions: a failure one of them describes in all but its versions is
        # still a failure (the bug may have changed), but its report names the entry (near_miss).
        self.other_versions = [
            e for e in known.entries if e.applies_to(backend, self.versions, any_version=True) and e not in self.entries
        ]
        self.passes: Counter = Counter()  # entry id -> matching examples that passed
        self.failures: Counter = Counter()  # entry id -> failures it explained
        self.first_failure: dict[str, Any] = {}  # entry id -> the first case it explained

    def note_pass(
        self, case: Any, route: str | None = None, judged: Sequence[str] = (), also: Collection[str] = ()
    ) -> None:
        """An example passed; `judged`: the autotune candidates its checks judged right (an entry that names
        candidates counts the pass only where one of its own was among them); `also`: the kinds of the checks
        after the verified one that ran and were right (CROSSCHECK_KINDS: its compiled code with fewer OpenMP
        threads, a dynamic compile at another size); an entry of such a kind counts the pass only then."""
        for entry in self.entries:
            if entry.kind in CROSSCHECK_KINDS and entry.kind not in also:
                continue
            if entry.covers(case, route) and entry.witnessed(judged):
                self.passes[entry.id] += 1

    def note_failure(
        self, case: Any, kind: str, route: str | None = None, candidates: Sequence[str] | None = None
    ) -> Entry | None:
        """The entry that explains this failure (count it as xfail), or None (a real failure: raise)."""
        entry = _first(self.entries, case, kind, route, candidates)  # entries already match backend and versions
        if entry is not None:
            self.failures[entry.id] += 1
            self.first_failure.setdefault(entry.id, case)
        return entry

    def near_miss(
        self, case: Any, kind: str, route: str | None = None, candidates: Sequence[str] | None = None
    ) -> str | None:
        """A line for the report of a failure no entry explains, where an entry describes it in everything but
        its version range (the bug seen before on other versions: the same one, or a new one that looks alike)."""
        entry = _first(self.other_versions, case, kind, route, candidates)
        if entry is None:
            return None
        installed = ", ".join(f"{name} {self.versions.get(name) or 'not installed'}" for name in entry.versions)
        where = "gemmguard's shipped entry" if entry.shipped else f"entry in {entry.origin}"
        return (
            f"gemmguard: known failure {entry.id} ({where}) describes this case, but for {entry.versions_text()}; "
            f"installed: {installed}. If it is the same bug, widen the entry's versions (or add one of the same "
            f"id to your known-failures file): {entry.reason} ({entry.link})"
        )

    def xfailed(self) -> list[Entry]:
        return [e for e in self.entries if self.failures[e.id]]

    def xpassed(self) -> list[Entry]:
        """Entries whose cases ran here and never failed: their bug did not show."""
        return [e for e in self.entries if self.passes[e.id] and not self.failures[e.id]]

    def finish(self, strict: bool, noted: set[str] | None = None) -> None:
        """After a test's examples: an XPASS of an entry of the user's own file warns, and any XPASS fails under
        --gemm-known-strict (KnownFailureFixed); failures the entries explained end the test as xfail, with their
        links. `noted`: the session's entry ids already warned about or seen failing (updated here): an entry warns
        once a session, and not at all once it explained a failure (another test's xfail says the bug still shows).
        A shipped entry does not warn: many strike only some cases of their class, or some CPUs, so one test's
        passes say little, and the author of a pull request cannot act on it; the session's results section sums
        them instead (`seen`, report/table.py known_lines)."""
        import warnings

        import pytest

        from ..errors import KnownFailureFixed, KnownFailureXPass

        if self.xpassed():
            if strict:
                raise KnownFailureFixed(f"{self.xpass_reason()} (--gemm-known-strict)")
            fresh = [e for e in self.xpassed() if not e.shipped and (noted is None or e.id not in noted)]
            if fresh:
                warnings.warn(self.xpass_reason(fresh), KnownFailureXPass, stacklevel=3)
        if noted is not None:
            noted.update(e.id for e in (*self.xpassed(), *self.xfailed()))
        if self.xfailed():
            pytest.xfail(self.xfail_reason())

    def seen(self) -> list[tuple[str, str, str, int]]:
        """(backend, entry id, "passed" or "failed", examples) for each shipped entry whose cases ran in this test:
        what the session's results section sums (report/tally.py Tally.known)."""
        shipped = [e for e in self.entries if e.shipped]
        counted = [(e.id, "passed", self.passes[e.id]) for e in shipped]
        counted += [(e.id, "failed", self.failures[e.id]) for e in shipped]
        return [(self.backend, entry_id, how, n) for entry_id, how, n in counted if n]

    def xfail_reason(self) -> str:
        parts = [
            f"{e.id} ({self.failures[e.id]} example(s), e.g. {_describe(self.first_failure[e.id])}): "
            f"{e.reason} ({e.link})"
            for e in self.xfailed()
        ]
        return "gemmguard known failure " + "; ".join(parts)

    def xpass_reason(self, entries: Sequence[Entry] | None = None) -> str:
        entries = self.xpassed() if entries is None else entries
        parts = [f"{e.id} ({self.passes[e.id]} matching example(s) passed; {e.link})" for e in entries]
        places = sorted({e.origin for e in entries if not e.shipped})
        fixes = [f"remove or narrow it in {', '.join(places)}"] if places else []
        if any(e.shipped for e in entries):
            fixes.append(
                "a shipped entry: if the bug is fixed on these versions, give the entry an upper version bound "
                "(override it by id in your known-failures file) and tell gemmguard's maintainers"
            )
        return f"gemmguard: known failure no longer shows: {'; '.join(parts)}; {'; '.join(fixes)}"


def _describe(case: Any) -> str:
    describe = getattr(case, "describe", None)
    return describe() if callable(describe) else repr(case)
