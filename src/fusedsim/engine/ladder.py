"""The OOM ladder: GPU full -> GPU strip -> CPU full -> CPU strip, with a per-machine record of failures.

A step that runs out of memory is recorded in ``ladder-<machine>.json`` (see :mod:`fusedsim.engine.machine`) under
its metric and backend with the pair's size; later runs skip that step for pairs at least as large, so the same
(metric, size) does not fail twice on one machine. Only out-of-memory errors move down the ladder; any other error
is raised as it is.

Tests inject failures with :func:`set_fault_hook`: the hook is called with ``(metric, backend)`` before each
attempt and may raise :class:`InjectedOOM`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fusedsim.engine.machine import cache_path, load_json, save_json

__all__ = ["InjectedOOM", "Step", "is_oom", "record_failure", "recorded_failure", "set_fault_hook"]


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


def recorded_failure(metric: str, step: Step, height: int, width: int, channels: int) -> dict[str, Any] | None:
    """The recorded failure that covers this step for a pair of this size, if any."""
    data = load_json(cache_path("ladder")).get("failures", {})
    for entry in data.get(f"{metric}|{step.rung}", {}).get(_size_key(channels), []):
        if height * width >= entry.get("pixels", 1 << 62) and (
                step.mode != "strip" or (step.rows or 0) >= entry.get("rows", 1 << 62)):
            return entry
    return None


def record_failure(metric: str, step: Step, height: int, width: int, channels: int, reason: str) -> None:
    """Remember that ``step`` ran out of memory for ``metric`` on a ``height`` x ``width`` x ``channels`` pair."""
    path = cache_path("ladder")
    data = load_json(path)
    failures = data.setdefault("failures", {})
    per_size = failures.setdefault(f"{metric}|{step.rung}", {}).setdefault(_size_key(channels), [])
    entry = {"pixels": height * width, "height": height, "width": width, "reason": reason[:300],
             "time": time.time()}
    if step.mode == "strip":
        entry["rows"] = step.rows or 0
    per_size.append(entry)
    from fusedsim.engine.machine import machine_identity

    data["machine"] = machine_identity()
    save_json(path, data)
