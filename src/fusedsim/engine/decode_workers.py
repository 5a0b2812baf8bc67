"""Image decoding for ``fusedsim batch`` in worker processes, so the decode rate grows with the cores.

Decoding in threads stops scaling after a few threads (Pillow and the array conversions hold the GIL for part of
each image), and sending decoded arrays back through a pipe costs as much as decoding them. This module uses
:class:`torch.utils.data.DataLoader` with worker processes:

* it returns tensors through shared memory (torch's ``file_descriptor`` strategy: the segment is unlinked as soon
  as it is made, so a crashed or killed run leaves nothing in ``/dev/shm``), with no pickling of the pixels;
* it keeps results in order, bounds the work in flight (``prefetch_factor`` per worker), notices dead workers, and
  stops its workers when the iterator is dropped; a hand-made pool over ``multiprocessing.shared_memory`` would
  have to redo all of this, and segments would outlive a killed run.

The loader runs over a flat, planned list of jobs (:func:`plan_jobs`): each reference shared by consecutive pairs
once (decoded and hashed in a worker), then its distorted images. The jobs are the loader's sampler, in chunks of
up to :data:`CHUNK_JOBS`, so they are handed to the workers a few at a time rather than copied into every worker.
A worker copies a chunk's pixels into a slot of a :class:`~fusedsim.engine.shared_slots.SlotArena`, one
shared-memory segment mapped once by every worker, and returns only plain data; the consumer gives the slot back
once no tensor views its images. Each tensor the loader returns would cost the consumer a shared-memory hand-over
(a socket connection to the worker for a file descriptor, a mapping, and unmapping it when done: about a
millisecond per chunk, plus page faults in the worker), which capped a 63-worker loader at ~500 images/s. When
every slot is busy, or a chunk outgrows its slot (slots are sized from a sample of the files' headers), the chunk
comes back packed in a fresh tensor instead. A job never raises: a bad file comes back as its one-line error, as in
the thread decoder.

Start method: ``forkserver`` (``spawn`` where there is none). Forking the caller is unsafe once it holds a CUDA
context or threads (Python 3.12 warns about it), and ``spawn`` imports torch again in every worker. The fork
server is a fresh, single-threaded interpreter started once per process with this module (so torch, Pillow and
the image reader) imported; each worker is a fork of it, ready in milliseconds, and later decoders reuse it.
Measured on 2 cores: about 1.1 s to the first pair for the first start in a process, 80-100 ms later; ``spawn``
about 1.2 s every time. Each worker also tells glibc to keep freed buffers (:func:`_worker_init`).

Lifetime: a worker exits when the process that reads its results (the consumer) dies, even by SIGKILL
(:func:`watch_consumer`). Without that, a killed ``batch`` left its processes running for good: a forkserver
worker is a child of the fork server, not of the consumer, so torch's own check (its parent changed) never fires;
the fork server stays up while any worker holds the write end of its liveness pipe (every forkserver child is
given it), and the resource tracker while any worker holds its pipe: each kept the others alive.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, Dataset

from fusedsim.engine.batch_pairs import (
    GROUP,
    DecodedPair,
    PairTask,
    error_text,
    read_distorted,
    read_reference,
    from_memory_order,
    image_bytes_estimate,
    memory_order,
)
from fusedsim.engine.shared_slots import SlotArena

if TYPE_CHECKING:
    from fusedsim.io.images import ImageData

__all__ = ["decode_in_processes", "plan_jobs", "prestart", "start_method", "watch_consumer"]

Job = tuple[bool, str]  # (is a reference, path)
Decoded = tuple["ImageData | None", str, str]  # (image, pixel hash of a reference, error)
#: jobs per loader item (see the module docstring): one shared-memory hand-over per chunk instead of per image
CHUNK_JOBS = 4
#: slots beyond the loader's chunks in flight: the chunks whose images the consumer still holds (the pairs of the
#: group being gathered, their reference, the scorer's prepared reference)
SPARE_SLOTS = 4 + 2 * GROUP // CHUNK_JOBS
_ALIGN = 64  # byte alignment of each image inside a packed chunk (float32 views need 4)


def start_method() -> str:
    """``forkserver`` where the platform has it, else ``spawn`` (never ``fork``: see the module docstring)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def prestart() -> threading.Thread | None:
    """Start the fork server now, in a thread of its own, so that its imports (torch and the image reader, about a
    second on a fast machine, several on a busy one) overlap the caller's set-up (the scorer, a kernel warm-up)
    instead of delaying the first decoded pair. The workers started later fork from it. None where there is no
    fork server (``spawn``: each worker imports on its own)."""
    if start_method() != "forkserver":
        return None
    from multiprocessing import forkserver

    _context()  # its preload list, which the server reads when it starts
    thread = threading.Thread(target=forkserver.ensure_running, name="fusedsim-forkserver-start", daemon=True)
    thread.start()
    return thread


