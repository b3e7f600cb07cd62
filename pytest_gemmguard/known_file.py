"""The known-failures file: its format, and reading it strictly (known.py has the format's description and
what the runner does with the entries). Torch-free."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from .errors import GemmUsageError

KINDS = ("wrong-result", "raises", "any")
FAILURE_KINDS = ("wrong-result", "raises")  # what a runner reports; "any" exists only in the file
REQUIRED = ("id", "backend", "versions", "kind", "link", "reason")
SIZE_KEYS = ("m", "n", "k", "batch")
# `seen` and `seen_right`: the evidence an entry carries (cases described as reports describe them: the cases it
# was seen failing on, and the neighbours seen right), so the pattern between them can be reviewed.
EVIDENCE_KEYS = ("seen", "seen_right")
ALLOWED = (*REQUIRED, "route", "ops", "dtypes", "layouts", "epilogues", "cpu", "candidates", *SIZE_KEYS, *EVIDENCE_KEYS)
# The CPU capabilities ATen names (torch.backends.cpu.get_cpu_capability(), lower case): a CPU kernel's code
# path, and so its bugs, can depend on it. The runner passes this machine's under the fact name CPU_FACT.
CPUS = ("default", "avx2", "avx512", "vsx", "zvector", "neon", "sve128", "sve256")
CPU_FACT = "cpu"
# In `epilogues`: every chain but none (a bug of a template's fused epilogue, whatever the chain).
FUSED = "fused"

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\[\]-]*$")  # a distribution or route name
_GLOB = re.compile(r"^[A-Za-z0-9_.*?\[\]-]+$")  # an autotune candidate's name, or a pattern of * ? [..]
_CLAUSE = re.compile(r"^(?:(==|!=|<=|>=|<|>)\s*(-?\d+)|%\s*(\d+)\s*(==|!=)\s*(\d+))$")
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")


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


def default_names() -> Names:
    from . import backends
    from .cases import LAYOUTS
    from .ops import DTYPES, OPS, STEPS

    return Names(tuple(backends.names()), tuple(OPS), tuple(DTYPES), tuple(LAYOUTS), tuple(STEPS))


# ---------------------------------------------------------------- conditions


@dataclass(frozen=True)
class SizeCondition:
    """`m = ">=2,%8!=0"`: every clause must hold. Kept with its text, for messages."""

    text: str
    clauses: tuple[tuple[str, int, int], ...]  # (op, value, modulus or 0)

    def __call__(self, value: int) -> bool:
        return all(_holds(op, value % mod if mod else value, ref) for op, ref, mod in self.clauses)


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
    """An int, or clauses like ">=2,<8" and "%8!=0"; raises ValueError saying what is wrong."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ValueError(f'{text!r} is not an integer or a condition string such as ">=2,<8" or "%8!=0"')
    if isinstance(text, int):
        return SizeCondition(str(text), (("==", text, 0),))
    clauses = []
    for part in text.split(","):
        m = _CLAUSE.match(part.strip())
        if m is None:
            raise ValueError(
                f"{part.strip()!r} in {text!r} is not a clause; write ==N !=N <N <=N >N >=N %D==R or %D!=R"
            )
        if m.group(1):
            clauses.append((m.group(1), int(m.group(2)), 0))
        else:
            mod, op, rem = int(m.group(3)), m.group(4), int(m.group(5))
            if mod == 0:
                raise ValueError(f"{part.strip()!r} in {text!r} divides by 0; use a modulus >= 1")
            clauses.append((op, rem, mod))
    return SizeCondition(text, tuple(clauses))


def _chain(text: str) -> str:
    """An epilogue chain in the canonical form a GemmCase uses ("none", "bias+relu")."""
    text = text.strip().lower()
    return "none" if text in ("", "none") else "+".join(s.strip() for s in text.split("+"))


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
    epilogues: tuple[str, ...] | None = None
    sizes: Mapping[str, SizeCondition] = field(default_factory=dict)
    cpus: tuple[str, ...] | None = None  # ATen CPU capabilities it was seen on; None: any
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
        return backend in self.backends and cpu_ok and (any_version or self.versions_match(versions))

    def versions_text(self) -> str:
        return ", ".join(f"{name} {spec or '(any)'}" for name, spec in self.versions.items())

    def covers(self, case: Any, route: str | None = None) -> bool:
        """Whether the case (op, dtype, layout, epilogue, sizes) and route fall in this entry's pattern."""
        if self.routes is not None and route not in self.routes:
            return False
        chain = _chain(case.epilogue)
        if self.epilogues is not None and chain not in self.epilogues:
            if not (FUSED in self.epilogues and chain != "none"):
                return False
        for allowed, value in ((self.ops, case.op), (self.dtypes, case.dtype), (self.layouts, case.layout)):
            if allowed is not None and value not in allowed:
                return False
        return all(cond(getattr(case, key)) for key, cond in self.sizes.items())

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


