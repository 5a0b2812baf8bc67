"""Device buffers that live across calls, one set per (device, stream): completion counters and scratch.

Kernels on one CUDA stream run in launch order, so a buffer whose contents die with the launch that writes them
(a reducing program's partial sums, the fused SSIM backward's row buffers) can serve every later launch on that
stream: one allocation saved per call, on a host path where each ``torch.empty`` costs microseconds. While a CUDA
graph is captured, or inside a compiled graph, fresh tensors are returned instead (the graph owns its memory).
"""

from __future__ import annotations

import torch

from fusedsim.core import state
from fusedsim.core.registry import in_compiled_graph

#: Scratch requests larger than this are not kept (they are allocated per call, as before).
MAX_KEPT_BYTES = 16 * 2**20
#: Total bytes of kept scratch per process; past it the kept set is dropped and refilled.
MAX_TOTAL_BYTES = 64 * 2**20


class _Kept:
    """The kept buffers, registered with :mod:`fusedsim.core.state`: counters and scratch by key, and the scratch's
    total size. The hot path reads the two dicts through the module names below (the same objects: cleared in
    place, never replaced)."""

    __slots__ = ("counters", "scratch", "scratch_bytes")

    def __init__(self) -> None:
        self.counters: dict[tuple[int, int], torch.Tensor] = {}
        self.scratch: dict[tuple, torch.Tensor] = {}
        self.scratch_bytes = 0

    def drop_scratch(self) -> None:
        self.scratch.clear()
        self.scratch_bytes = 0

    def clear(self) -> None:
        """Drop every kept buffer, once the kernels that may still use them are done: they were allocated on side
        streams (:func:`_allocate_off_stream`), so the allocator would not order their reuse after those kernels."""
        for index in {key[0] for key in (*self.counters, *self.scratch)}:
            torch.cuda.synchronize(index)
        self.counters.clear()
        self.drop_scratch()


_KEPT = state.register(_Kept())
_counters = _KEPT.counters
_scratch = _KEPT.scratch


# torch.cuda.is_current_stream_capturing without its Python frame (this runs on every call of the hot path)
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing


def _graph_owned() -> bool:
    """Inside a compiled graph (:func:`fusedsim.core.registry.in_compiled_graph`) or a CUDA-graph capture."""
    return in_compiled_graph() or _capturing()


def _allocate_off_stream(device: torch.device, make) -> torch.Tensor:
    """``make()`` run on a side stream, so that the tensor never comes from a private memory pool routed to the
    current stream (torch.compile's CUDA-graph trees do that while warming up), which must hold no live tensor."""
    current, side = torch.cuda.current_stream(device), torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        tensor = make()
    current.wait_stream(side)
    return tensor


def stream_counter(device: torch.device, index: int | None) -> torch.Tensor:
    """A zeroed int32 completion counter per (device, stream); the reducing program resets it to 0. While a CUDA
    graph is being captured a fresh one is used (its zeroing is captured with the graph)."""
    if index is None or _graph_owned():
        return torch.zeros(1, dtype=torch.int32, device=device)
    key = (index, torch._C._cuda_getCurrentRawStream(index))
    counter = _counters.get(key)
    if counter is None:
        counter = _counters[key] = _allocate_off_stream(device, lambda: torch.zeros(1, dtype=torch.int32,
                                                                                    device=device))
    return counter


def stream_scratch(device: torch.device, index: int | None, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """Uninitialised scratch of ``numel`` elements for one launch on the current stream (contents undefined on
    entry and dead after the launch). Kept per (device, stream, size, dtype) when small."""
    nbytes = numel * dtype.itemsize
    if index is None or nbytes > MAX_KEPT_BYTES or _graph_owned():
        return torch.empty(numel, dtype=dtype, device=device)
    key = (index, torch._C._cuda_getCurrentRawStream(index), numel, dtype)
    buf = _scratch.get(key)
    if buf is None:
        if _KEPT.scratch_bytes + nbytes > MAX_TOTAL_BYTES:
            _KEPT.drop_scratch()
        buf = _scratch[key] = _allocate_off_stream(device, lambda: torch.empty(numel, dtype=dtype, device=device))
        _KEPT.scratch_bytes += nbytes
    return buf


def stream_scratch_and_counter(device: torch.device, index: int | None, numel: int,
                               dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(:func:`stream_scratch`, :func:`stream_counter`) for one launch, looking at the stream once."""
    if index is not None and not _graph_owned():
        stream = torch._C._cuda_getCurrentRawStream(index)
        buf, counter = _scratch.get((index, stream, numel, dtype)), _counters.get((index, stream))
        if buf is not None and counter is not None:
            return buf, counter
    return stream_scratch(device, index, numel, dtype), stream_counter(device, index)
