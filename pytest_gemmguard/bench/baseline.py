"""Baselines: measurements stored as JSON, keyed by a fingerprint of the hardware and software.

A baseline file is one JSON object (never pickle: a baseline is data anyone can read and diff):

    {"format": "gemmguard-baseline", "version": 3, "fingerprint": {...}, "updated": "...",
     "entries": {"<test id> | <case>": {<Measurement.as_dict()>}, ...}}

Version 2 adds every cold compile sample to an entry (`cold_compile_samples`, `warm_compile_samples`; one
fresh process each, see --gemm-compile-samples). Version 1 files are still read, and merged into when
saving: their entries have one cold compile (`cold_compile_s`), which counts as a single sample, so their
compile verdicts are untested (reported, not failed) until the baseline is recorded again. Version 3 (issue
13) adds the reference's samples paired with the kernel's and the estimate the runtime verdict judges: the
median paired ratio, its interval and its noise (`ratio`, `ratio_low`, `ratio_high`, `ratio_n`, `noise`), so a
baseline recorded under noise says so and comparisons against it come out inconclusive. Entries of versions 1
and 2 are compared through their median / reference median, their noise that of their unpaired samples
(verdict.estimate_of). Any other version is refused.

Issue 16, multi-GPU runners: a benchmark times one GPU, so the fingerprint names the GPU model (`gpu`, `sm`)
and no longer how many cards the box holds (`gpu_count`, still in older files, is not compared: a worker
given one GPU sees one). Two identical cards share one baseline. On a box of mixed GPUs the entries of a
model other than the fingerprint's are stored as "KEY @ MODEL" (each entry also records the GPU that timed
it, `gpu`), so each model is compared with its own; such a file serves every model it holds entries of.
Files without such keys read as before, and a gemmguard that predates them never looks them up.

Numbers from another GPU, CPU, driver or library version say nothing about this one, so `load` refuses a
baseline whose fingerprint differs (one line naming what differs) unless forced. A missing file is not
an error (there is nothing to compare yet); an unreadable or malformed file is an error and `save` never
overwrites it, so a broken baseline is looked at, not silently replaced. Writes are atomic and keep the
file's mode (files.py).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from ..errors import BaselineError
from ..files import write_json_atomic

__all__ = ["BaselineError", "fingerprint", "load", "read", "save"]

FORMAT = "gemmguard-baseline"
VERSION = 3  # written
READABLE = (1, 2, 3)  # read: version 1 entries lack the compile samples, 1 and 2 the paired ratios
MODEL_KEYS = ("gpu", "sm")  # the GPU model: a mixed box's file holds entries of several (KEY @ MODEL)
IGNORED = ("gpu_count",)  # written by older versions; cards in the box change no GEMM's speed


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
    except OSError:
        return None
    for word in first.split():
        if word[:1].isdigit() and "." in word:
            return word
    return None


def fingerprint(device: str = "cpu") -> dict[str, Any]:
    """What must match for two measurements to be comparable: machine and software versions."""
    import torch

    fp: dict[str, Any] = {
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": ".".join(platform.python_version_tuple()[:2]),
        "torch": torch.__version__,
        "triton": _dist_version("triton"),
        "cutlass_dsl": _dist_version("nvidia-cutlass-dsl"),
        "device": "cpu",
    }
    if str(device).startswith("cuda") and torch.cuda.is_available():
        cap = torch.cuda.get_device_capability()
        fp.update(
            device="cuda",
            gpu=torch.cuda.get_device_name(),
            sm=f"{cap[0]}{cap[1]}",
            cuda=torch.version.cuda,
            driver=_nvidia_driver(),
        )
    return fp


def fingerprint_diff(a: dict, b: dict) -> list[str]:
    """'key: mine vs theirs' for every key whose values differ (but the IGNORED ones)."""
    return [
        f"{k}: {b.get(k)!r} here vs {a.get(k)!r} in baseline"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k) and k not in IGNORED
    ]


def entry_key(key: str, model: str | None, file_model: str | None) -> str:
    """Where a measurement of GPU model `model` lives in a file whose fingerprint names `file_model`."""
    return key if not model or model == file_model else f"{key} @ {model}"


def mismatch(doc: dict, here: dict[str, Any]) -> list[str]:
    """What makes the baseline `doc` foreign here: fingerprint_diff, less a GPU model the file holds
    entries of (a mixed box's file: see the module docstring)."""
    diff = fingerprint_diff(doc["fingerprint"], here)
    model = here.get("gpu")
    held = bool(model) and any(k.endswith(f" @ {model}") for k in doc.get("entries", {}))
    if held and all(d.split(":", 1)[0] in MODEL_KEYS for d in diff):
        return []
    return diff


@dataclass
class Baseline:
    path: str
    fingerprint: dict[str, Any]
    entries: dict[str, dict] = field(default_factory=dict)
    forced: bool = False  # loaded despite a foreign fingerprint

    def entry(self, key: str, model: str | None = None) -> dict | None:
        """The entry of measurement `key` timed on GPU model `model` (None on the CPU)."""
        return self.entries.get(entry_key(key, model, self.fingerprint.get("gpu")))


def read(path: str) -> dict | None:
    """The raw document, None when the file does not exist; BaselineError if it is not a baseline."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineError(f"gemmguard: cannot read baseline {path}: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(
            f"gemmguard: baseline {path} is corrupt (not JSON: {exc}); fix or delete it, it will not be overwritten"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), dict):
        raise BaselineError(
            f"gemmguard: {path} is not a gemmguard baseline (no format={FORMAT!r} with entries); "
            "fix or delete it, it will not be overwritten"
        )
    if doc.get("version") not in READABLE:
        raise BaselineError(
            f"gemmguard: baseline {path} has version {doc.get('version')!r}; this gemmguard reads versions "
            f"{', '.join(map(str, READABLE))} (record it again, or use the gemmguard that wrote it)"
        )
    if not isinstance(doc.get("fingerprint"), dict):
        raise BaselineError(f"gemmguard: baseline {path} has no fingerprint; fix or delete it")
    return doc


def load(path: str, here: dict[str, Any], force: bool = False) -> Baseline | None:
    """The baseline at `path` for this machine; None if missing. Raises BaselineError if it is corrupt,
    or recorded on other hardware/software (unless `force`)."""
    doc = read(path)
    if doc is None:
        return None
    diff = mismatch(doc, here)
    if diff and not force:
        raise BaselineError(
            f"gemmguard: baseline {path} was recorded on other hardware/software ({'; '.join(diff)}); "
            "refusing to compare (--gemm-baseline-force to compare anyway)"
        )
    return Baseline(path, doc["fingerprint"], doc["entries"], forced=bool(diff))


def save(path: str, here: dict[str, Any], entries: dict[str, dict], force: bool = False) -> int:
    """Merge `entries` into the baseline at `path` (created if missing) and write it atomically.

    Refuses (BaselineError) to touch a corrupt file, and to merge into one from other hardware/software
    unless `force`, in which case that file's entries are dropped. Returns the number of entries written."""
    doc = read(path)
    merged: dict[str, dict] = {}
    written = dict(here)
    if doc is not None:
        diff = mismatch(doc, here)
        if diff and not force:
            raise BaselineError(
                f"gemmguard: not saving to {path}: it holds a baseline from other hardware/software "
                f"({'; '.join(diff)}); use another path or --gemm-baseline-force to replace it"
            )
        if not diff:
            merged.update(doc["entries"])
            # The file's own model keeps keying its plain entries (this run's may be another of a mixed box).
            written.update({k: doc["fingerprint"][k] for k in MODEL_KEYS if k in doc["fingerprint"]})
    model = written.get("gpu")
    merged.update({entry_key(k, (e.get("gpu") or {}).get("name"), model): e for k, e in entries.items()})
    out = {
        "format": FORMAT,
        "version": VERSION,
        "fingerprint": written,
        "updated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "entries": dict(sorted(merged.items())),
    }
    write_json_atomic(path, out)
    return len(merged)
