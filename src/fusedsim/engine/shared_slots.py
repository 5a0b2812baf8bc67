"""Shared-memory slots that decode workers fill and the consumer reuses, so a decoded chunk costs no segment.

Returning a fresh shared-memory tensor per chunk costs the consuming process, per chunk, a socket connection to
the worker for the segment's file descriptor, a mapping and later an unmapping (about 0.4 ms per 1024² RGB image
to release alone), and the worker page-faults a new segment each time. A :class:`SlotArena` is one segment made
once by the consumer and mapped by each worker once, when the worker starts (it travels inside the dataset). It is
cut into equal slots:

* the consumer *takes* a free slot when it hands a chunk of jobs to a worker (:meth:`SlotArena.take`; None when
  every slot is busy: the worker then returns a fresh tensor as before, so a slow consumer never deadlocks);
* the worker copies the chunk's pixels into it (:meth:`SlotArena.slot`) and returns only plain data;
* the consumer views the slot through :meth:`SlotArena.lease`, a tensor whose storage holds the lease: every view
  of it (images, reshapes, numpy arrays) keeps the storage, so the slot returns to the free list only when the
  last one is gone. Nothing is written into a slot that any tensor still views.

The arena is pageable memory on purpose: a slot may be reused as soon as its tensors are dropped, which is safe
only for copies that have read their source when they return. Pinned, a ``non_blocking`` copy to a GPU would still
be reading it. The scorer copies each image into pinned memory of its own first
(:func:`fusedsim.engine.inputs.to_device`), so its transfers are asynchronous without touching the slots.
"""

from __future__ import annotations

import os
import weakref
from collections import deque

import torch

__all__ = ["SlotArena"]

_ALIGN = 64  # slot size granularity (float32 views need 4)


def _shared_bytes(nbytes: int) -> torch.Tensor:
    """A uint8 tensor of ``nbytes`` in shared memory whose pages are allocated as they are first written.

    On Linux it is an anonymous memory file (``memfd_create``): no name in ``/dev/shm``, so nothing outlives the
    processes that map it. torch's own shared storage allocates every page up front (about 0.3 ms per MiB, half a
    second for a 64-worker arena, on the consumer's thread before the first pair)."""
    memfd_create = getattr(os, "memfd_create", None)
    new_from_fd = getattr(torch.UntypedStorage, "_new_shared_fd_cpu", None)
    if memfd_create is None or new_from_fd is None:  # pragma: no cover - not Linux, or another torch
        return torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(nbytes))
    fd = memfd_create("fusedsim-decode-slots", getattr(os, "MFD_CLOEXEC", 0))
    try:
        os.ftruncate(fd, nbytes)
        storage = new_from_fd(fd, nbytes)  # maps a duplicate of ``fd``, kept for sharing with workers
    finally:
        os.close(fd)
    return torch.empty(0, dtype=torch.uint8).set_(storage)


class SlotArena:
    """``slots`` slots of ``slot_bytes`` (rounded up to 64) in one shared-memory segment; see the module docstring.

    Pickling (into a worker) sends the segment and the slot size, not the free list: workers only write slots the
    consumer gave them.
    """

    def __init__(self, slots: int, slot_bytes: int) -> None:
        if slots < 1 or slot_bytes < 1:
            raise ValueError(f"slots and slot_bytes must be >= 1; got {slots} and {slot_bytes}")
        self.slot_bytes = -(-slot_bytes // _ALIGN) * _ALIGN
        self.slots = slots
        self.memory = _shared_bytes(slots * self.slot_bytes)
        self._free: deque[int] = deque(range(slots))
        self._array = None  # numpy view of the whole segment (consumer side, made on the first lease)

    def __getstate__(self) -> dict:
        return {"slot_bytes": self.slot_bytes, "slots": self.slots, "memory": self.memory}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._free = deque()  # a worker's copy hands out nothing
        self._array = None

    @property
    def free(self) -> int:
        """Slots not taken or leased now."""
        return len(self._free)

    def take(self) -> int | None:
        """A free slot's index, or None when every slot is taken or still viewed."""
        try:
            return self._free.popleft()
        except IndexError:
            return None

    def give_back(self, slot: int) -> None:
        """Return a taken slot that no tensor views (a chunk that came back without using it)."""
        self._free.append(slot)

    def slot(self, slot: int) -> torch.Tensor:
        """The bytes of ``slot`` (worker side: write a chunk into it)."""
        start = slot * self.slot_bytes
        return self.memory[start:start + self.slot_bytes]

    def lease(self, slot: int) -> torch.Tensor:
        """The bytes of a filled ``slot`` as a tensor of its own storage (consumer side). The slot is free again
        once that storage is released, that is once no tensor or array made from the lease is alive."""
        if self._array is None:
            self._array = self.memory.numpy()
        start = slot * self.slot_bytes
        view = self._array[start:start + self.slot_bytes]  # a new ndarray: the lease's lifetime
        weakref.finalize(view, self._free.append, slot)
        return torch.from_numpy(view)  # its storage holds ``view`` until every view of it is gone
