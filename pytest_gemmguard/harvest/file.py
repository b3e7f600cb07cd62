"""The harvest file: `to_json_text` (its stable text), `save_harvest` (written atomically through
`files.write_text_atomic`), `load_harvest` (read and validated: a bad file is one GemmUsageError line), and
`markdown_table` (the same GEMMs as a Markdown table)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cases.case import LAYOUTS, aliasable
from ..cases.ops import DTYPES, OPS, parse_chain
from ..errors import GemmUsageError
from ..files import write_text_atomic
from .items import Harvest, HarvestedGemm, Skipped, case_problem

FORMAT = "gemmguard-harvest"
VERSION = 1


def to_json_text(harvest: Sequence[HarvestedGemm], source: Any = None) -> str:
    """The harvest file's text: stable (sorted keys and items, indent 2, trailing newline) so that a
    re-harvest of an unchanged model is byte-identical and a changed one diffs line by line."""
    skipped = getattr(harvest, "skipped", [])
    data = {
        "format": FORMAT,
        "version": VERSION,
        "source": source if source is not None else getattr(harvest, "source", None),
        "gemms": [g.to_json() for g in sorted(harvest, key=lambda g: g.key)],
        "skipped": [
            {"what": s.what, "why": s.why, "count": s.count} for s in sorted(skipped, key=lambda s: (s.what, s.why))
        ],
    }
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def save_harvest(path: str | os.PathLike, harvest: Sequence[HarvestedGemm], source: Any = None) -> None:
    """Write a harvest file atomically: readers see the old file or the new one, never half of one; an
    existing file keeps its mode, a new one gets the umask's."""
    try:
        write_text_atomic(os.fspath(path), to_json_text(harvest, source))
    except OSError as exc:
        raise GemmUsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def load_harvest(path: str | os.PathLike) -> Harvest:
    """Read a harvest file; a missing, corrupt or foreign file raises GemmUsageError with one line."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GemmUsageError(
            f"harvest file {path} does not exist (write one with python -m pytest_gemmguard harvest)"
        ) from None
    except OSError as exc:
        raise GemmUsageError(f"cannot read harvest file {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GemmUsageError(f"harvest file {path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise GemmUsageError(f'{path} is not a gemmguard harvest file (no "format": "{FORMAT}")')
    version = data.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise GemmUsageError(f"harvest file {path} has format version {version!r}; this gemmguard reads 1 to {VERSION}")
    gemms, skipped = data.get("gemms"), data.get("skipped", [])
    if not isinstance(gemms, list) or not isinstance(skipped, list):
        raise GemmUsageError(f'harvest file {path}: "gemms" and "skipped" must be lists')
    items = [_item_from_json(path, i, g) for i, g in enumerate(gemms)]
    try:
        skips = [Skipped(str(s["what"]), str(s["why"]), int(s["count"])) for s in skipped]
    except (TypeError, KeyError, ValueError):
        raise GemmUsageError(f'harvest file {path}: a "skipped" entry needs what, why and count') from None
    return Harvest(items, skips, data.get("source"))


def _item_from_json(path: Path, index: int, raw: Any) -> HarvestedGemm:
    where = f"harvest file {path}, gemms[{index}]"
    if not isinstance(raw, dict):
        raise GemmUsageError(f"{where}: not an object")
    try:
        op, dtype, layout = str(raw["op"]), str(raw["dtype"]), str(raw["layout"])
        dims = {d: raw[d] for d in ("m", "n", "k", "batch", "count")}
        epilogue = str(raw.get("epilogue", "none"))
    except KeyError as exc:
        raise GemmUsageError(f"{where}: missing {exc.args[0]!r}") from None
    if op not in OPS or dtype not in DTYPES or layout not in LAYOUTS:
        raise GemmUsageError(f"{where}: unknown op, dtype or layout ({op}, {dtype}, {layout})")
    for name, value in dims.items():
        low = 0 if name == "batch" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise GemmUsageError(f"{where}: {name}={value!r} must be an integer >= {low}")
    if OPS[op].batched != (dims["batch"] >= 1):
        raise GemmUsageError(f"{where}: batch={dims['batch']} does not suit {op}")
    if not aliasable(layout, dims["m"], dims["n"]):
        raise GemmUsageError(f"{where}: layout aliased needs n = m (B is A transposed); m={dims['m']}, n={dims['n']}")
    try:
        epilogue = "+".join(parse_chain(epilogue)) or "none"
    except ValueError as exc:
        raise GemmUsageError(f"{where}: {exc}") from None
    listed = {f: tuple(str(x) for x in raw.get(f, ()) or ()) for f in ("operands", "sources", "modules")}
    item = HarvestedGemm(op, dims["m"], dims["n"], dims["k"], dims["batch"], dtype, layout, epilogue,
                         dims["count"], **listed)  # fmt: skip
    why = case_problem(item)
    if why:
        raise GemmUsageError(f"{where}: {why}")
    return item


def markdown_table(harvest: Sequence[HarvestedGemm]) -> str:
    """The harvest as a Markdown table, one row per GEMM (for docs and CI summaries)."""
    rows = ["| op | B | M | N | K | dtype | layout | epilogue | runs | modules |", "|---" * 10 + "|"]
    for g in harvest:
        where = ", ".join(g.modules) or "-"
        rows.append(f"| {g.op} | {g.batch or '-'} | {g.m} | {g.n} | {g.k} | {g.dtype} | {g.layout} | {g.epilogue} "
                    f"| {g.count} | {where} |")  # fmt: skip
    return "\n".join(rows) + "\n"