def plan_jobs(tasks: Iterable[PairTask]) -> Iterator[Job]:
    """The decoding jobs of ``tasks`` in order: a reference when it differs from the previous pair's, then the
    distorted image."""
    ref = None
    for task in tasks:
        if task.ref != ref:
            ref = task.ref
            yield True, task.ref
        yield False, task.dist


class _Jobs:
    """The loader's sampler: the jobs of ``tasks`` in chunks of up to ``chunk``, planned as the workers ask, each
    with a slot of ``arena`` taken for its pixels (None: none free, or no arena)."""

    def __init__(self, tasks: Sequence[PairTask], chunk: int = 1, arena: SlotArena | None = None) -> None:
        self.tasks, self.chunk, self.arena = tasks, chunk, arena

    def __iter__(self) -> Iterator[tuple[tuple[Job, ...], int | None]]:
        batch: list[Job] = []
        for job in plan_jobs(self.tasks):
            batch.append(job)
            if len(batch) == self.chunk:
                yield tuple(batch), self._slot()
                batch = []
        if batch:
            yield tuple(batch), self._slot()

    def _slot(self) -> int | None:
        return None if self.arena is None else self.arena.take()


def _decode(job: Job) -> Decoded:
    is_ref, path = job
    try:
        if is_ref:
            image, key = read_reference(path)
            return image, key, ""
        return read_distorted(path), "", ""
    except Exception as exc:  # a bad file is a result, not the end of the loader
        return None, "", error_text(exc)


#: (a fresh byte tensor with the pixels, or None when they are in the slot; per job: (image fields or None, key,
#: error); the slot taken for the chunk, or None)
Packed = tuple["torch.Tensor | None", list, "int | None"]  # noqa: UP037


class _Decoder(Dataset):
    """Runs in a worker: a chunk of jobs and its slot to one :data:`Packed` item (the sampler's items)."""

    def __init__(self, arena: SlotArena | None = None) -> None:
        self.arena = arena

    def __getitem__(self, index: tuple[tuple[Job, ...], int | None]) -> Packed:  # type: ignore[override]
        jobs, slot = index
        return _pack([_decode(job) for job in jobs], self.arena, slot)


def _pack(results: list[Decoded], arena: SlotArena | None = None, slot: int | None = None) -> Packed:
    """The chunk's pixels copied into ``arena``'s ``slot`` when they fit, else into one fresh byte tensor (one
    shared-memory segment for the loader to hand over), each image at an aligned offset; the rest (path, shape,
    dtype, bit depth, channels) travels as plain data."""
    sizes = [0 if image is None else image.pixels.numel() * image.pixels.element_size() for image, _, _ in results]
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // _ALIGN) * _ALIGN
    in_slot = arena is not None and slot is not None and total <= arena.slot_bytes
    fresh = None if in_slot or not total else torch.empty(total, dtype=torch.uint8)
    target = arena.slot(slot) if in_slot else fresh  # type: ignore[union-attr]
    meta = []
    for (image, key, error), offset, size in zip(results, offsets, sizes):
        if image is None:
            meta.append((None, key, error))
            continue
        pixels, layout = memory_order(image.pixels)
        target[offset:offset + size].numpy()[...] = pixels.view(-1).view(torch.uint8).numpy()  # numpy: one thread
        fields = (image.path, tuple(image.pixels.shape), image.pixels.dtype, image.bit_depth, image.channels, offset,
                  layout)
        meta.append((fields, key, error))
    return fresh, meta, slot