# ---------------------------------------------------------------- reading the file


def load(path: str | os.PathLike, names: Names | None = None, *, shipped: bool = False) -> KnownFailures:
    """Read and validate a known-failures file; any problem is a one-line GemmUsageError. `shipped`: gemmguard's
    own database, whose links must be public URLs (a path would point into a repository its users lack)."""
    path = os.fspath(path)
    tomllib = _toml()
    try:
        with open(path, "rb") as fh:
            text = fh.read()
    except OSError as exc:
        raise GemmUsageError(f"{path}: cannot read the known-failures file: {exc.strerror or exc}") from None
    try:
        doc = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise GemmUsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc).splitlines()[0]
        where = _TOML_LINE.search(message)
        line = int(where.group(1)) if where else text.decode("utf-8").count("\n") + 1  # "at end of document"
        message = _TOML_LINE.sub("", message).strip()
        raise GemmUsageError(f"{path}:{line}: TOML syntax error: {message}") from None
    return parse(doc, path, names, shipped=shipped)


SHIPPED_NAME = "known-failures.toml"


def shipped_path() -> str:
    """gemmguard's own known-failures database, installed with the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), SHIPPED_NAME)


def load_shipped(names: Names | None = None) -> KnownFailures:
    return load(shipped_path(), names, shipped=True)


def _toml():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise GemmUsageError(
                "reading a known-failures file needs Python >= 3.11 or the tomli package (pip install tomli)"
            ) from None
    return tomllib


def parse(doc: Mapping[str, Any], path: str, names: Names | None = None, *, shipped: bool = False) -> KnownFailures:
    """Validate an already-parsed document (what `load` does after reading TOML)."""
    extra = sorted(set(doc) - {"known"})
    if extra:
        raise GemmUsageError(f"{path}: unknown top-level key {extra[0]!r}; the file holds only [[known]] entries")
    raw = doc.get("known", [])
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise GemmUsageError(f"{path}: 'known' must be an array of tables; write each entry as [[known]]")
    names = names or default_names()
    base = os.path.dirname(os.path.abspath(path))
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(raw, start=1):
        entry = _entry(table, index, path, base, names, shipped)
        if entry.id in seen:
            raise GemmUsageError(
                f"{path}: entry {index} (id {entry.id!r}): key 'id': duplicate of entry {seen[entry.id]}; "
                "give each entry its own id"
            )
        seen[entry.id] = index
        entries.append(entry)
    return KnownFailures(path, tuple(entries))


def _entry(table: Mapping[str, Any], index: int, path: str, base: str, names: Names, shipped: bool = False) -> Entry:
    raw_id = table.get("id")
    label = f"entry {index} (id {raw_id!r})" if isinstance(raw_id, str) else f"entry {index}"

    def fail(key: str, problem: str) -> GemmUsageError:
        return GemmUsageError(f"{path}: {label}: key {key!r}: {problem}")

    unknown = sorted(set(table) - set(ALLOWED))
    if unknown:
        raise fail(unknown[0], f"unknown key; valid: {', '.join(ALLOWED)}")
    missing = [k for k in REQUIRED if k not in table]
    if missing:
        raise fail(missing[0], f"missing; every entry needs {', '.join(REQUIRED)}")

    def text(key: str, pattern: re.Pattern | None = None, form: str = "") -> str:
        value = table[key]
        if not isinstance(value, str) or not value.strip():
            raise fail(key, f"must be a non-empty string, not {value!r}")
        value = " ".join(value.split())  # reports show it on one line
        if pattern is not None and not pattern.match(value):
            raise fail(key, f"{value!r} is not {form}")
        return value

    def listed(key: str, valid: Sequence[str] | None, what: str) -> tuple[str, ...] | None:
        # None: the key was left out, so it does not narrow the pattern.
        if key not in table:
            return None
        out = []
        for item in _strings(table[key], lambda p: fail(key, p), what):
            name = item.strip() if key in ("backend", "route") else item.strip().lower()
            if valid is not None and name not in valid:
                raise fail(key, f"unknown {what} {item!r}; valid: {', '.join(valid)}")
            if valid is None and not _NAME.match(name):
                raise fail(key, f"{item!r} is not a {what} (letters, digits, . _ - [ ])")
            out.append(name)
        return tuple(dict.fromkeys(out))

    entry_id = text("id", _ID, "an id of letters, digits, '.', '_' and '-' (starting with a letter or digit)")
    label = f"entry {index} (id {entry_id!r})"
    kind = text("kind")
    if kind not in KINDS:
        raise fail("kind", f"{kind!r} is not a kind; valid: {', '.join(KINDS)}")
    epilogues = None
    if "epilogues" in table:
        chains = []
        for chain in _strings(table["epilogues"], lambda p: fail("epilogues", p), "epilogue chain"):
            canonical = _chain(chain)
            bad = [s for s in canonical.split("+") if canonical not in ("none", FUSED) and s not in names.steps]
            if bad:
                raise fail(
                    "epilogues",
                    f"unknown epilogue step {bad[0]!r} in {chain!r}; steps: "
                    f"{', '.join(names.steps)} joined by '+', none, or {FUSED} (any chain but none)",
                )
            chains.append(canonical)
        epilogues = tuple(dict.fromkeys(chains))
    sizes = {}
    for key in SIZE_KEYS:
        if key in table:
            try:
                sizes[key] = parse_size(table[key])
            except ValueError as exc:
                raise fail(key, str(exc)) from None
    return Entry(
        id=entry_id,
        index=index,
        backends=listed("backend", names.backends, "backend") or (),
        versions=_versions(table["versions"], fail),
        kind=kind,
        link=_link(text("link"), base, fail, urls_only=shipped),
        reason=text("reason"),
        routes=listed("route", None, "route"),
        ops=listed("ops", names.ops, "op"),
        dtypes=listed("dtypes", names.dtypes, "dtype"),
        layouts=listed("layouts", names.layouts, "layout"),
        epilogues=epilogues,
        sizes=sizes,
        cpus=listed("cpu", CPUS, "CPU capability"),
        candidates=_patterns(table, fail),
        origin=path,
        shipped=shipped,
        seen=_evidence(table, "seen", fail),
        seen_right=_evidence(table, "seen_right", fail),
    )


def _evidence(table: Mapping[str, Any], key: str, fail) -> tuple[str, ...]:
    if key not in table:
        return ()
    return tuple(" ".join(s.split()) for s in _strings(table[key], lambda p: fail(key, p), "case description"))


def _patterns(table: Mapping[str, Any], fail) -> tuple[str, ...] | None:
    if "candidates" not in table:
        return None
    out = []
    for item in _strings(table["candidates"], lambda p: fail("candidates", p), "candidate name pattern"):
        if not _GLOB.match(item.strip()):
            raise fail(
                "candidates",
                f"{item!r} is not a candidate name pattern (letters, digits, . _ - and * ? [...]), "
                "e.g. triton_mm_persistent_tma_*",
            )
        out.append(item.strip())
    return tuple(dict.fromkeys(out))


def _strings(value: Any, fail, what: str) -> list[str]:
    """One string or a non-empty list of non-empty strings (a key that narrows to a set of names)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v.strip() for v in items):
        raise fail(f"must be a {what} or a non-empty list of them, not {value!r}")
    return items


