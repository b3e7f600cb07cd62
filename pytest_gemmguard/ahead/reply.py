"""What a compile-ahead worker learnt of one case: the one record that crosses from a worker (worker.py writes it as
a JSON line) through the pool (pool.py adds what only it knows) to the check that waits for it (run/check.py).
Torch-free."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

STATUSES = ("ok", "unsupported", "timeout", "error", "fatal")


@dataclass(frozen=True)
class Reply:
    """status: ok (compiled and ran), unsupported (no kernel of the backend ran), timeout (its compile outlasted
    --gemm-compile-timeout), error (its compile raised: the test process compiles the case itself) or fatal (it
    killed its process, or poisoned its CUDA context)."""

    status: str
    detail: str = ""  # what was raised, or how the worker died
    candidates: tuple[dict, ...] = ()  # the autotune candidates its compile judged (CandidateResult.to_json)
    fn: bool = False  # it compiled the test's own function (travel.py), not the case's own GEMM
    settled: bool = False  # unsupported for a reason every compile of the case meets (Unsupported.settled)
    no_choice: bool = False  # unsupported because Inductor found no valid choice (Unsupported.no_choice)
    compile_s: float | None = None  # the worker's own time on it: compile, autotuning, its checks
    retiring: bool = False  # its worker ends after this reply: a later compile poisoned its CUDA context
    # Added by the pool:
    ahead_s: float | None = None  # from the job's start to its reply, as the pool saw it
    queued_ahead: bool = True  # drawn ahead; False: a worker started on it only when the test asked
    candidates_fn: bool = False  # `candidates` were judged in the test's own function (else in the bare GEMM)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Reply:
        """A worker's reply line, read; anything that is not one raises ValueError (the pool says so)."""
        if not isinstance(data, dict) or data.get("status") not in STATUSES:
            raise ValueError(f"not a compile-ahead reply: {str(data)[:200]!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in known}
        return cls(**{**fields, "candidates": tuple(fields.get("candidates") or ())})