def _unpack(item: Packed, arena: SlotArena | None = None) -> Iterator[Decoded]:
    """The decoded jobs of one :data:`Packed` item, their pixels views of its byte tensor or of a lease on its
    slot (a slot the worker did not fill goes back to the arena)."""
    from fusedsim.io.images import ImageData

    fresh, meta, slot = item
    flat = fresh
    if slot is not None:
        assert arena is not None
        if fresh is None and any(fields is not None for fields, _, _ in meta):
            flat = arena.lease(slot)
        else:
            arena.give_back(slot)
    for fields, key, error in meta:
        if fields is None:
            yield None, key, error
            continue
        path, shape, dtype, bit_depth, channels, offset, layout = fields
        nbytes = math.prod(shape) * dtype.itemsize
        pixels = from_memory_order(flat[offset:offset + nbytes].view(dtype), shape, layout)
        yield ImageData(path=path, pixels=pixels, bit_depth=bit_depth, channels=channels), key, error
    del flat  # the images alone keep the lease


def _identity(item: Packed) -> Packed:
    return item


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_KEEP_BYTES = 256 << 20


_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
_WATCH_INTERVAL_S = 0.25  # polling period of the portable watchdog


def _die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies (the fork server, or the consumer under
    ``spawn``). A no-op elsewhere or when ``prctl`` is unavailable; :func:`watch_consumer` covers those."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import ctypes.util
    import signal

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (the pid was reused): not our consumer any more
        return False
    return True


def _wait_pidfd(pid: int) -> bool:
    """Block until ``pid`` exits, through a pidfd (Linux 5.3+: woken at once, no polling, immune to pid reuse);
    False when pidfds are unavailable (the caller polls instead)."""
    import select

    try:
        fd = os.pidfd_open(pid)  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll():
            pass
    finally:
        os.close(fd)
    return True


def _watch(consumer: int, parent: int) -> None:
    """Exit when ``consumer`` dies: woken by its pidfd (the parent-death signal covers the parent there), else by
    polling both the consumer and the parent (no pidfd, so no parent-death signal either, e.g. macOS)."""
    if not _wait_pidfd(consumer):
        while _pid_alive(consumer) and os.getppid() == parent:
            threading.Event().wait(_WATCH_INTERVAL_S)
    os._exit(1)


def watch_consumer(consumer: int) -> None:
    """Make this worker exit when ``consumer`` (the process reading its results) or its own parent dies: the
    kernel's parent-death signal where there is one, and a daemon thread for the consumer, which under
    ``forkserver`` is not the parent (see the module docstring). Exiting at once (``os._exit``) is safe: a worker
    owns nothing that outlives it (its shared memory is unnamed)."""
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent or not _pid_alive(consumer):  # died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch, args=(consumer, parent), name="fusedsim-consumer-watch", daemon=True).start()


def _worker_init(worker_id: int, consumer: int | None = None) -> None:
    """Tie the worker's life to the ``consumer`` process (:func:`watch_consumer`), and let glibc keep freed
    decode buffers: by default a process's main heap returns them to the system after every image, and the next
    image page-faults them back (about 3000 faults, 8 ms of system time, per 1024x1024 RGB image: a third of its
    decoding time). The latter is a no-op where the C library has no ``mallopt``."""
    import ctypes
    import ctypes.util

    if consumer is not None:
        watch_consumer(consumer)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 64 << 20)  # buffers below 64 MiB come from the heap, which keeps them
    mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES)


def _context() -> Any:
    method = start_method()
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # takes effect when this process first starts its fork server; '__main__' is the default preload
        ctx.set_forkserver_preload(["__main__", __name__, "fusedsim.io.images"])
    return ctx


def _job_count(tasks: Sequence[PairTask]) -> int:
    return sum(1 for _ in plan_jobs(tasks))


