"""Two clips streamed to a GPU batch by batch: only the planes asked for, read in parallel into pinned buffers,
copied on a side stream while the previous batch is scored.

End to end, comparing two clips on a GPU is bound by getting the samples there, not by the kernels (libvmaf's
integer SSIM runs at >17,000 frames/s at 1080p on an H200). So for batch ``b`` (``slots`` pinned host buffers,
two device buffers):

* reader threads wait until the host slot's previous copy has finished, then fill it with positioned reads
  (``os.preadv``, which releases the GIL) of the requested planes of each frame of both clips;
* the main thread, once the reads are done, enqueues the copy into a device buffer on a side stream (after the
  kernels that last used that buffer), makes the compute stream wait for the copy and yields the batch.

Only regular files can be read this way (every frame's byte offset is known up front); pipes go through
:meth:`fusedsim.io.video.VideoReader.batches`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from fusedsim.io.video import VideoFormat, VideoReader

__all__ = ["PLANES", "DeviceFrames", "plane_groups", "plane_layout", "read_planes", "row_bytes", "split_planes",
           "stream_pair_to_device"]

#: Plane names in file order.
PLANES = ("y", "u", "v")


@dataclass
class DeviceFrames:
    """Frames ``first .. first+n-1`` of both clips on the device: ``ref[i]`` / ``dist[i]`` is plane ``PLANES[i]``
    as an ``(n, h, w)`` uint8/uint16 tensor, or None when that plane was not read."""

    first: int
    n: int
    ref: tuple[torch.Tensor | None, ...]
    dist: tuple[torch.Tensor | None, ...]


def plane_layout(fmt: VideoFormat, planes: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """(index in PLANES, byte offset in the frame, height, width) of each requested plane, in file order."""
    sizes = [(fmt.height, fmt.width), (fmt.chroma_height, fmt.chroma_width), (fmt.chroma_height, fmt.chroma_width)]
    starts = [0, fmt.luma_bytes, fmt.luma_bytes + fmt.chroma_bytes]
    return [(i, starts[i], *sizes[i]) for i, name in enumerate(PLANES) if name in planes]


def _pread_exact(fd: int, view: memoryview, offset: int, path: str, frame: int) -> None:
    """Fill ``view`` from byte ``offset`` of ``fd`` (regular files rarely return short reads; finish them)."""
    done = os.preadv(fd, [view], offset)
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise ValueError(f"{path}: frame {frame} is truncated (the file shrank while it was being read)")
        done += got


def read_planes(fd: int, offsets: np.ndarray, groups: list[tuple[int, int, int]], rows: np.ndarray, first: int,
                lo: int, hi: int, path: str) -> None:
    """Read frames ``first+lo .. first+hi-1`` into ``rows[lo:hi]`` (uint8 ``(frames, row_bytes)``): for each frame,
    each group ``(offset in the frame, offset in the row, length)`` of :func:`plane_groups`."""
    for i in range(lo, hi):
        base = int(offsets[first + i])
        for start, pos, size in groups:
            _pread_exact(fd, memoryview(rows[i, pos:pos + size]), base + start, path, first + i)


class _Slot:
    """Pinned host bytes for one batch of both clips, and the event of the copy that last read them."""

    def __init__(self, frame_bytes: int, frames: int) -> None:
        self.host = torch.empty((2, frames, frame_bytes), dtype=torch.uint8, pin_memory=True)
        self.array = self.host.numpy()  # the readers' view (shares memory)
        self.copied: torch.cuda.Event | None = None


def row_bytes(layout: list[tuple[int, int, int, int]], bytes_per_sample: int) -> int:
    """Bytes of one frame's requested planes, stored back to back."""
    return sum(h * w for _, _, h, w in layout) * bytes_per_sample


def split_planes(rows, layout: list[tuple[int, int, int, int]], bytes_per_sample: int, dtype) -> dict:
    """``{index in PLANES: (n, h, w) view}`` of the planes packed in ``rows`` (``(n, row_bytes)`` uint8, a numpy
    array or a torch tensor; ``dtype`` is the sample dtype of that library). No copies."""
    n, out, pos = rows.shape[0], {}, 0
    for index, _, h, w in layout:
        size = h * w * bytes_per_sample
        out[index] = rows[:, pos:pos + size].view(dtype).reshape(n, h, w)
        pos += size
    return out


