"""Building block: a row of BW columns shifted by a few columns inside the warps that hold it (Triton).

A separable filter along W needs, per tap, the row shifted by s columns. As a masked load at ``cols + s`` each tap
touches two cache lines per warp (the shift breaks the 128-byte alignment) and keeps one prefetched register per
tap. Instead, the row is loaded once as three aligned 32-column segments per warp (``lo`` = columns - 32, ``mid``,
``hi`` = columns + 32) and each tap is one select and one warp shuffle: ``tl.gather`` along a 32-wide axis is
warp-local when one warp holds the axis, and Triton lowers it to ``shfl.sync``. Shifts up to 32 columns each
way (windows up to 33 taps); zero padding is the segments' load masks.

``lane_shift`` gives the same numbers on any layout (``tl.gather`` is exact); its speed assumes one column per
thread, i.e. BW = 32 x warps (the SSIM plans' tiles).
"""

from __future__ import annotations

import triton
import triton.language as tl

SEGMENT = 32  # columns per warp segment: the shift reach of one neighbouring segment
MAX_SHIFT = SEGMENT


@triton.jit
def lane_shift(lo, mid, hi, S: tl.constexpr, BW: tl.constexpr):
    """Element i of the result is element i + S of the row whose 32-column segments are ``mid``, with ``lo`` /
    ``hi`` the segments 32 columns before / after each of them (|S| <= 32; [BW] each)."""
    if S == 0:
        return mid
    else:
        lane = tl.arange(0, BW) % 32
        # source lane j sends the element that lane (j - S) mod 32 needs: its own segment's or the neighbour's
        if S > 0:
            src = tl.where(lane >= S, mid, hi)
        else:
            src = tl.where(lane < 32 + S, mid, lo)
        idx = tl.reshape((lane + (S + 32)) % 32, [BW // 32, 32])
        return tl.reshape(tl.gather(tl.reshape(src, [BW // 32, 32]), idx, 1), [BW])
