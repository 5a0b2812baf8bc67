"""Fixture clips of ``refdata/vmaf`` (raw planar YUV 4:2:0, >8-bit as uint16 LE) read with numpy alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Pair:
    name: str
    width: int
    height: int
    bit_depth: int
    n: int
    ref: tuple[np.ndarray, np.ndarray, np.ndarray]  # y, cb, cr: (n, H, W), (n, Hc, Wc), (n, Hc, Wc)
    dist: tuple[np.ndarray, np.ndarray, np.ndarray]
    frames: list[dict]  # expected values per frame (libvmaf names)

    def expected(self, key: str) -> list[float]:
        return [f[key] for f in self.frames]


def read_yuv420(path: Path, width: int, height: int, bit_depth: int, n: int):
    dtype = np.uint8 if bit_depth == 8 else np.dtype("<u2")
    cw, ch = (width + 1) // 2, (height + 1) // 2
    frame = width * height + 2 * cw * ch
    data = np.fromfile(path, dtype=dtype)
    assert data.size == n * frame, f"{path}: {data.size} samples, expected {n * frame}"
    data = data.reshape(n, frame).astype(np.uint8 if bit_depth == 8 else np.uint16)
    y = data[:, : width * height].reshape(n, height, width)
    u = data[:, width * height : width * height + cw * ch].reshape(n, ch, cw)
    v = data[:, width * height + cw * ch :].reshape(n, ch, cw)
    return np.ascontiguousarray(y), np.ascontiguousarray(u), np.ascontiguousarray(v)


def load_pairs(refdata: Path) -> list[Pair]:
    root = refdata / "vmaf"
    pairs = []
    for path in sorted(root.glob("*.json")):
        meta = json.loads(path.read_text())
        if "frames" not in meta:
            continue
        w, h, bd, n = meta["width"], meta["height"], meta["bitdepth"], meta["frames_count"]
        ref = read_yuv420(root / meta["reference"], w, h, bd, n)
        dist = read_yuv420(root / meta["distorted"], w, h, bd, n)
        pairs.append(Pair(meta["pair"], w, h, bd, n, ref, dist, meta["frames"]))
    return pairs
