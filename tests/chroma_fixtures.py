"""Chroma planes of the ``refdata/vmaf-score`` fixture pairs (:mod:`score_fixtures` loads their luma).

The files store ceil-size 4:2:0 chroma; libvmaf 3.2.0 reads ``w/2 x h/2`` (its odd-size runs used copies cropped to
that size), so the planes are returned as stored and callers crop as libvmaf reads them.
"""

from __future__ import annotations

import functools
import lzma
from pathlib import Path

import numpy as np

from score_fixtures import ScorePair, _clip_path


@functools.lru_cache(maxsize=4)
def _read_chroma(path: Path, width: int, height: int, bit_depth: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    dtype = np.dtype(np.uint8) if bit_depth == 8 else np.dtype("<u2")
    raw = lzma.open(path).read() if path.suffix == ".xz" else path.read_bytes()
    cw, ch = (width + 1) // 2, (height + 1) // 2
    frame = width * height + 2 * cw * ch
    data = np.frombuffer(raw, dtype=dtype).reshape(n, frame)
    native = np.uint8 if bit_depth == 8 else np.uint16
    u = data[:, width * height:width * height + cw * ch].reshape(n, ch, cw).astype(native)
    v = data[:, width * height + cw * ch:].reshape(n, ch, cw).astype(native)
    return u, v


def chroma(refdata: Path, pair: ScorePair) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(ref_u, ref_v, dist_u, dist_v)`` as stored in the clips (ceil-size 4:2:0)."""
    names = [Path(pair.record[role]).name.removesuffix(".yuv") for role in ("reference", "distorted")]
    planes = [_read_chroma(_clip_path(refdata, name), pair.width, pair.height, pair.bit_depth, pair.n)
              for name in names]
    return planes[0][0], planes[0][1], planes[1][0], planes[1][1]
