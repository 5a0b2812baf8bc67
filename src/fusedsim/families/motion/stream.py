"""libvmaf's integer motion over a clip that arrives in batches: :class:`MotionStream`.

Motion is temporal. Frame ``i``'s score compares it with frame ``i - lag`` (``lag`` 1, or 2 with the five-frame
window); its ``motion2`` needs the score of frame ``i + 1`` too, so each frame is finished one frame after it
arrives (the first ``lag`` frames once frame ``lag`` has arrived: their ``motion3`` is that frame's), and the last
one at :meth:`MotionStream.flush`. The stream keeps the last ``lag`` frames and a few per-frame scores, never the
clip. Values stay on the frames' device (no host synchronisation but the optional sample check) and equal
:func:`~fusedsim.families.motion.twin.motion_columns_ref` bit for bit, whatever the batch sizes.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from fusedsim.core.sample_range import check_sample_range
from fusedsim.families.motion.ops import integer_motion_sad
from fusedsim.families.motion.twin import MIN_SIZE, SUPPORTED_BIT_DEPTHS, MotionOptions
from fusedsim.families.vmaf.inputs import check_bit_depth, to_frames

__all__ = ["MotionStream", "concat_columns"]

_SAD = "VMAF_integer_feature_motion_sad_score"
_M2 = "VMAF_integer_feature_motion2_score"
_M3 = "VMAF_integer_feature_motion3_score"
_DEBUG = "VMAF_integer_feature_motion_score"


def concat_columns(chunks: Iterable[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The emissions of a stream (``push`` results, then ``flush``) joined into whole columns."""
    chunks = list(chunks)
    return {name: torch.cat([c[name] for c in chunks]) for name in chunks[0]} if chunks else {}


