"""An exclusive lock on an output for the whole run of a command that appends to it (``fusedsim batch``).

Two runs appending rows to one table interleave them (and two ``--resume`` runs both redo the missing pairs), so a
run holds ``fcntl.flock`` on ``<target>.lock`` from before it reads the output until it has closed it (the Parquet
side log included). A second run fails at once, naming the lock file and the holder's process id. The lock file is
removed on release; a run that finds it replaced after locking (the holder released it meanwhile) locks the new one.
The lock is advisory and needs a file system with ``flock`` (local disks; NFS emulates it).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["OutputLockedError", "exclusive_output_lock", "lock_path"]


class OutputLockedError(ValueError):
    """Another process holds the output's lock."""


def lock_path(target: str) -> str:
    """The lock file of the resolved output ``target``: ``<target>.lock`` beside it."""
    return target + ".lock"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"process {text}" if text.isdigit() else "another process (pid not yet written)"


def _acquire(path: str, option: str, name: str) -> int:
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ValueError(f"{option} {name}: cannot create the lock file {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise OutputLockedError(f"{option} {name} is in use by {holder} (lock {path}); wait for that run to "
                                    "finish or stop it, then rerun (with --resume to continue)") from None
        except OSError as exc:
            os.close(fd)
            raise ValueError(f"{option} {name}: cannot lock {path}: {exc.strerror or exc}") from None
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        mine = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            return fd
        os.close(fd)  # the holder removed this file as we locked it: lock the one now at the path


@contextmanager
def exclusive_output_lock(target: str, option: str, name: str = "") -> Iterator[str]:
    """Hold the exclusive lock of the output ``target`` (resolved path) in the block; yields the lock file's path.
    Raises :class:`OutputLockedError` (a ValueError: a usage error) at once when another run holds it."""
    path = lock_path(target)
    fd = _acquire(path, option, name or target)
    try:
        yield path
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)
