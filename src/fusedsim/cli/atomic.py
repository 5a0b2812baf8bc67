"""Whole-or-nothing binary files: written to a temporary file beside the target, then renamed into place."""

from __future__ import annotations

import os
import stat
import tempfile

__all__ = ["write_bytes"]


def write_bytes(target: str, data: bytes) -> None:
    """Write ``data`` to ``target`` (a resolved path, not a symlink) through a temporary file and a rename; an
    existing file keeps its mode, a new one gets the umask's."""
    folder = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=".fs", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