def _decoded(items: Iterator[Packed], arena: SlotArena | None) -> Iterator[Decoded]:
    for item in items:
        yield from _unpack(item, arena)


def _pairs(tasks: Sequence[PairTask], results: Iterator[Decoded]) -> Iterator[DecodedPair]:
    """Pairs from the decoded jobs, which come in :func:`plan_jobs` order."""
    ref_path, ref = None, None
    for task in tasks:
        if task.ref != ref_path or ref is None:
            ref_path, ref = task.ref, next(results)
        yield _pair(task, ref, next(results))


def _pair(task: PairTask, ref: Decoded, dist: Decoded) -> DecodedPair:
    error = ref[2] or dist[2]  # the reference's error first, as the thread decoder
    if error:
        return DecodedPair(task, error=error)
    return DecodedPair(task, ref=ref[0], ref_key=ref[1], dist=dist[0])


def decode_in_processes(tasks: Sequence[PairTask], workers: int = 4, prefetch: int = 16,
                        reuse_memory: bool = True) -> Iterator[DecodedPair]:
    """Decode ``tasks`` in ``workers`` processes, in order, at most ``prefetch`` images (so pairs) ahead of the
    consumer.

    A reference shared by consecutive pairs is decoded and hashed once. The workers stop when the iterator is
    exhausted or closed (or collected), including on an exception or KeyboardInterrupt in the consumer.
    ``reuse_memory``: pixels come back in reused shared-memory slots (see the module docstring); False returns
    each chunk in a fresh segment (for comparisons).
    """
    if workers < 1 or prefetch < 1:
        raise ValueError(f"workers and prefetch must be >= 1; got {workers} and {prefetch}")
    jobs = _job_count(tasks)
    if not jobs:
        return
    # images in flight = workers * prefetch_factor * chunk <= prefetch, so pairs ahead <= prefetch too; chunks
    # shrink before workers are dropped
    workers = min(workers, prefetch, jobs)
    chunk = max(1, min(CHUNK_JOBS, prefetch // (2 * workers), -(-jobs // workers)))
    per_worker = max(1, prefetch // (workers * chunk))
    arena = _arena(tasks, workers * per_worker + SPARE_SLOTS, chunk) if reuse_memory else None
    loader = DataLoader(_Decoder(arena), batch_size=None, sampler=_Jobs(tasks, chunk, arena), collate_fn=_identity,
                        num_workers=workers, prefetch_factor=per_worker, multiprocessing_context=_context(),
                        worker_init_fn=functools.partial(_worker_init, consumer=os.getpid()),
                        persistent_workers=False)
    items = iter(loader)
    try:
        yield from _pairs(tasks, _decoded(items, arena))
    finally:
        _stop(items)


#: pairs whose file headers size the slots: the first and others spread over the list (a header read is ~0.1 ms)
SIZE_SAMPLE_PAIRS = 16


def _arena(tasks: Sequence[PairTask], slots: int, chunk: int) -> SlotArena | None:
    """Slots for ``chunk`` images as large as the largest image of :data:`SIZE_SAMPLE_PAIRS` pairs spread over
    ``tasks`` (their file headers). Generous slots cost address space only: the arena's pages are allocated as
    they are first written, so a slot filled by smaller chunks uses what they write. None when no header can be
    read (every chunk then comes back in a fresh tensor); a chunk larger than its slot comes back fresh too."""
    step = max(1, len(tasks) // SIZE_SAMPLE_PAIRS)
    sample = {tasks[i] for i in range(0, len(tasks), step)} | {tasks[-1]}
    sizes = [size for task in sample for size in (image_bytes_estimate(task.ref), image_bytes_estimate(task.dist))
             if size is not None]
    if not sizes:
        return None
    per_image = -(-max(sizes) // _ALIGN) * _ALIGN
    return SlotArena(slots, chunk * per_image)


def _stop(results: Any) -> None:
    """Stop the loader's workers now rather than when the iterator is collected (it may sit in a traceback)."""
    stop = getattr(results, "_shutdown_workers", None)
    if stop is not None:
        stop()

