"""The memory guard: what a case will hold at its peak, estimated before its inputs are allocated, against what
is free (`--gemm-memory-limit`). Without it a case too large for the machine (an mm of 65536^3 float32 on aten)
allocated 20 GB in 79 s and was killed by the kernel, with no message.

The estimate follows a check through its phases (run/check.py, oracle/, compile/candidates.py) and takes the largest:

    inputs       the operands in their dtype as stored (a strided one in a buffer twice as wide), while each is
                 drawn as float32 values and cast (on the host, also for a GPU backend)
    reference    float64 copies of every input, and |A| and |B| in float64 with the product, its bound and one
                 temporary of the output's size, or five of the output's size for the epilogue (oracle/)
    run          the float64 reference and tolerance kept, NaN blocks released to the allocator (4 outputs),
                 the output
    comparison   the same kept, the output, and up to seven float64 arrays of its size (oracle.judge)
    candidates   (--gemm-all-choices) autotuning's own example operands and output, and their float64
                 reference, beside the case's
    chunks       for a case judged in row chunks (oracle/chunks.py) instead of the reference and comparison: the
                 float64 copies of the inputs used whole, about ten float64 arrays of one chunk, one NaN block, the
                 output, and eager's output (a failure's report); no candidates

Every phase holds the operands. A margin of 10% covers what is not counted (the allocator's rounding, a
kernel's workspace). On the CPU all of it is host memory; for a GPU backend the phases are on the device, and
the host holds the float32 values of one operand at a time while it is drawn.

Torch-free at import: validate.py parses the setting with `parse_limit`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

MARGIN = 1.1
F64 = 8
# A case whose largest tensor spans more elements than this is judged in row chunks, its winner only
# (oracle/chunks.py): whole, its float64 reference and comparison would hold about nine arrays of its result's size.
CHUNK_ELEMENTS = 2**26
# Elements of one row chunk's widest row-wise array (8 MiB in float64): on 2 CPU cores a chunk of 2**24 took 4x as
# long (each array a fresh mapping, zeroed page by page), 2**19 to 2**21 about the same.
ROW_WORK = 2**20
LIMIT_HELP = "--gemm-memory-limit=BYTES (or off; ini gemm_memory_limit, environment GEMMGUARD_MEMORY_LIMIT)"
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_limit(value: Any) -> str | int:
    """'auto' (what is free now), 'off' (no guard) or a byte count (a K, M, G or T suffix counts powers of 1024)."""
    text = str(value).strip().lower()
    if text in ("auto", "off"):
        return text
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", text)
    if match is None or float(match[1]) * _UNITS[match[2]] < 1:
        raise ValueError("must be 'auto', 'off' or a number of bytes >= 1 (K, M, G, T: powers of 1024)")
    return int(float(match[1]) * _UNITS[match[2]])


def size(nbytes: float) -> str:
    """Bytes for a reader: '412 GiB', '21.9 GiB', '512 MiB'."""
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} B"


@dataclass(frozen=True)
class Need:
    """What a case holds at its peak: bytes of host memory, of device memory (0 for a CPU backend), and the
    peak phase's bytes by what holds them, for the message."""

    host: int
    device: int
    parts: dict[str, int]


def chunked(case: Any) -> bool:
    """Whether `case` is judged in row chunks (CHUNK_ELEMENTS)."""
    return case.elements > CHUNK_ELEMENTS


