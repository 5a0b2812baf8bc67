"""The OOM ladder: GPU full -> GPU strip -> CPU full -> CPU strip, with a per-machine record of failures.

A step that runs out of memory is recorded in ``ladder-<machine>.json`` (see :mod:`fusedsim.engine.machine`) under
its metric and backend with the pair's size; later runs skip that step for pairs at least as large, so the same
(metric, size) does not fail twice on one machine. Only out-of-memory errors move down the ladder; any other error
is raised as it is.

A malformed record (hand edits, another version, a disk error) is ignored with a warning naming the file
(:func:`validate_ladder`): a cache must never stop a ``score``. A record that cannot be written is a warning too.

Tests inject failures with :func:`set_fault_hook`: the hook is called with ``(metric, backend)`` before each
attempt and may raise :class:`InjectedOOM`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusedsim.engine.machine import CacheFileWarning, cache_path, load_json, save_json

__all__ = ["InjectedOOM", "Step", "is_oom", "record_failure", "recorded_failure", "set_fault_hook",
           "validate_ladder"]


class InjectedOOM(MemoryError):
    """An out-of-memory error raised on purpose by a fault hook (tests)."""


@dataclass(frozen=True)
class Step:
    """One rung: ``device`` (``"cuda:0"``, ``"cpu"``), ``mode`` (``"full"``/``"strip"``) and strip body ``rows``."""

    device: str
    mode: str
    rows: int | None = None

    @property
    def device_type(self) -> str:
        return self.device.partition(":")[0]

    @property
    def backend(self) -> str:
        """E.g. ``"cuda full"``, ``"cuda strip 512"``, ``"cpu full"``."""
        return f"{self.device_type} {self.mode}" + (f" {self.rows}" if self.mode == "strip" and self.rows else "")

    @property
    def rung(self) -> str:
        """The record key of the step: device type and mode (a strip failure holds for that height or more)."""
        return f"{self.device_type} {self.mode}"


_FAULT_HOOK: Callable[[str, str], None] | None = None


def set_fault_hook(hook: Callable[[str, str], None] | None) -> Callable[[str, str], None] | None:
    """Install ``hook(metric, backend)`` called before each attempt (None removes it); returns the previous one."""
    global _FAULT_HOOK
    previous, _FAULT_HOOK = _FAULT_HOOK, hook
    return previous


def run_fault_hook(metric: str, step: Step) -> None:
    if _FAULT_HOOK is not None:
        _FAULT_HOOK(metric, step.backend)


_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "failed to allocate")


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` reports exhausted memory (CUDA OOM, a failed CPU allocation, MemoryError)."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except (ImportError, AttributeError):
        pass
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)


def _size_key(channels: int) -> str:
    return f"c{channels}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry_problem(entry: Any) -> str | None:
    """Why one failure record is unusable (the fields the ladder compares), or None."""
    if not isinstance(entry, dict):
        return f"a failure record is {type(entry).__name__}, not an object"
    for key in ("pixels", "rows"):
        if key in entry and not _is_int(entry[key]):
            return f"a failure record's {key!r} is {entry[key]!r}, not an integer"
    if "pixels" not in entry:
        return "a failure record has no 'pixels'"
    return None


def validate_ladder(data: dict[str, Any]) -> str | None:
    """Why ``data`` (a ``ladder-*.json``) cannot be used, or None: ``{"failures": {"metric|rung": {"cN": [{"pixels":
    int, "rows": int?, ...}]}}}``. Checked whole on load, so a lookup or a new record never meets a bad shape."""
    failures = data.get("failures", {})
    if not isinstance(failures, dict):
        return f"'failures' is {type(failures).__name__}, not an object"
    for key, per_size in failures.items():
        if not isinstance(per_size, dict):
            return f"'failures'[{key!r}] is {type(per_size).__name__}, not an object"
        for size, entries in per_size.items():
            if not isinstance(entries, list):
                return f"'failures'[{key!r}][{size!r}] is {type(entries).__name__}, not a list"
            for entry in entries:
                problem = _entry_problem(entry)
                if problem:
                    return f"{problem} (in {key!r})"
    return None


_LOADED: dict[Path, tuple[tuple[int, ...] | None, dict[str, Any]]] = {}  # path -> (inode, mtime, size), its data


def _load_ladder() -> dict[str, Any]:
    """This machine's ladder file, read again only when it changed (a ``stat`` per lookup: every group a batch
    scores looks it up, and another process may record a failure meanwhile)."""
    path = cache_path("ladder")
    try:
        info = path.stat()
        stamp: tuple[int, ...] | None = (info.st_ino, info.st_mtime_ns, info.st_size)  # a write replaces the file
    except OSError:
        stamp = None
    known = _LOADED.get(path)
    if known is not None and known[0] == stamp:
        return known[1]
    data = load_json(path, validate_ladder)
    _LOADED[path] = (stamp, data)
    return data


def recorded_failure(metric: str, step: Step, height: int, width: int, channels: int) -> dict[str, Any] | None:
    """The recorded failure that covers this step for a pair of this size, if any."""
    data = _load_ladder().get("failures", {})
    for entry in data.get(f"{metric}|{step.rung}", {}).get(_size_key(channels), []):
        if height * width >= entry.get("pixels", 1 << 62) and (
                step.mode != "strip" or (step.rows or 0) >= entry.get("rows", 1 << 62)):
            return entry
    return None


def record_failure(metric: str, step: Step, height: int, width: int, channels: int, reason: str) -> None:
    """Remember that ``step`` ran out of memory for ``metric`` on a ``height`` x ``width`` x ``channels`` pair."""
    path = cache_path("ladder")
    data = load_json(path, validate_ladder)
    failures = data.setdefault("failures", {})
    per_size = failures.setdefault(f"{metric}|{step.rung}", {}).setdefault(_size_key(channels), [])
    entry = {"pixels": height * width, "height": height, "width": width, "reason": reason[:300],
             "time": time.time()}
    if step.mode == "strip":
        entry["rows"] = step.rows or 0
    per_size.append(entry)
    from fusedsim.engine.machine import machine_identity

    data["machine"] = machine_identity()
    problem = save_json(path, data)
    if problem:  # the ladder still works for this run; later runs may try the failing step again
        warnings.warn(f"could not save the out-of-memory record to {path}: {problem}", CacheFileWarning,
                      stacklevel=2)
