"""Fixtures of ``refdata/vmaf-score``: libvmaf 3.2.0's exact per-frame outputs on 12 clip pairs.

The three new pairs live in ``vmaf-score/clips/*.yuv.xz``; the nine ``prev_*`` pairs reuse ``refdata/vmaf/clips``
(their 3.2.0 runs read floor-size chroma copies whose luma is byte-identical: VIF, ADM, motion and VMAF read luma
only). Values: ``pair.metric(run, name)`` returns the run's column, falling back to the ``default`` run for the
columns the fixture lists as identical to it (see that folder's README, section 5).
"""

from __future__ import annotations

import functools
import json
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class ScorePair:
    name: str
    width: int
    height: int
    bit_depth: int
    n: int
    ref_y: np.ndarray  # (n, H, W) uint8 or uint16
    dist_y: np.ndarray
    record: dict  # the whole reference/<pair>.json

    def metric(self, run: str, name: str) -> list[float]:
        """libvmaf's per-frame column ``name`` of ``run`` (exact doubles)."""
        runs = self.record["runs"]
        metrics = runs[run]["metrics"]
        if name in metrics:
            return metrics[name]
        if name in runs["default"]["metrics"] and run != "default":
            return runs["default"]["metrics"][name]
        raise KeyError(f"{self.name}: run {run!r} has no column {name!r}")

    def pooled(self, run: str, name: str) -> dict:
        return self.record["runs"][run]["pooled_metrics"][name]


def _read_luma(path: Path, width: int, height: int, bit_depth: int, n: int) -> np.ndarray:
    dtype = np.dtype(np.uint8) if bit_depth == 8 else np.dtype("<u2")
    raw = lzma.open(path).read() if path.suffix == ".xz" else path.read_bytes()
    frame = width * height + 2 * ((width + 1) // 2) * ((height + 1) // 2)
    data = np.frombuffer(raw, dtype=dtype)
    assert data.size == n * frame, f"{path}: {data.size} samples, expected {n * frame}"
    y = data.reshape(n, frame)[:, : width * height].reshape(n, height, width)
    return np.ascontiguousarray(y.astype(np.uint8 if bit_depth == 8 else np.uint16))


def _clip_path(refdata: Path, name: str) -> Path:
    new = refdata / "vmaf-score" / "clips" / f"{name}.yuv.xz"
    return new if new.is_file() else refdata / "vmaf" / "clips" / f"{name}.yuv"


@functools.lru_cache(maxsize=2)
def load_score_pairs(refdata: Path) -> tuple[ScorePair, ...]:
    pairs = []
    for path in sorted((refdata / "vmaf-score" / "reference").glob("*.json")):
        record = json.loads(path.read_text())
        geometry = record["cli_geometry"].split()
        width, height, bits = (int(geometry[geometry.index(flag) + 1]) for flag in ("-w", "-h", "-b"))
        n = record["frames"]
        ref_name = Path(record["reference"]).name.removesuffix(".yuv")
        dist_name = Path(record["distorted"]).name.removesuffix(".yuv")
        pairs.append(ScorePair(record["pair"], width, height, bits, n,
                               _read_luma(_clip_path(refdata, ref_name), width, height, bits, n),
                               _read_luma(_clip_path(refdata, dist_name), width, height, bits, n), record))
    return tuple(pairs)