def rows_per_chunk(case: Any) -> int:
    """Rows of the result in one chunk: about ROW_WORK elements in its widest row-wise array."""
    from .ops import OPS

    lead = case.batch if OPS[case.op].batched else 1
    return max(ROW_WORK // max(lead * max(case.k, case.n), 1), 1)


def estimate(case: Any, device: str, all_choices: bool = True) -> Need:
    """What `case` will hold at its peak on `device` when checked (module docstring)."""
    from .case import STORAGE_OFFSET, input_roles, operand_specs, role_dtypes, row_dims
    from .ops import DTYPES, OPS

    specs, dtypes = operand_specs(case), role_dtypes(case)
    args, extras = input_roles(case)
    numel = {role: math.prod(specs[role][0]) for role in (*args, *extras)}
    itemsize = {role: DTYPES[dtypes[role]].itemsize for role in numel}
    wide = {"strided": 2}
    stored = sum((numel[r] * wide.get(specs[r][1], 1) + STORAGE_OFFSET) * itemsize[r] for r in numel)
    drawn = (4 + max(itemsize.values())) * max(numel.values())  # an operand's float32 values, and their cast
    product = [r for r in ("a", "b", "w") if r in OPS[case.op].arg_names]
    ab = sum(numel[r] for r in product)
    ab_stored = sum(numel[r] * itemsize[r] for r in product)
    lead = case.batch if OPS[case.op].batched else 1
    out = lead * case.m * case.n
    out_bytes = out * DTYPES[case.out_dtype].itemsize
    kept = 2 * F64 * out  # the float64 reference and its tolerance
    f64 = "float64 references and comparisons"
    phases = {
        "reference": {f64: F64 * (sum(numel.values()) + max(ab + 3 * out, 5 * out))},
        "run": {f64: kept, "outputs": 5 * out_bytes},
        "comparison": {f64: kept + 7 * F64 * out, "outputs": out_bytes},
    }
    if chunked(case):  # judged in row chunks (oracle/chunks.py), the winner only
        whole = sum(n for r, n in numel.items() if r not in row_dims(case))
        chunk = min(rows_per_chunk(case), case.m) * lead * (case.k + case.n)
        phases = {  # one NaN block, the output, eager's output for a failure's report; a chunk's float64 arrays
            "run": {"outputs": 3 * out_bytes},
            "comparison": {f64: F64 * (whole + 10 * chunk), "outputs": 3 * out_bytes},
        }
        all_choices = False
    if all_choices:  # autotuning's example tensors, and the float64 reference its candidates are judged by
        phases["candidates"] = {f64: kept + F64 * (2 * ab + 3 * out), "autotuning's tensors": ab_stored + out_bytes}
    on_gpu = str(device).startswith("cuda")
    if not on_gpu:
        phases["inputs"] = {"values being drawn": drawn}
    peak = max(phases.values(), key=lambda p: sum(p.values()))
    parts = {"operands": stored, **peak}
    total = int(MARGIN * sum(parts.values()))
    return Need(int(MARGIN * drawn), total, parts) if on_gpu else Need(total, 0, parts)


def host_free() -> tuple[int | None, str]:
    """Bytes the host can still give this process, and where that figure comes from (None: unknown):
    MemAvailable, or less where this process's cgroup has a memory limit closer than that."""
    free, source = None, ""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    free, source = int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
                    break
    except (OSError, ValueError, IndexError):
        pass
    if free is None:
        try:
            free, source = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free pages"
        except (AttributeError, ValueError, OSError):
            pass
    left = _cgroup_left()
    if left is not None and (free is None or left < free):
        free, source = left, "this process's cgroup memory limit"
    return free, source


def _cgroup_left() -> int | None:
    """The memory limit of this process's cgroup less its usage (v2, then v1), None without a limit."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_file, encoding="ascii") as fh:
                limit = fh.read().strip()
            with open(usage_file, encoding="ascii") as fh:
                usage = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 1 << 60:  # "no limit", as v1 writes it
            return None
        return max(int(limit) - usage, 0)
    return None


def device_free(device: str) -> tuple[int | None, str]:
    """Bytes free on a CUDA device, with what torch's allocator holds cached but unused (it is reused first)."""
    try:
        import torch

        where = torch.device(device)
        free = torch.cuda.mem_get_info(where)[0]
        cached = torch.cuda.memory_reserved(where) - torch.cuda.memory_allocated(where)
    except Exception:  # no CUDA here, or a driver that cannot say: no bound from it
        return None, ""
    return free + cached, "torch.cuda.mem_get_info, with the allocator's cached blocks"


def guard(case: Any, device: str, limit: str | int = "auto", all_choices: bool = True) -> None:
    """Refuse, with CaseTooLarge, a case that needs more memory than `limit` allows ('auto': what is free now;
    a byte count: that much on the host and on the device; 'off': no guard), before anything is allocated."""
    if limit == "off":
        return
    from ..errors import CaseTooLarge

    need = estimate(case, device, all_choices)
    for where, needed in (("host", need.host), ("GPU", need.device)):
        if not needed:
            continue
        if limit == "auto":
            free, source = host_free() if where == "host" else device_free(device)
        else:
            free, source = int(limit), "--gemm-memory-limit"
        if free is None or needed <= free:
            continue
        allowed = f"{size(free)} is free ({source})" if limit == "auto" else f"the limit is {size(free)} ({source})"
        held = ", ".join(f"{what} {size(n)}" for what, n in need.parts.items() if n)
        if where == "host" and need.device:
            held = "its largest operand's float32 values and their cast, while they are drawn"
        raise CaseTooLarge(
            f"{case.describe()} needs about {size(needed)} of {where} memory at its peak ({held}; 10% margin "
            f"included) and {allowed}: refused before allocating its inputs; to run it anyway, raise the limit "
            f"on purpose with {LIMIT_HELP}"
        )
