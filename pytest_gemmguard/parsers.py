"""The value parsers of gemmguard's settings (validate.py's tables and backends/settings.py name one per setting):
each turns what the user wrote into the value gemmguard uses, or raises ValueError(problem), which the caller
writes as one line naming where the value came from. They know nothing of gemmguard's own parts (validate.py's
backend_list and replay check against the registry and the replay line), so any part can use them. Torch-free."""

from __future__ import annotations

import math
from typing import Any

from . import files

# ---------------------------------------------------------------- value parsers
# Each raises ValueError(problem). The error reads "SOURCE=VALUE: problem"; a problem that starts with ": " or
# " " is about the setting rather than the value, and is written right after the source ("--gemm-backends is
# empty; valid: ...", "--gemm-backends: unknown backend 'x'; valid: ...").


def positive_int(value: Any) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError("must be an integer >= 1")
    return number


def any_int(value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError("must be an integer") from None


def seconds(value: Any, *, zero_means: str | None = None) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        number = math.nan
    lowest = 0.0 if zero_means else math.ulp(0.0)
    if not math.isfinite(number) or number < lowest:
        raise ValueError("must be a number of seconds >= 0 (0: " + zero_means + ")" if zero_means else "must be > 0")
    return number


def flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def on_off(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("on", "off"):
        raise ValueError("must be 'on' or 'off'")
    return text == "on"


def fewer_threads_choice(value: Any) -> str:
    """'auto' | 'all' | 'off': which CPU backends' compiled code runs again with fewer OpenMP threads."""
    text = str(value).strip().lower()
    if text not in ("auto", "all", "off"):
        raise ValueError("must be 'auto' (Inductor's own CPU kernels), 'all' (ATen's library GEMM too) or 'off'")
    return text


def profile_choice(value: Any) -> str:
    """'default' | 'big': which sizes the tests draw (cases/big.py)."""
    text = str(value).strip().lower()
    if text not in ("default", "big"):
        raise ValueError("must be 'default' or 'big' (one tensor of every drawn case past 2**31 elements)")
    return text


def workers(value: Any) -> int | None:
    """'auto' -> None (decided per backend); else a count >= 0."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise ValueError("must be 'auto' or an integer >= 0 (0: compile in the test process only)")
    return number


def gpu_choice(value: Any) -> str | list[int]:
    """'all' | 'none' | '0,2' -> [0, 2] (indices into the GPUs visible here; checked against them later)."""
    text = str(value).strip().lower()
    if text in ("all", "none"):
        return text
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise ValueError("must be 'all', 'none' or distinct GPU indices like 0,2")
    return [int(p) for p in parts]


def directory(value: Any) -> str:
    """A directory gemmguard may create files in (created later, on first write)."""
    why = files.check_writable(str(value), directory=True)
    if why:
        raise ValueError(f"cannot be used as a directory: {why}")
    return str(value)


def writable_file(value: Any) -> str:
    why = files.check_writable(str(value))
    if why:
        raise ValueError(f"cannot be written: {why}")
    return str(value)


def text(value: Any) -> str:
    return str(value)


def fail_or_warn(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("fail", "warn"):
        raise ValueError("must be 'fail' or 'warn'")
    return text


def fraction(value: Any) -> float:
    """'20%' or 0.2: a relative threshold."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError("expected a fraction like '20%' or 0.2") from None
    if not 0 <= number < 100:
        raise ValueError("must be >= 0")
    return number
