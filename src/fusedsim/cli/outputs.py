"""Output files of the CLI that are checked before any work and never lost after it.

* ``check_outputs`` runs before the computation: every path must be writable (its folder exists and a file can be
  created there; an existing file must be writable; a directory is refused), standard output (``-``) is taken at
  most once, and one path is not named twice. A symlink is followed: its *target* is checked and later written.
* ``write_outputs`` writes all files or none: every text goes to a short temporary file beside its target first
  (``.fs<random>.tmp``, so a long but valid output name still works), then all are renamed into place; a failed
  rename puts back what was there before. Streams (``-``, ``/dev/stdout``, FIFOs, character devices) are written
  directly, after the files.
* When a write fails after a finished run, the results are saved in fallback files (the system's temporary folder,
  else the current folder) and the error names them, so a long run is never lost to a bad output path.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Output", "OutputWriteError", "check_outputs", "refuse_outputs_that_are_inputs", "same_file",
           "write_outputs"]

_STDOUT = "-"


class OutputWriteError(RuntimeError):
    """Writing the outputs failed; ``saved`` lists the fallback files that hold the results."""

    def __init__(self, message: str, saved: Sequence[str]):
        super().__init__(message)
        self.saved = list(saved)


@dataclass
class Output:
    """One output: ``path`` as given, its ``kind`` (``json``, ``xml``, ``csv``) and the ``option`` that named it."""

    path: str
    kind: str
    option: str
    target: str = ""  # the resolved file written (a symlink's target), or "-" for standard output
    stream: bool = False  # written in place (stdout, a device or a FIFO): no temporary file, no rename
    line: int = 0  # the line of a list file (vmaf --pairs) that named it, for messages; 0: none


def _resolve(out: Output) -> None:
    if out.path in (_STDOUT, "/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"):
        out.target, out.stream = _STDOUT, True  # through sys.stdout, in order with anything else printed
        return
    if out.path.startswith(("/dev/fd/", "/proc/self/fd/")) or out.path == "/dev/stderr":
        out.target, out.stream = out.path, True  # an inherited descriptor: opened as given, never replaced
        return
    try:
        st = os.stat(out.path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ValueError(f"{out.option} {out.path}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{out.option} {out.path}: is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        out.target, out.stream = out.path, True  # /dev/null, a FIFO, a terminal: written directly
        return
    out.target = os.path.realpath(out.path)  # follows symlinks (also dangling ones: their target is created)


def _file_id(path: str) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the file ``path`` names (symlinks followed), or None when there is none."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _stream_id(stream: object) -> tuple[int, int] | None:
    """The regular file a standard stream is redirected to (``>> ref.png``, ``< dist.y4m``), or None for a terminal,
    a pipe or a stream without a descriptor."""
    try:
        st = os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file: the same device and inode when both exist (hard links,
    symlinks, ``..``), else the same resolved path when neither does (a dangling symlink to the other's name);
    a file that exists is never one that does not."""
    id_a, id_b = _file_id(a), _file_id(b)
    if id_a is not None or id_b is not None:
        return id_a == id_b
    return os.path.realpath(a) == os.path.realpath(b)


_STDOUT_NAMES = (_STDOUT, "/dev/stdout", "/proc/self/fd/1", "/dev/fd/1")


def refuse_outputs_that_are_inputs(outputs: Sequence[Output], inputs: Iterable[tuple[str, str]]) -> None:
    """Raise ValueError before any work when an output is one of the inputs (``(argument, path)`` pairs), naming
    the output's argument and both paths.

    Writing an output replaces its file, so an output that is also an input destroys that input (and reading a
    half-written input gives wrong values). Identity is by device and inode (:func:`same_file`), which a path
    comparison misses for hard links. Standard output and standard input (``-``) count as the files they are
    redirected to (``>> ref.png``, ``< dist.y4m``). Empty inputs are skipped.
    """
    inputs = [(arg, str(path)) for arg, path in inputs if str(path)]
    for out in outputs:
        to_stdout = out.path in _STDOUT_NAMES
        out_id = _stream_id(sys.stdout) if to_stdout else _file_id(out.path)
        where = "standard output" if to_stdout else out.path
        for arg, path in inputs:
            if path == "-":
                if out_id is not None and out_id == _stream_id(sys.stdin):
                    raise ValueError(f"{out.option} {where} is the file standard input ({arg} -) is read from; "
                                     "writing it would destroy that input: choose another output path")
                continue
            if (out_id is not None and out_id == _file_id(path)) if to_stdout else same_file(out.path, path):
                raise ValueError(f"{out.option} {where} is the input {arg} {path} (the same file); writing it would "
                                 "destroy that input: choose another output path")


