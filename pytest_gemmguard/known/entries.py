"""What a known-failures entry is: the vocabulary it is checked against, its size conditions, the entry and
the set of entries, and how an entry matches a case. Torch-free (reading.py reads the file)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

# "wrong-with-fewer-threads": right as compiled, wrong once OpenMP gave the kernel fewer threads
# (crosscheck/threads.py).
FEWER_THREADS = "wrong-with-fewer-threads"
REFUSES = "refuses"  # Inductor found no valid choice for a case the backend takes (errors.BackendRefused)
# Right as compiled for the case's own size, wrong from one compile with dynamic shapes autotuned at another size
# (crosscheck/sizes.py).
DYNAMIC = "wrong-when-reused-across-sizes"
# Kinds a check after the verified one finds (crosscheck/): an entry of one counts a pass only where that check ran.
CROSSCHECK_KINDS = (FEWER_THREADS, DYNAMIC)
KINDS = ("wrong-result", FEWER_THREADS, DYNAMIC, "raises", REFUSES, "any")
# What a runner reports; "any" exists only in the file.
FAILURE_KINDS = ("wrong-result", FEWER_THREADS, DYNAMIC, "raises", REFUSES)
REQUIRED = ("id", "backend", "versions", "kind", "link", "reason")
# "elements": the most elements one tensor of the case spans (GemmCase.elements; ">2147483648" is the big profile's
# class, a 32-bit index that wraps).
SIZE_KEYS = ("m", "n", "k", "batch", "elements")
# `seen` and `seen_right`: the evidence an entry carries (cases described as reports describe them: the cases it
# was seen failing on, and the neighbours seen right), so the pattern between them can be reviewed.
EVIDENCE_KEYS = ("seen", "seen_right")
CASE_KEYS = ("ops", "dtypes", "layouts", "values", "epilogues")  # the case pattern, in @gemm_case's names
ALLOWED = (*REQUIRED, "route", *CASE_KEYS, "device", "cpu", "candidates", *SIZE_KEYS, *EVIDENCE_KEYS)
# The device a backend's kernels run on in the test (Backend.device(): "cpu", or "cuda" for every GPU): `aten` is ATen's
# CPU code on one machine and cuBLAS on another, with bugs of their own. The runner passes it as DEVICE_FACT.
DEVICES = ("cpu", "cuda")
DEVICE_FACT = "device"
# The CPU capabilities ATen names (torch.backends.cpu.get_cpu_capability(), lower case): a CPU kernel's code
# path, and so its bugs, can depend on it. The runner passes this machine's under the fact name CPU_FACT.
CPUS = ("default", "avx2", "avx512", "vsx", "zvector", "neon", "sve128", "sve256")
CPU_FACT = "cpu"
# In `epilogues`: every chain but none (a bug of a template's fused epilogue, whatever the chain).
FUSED = "fused"
# In `epilogues`, after a chain's steps ("relu+*"): that chain and every chain it begins (what follows the GEMM first
# can decide which kernel Inductor generates).
BEGINS = "+*"

# A clause: compare with a number, with a multiple of another size of the case (">=64*m": Inductor's heuristics
# compare K with M and N), or a remainder.
_CLAUSE = re.compile(r"^(?:(==|!=|<=|>=|<|>)\s*(-?\d+)(?:\s*\*\s*(m|n|k|batch))?|%\s*(\d+)\s*(==|!=)\s*(\d+))$")


# ---------------------------------------------------------------- names the file may use


@dataclass(frozen=True)
class Names:
    """The vocabulary an entry is checked against. Passed in, or read lazily from gemmguard's own
    modules by `default_names()` (which import torch, so never at module import)."""

    backends: tuple[str, ...]
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    layouts: tuple[str, ...]
    steps: tuple[str, ...]
    values: tuple[str, ...] | None = None  # cases.case.VALUES; None: not checked


def default_names() -> Names:
    from .. import backends
    from ..cases.case import LAYOUTS, VALUES
    from ..cases.ops import DTYPES, OPS, STEPS

    return Names(tuple(backends.names()), tuple(OPS), tuple(DTYPES), tuple(LAYOUTS), tuple(STEPS), VALUES)


# ---------------------------------------------------------------- conditions


@dataclass(frozen=True)
class SizeCondition:
    """`m = ">=2,%8!=0"`, `k = ">=64*m"`: every clause must hold. Kept with its text, for messages."""

    text: str
    clauses: tuple[tuple[str, int, int, str], ...]  # (op, value, modulus or 0, the size the value multiplies or "")

    def __call__(self, value: int, case: Any = None) -> bool:
        """Whether `value` meets every clause; `case`: where a clause names another size (">=64*m"), its sizes."""
        for op, ref, mod, times in self.clauses:
            if times:
                ref *= getattr(case, times)
            if not _holds(op, value % mod if mod else value, ref):
                return False
        return True


def _holds(op: str, value: int, ref: int) -> bool:
    return {
        "==": value == ref,
        "!=": value != ref,
        "<": value < ref,
        "<=": value <= ref,
        ">": value > ref,
        ">=": value >= ref,
    }[op]


def parse_size(text: Any) -> SizeCondition:
    """An int, or clauses like ">=2,<8", "%8!=0" and ">=64*m" (a multiple of another size); raises ValueError saying
    what is wrong."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ValueError(f'{text!r} is not an integer or a condition string such as ">=2,<8" or "%8!=0"')
    if isinstance(text, int):
        return SizeCondition(str(text), (("==", text, 0, ""),))
    clauses = []
    for part in text.split(","):
        m = _CLAUSE.match(part.strip())
        if m is None:
            raise ValueError(
                f"{part.strip()!r} in {text!r} is not a clause; write ==N !=N <N <=N >N >=N (N may be a multiple of "
                "another size: >=64*m), %D==R or %D!=R"
            )
        if m.group(1):
            clauses.append((m.group(1), int(m.group(2)), 0, m.group(3) or ""))
        else:
            mod, op, rem = int(m.group(4)), m.group(5), int(m.group(6))
            if mod == 0:
                raise ValueError(f"{part.strip()!r} in {text!r} divides by 0; use a modulus >= 1")
            clauses.append((op, rem, mod, ""))
    return SizeCondition(text, tuple(clauses))