class MotionStream:
    """libvmaf's integer motion features of a reference clip fed in order, in batches of any size.

    ``push(frames)`` takes the next frames, integer luma ``(H, W)`` or ``(B, H, W)`` (torch tensor on any device, or
    numpy array), and returns the columns of the frames it finished; ``flush()`` finishes the rest. Emissions are
    consecutive: the ``k``-th value of all emissions joined (:func:`concat_columns`) is frame ``k``'s. Each is a
    dict of float64 tensors of equal length (maybe 0), keyed by libvmaf's printed names:
    ``VMAF_integer_feature_motion_sad_score``, ``integer_motion2``, ``integer_motion3`` (and ``integer_motion``, the
    score again, with ``debug``), each with ``options.suffix()`` appended (``_mmxv_18`` for the v1 models).

    Args:
        bit_depth: 8, 10, 12 or 16.
        options: libvmaf's motion options (default: those of ``vmaf_v0.6.1``).
        debug: add the ``integer_motion`` column.
        check_values: check every batch's samples against ``bit_depth`` (one host synchronisation per batch).
    """

    def __init__(self, bit_depth: int = 8, *, options: MotionOptions | None = None, debug: bool = False,
                 check_values: bool = True) -> None:
        self.bit_depth = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "integer motion")
        if options is None:
            options = MotionOptions()
        if not isinstance(options, MotionOptions):
            raise TypeError(f"options must be a MotionOptions; got {type(options).__name__}")
        self.options = options
        self.names = options.feature_names(debug=bool(debug))
        self.check_values = bool(check_values)
        self._lag = options.lag
        self._tail: torch.Tensor | None = None  # the last (up to) lag frames
        self._seen = 0  # frames pushed
        self._done = 0  # frames emitted
        self._sad: torch.Tensor | None = None  # per-frame scores of frames _sad_start, _sad_start + 1, ...
        self._sad_start = 0
        self._stamp: torch.Tensor | None = None  # motion3 of the first lag frames, (1,)
        self._last_p: torch.Tensor | None = None  # the previous frame's blended, clipped motion2, (1,)
        self._flushed = False

    @property
    def frames_seen(self) -> int:
        """Frames pushed so far."""
        return self._seen

    @property
    def frames_done(self) -> int:
        """Frames emitted so far."""
        return self._done

    # ---------------------------------------------------------------------------------------------- input
    def _frames(self, frames: object) -> torch.Tensor:
        t = to_frames(frames, "frames")
        h, w = t.shape[-2:]
        if self._tail is not None:
            if t.shape[-2:] != self._tail.shape[-2:]:
                raise ValueError(f"frames must keep the size of the earlier frames {tuple(self._tail.shape[-2:])}; "
                                 f"got {tuple(t.shape[-2:])}")
            if t.device != self._tail.device:
                raise ValueError(f"frames must stay on the earlier frames' device {self._tail.device}; got {t.device}")
        elif h < MIN_SIZE or w < MIN_SIZE:
            raise ValueError(f"frames must be at least {MIN_SIZE}x{MIN_SIZE} (libvmaf's mirrored 5-tap filter reads "
                             f"outside smaller frames); got {h}x{w}")
        if self.check_values:
            check_sample_range(t, "frames", self.bit_depth)
        return t

    # ---------------------------------------------------------------------------------------------- scores
    def _scores(self, batch: torch.Tensor) -> torch.Tensor:
        """Per-frame scores of ``batch`` (frames ``seen .. seen+b-1``): libvmaf's ``extract``."""
        b, lag, seen, opts = batch.shape[0], self._lag, self._seen, self.options
        raw = torch.zeros(b, dtype=torch.float64, device=batch.device)
        if opts.force_zero:
            return raw
        t = 0 if self._tail is None else self._tail.shape[0]
        # pairs whose earlier frame is in the tail: j in [lag - t, min(lag, b)), earlier frame tail[j - lag + t]
        j0, j1 = lag - t, min(lag, b)
        if j0 < j1:
            raw[j0:j1] = integer_motion_sad(self._tail[j0 - lag + t:j1 - lag + t], batch[j0:j1], self.bit_depth)
        if b > lag:
            raw[lag:] = integer_motion_sad(batch[:-lag], batch[lag:], self.bit_depth)
        score = torch.clamp(raw * opts.fps_weight, max=opts.max_val)  # min(s * w, max), as libvmaf
        first = max(0, min(b, lag - seen))  # frames before `lag` score 0
        score[:first] = 0.0
        return score

    def _blend_clip(self, m: torch.Tensor) -> torch.Tensor:
        """``min(m*f + (1-f)*min(offset, m), max_val)``, one IEEE operation at a time as in libvmaf."""
        o = self.options
        blended = m * o.blend_factor + (1 - o.blend_factor) * torch.clamp(m, max=o.blend_offset)
        return torch.clamp(blended, max=o.max_val)

    def _s(self, lo: int, hi: int) -> torch.Tensor:
        """Scores of frames ``[lo, hi)``."""
        return self._sad[lo - self._sad_start:hi - self._sad_start]

    # ---------------------------------------------------------------------------------------------- output
    def _emit(self, end: int, final: bool) -> dict[str, torch.Tensor]:
        """Finish frames ``[done, end)``: libvmaf's ``flush`` rules (see ``motion_columns_ref``), vectorised."""
        a, lag, seen = self._done, self._lag, self._seen
        device = self._sad.device if self._sad is not None else torch.device("cpu")
        empty = torch.zeros(0, dtype=torch.float64, device=device)
        if end <= a:
            return {name: empty for name in self.names.values()}
        if self._stamp is None:
            self._stamp = (self._blend_clip(self._s(lag, lag + 1)) if seen > lag
                           else torch.zeros(1, dtype=torch.float64, device=device))
        m2, m3 = [], []
        head = min(end, lag) - a  # frames before lag: motion2 0, motion3 the stamp
        if head > 0:
            m2.append(torch.zeros(head, dtype=torch.float64, device=device))
            m3.append(self._stamp.expand(head))
            self._last_p = self._stamp
        b = max(a, lag)
        if end > b:
            with_next = min(end, seen - 1)  # frames [b, with_next) have a next frame
            single = min(with_next, 2 * lag - 1)  # before 2*lag-1 the earlier neighbour is not used
            parts = []
            if b < single:
                parts.append(self._s(b + 1, single + 1))
            c = max(b, single)
            if c < with_next:
                parts.append(torch.minimum(self._s(c - lag + 1, with_next - lag + 1), self._s(c + 1, with_next + 1)))
            if end > with_next:  # the last frame of the clip: its own score
                parts.append(self._s(seen - 1, seen))
            body = torch.cat(parts)
            p = self._blend_clip(body)
            if self.options.moving_average:
                m3.append((p + torch.cat((self._last_p, p[:-1]))) / 2.0)
            else:
                m3.append(p)
            self._last_p = p[-1:]
            m2.append(body)
        sad = self._s(a, end).clone()  # not a view of the stream's buffer
        columns = {self.names[_SAD]: sad, self.names[_M2]: torch.cat(m2), self.names[_M3]: torch.cat(m3)}
        if _DEBUG in self.names:
            columns[self.names[_DEBUG]] = sad
        self._done = end
        keep = max(0, end - lag + 1)  # the next frame's earlier neighbour onwards
        if keep > self._sad_start:
            self._sad = self._sad[keep - self._sad_start:].clone()
            self._sad_start = keep
        return columns

    def _last_frames(self, batch: torch.Tensor) -> torch.Tensor:
        """Copies of the last ``lag`` frames seen (fewer at the start): the caller's batch is not kept alive.
        (Copied slice by slice rather than concatenated: few ops take uint16 on every device.)"""
        lag, b = self._lag, batch.shape[0]
        old = 0 if self._tail is None else min(self._tail.shape[0], lag - min(b, lag))
        tail = torch.empty((old + min(b, lag), *batch.shape[1:]), dtype=batch.dtype, device=batch.device)
        if old:
            tail[:old] = self._tail[-old:]
        tail[old:] = batch[-min(b, lag):]
        return tail

    def push(self, frames: torch.Tensor | np.ndarray) -> dict[str, torch.Tensor]:
        """Take the next frames ``(H, W)`` or ``(B, H, W)``; return the columns of the frames now finished."""
        if self._flushed:
            raise RuntimeError("this MotionStream has been flushed; start a new one for another clip")
        batch = self._frames(frames)
        score = self._scores(batch)
        self._sad = score if self._sad is None else torch.cat((self._sad, score))
        self._tail = self._last_frames(batch)
        self._seen += batch.shape[0]
        return self._emit(self._seen - 1 if self._seen > self._lag else self._done, final=False)

    def flush(self) -> dict[str, torch.Tensor]:
        """Finish every remaining frame (the clip has ended); later calls return empty columns."""
        self._flushed = True
        return self._emit(self._seen, final=True)
