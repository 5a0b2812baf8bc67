"""Per-frame columns on their way to the host, without waiting for the GPU when they are queued.

A streaming caller that copies each batch's columns to the host right after launching it waits for every kernel of
the batch, and the GPU then idles while the host turns the values into scores and launches the next batch. Queued
instead (float64, one copy per device into page-locked memory, behind the batch's kernels, an event after it), a
batch's columns are read one batch later, while the next batch computes.
"""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.vmaf.features import to_numpy

__all__ = ["ColumnsToHost"]


class ColumnsToHost:
    """``columns`` (name -> per-frame tensor) copied to the host: at once for CPU tensors, queued for GPU tensors
    (the copies follow the work already queued on each device's current stream). :meth:`wait` returns float64
    arrays by name, in the columns' order."""

    def __init__(self, columns: dict[str, torch.Tensor]) -> None:
        self.names = list(columns)
        self._ready: dict[str, np.ndarray] | None = None
        self._queued: list[tuple[list[str], list[int], torch.Tensor, torch.cuda.Event]] = []
        on_cpu = {name: values for name, values in columns.items() if values.device.type != "cuda"}
        if on_cpu:
            self._ready = to_numpy(on_cpu)
        by_device: dict[torch.device, list[str]] = {}
        for name, values in columns.items():
            if values.device.type == "cuda":
                by_device.setdefault(values.device, []).append(name)
        for device, names in by_device.items():
            parts = [columns[name].detach().reshape(-1).to(torch.float64) for name in names]
            flat = torch.cat(parts)
            host = torch.empty(flat.shape, dtype=torch.float64, pin_memory=True)
            host.copy_(flat, non_blocking=True)
            done = torch.cuda.Event()
            done.record(torch.cuda.current_stream(device))
            self._queued.append((names, [p.numel() for p in parts], host, done))

    @property
    def queued(self) -> bool:
        """True while copies from a GPU may still be on their way."""
        return bool(self._queued)

    def empty(self) -> dict[str, np.ndarray]:
        """The same names with no values (what a caller gets before the first batch has landed)."""
        return {name: np.zeros(0) for name in self.names}

    def wait(self) -> dict[str, np.ndarray]:
        """The columns on the host (waits for the queued copies, not for later work)."""
        out = dict(self._ready or {})
        for names, lengths, host, done in self._queued:
            done.synchronize()
            for name, piece in zip(names, np.split(host.numpy(), np.cumsum(lengths)[:-1])):
                out[name] = piece.copy()  # off the page-locked block, which the allocator reuses
        self._queued, self._ready = [], out
        return {name: out[name] for name in self.names}
