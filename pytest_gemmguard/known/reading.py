"""Reading a known-failures file strictly: any problem is one line naming the file, the entry, the key and the
fix. gemmguard's own database (`known-failures.toml` beside this module) is read the same way, its links public
URLs only. Torch-free."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import GemmUsageError
from .entries import (
    ALLOWED,
    BEGINS,
    CPUS,
    DEVICES,
    FUSED,
    KINDS,
    REQUIRED,
    SIZE_KEYS,
    Entry,
    KnownFailures,
    Names,
    _chain,
    default_names,
    parse_size,
)

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\[\]-]*$")  # a distribution or route name
_GLOB = re.compile(r"^[A-Za-z0-9_.*?\[\]-]+$")  # an autotune candidate's name, or a pattern of * ? [..]
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")


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
            steps = canonical.removesuffix(BEGINS).split("+")
            bad = [s for s in steps if canonical not in ("none", FUSED) and s not in names.steps]
            if bad:
                raise fail(
                    "epilogues",
                    f"unknown epilogue step {bad[0]!r} in {chain!r}; steps: {', '.join(names.steps)} joined by '+' "
                    f"(ending in '{BEGINS}': every chain that begins so), none, or {FUSED} (any chain but none)",
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
        values=listed("values", names.values, "kind of values"),
        epilogues=epilogues,
        sizes=sizes,
        cpus=listed("cpu", CPUS, "CPU capability"),
        devices=listed("device", DEVICES, "device"),
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
