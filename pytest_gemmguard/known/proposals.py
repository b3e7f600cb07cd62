"""From a new sighting to a known-failures entry: a run's verdict record (or several) in, proposed `[[known]]`
entries out, generalised to what the failures share, for a person to review. Torch-free.

Failures are grouped by backend, kind and op. Within a group, a key the failures all agree on is kept (one dtype,
one layout); one they vary over lists the values seen (the reviewer widens it to the mechanism, or narrows it);
epilogue chains that vary but are never "none" become "fused" (the bug of a template's fused epilogue). A size
is named only where every failure shares it (M = 1, K = 1), and for aten the device its kernels ran on (records
name it). The versions start at the installed release and stay open (known/: a fix shows as XPASS). The cases
become `seen`; the passing cases of the same backend and op in the same records become `seen_right`, the
neighbours a reviewer checks the pattern against."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .entries import FAILURE_KINDS
from .verdicts import FAILURES, PASS, Record

# The package whose release a backend's bugs move with, beside torch.
BACKEND_PACKAGES = {"triton": "triton", "cutlass": "nvidia-cutlass", "cutedsl": "nvidia-cutlass-dsl"}
# Backends whose kernels run on the CPU or on CUDA, whichever the machine has: ATen is oneDNN's or MKL's code on
# one and cuBLAS on the other, with bugs of their own, so its entry names the device its failures were seen on.
EITHER_DEVICE = ("aten",)
_CASE = re.compile(
    r"^(?P<op>\S+) (?P<dims>[\d×]+) (?P<dtype>\S+) (?P<layout>\S+) epilogue=(?P<epilogue>\S+)"
    r"(?: values=(?P<values>\S+))?"
)
MAX_RIGHT = 6
LINK_TODO = "https://github.com/pytorch/pytorch/issues"  # replace with the upstream issue or the write-up


def parse_case(text: str) -> dict[str, Any] | None:
    """A case as reports describe it ("mm 8×16×32 float32 contiguous epilogue=none", then " values=nan" where the
    operands held NaN or inf) -> its fields."""
    m = _CASE.match(text)
    if m is None:
        return None
    dims = [int(d) for d in m["dims"].split("×")]
    batch, (mm, n, k) = (dims[0], dims[1:]) if len(dims) == 4 else (0, dims)
    return {"op": m["op"], "m": mm, "n": n, "k": k, "batch": batch, "dtype": m["dtype"], "layout": m["layout"],
            "epilogue": m["epilogue"], "values": m["values"] or "normal"}  # fmt: skip


def _release(version: str | None) -> str | None:
    """'2.13.0+cpu' -> '2.13' (the release a range opens at)."""
    if not version:
        return None
    parts = re.findall(r"\d+", version.split("+")[0])[:2]
    return ".".join(parts) if len(parts) == 2 else None


def _toml_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def propose(records: Iterable[Record]) -> list[str]:
    """One proposed `[[known]]` entry (TOML text) per group of failures."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    right: dict[tuple[str, str], list[str]] = {}
    for record in records:
        for row in sorted(record.results.values(), key=lambda r: (r["test"], r["case"])):
            case = parse_case(row["case"])
            if case is None:
                continue
            if row["outcome"] == PASS:
                right.setdefault((row["backend"], case["op"]), []).append(row["case"])
                continue
            if row["outcome"] not in FAILURES:
                continue  # a known failure already has its entry; unsupported is no failure
            kind = row["outcome"] if row["outcome"] in FAILURE_KINDS else "wrong-result"  # pre-existing: a wrong result
            group = groups.setdefault((row["backend"], kind, case["op"]),
                                      {"cases": [], "texts": [], "facts": {}, "devices": set()})  # fmt: skip
            group["devices"].add(row.get("device"))
            group["cases"].append(case)
            group["texts"].append(row["case"])
            group["facts"] = record.facts
    return [_entry(backend, kind, op, g, right.get((backend, op), [])) for (backend, kind, op), g in groups.items()]


def _entry(backend: str, kind: str, op: str, group: dict[str, Any], seen_right: list[str]) -> str:
    cases = group["cases"]
    texts = list(dict.fromkeys(group["texts"]))
    digest = hashlib.blake2b("\n".join(texts).encode(), digest_size=3).hexdigest()
    lines = [
        "[[known]]",
        f'id = "{backend}-{op}-{kind}-{digest}"  # name the mechanism: template or kernel family, and its condition',
        f'backend = "{backend}"',
        f'ops = ["{op}"]',
    ]
    for key in ("dtypes", "layouts"):
        values = sorted({c[key[:-1]] for c in cases})
        lines.append(f"{key} = {_toml_list(values)}")
    held = sorted({c["values"] for c in cases})
    if held != ["normal"]:  # NaN or inf in the operands: the entry names what they held
        lines.append(f"values = {_toml_list(held)}")
    chains = sorted({c["epilogue"] for c in cases})
    if len(chains) == 1:
        lines.append(f"epilogues = {_toml_list(chains)}")
    elif "none" not in chains:
        lines.append('epilogues = ["fused"]  # seen with ' + ", ".join(chains))
    if backend in EITHER_DEVICE and None not in group["devices"]:  # every failure's record named its device
        lines.append(f"device = {_toml_list(sorted(group['devices']))}")
    for size in ("m", "n", "k"):
        values = {c[size] for c in cases}
        if len(values) == 1 and values <= {1}:
            lines.append(f"{size} = 1")
    spans = [max(c["batch"], 1) * max(c["m"] * c["k"], c["k"] * c["n"], c["m"] * c["n"]) for c in cases]
    if min(spans) > 2**31:  # every case had a tensor past 2**31 elements: the big profile's class (cases/big.py)
        lines.append('elements = ">2147483648"')
    versions = {"torch": _release(group["facts"].get("torch"))}
    package = BACKEND_PACKAGES.get(backend)
    if package:
        versions[package] = _release(group["facts"].get(package))
    shown = ", ".join(f'{name} = ">={v}"' if v else f'{name} = ""' for name, v in versions.items())
    lines += [
        f"versions = {{ {shown} }}",
        f'kind = "{kind}"',
        f'link = "{LINK_TODO}"  # the upstream issue, or the published write-up',
        f'reason = "{backend} {kind} on {op}: say what the bug is, in one line"',
        f"seen = {_toml_list(texts)}",
    ]
    # The passing neighbours, where the records hold any (an empty list is no evidence, and no entry takes one).
    lines += [f"seen_right = {_toml_list(seen_right[:MAX_RIGHT])}"] if seen_right else []
    return "\n".join(lines) + "\n"
