"""Memory modes ``auto | full | strip[:ROWS]`` and the memory budget of a device.

* ``full``: the whole pair at once.
* ``strip``: horizontal strips of ``rows`` body rows (``None``: as many as the budget allows), each carrying its
  metric's halo (:attr:`MetricSpec.halo_rows`) so strip results equal full results.
* ``auto``: full when :meth:`MetricSpec.working_set_bytes` fits the budget, else strip.

The budget of a GPU is ``FUSEDSIM_VRAM_CAP_BYTES`` when set, else 80% of the free memory from
``torch.cuda.mem_get_info``. On the CPU, ``FUSEDSIM_RAM_CAP_BYTES`` caps the whole process: the budget is 80% of
the cap less what the process holds already (its resident set: the images, torch); without a cap, 80% of the
available memory.

A cap is a promise only strips can keep: a metric without a strip path runs in full whatever the budget. When its
estimated working set is over a cap from the environment, :func:`warn_cap_once` says so (a
:class:`MemoryCapWarning`, once per metric and device type) instead of exceeding the cap in silence; the engine
calls it where it decides the modes.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["MemoryCapWarning", "MemoryMode", "budget_bytes", "cap_shortfall", "parse_memory", "process_rss",
           "strip_rows_for_budget", "warn_cap_once"]

VRAM_CAP_ENV = "FUSEDSIM_VRAM_CAP_BYTES"
RAM_CAP_ENV = "FUSEDSIM_RAM_CAP_BYTES"
_HEADROOM = 0.8  # of the free host memory: allocator fragmentation, estimates that run low
_MIN_STRIP_ROWS = 16


@dataclass(frozen=True)
class MemoryMode:
    """``mode`` is ``auto``, ``full`` or ``strip``; ``rows`` the strip body height (None: from the budget)."""

    mode: str = "auto"
    rows: int | None = None

    def __str__(self) -> str:
        return f"strip:{self.rows}" if self.mode == "strip" and self.rows else self.mode


def parse_memory(memory: str | int | MemoryMode, name: str = "memory") -> MemoryMode:
    """``"auto"``, ``"full"``, ``"strip"``, ``"strip:ROWS"`` or an int (strip body rows) as a :class:`MemoryMode`."""
    if isinstance(memory, MemoryMode):
        return memory
    if isinstance(memory, bool):
        raise TypeError(f"{name} must be auto, full, strip, strip:ROWS or an int; got {memory!r}")
    if isinstance(memory, int):
        if memory < 1:
            raise ValueError(f"{name}: strip rows must be >= 1; got {memory}")
        return MemoryMode("strip", memory)
    if not isinstance(memory, str):
        raise TypeError(f"{name} must be auto, full, strip, strip:ROWS or an int; got {type(memory).__name__}")
    text = memory.strip().lower()
    if text in ("auto", "full", "strip"):
        return MemoryMode(text)
    head, sep, rows = text.partition(":")
    if head == "strip" and sep and rows.isdigit() and int(rows) >= 1:
        return MemoryMode("strip", int(rows))
    raise ValueError(f"{name} must be auto, full, strip or strip:ROWS (ROWS >= 1); got {memory!r}")


def _env_bytes(var: str) -> int | None:
    text = os.environ.get(var)
    if text is None or not text.strip():
        return None
    try:
        value = int(float(text))
    except ValueError:
        raise ValueError(f"{var} must be a number of bytes; got {text!r}") from None
    if value < 1:
        raise ValueError(f"{var} must be a positive number of bytes; got {text!r}")
    return value


def _available_ram() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 << 30  # unknown: a conservative guess


def budget_bytes(device: torch.device) -> int:
    """Bytes a metric may use on ``device``: the cap from the environment, else a share of the free memory."""
    if device.type == "cuda":
        cap = _env_bytes(VRAM_CAP_ENV)
        if cap is not None:
            return cap
        import torch

        free, _total = torch.cuda.mem_get_info(device)
        return int(free * _HEADROOM)
    cap = _env_bytes(RAM_CAP_ENV)
    free = cap - process_rss() if cap is not None else _available_ram()
    return int(free * _HEADROOM)


def process_rss() -> int:
    """This process's resident set in bytes (0 when unknown)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def strip_rows_for_budget(bytes_per_row: float, halo: int, budget: int, fixed: int = 0) -> int:
    """Largest strip body (rows) whose working set, halo rows included, fits ``budget``; at least 16 rows and the
    halo (a thinner body would spend most of its work on context rows)."""
    if bytes_per_row <= 0:
        return 1 << 30
    rows = int((budget - fixed) // bytes_per_row) - 2 * halo
    return max(rows, _MIN_STRIP_ROWS, halo)


class MemoryCapWarning(UserWarning):
    """A metric without strips needs more memory than ``FUSEDSIM_RAM_CAP_BYTES``/``FUSEDSIM_VRAM_CAP_BYTES``
    allows: it runs anyway, over the cap."""


_CAP_WARNED: set[tuple[str, str]] = set()  # (metric, device type) already warned about in this process


def _cap_var(device: torch.device) -> str:
    return VRAM_CAP_ENV if device.type == "cuda" else RAM_CAP_ENV


def cap_shortfall(metric: str, working_set: int, device: torch.device, height: int, width: int) -> str | None:
    """Why the memory cap on ``device`` cannot hold ``metric`` (no strip path: the caller knows) at ``height`` x
    ``width``, or None when no cap is set or ``working_set`` fits its budget. Without a cap the budget is free
    memory, which the OOM ladder handles; a cap is the user's limit, so exceeding it must be said."""
    var = _cap_var(device)
    cap = _env_bytes(var)
    if cap is None:
        return None
    budget = budget_bytes(device)
    if working_set <= budget:
        return None
    return (f"{var}={cap} cannot hold {metric} at {width}x{height}: it has no strip path and needs about "
            f"{working_set / 2**20:.0f} MiB in full (the cap leaves {max(budget, 0) / 2**20:.0f} MiB); it runs in "
            "full and will use more than the cap")


def warn_cap_once(metric: str, working_set: int, device: torch.device, height: int, width: int) -> str | None:
    """:func:`cap_shortfall`, warned as a :class:`MemoryCapWarning` the first time for ``metric`` on this device
    type (a batch would repeat it for every pair); returns the text whether warned now or before."""
    text = cap_shortfall(metric, working_set, device, height, width)
    key = (metric, device.type)
    if text is not None and key not in _CAP_WARNED:
        _CAP_WARNED.add(key)
        warnings.warn(text, MemoryCapWarning, stacklevel=2)
    return text
