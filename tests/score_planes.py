"""All three planes of the ``refdata/vmaf-score`` clip pairs (``score_fixtures`` reads luma only).

The clips are raw 4:2:0 with ceil-size chroma (``ceil(w/2) x ceil(h/2)``). libvmaf 3.2.0's pictures hold
floor-size chroma, and its runs of the odd-size (333x217) pairs read floor-size copies whose chroma is the
top-left ``floor(w/2) x floor(h/2)`` of these planes (that folder's README, section 3.2).
"""

from __future__ import annotations

import functools
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from score_fixtures import ScorePair, _clip_path, load_score_pairs


@dataclass(frozen=True)
class PlanePair:
    pair: ScorePair
    ref: tuple[np.ndarray, np.ndarray, np.ndarray]  # y (n, H, W), u and v (n, ceil(H/2), ceil(W/2))
    dist: tuple[np.ndarray, np.ndarray, np.ndarray]


def _read_planes(path: Path, width: int, height: int, bit_depth: int, n: int) -> tuple[np.ndarray, ...]:
    dtype = np.dtype(np.uint8) if bit_depth == 8 else np.dtype("<u2")
    raw = lzma.open(path).read() if path.suffix == ".xz" else path.read_bytes()
    cw, ch = (width + 1) // 2, (height + 1) // 2
    frame = width * height + 2 * cw * ch
    data = np.frombuffer(raw, dtype=dtype).reshape(n, frame)
    y = data[:, : width * height].reshape(n, height, width)
    u = data[:, width * height: width * height + cw * ch].reshape(n, ch, cw)
    v = data[:, width * height + cw * ch:].reshape(n, ch, cw)
    native = np.uint8 if bit_depth == 8 else np.uint16
    return tuple(np.ascontiguousarray(p.astype(native)) for p in (y, u, v))


@functools.lru_cache(maxsize=2)
def load_plane_pairs(refdata: Path) -> tuple[PlanePair, ...]:
    out = []
    for pair in load_score_pairs(refdata):
        names = [Path(pair.record[k]).name.removesuffix(".yuv") for k in ("reference", "distorted")]
        ref, dist = (_read_planes(_clip_path(refdata, name), pair.width, pair.height, pair.bit_depth, pair.n)
                     for name in names)
        out.append(PlanePair(pair, ref, dist))
    return tuple(out)