def _versions(value: Any, fail) -> dict[str, Any]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not isinstance(value, dict) or not value:
        raise fail("versions", 'must be a non-empty table such as { torch = ">=2.13,<2.14" }')
    out = {}
    for name, spec in value.items():
        if not _NAME.match(name):
            raise fail("versions", f"{name!r} is not a distribution name")
        if not isinstance(spec, str):
            raise fail("versions", f'{name} = {spec!r} must be a specifier string such as ">=2.13,<2.14"')
        try:
            out[name] = SpecifierSet(spec)
        except InvalidSpecifier:
            raise fail(
                "versions", f'{name} = {spec!r} is not a PEP 440 specifier set; write e.g. ">=2.13,<2.14"'
            ) from None
    return out


def _link(link: str, base: str, fail, urls_only: bool = False) -> str:
    if re.match(r"^https?://\S+$", link):
        return link
    if urls_only:
        raise fail(
            "link", f"{link!r} is not an http(s) URL; a shipped entry links an upstream issue or a published page"
        )
    if "://" in link or " " in link:
        raise fail("link", f"{link!r} is neither an http(s) URL nor a relative path")
    target = link.split("#", 1)[0]
    if not target or os.path.isabs(target) or not os.path.exists(os.path.join(base, target)):
        raise fail(
            "link",
            f"{target!r} is not a file relative to the known-failures file; use a URL or an existing "
            "path such as docs/findings.md#anchor",
        )
    return link