def _chain(text: str) -> str:
    """An epilogue chain in the canonical form a GemmCase uses ("none", "bias+relu")."""
    text = text.strip().lower()
    return "none" if text in ("", "none") else "+".join(s.strip() for s in text.split("+"))


def epilogue_matches(chain: str, patterns: Sequence[str]) -> bool:
    """Whether a canonical chain is one of an entry's `epilogues`: a whole chain, FUSED (any but none), or a
    chain's beginning followed by BEGINS."""
    for pattern in patterns:
        if pattern == chain or (pattern == FUSED and chain != "none"):
            return True
        if pattern.endswith(BEGINS) and (chain + "+").startswith(pattern[: -len(BEGINS)] + "+"):
            return True
    return False


# ---------------------------------------------------------------- entries


@dataclass(frozen=True)
class Entry:
    """One known failure. Tuples are the allowed values of a key; None means the key was left out."""

    id: str
    index: int  # 1-based position in the file, for messages
    backends: tuple[str, ...]
    versions: Mapping[str, Any]  # name -> packaging SpecifierSet
    kind: str
    link: str
    reason: str
    routes: tuple[str, ...] | None = None
    ops: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    layouts: tuple[str, ...] | None = None
    values: tuple[str, ...] | None = None  # what the operands hold (cases.case.VALUES): "nan", "inf", "normal"
    epilogues: tuple[str, ...] | None = None
    sizes: Mapping[str, SizeCondition] = field(default_factory=dict)
    cpus: tuple[str, ...] | None = None  # ATen CPU capabilities it was seen on; None: any
    devices: tuple[str, ...] | None = None  # where the backend's kernels ran (DEVICES); None: anywhere
    # Name patterns of the autotune candidates that are wrong. Given, the entry explains only a failure
    # whose every confirmed wrong candidate matches one (a losing candidate's, or a wrong winner's that
    # confirm.blame pinned on them): never an unblamed wrong winner, never another template's wrong
    # candidate beside them. None: any failure of the case.
    candidates: tuple[str, ...] | None = None
    origin: str = ""  # the file the entry was read from (messages say where to change it)
    shipped: bool = False  # from gemmguard's own database, not the user's file
    seen: tuple[str, ...] = ()  # evidence: cases it was seen failing on
    seen_right: tuple[str, ...] = ()  # evidence: neighbouring cases seen right

    def versions_match(self, versions: Mapping[str, str | None]) -> bool:
        """Every named package is installed (present in `versions`, not None) at a version in range."""
        for name, spec in self.versions.items():
            version = versions.get(name)
            if version is None or not spec.contains(version, prereleases=True):
                return False
        return True

    def applies_to(self, backend: str, versions: Mapping[str, str | None], *, any_version: bool = False) -> bool:
        """Whether this entry can describe anything a test of `backend` does with these packages (with
        `any_version`, whatever versions are installed: what a near miss is looked for in)."""
        cpu_ok = self.cpus is None or versions.get(CPU_FACT) in self.cpus
        device_ok = self.devices is None or versions.get(DEVICE_FACT) in self.devices
        return backend in self.backends and cpu_ok and device_ok and (any_version or self.versions_match(versions))

    def versions_text(self) -> str:
        return ", ".join(f"{name} {spec or '(any)'}" for name, spec in self.versions.items())

    def covers(self, case: Any, route: str | None = None) -> bool:
        """Whether the case (op, dtype, layout, values, epilogue, sizes) and route fall in this entry's pattern."""
        if self.routes is not None and route not in self.routes:
            return False
        if self.epilogues is not None and not epilogue_matches(_chain(case.epilogue), self.epilogues):
            return False
        values = getattr(case, "values", "normal")
        pattern = ((self.ops, case.op), (self.dtypes, case.dtype), (self.layouts, case.layout), (self.values, values))
        for allowed, value in pattern:
            if allowed is not None and value not in allowed:
                return False
        return all(cond(getattr(case, key), case) for key, cond in self.sizes.items())

    def explains(self, kind: str, candidates: Sequence[str] | None = None) -> bool:
        """Whether a failure of this kind fits the entry; `candidates`: the autotune candidates the failure is
        confirmed to come from (None or empty for an unblamed wrong winner, a crash, a raise)."""
        if not (self.kind == "any" or self.kind == kind):
            return False
        if self.candidates is None:
            return True
        return bool(candidates) and all(self.names(name) for name in candidates)

    def witnessed(self, judged: Sequence[str] = ()) -> bool:
        """Whether a pass of a covered case shows this bug gone: always, unless the entry names candidates;
        then only where one of them was judged right (a case whose autotuning never offered the template
        could not show it)."""
        return self.candidates is None or any(self.names(name) for name in judged)

    def names(self, candidate: str) -> bool:
        """Whether one of the entry's `candidates` patterns names this autotune candidate."""
        return any(fnmatchcase(candidate, pattern) for pattern in self.candidates or ())

    def line(self) -> str:
        return f"{self.id}: {self.reason} ({self.link})"


@dataclass(frozen=True)
class KnownFailures:
    path: str  # the files the entries came from, for messages ("a + b" where a user's file adds to the shipped one)
    entries: tuple[Entry, ...] = ()

    def merged_over(self, shipped: KnownFailures) -> KnownFailures:
        """This (a user's) file over gemmguard's shipped one: its entries first, then every shipped entry whose
        id it does not reuse (an entry of the same id overrides the shipped one)."""
        own = {e.id for e in self.entries}
        kept = tuple(e for e in shipped.entries if e.id not in own)
        return KnownFailures(f"{self.path} + {shipped.path}", self.entries + kept)

    def packages(self) -> tuple[str, ...]:
        """Every distribution some entry's versions name (what `installed_versions` must read)."""
        return tuple(dict.fromkeys(name for e in self.entries for name in e.versions))

    def applicable(self, backend: str, versions: Mapping[str, str | None]) -> list[Entry]:
        return [e for e in self.entries if e.applies_to(backend, versions)]
