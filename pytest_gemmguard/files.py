"""Every file gemmguard writes goes through here: atomically (readers see the old file or the new one,
never half of one), keeping an existing file's mode (a new file follows the umask, as `open` would), and
with a check that can run before long work starts (`check_writable`). Torch-free."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _nearest_existing(path: str) -> str:
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return probe


def check_writable(path: str, *, directory: bool = False) -> str | None:
    """Why `path` (a file, or a directory with `directory=True`) cannot be written, or None. Nothing is
    created: a file is tried in the nearest directory that exists."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        if directory and not os.path.isdir(path):
            return f"{path} is a file, not a directory"
        if not directory and os.path.isdir(path):
            return f"{path} is a directory, not a file"
        if not directory and not os.access(path, os.W_OK):
            return f"{path} is not writable"
    where = path if directory and os.path.isdir(path) else _nearest_existing(os.path.dirname(path) or ".")
    if not os.path.isdir(where):
        return f"{where} is a file, not a directory"
    try:
        fd, probe = tempfile.mkstemp(prefix=".gemmguard-probe-", dir=where)
    except OSError as exc:
        return f"cannot create files in {where}: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None


def write_atomic(path: str, write: Callable[[str], None]) -> str:
    """Have `write(tmp)` fill a temporary file beside `path`, then put it in place atomically with the mode
    `path` had (or the umask's for a new file), creating the directory; returns the absolute path."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=".gemmguard-", suffix=os.path.splitext(path)[1] + ".tmp", dir=directory)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename in (None, tmp):
            # A write or flush that fails (a full disk: ENOSPC) names no file, or only the temporary one: the
            # error names the file that could not be written.
            raise OSError(exc.errno, exc.strerror or str(exc), path) from exc
        raise
    return path


def write_text_atomic(path: str, text: str) -> str:
    """Write `text` to `path` atomically (see write_atomic); returns the absolute path written."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return write_atomic(path, write)


def os_error(exc: OSError) -> str:
    """An OS error in words, with its code: 'No space left on device (ENOSPC)'."""
    code = errno.errorcode.get(exc.errno) if isinstance(exc.errno, int) else None
    text = exc.strerror or str(exc)
    return f"{text} ({code})" if code else text


def rescue(name: str, text: str) -> str:
    """Keep `text` that could not be written where it belonged, as `name` in a fresh temporary directory (the
    system's, often another filesystem than the full one); returns its path, or raises OSError if that fails
    too."""
    return write_text_atomic(os.path.join(tempfile.mkdtemp(prefix="gemmguard-rescue-"), name), text)


def write_json_atomic(path: str, obj: Any) -> str:
    """JSON (indent 1, no NaN) through `write_text_atomic`."""
    return write_text_atomic(path, json.dumps(obj, indent=1, allow_nan=False) + "\n")
