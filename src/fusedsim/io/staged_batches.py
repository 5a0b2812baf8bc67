"""Decoded frames stacked into batches on the decoding thread, in page-locked memory, ready for one copy to the GPU.

    batches = stacked_batches(frames, sizes, ring)          # on the decoding thread
    y, u, v = upload(batch, device, ring)                    # on the consuming thread

A batch of eight 1080p 4:2:0 frames is 25 MB of planes a clip. Stacking them with numpy and then pinning the stack
on the consuming thread were two host copies there, in series with the GPU work: the bound of the whole video path
(240 frames/s on a 16-core H200 host with eight frames a batch, the GPU busy a quarter of the time). Here each
frame's planes are copied once, by the clip's own decoding thread, straight into a page-locked buffer; the consumer
only queues the copy to the device. A buffer is refilled only after that copy has finished: the consumer hands it
back with an event recorded after the copy, and the decoding thread waits on it.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["RingClosed", "StagedBatch", "StagingRing", "stacked_batches", "upload"]


class RingClosed(Exception):
    """The consumer went away: the decoding thread stops."""


@dataclass
class StagedBatch:
    """``n`` frames' planes stacked ``(n, h, w)`` (None where a plane was not decoded): page-locked host tensors
    of the ring's ``slot`` (``slot`` >= 0), host tensors (CPU device) or device tensors (GPU decoder)."""

    planes: tuple[torch.Tensor | None, ...]
    slot: int = -1
    n: int = 0


@dataclass
class _Slot:
    buffers: tuple[torch.Tensor | None, ...]
    event: Any = None
    shapes: tuple = field(default=())


class StagingRing:
    """At most ``slots`` page-locked batches in flight between the decoding thread and the device. ``take``
    blocks until a slot is free and its last copy to the device has finished; :meth:`close` makes it raise
    :class:`RingClosed` instead (the consumer stopped early). ``pin=False`` allocates ordinary host memory (for
    machines without CUDA)."""

    def __init__(self, slots: int, pin: bool = True) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 2:
            raise ValueError(f"slots must be an int >= 2; got {slots!r}")
        self._pin = pin
        self._slots: list[_Slot] = []
        self._limit = slots
        self._free: queue.Queue[int] = queue.Queue()
        self._closed = False

    def take(self, shapes: Sequence[tuple[int, ...] | None], dtype: torch.dtype) -> tuple[int, _Slot]:
        """A free slot whose buffers have ``shapes`` (one per plane; None: no plane) and ``dtype`` (made anew when a
        slot held other shapes, e.g. for the shorter last batch)."""
        if len(self._slots) < self._limit:
            index = len(self._slots)
            self._slots.append(_Slot(()))
        else:
            while True:
                if self._closed:
                    raise RingClosed
                try:
                    index = self._free.get(timeout=0.1)
                    break
                except queue.Empty:
                    continue
        slot = self._slots[index]
        if slot.event is not None:
            slot.event.synchronize()  # its previous batch has reached the device
            slot.event = None
        wanted = tuple(shapes)
        if slot.shapes != (wanted, dtype):
            slot.buffers = tuple(None if s is None else torch.empty(s, dtype=dtype, pin_memory=self._pin)
                                 for s in wanted)
            slot.shapes = (wanted, dtype)
        return index, slot

    def give_back(self, index: int, event: Any) -> None:
        """Slot ``index`` may be refilled once ``event`` (recorded after its copies to the device) has passed."""
        self._slots[index].event = event
        self._free.put(index)

    def close(self) -> None:
        self._closed = True


_TORCH_DTYPES = {np.dtype(np.uint8): torch.uint8, np.dtype(np.uint16): torch.uint16}


def _dtype_of(plane: Any) -> torch.dtype:
    if isinstance(plane, torch.Tensor):
        return plane.dtype
    try:
        return _TORCH_DTYPES[np.dtype(plane.dtype)]
    except KeyError:
        raise ValueError(f"decoded planes must be uint8 or uint16; got {plane.dtype}") from None


def _copy_into(dst: torch.Tensor, plane: Any) -> None:
    """One plane into a slot's row: numpy's copy (a row-wise memcpy; torch's element-wise copy of a freshly
    decoded, cache-cold plane was several times slower)."""
    np.copyto(dst.numpy(), plane, casting="no")


def stacked_batches(frames: Iterator[tuple[Any, Any, Any]], sizes: Iterable[int],
                    ring: StagingRing | None) -> Iterator[StagedBatch]:
    """``frames`` (y, u, v) (numpy arrays, possibly strided views, or device tensors; u/v may be None) grouped
    into batches of ``sizes`` frames, each plane stacked ``(n, h, w)``: host frames copied one by one as they come
    into a slot of ``ring`` (going to a GPU) or a new host tensor (``ring`` None), device frames by
    ``torch.stack``.
    Raises ValueError when the frames run out before the sizes do."""
    for n in sizes:
        first = next(frames, None)
        if first is None:
            raise ValueError(f"the clip ended before a batch of {n} frames")
        if isinstance(first[0], torch.Tensor):  # a GPU decoder's frames: already ours, stacked on the device
            chunk = [first, *(_next(frames) for _ in range(n - 1))]
            yield StagedBatch(tuple(None if first[k] is None else torch.stack([f[k] for f in chunk])
                                    for k in range(3)), -1, n)
            continue
        shapes = [None if first[k] is None else (n, *first[k].shape) for k in range(3)]
        if ring is not None:
            index, slot = ring.take(shapes, _dtype_of(first[0]))
            buffers = slot.buffers
        else:
            index, buffers = -1, tuple(None if s is None else torch.empty(s, dtype=_dtype_of(first[0]))
                                       for s in shapes)
        frame = first
        for i in range(n):
            if i:
                frame = _next(frames)
            for k in range(3):  # one copy per plane as soon as it is decoded: a decoder's view is not held
                if buffers[k] is not None:
                    _copy_into(buffers[k][i], frame[k])
        yield StagedBatch(buffers, index, n)


def _next(frames: Iterator[tuple[Any, Any, Any]]) -> tuple[Any, Any, Any]:
    item = next(frames, None)
    if item is None:
        raise ValueError("the clip ended inside a batch")
    return item


def upload(batch: StagedBatch, device: torch.device, ring: StagingRing | None) -> tuple[torch.Tensor | None, ...]:
    """The batch's planes on ``device``; a ring slot is queued to the device without waiting and handed back
    with an event after its copies."""
    planes = tuple(None if p is None else p.to(device, non_blocking=batch.slot >= 0) for p in batch.planes)
    if batch.slot >= 0 and ring is not None:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))  # the stream the copies went to (device may not be current)
        ring.give_back(batch.slot, event)
    return planes
