"""Independent steps of one call on side CUDA streams, so that latency-bound kernels overlap.

A multi-scale metric compares its scales independently, and at video sizes its largest scale's vertical recursive
pass is a few sequential chains per SM (latency-bound): the smaller scales' launches, queued behind it on one
stream, would run on an otherwise idle GPU. :func:`concurrent` runs a step on the next of two side streams after
everything queued so far on the caller's stream; :func:`gather` makes the caller's stream wait for the side
streams before it reads the results. Values are unchanged: each step runs the same kernels on the same inputs,
and nothing synchronises the host.

Two streams, taken in turn, bound the extra memory: step k + 2 waits for step k on its stream, so at most two
steps' scratch is alive (the largest scale's and the next one's). On the CPU both are plain calls. Each step
costs the host a stream switch, so callers use this for large calls only (see :data:`MIN_ELEMENTS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import count

import torch

from fusedsim.core.state import cached

#: side streams per device, taken in turn
STREAMS = 2
#: calls whose largest image holds fewer values than this stay on one stream: 8 MP of 3 channels. H200,
#: SSIMULACRA2 per call with every scale on side streams: one 1080p frame, where the host bounds the call, 1.25-1.57
#: -> 1.35-1.59 ms (2.26 ms in bench_vship's run, against 1.3-1.5 in others); 8 x 1080p 2.58 -> 2.28 ms; one
#: 4096² frame 5.0 -> 3.8 ms
MIN_ELEMENTS = 24 * 2**20


@cached(maxsize=None)
def _side_streams(device: torch.device) -> tuple[tuple[torch.cuda.Stream, ...], count]:
    return tuple(torch.cuda.Stream(device) for _ in range(STREAMS)), count()


def _device_of(tensors: Sequence[object]) -> torch.device | None:
    for t in tensors:
        if isinstance(t, torch.Tensor):
            return t.device if t.device.type == "cuda" else None
    return None


def concurrent(step: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``step`` run on the next side stream of its tensors' GPU (a plain call elsewhere, and while a CUDA graph is
    captured). The result must go through :func:`gather` before the caller's stream reads it."""

    def run(*tensors: torch.Tensor) -> torch.Tensor:
        device = _device_of(tensors)
        if device is None or torch.cuda.is_current_stream_capturing():
            return step(*tensors)
        streams, turn = _side_streams(device)
        side = streams[next(turn) % STREAMS]
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            out = step(*tensors)
        for t in tensors:  # made on the caller's stream: not to be reused before the side stream has read them
            if isinstance(t, torch.Tensor):
                t.record_stream(side)
        return out

    run.__wrapped__ = step  # the plain step (tests compare both)
    return run


def gather(results: list[torch.Tensor]) -> list[torch.Tensor]:
    """``results`` of :func:`concurrent` steps, safe to read on the current stream: it waits for the side streams
    (no host synchronisation), and their memory is kept until the current stream is done with them."""
    device = _device_of(results)
    if device is None or torch.cuda.is_current_stream_capturing():
        return results
    current = torch.cuda.current_stream(device)
    for side in _side_streams(device)[0]:
        current.wait_stream(side)
    for r in results:
        r.record_stream(current)
    return results


__all__ = ["MIN_ELEMENTS", "STREAMS", "concurrent", "gather"]