def check_outputs(outputs: Sequence[Output]) -> None:
    """Check every output before any work; raise ValueError naming the first bad one."""
    seen: dict[str, Output] = {}
    for out in outputs:
        _resolve(out)
        key = out.target
        if out.stream and out.target != _STDOUT:
            try:
                st = os.stat(out.target)
                key = f"dev:{st.st_dev}:{st.st_ino}"
            except OSError:
                pass
        if key in seen:
            other = seen[key]
            if key == _STDOUT or (out.stream and other.stream):
                where = "standard output (-)" if key == _STDOUT else out.target
                raise ValueError(f"only one of {other.option} and {out.option} can write to {where}")
            raise ValueError(f"{other.option} {other.path} and {out.option} {out.path} both write to "
                             f"{out.target}; give each output its own path")
        seen[key] = out
        if out.target == _STDOUT:
            continue
        if out.stream:
            if not os.access(out.target, os.W_OK):
                raise ValueError(f"{out.option} {out.path}: {out.target} is not writable")
            continue
        folder, name = os.path.split(out.target)
        if not os.path.isdir(folder):
            raise ValueError(f"{out.option} {out.path}: folder {folder} does not exist")
        try:
            name_max = os.pathconf(folder, "PC_NAME_MAX")
        except (OSError, ValueError, AttributeError):
            name_max = 255
        if len(os.fsencode(name)) > name_max:
            raise ValueError(f"{out.option} {out.path}: file name too long (over {name_max} bytes)")
        if os.path.exists(out.target) and not os.access(out.target, os.W_OK):
            raise ValueError(f"{out.option} {out.path}: {out.target} is not writable")
        # a real probe: the folder may be read-only, full of quota, or on a read-only file system
        try:
            fd, probe = tempfile.mkstemp(prefix=".fs", suffix=".tmp", dir=folder)
        except OSError as exc:
            raise ValueError(f"{out.option} {out.path}: cannot create a file in {folder}: "
                             f"{exc.strerror or exc}") from None
        os.close(fd)
        os.unlink(probe)


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def _save_fallback(outputs: Sequence[Output], texts: Sequence[str]) -> list[str]:
    saved: list[str] = []
    for folder in (tempfile.gettempdir(), os.getcwd()):
        try:
            stem_fd, stem = tempfile.mkstemp(prefix="fusedsim-vmaf-", suffix=".saved", dir=folder)
            os.close(stem_fd)
            os.unlink(stem)
            paths = [f"{stem[:-len('.saved')]}-{i}.{out.kind}" for i, out in enumerate(outputs)]
            for path, text in zip(paths, texts):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                    f.write(text)
                saved.append(path)
            return saved
        except OSError:
            for path in saved:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            saved = []
    return saved


def write_outputs(outputs: Sequence[Output], texts: Sequence[str]) -> None:
    """Write ``texts[i]`` to ``outputs[i]`` (checked by ``check_outputs``): all files or none.

    On failure nothing that existed is changed, the results are saved in fallback files, and OutputWriteError says
    what failed and where the results are.
    """
    files = [(o, t) for o, t in zip(outputs, texts) if not o.stream]
    streams = [(o, t) for o, t in zip(outputs, texts) if o.stream]
    temps: list[str] = []
    backups: list[tuple[str, str]] = []  # (backup, target) of files replaced so far
    done: list[str] = []  # targets renamed into place (that did not exist before)
    failed: Output | None = None
    try:
        # 1. every file's text into a temporary file beside its target
        for out, text in files:
            failed = out
            folder = os.path.dirname(out.target)
            fd, tmp = tempfile.mkstemp(prefix=".fs", suffix=".tmp", dir=folder)
            temps.append(tmp)
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            try:
                os.chmod(tmp, stat.S_IMODE(os.stat(out.target).st_mode))  # an existing file keeps its mode
            except FileNotFoundError:
                os.chmod(tmp, 0o666 & ~_umask())
        # 2. all into place; an existing target is kept as a hard link until every rename succeeded
        for (out, _), tmp in zip(files, temps):
            failed = out
            if os.path.exists(out.target):
                backup = tmp + ".old"
                os.link(out.target, backup)
                backups.append((backup, out.target))
            else:
                done.append(out.target)
            os.replace(tmp, out.target)
        temps.clear()
        # 3. streams last (they cannot be taken back)
        for out, text in streams:
            failed = out
            if out.target == _STDOUT:
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                _write_text(out.target, text)
    except BaseException as exc:
        for tmp in temps:
            _unlink(tmp)
        if failed is not None and not failed.stream:  # files not all in place: undo the renames
            for backup, target in backups:
                try:
                    os.replace(backup, target)
                except OSError:
                    pass
            for target in done:
                _unlink(target)
            backups.clear()
        for backup, _ in backups:
            _unlink(backup)
        if not isinstance(exc, Exception):
            raise
        saved = _save_fallback(outputs, texts)
        reason = getattr(exc, "strerror", None) or str(exc)
        what = f"{failed.option} {failed.path}" if failed is not None else "the outputs"
        unchanged = "" if (failed is not None and failed.stream) else "; no output file was changed"
        if saved:
            where = "the results are saved in " + ", ".join(saved)
        else:
            where = "the results could not be saved anywhere either"
        raise OutputWriteError(f"cannot write {what}: {reason}{unchanged}; {where}", saved) from exc
    for backup, _ in backups:
        _unlink(backup)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