def plane_groups(layout: list[tuple[int, int, int, int]], bytes_per_sample: int) -> list[tuple[int, int, int]]:
    """Runs of planes that are adjacent in the file: (offset in the frame, offset in the slot row, length)."""
    groups: list[list[int]] = []
    slot_pos = 0
    for _, start, h, w in layout:
        size = h * w * bytes_per_sample
        if groups and groups[-1][0] + groups[-1][2] == start:
            groups[-1][2] += size
        else:
            groups.append([start, slot_pos, size])
        slot_pos += size
    return [tuple(g) for g in groups]  # type: ignore[misc]


def stream_pair_to_device(ref: VideoReader, dist: VideoReader, planes: Sequence[str], *, device: torch.device,
                          batch_frames: int, frames: int, threads: int | None = None, slots: int = 3,
                          ) -> Iterator[DeviceFrames]:
    """Yield the first ``frames`` frames of both clips on ``device`` in batches of ``batch_frames``.

    Both readers must be regular files of the same format (:meth:`VideoReader.frame_offsets`). The tensors of a
    batch are valid until the next batch is asked for (their device memory is then refilled), and work queued
    on the current stream before that is ordered before the refill.
    """
    fmt = ref.fmt
    offsets = (ref.frame_offsets(), dist.frame_offsets())
    if min(len(offsets[0]), len(offsets[1])) < frames:
        raise ValueError(f"the clips have {len(offsets[0])} and {len(offsets[1])} frames; {frames} were asked for")
    layout = plane_layout(fmt, planes)
    if not layout:
        raise ValueError(f"planes must name at least one of {', '.join(PLANES)}; got {list(planes)!r}")
    bps = fmt.bytes_per_sample
    groups = plane_groups(layout, bps)
    packed = row_bytes(layout, bps)
    batch_frames = max(1, min(batch_frames, frames))
    n_batches = -(-frames // batch_frames)
    threads = threads or min(8, os.cpu_count() or 1)
    chunks = max(1, min(threads, batch_frames))
    paths = (str(ref.path), str(dist.path))
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    dtype = torch.uint8 if bps == 1 else torch.uint16
    copy_stream = torch.cuda.Stream(device)
    compute_stream = torch.cuda.current_stream(device)
    device_buffers = [torch.empty((2, batch_frames, packed), dtype=torch.uint8, device=device) for _ in range(2)]
    used: list[torch.cuda.Event | None] = [None, None]
    host_slots: list[_Slot | None] = [None] * max(2, slots)

    def read_chunk(slot: _Slot, clip: int, first: int, lo: int, hi: int) -> None:
        if slot.copied is not None:
            slot.copied.synchronize()  # the slot's previous batch has reached the device
        read_planes(fds[clip], offsets[clip], groups, slot.array[clip], first, lo, hi, paths[clip])

    def submit(pool: ThreadPoolExecutor, b: int) -> list[Future]:
        slot = host_slots[b % len(host_slots)]
        if slot is None:
            slot = host_slots[b % len(host_slots)] = _Slot(packed, batch_frames)
        first = b * batch_frames
        n = min(batch_frames, frames - first)
        bounds = np.linspace(0, n, min(chunks, n) + 1).astype(int)
        return [pool.submit(read_chunk, slot, clip, first, int(lo), int(hi))
                for clip in (0, 1) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]

    def to_device(b: int, pending: list[Future]) -> DeviceFrames:
        for future in pending:
            future.result()
        slot = host_slots[b % len(host_slots)]
        assert slot is not None
        first = b * batch_frames
        n = min(batch_frames, frames - first)
        buffer = device_buffers[b % 2]
        with torch.cuda.stream(copy_stream):
            if used[b % 2] is not None:
                copy_stream.wait_event(used[b % 2])  # the kernels of batch b-2 are done with this buffer
            buffer[:, :n].copy_(slot.host[:, :n], non_blocking=True)
            slot.copied = torch.cuda.Event()
            slot.copied.record(copy_stream)
        compute_stream.wait_event(slot.copied)
        clips = [split_planes(buffer[clip, :n], layout, bps, dtype) for clip in (0, 1)]
        return DeviceFrames(first, n, *(tuple(c.get(i) for i in range(len(PLANES))) for c in clips))

    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fusedsim-read") as pool:
            pending = {b: submit(pool, b) for b in range(min(len(host_slots), n_batches))}
            for b in range(n_batches):
                batch = to_device(b, pending.pop(b))
                if b + len(host_slots) < n_batches:
                    pending[b + len(host_slots)] = submit(pool, b + len(host_slots))
                yield batch
                del batch
                event = torch.cuda.Event()
                event.record(compute_stream)
                used[b % 2] = event
    finally:
        for fd in fds:
            os.close(fd)
