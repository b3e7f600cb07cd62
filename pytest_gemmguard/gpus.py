"""Multi-GPU runners (--gemm-gpus): one pytest-xdist worker per GPU, and which physical GPU a process times on.

The GPUs come from `nvidia-smi -L` (a subprocess: the caller never initialises CUDA, which matters in the
xdist controller, which runs no test and should hold no CUDA context), narrowed by the controller's own
CUDA_VISIBLE_DEVICES. The controller gives each worker one of them, round robin over the chosen list, by
setting CUDA_VISIBLE_DEVICES to the GPU's UUID in the worker's environment when xdist starts it
(`pytest_xdist_setupnodes`: the variable is in place before the worker's interpreter imports anything, so
no conftest or plugin can initialise CUDA first). A UUID, not an index, because CUDA numbers devices
fastest-first by default while nvidia-smi numbers them by PCI bus: an index can name another card. A
restarted worker (xdist replaces one that crashed) reuses its spec, so it gets the same GPU, and a GPU that
fails takes down only the workers given it.

`identity(device)` is what the benchmark lock keys on (bench/gpu_lock.py): the UUID of the GPU behind
`device`, so two workers on different GPUs time at the same moment and two on one GPU never do, however
each spells its device. Torch-free but for `identity`/`timing_gpu`, which ask torch when the timing process
has CUDA up (the exact answer) and fall back to CUDA_VISIBLE_DEVICES and the inventory.

GEMMGUARD_GPU_LIST is a test hook for machines without a GPU: "UUID:NAME,UUID:NAME" stands for what
`nvidia-smi -L` would report (tests/test_gpus.py). It changes which environment the workers get, nothing else.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from .errors import GemmUsageError

ENV_LIST = "GEMMGUARD_GPU_LIST"  # test hook: a fake `nvidia-smi -L`
ENV_WORKER_GPU = "GEMMGUARD_WORKER_GPU"  # set with CUDA_VISIBLE_DEVICES in a worker: "INDEX|UUID|NAME"
_SMI_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")


@dataclass(frozen=True)
class Gpu:
    index: int  # in `nvidia-smi -L`: the unmasked list, PCI bus order
    uuid: str
    name: str

    def label(self) -> str:
        return f"GPU {self.index} {self.name} ({self.uuid})"

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "name": self.name}

    def encode(self) -> str:
        return f"{self.index}|{self.uuid}|{self.name}"

    @classmethod
    def decode(cls, text: str) -> Gpu | None:
        index, uuid, name = [*text.split("|", 2), "", ""][:3]
        return cls(int(index), uuid, name) if index.isdigit() and uuid else None


_INVENTORY: dict[str, list[Gpu]] = {}


def inventory() -> list[Gpu]:
    """Every GPU of the machine, as `nvidia-smi -L` lists them ([] without the tool or a driver); once per
    process (per value of the test hook)."""
    fake = os.environ.get(ENV_LIST)
    key = fake if fake is not None else "\0smi"
    if key not in _INVENTORY:
        _INVENTORY[key] = _parse_fake(fake) if fake is not None else _nvidia_smi()
    return _INVENTORY[key]


def _parse_fake(text: str) -> list[Gpu]:
    out = []
    for i, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
        uuid, _, name = part.partition(":")
        out.append(Gpu(i, uuid.strip(), name.strip() or "fake GPU"))
    return out


def _nvidia_smi() -> list[Gpu]:
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    found = (_SMI_LINE.match(line.strip()) for line in done.stdout.splitlines())
    # MIG instances are listed indented under their GPU and do not match: one worker per whole GPU.
    return [Gpu(int(m[1]), m[3], m[2]) for m in found if m] if done.returncode == 0 else []


def visible(gpus: list[Gpu], mask: str | None) -> list[Gpu]:
    """The GPUs a process with CUDA_VISIBLE_DEVICES=`mask` can use, in its order. Like CUDA, the list ends
    at the first entry that names no GPU; an entry may be an index or a (prefix of a) UUID."""
    if mask is None:
        return list(gpus)
    out: list[Gpu] = []
    for entry in (e.strip() for e in mask.split(",")):
        match = [g for g in gpus if (entry.isdigit() and g.index == int(entry)) or
                 (entry.startswith("GPU-") and g.uuid.startswith(entry))]  # fmt: skip
        if len(match) != 1 or match[0] in out:
            break
        out.append(match[0])
    return out


def chosen(setting: Any, gpus: list[Gpu]) -> list[Gpu]:
    """The GPUs --gemm-gpus gives workers: 'all' -> every visible one, 'none' -> none (each worker sees
    what the controller sees, as before), a list of indices -> those of the visible list."""
    if setting == "none":
        return []
    if setting == "all":
        return list(gpus)
    bad = [i for i in setting if i >= len(gpus)]
    if bad:
        have = ", ".join(f"{i}: {g.name}" for i, g in enumerate(gpus)) or "none"
        raise GemmUsageError(
            f"--gemm-gpus={','.join(map(str, setting))}: no GPU {bad[0]} here ({len(gpus)} visible: {have})"
        )
    return [gpus[i] for i in setting]


def worker_number(worker_id: str | None) -> int | None:
    """'gw3' -> 3 (pytest-xdist's worker ids); None for anything else."""
    m = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(m[1]) if m else None


def assign(worker_id: str | None, gpus: list[Gpu]) -> Gpu | None:
    """The GPU of worker `worker_id`: round robin over `gpus` by its number (more workers than GPUs share
    them, and the benchmark lock keeps their timings apart); None without GPUs or a worker number."""
    number = worker_number(worker_id)
    if number is None or not gpus:
        return None
    return gpus[number % len(gpus)]


def plan(setting: Any, mask: str | None = None) -> list[Gpu]:
    """The GPUs this controller hands to its workers (its own CUDA_VISIBLE_DEVICES unless `mask`). Fewer
    than two means nothing changes: one GPU, or none, is what every worker sees anyway."""
    here = visible(inventory(), os.environ.get("CUDA_VISIBLE_DEVICES") if mask is None else mask)
    return chosen(setting, here)


def worker_env(gpu: Gpu) -> dict[str, str]:
    """What a worker given `gpu` gets in its environment (children it starts, compile-ahead workers and
    cold-compile processes, inherit it, so they use its GPU too)."""
    return {"CUDA_VISIBLE_DEVICES": gpu.uuid, ENV_WORKER_GPU: gpu.encode()}


def my_gpu() -> Gpu | None:
    """The GPU the controller gave this worker (None when it gave none)."""
    return Gpu.decode(os.environ.get(ENV_WORKER_GPU, ""))


# ---------------------------------------------------------------- the GPU a timing process uses


def _ordinal(device: str) -> int:
    index = str(device).partition(":")[2]
    if index.isdigit():
        return int(index)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


def _torch_uuid(ordinal: int) -> str | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        uuid = str(torch.cuda.get_device_properties(ordinal).uuid)
    except Exception:  # an old torch without .uuid, a device that is gone: fall back to the environment
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def identity(device: str) -> str:
    """A name for the physical GPU behind `device` ('cuda', 'cuda:1') in this process, the same in every
    process that uses that GPU: its UUID where torch or the inventory can tell, else its index."""
    ordinal = _ordinal(device)
    uuid = _torch_uuid(ordinal)
    if uuid:
        return uuid
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = visible(inventory(), mask)
    if ordinal < len(seen):
        return seen[ordinal].uuid
    entries = [e.strip() for e in mask.split(",")] if mask else []
    return f"index-{entries[ordinal] if ordinal < len(entries) else ordinal}"


def timing_gpu(device: str) -> dict[str, Any]:
    """{index, uuid, name} of the GPU that times on `device` ({} on the CPU): the benchmark row's GPU."""
    if not str(device).startswith("cuda"):
        return {}
    uuid = identity(device)
    known = next((g for g in inventory() if g.uuid == uuid), None)
    name = known.name if known else ""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            name = torch.cuda.get_device_name(_ordinal(device)) if torch.cuda.is_available() else name
        except Exception:
            pass
    return {"index": known.index if known else None, "uuid": uuid, "name": name}


def short(gpu: dict[str, Any] | None) -> str:
    """A benchmark row's GPU column: '0 H200' (the index in nvidia-smi -L and the model)."""
    if not gpu:
        return "-"
    name = str(gpu.get("name") or "?").removeprefix("NVIDIA ")
    index = gpu.get("index")
    return f"{index if index is not None else '?'} {name}"
