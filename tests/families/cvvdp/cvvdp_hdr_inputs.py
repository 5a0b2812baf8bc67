"""The HDR inputs of the ColorVideoVDP HDR fixtures (``cvvdp_hdr_fixtures.json``), made the same way by the tests and by
``make_cvvdp_hdr_fixtures.py``: a synthetic scene in absolute linear light (float64 numpy, integer-hash noise, no
RNG), distorted in linear light, then encoded for the display's EOTF (PQ, HLG or linear cd/m²) and rounded to
float32. Each input's bytes are checked against the SHA-256 the fixture stores."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from cvvdp_video_clips import hash32, sha256  # noqa: E402, F401  (the video fixtures' hash and digest)

FIXTURES = Path(__file__).with_name("cvvdp_hdr_fixtures.json")
SCENE_MAX = 4000.0  # cd/m²: the scene's brightest light (HLG signals are relative to it)


def load_fixtures() -> dict:
    with open(FIXTURES, encoding="utf-8") as f:
        return json.load(f)


def _hash(t, c, y, x, seed: int) -> np.ndarray:
    """Deterministic pseudo-random values in [-1, 1) from the sample's coordinates (the video clips' hash)."""
    return ((hash32(t, c, y, x, seed) & 0xFFFF).astype(np.float64) - 32768) / 32768


def _scene(frames: int, height: int, width: int) -> tuple[np.ndarray, ...]:
    """(T, 3, H, W) cd/m²: a horizontal log ramp 0.05..1500 cd/m², tinted per channel, with a grating and a moving
    square at 3000 cd/m² (above most HDR peaks: clipped by the display)."""
    t, c, y, x = np.meshgrid(np.arange(frames), np.arange(3), np.arange(height), np.arange(width), indexing="ij")
    ramp = 0.05 * (1500 / 0.05) ** (x / (width - 1))
    tint = 1.0 - 0.25 * np.cos(0.15 * y + 2.1 * c)
    grating = 1.0 + 0.2 * np.sin(0.9 * x + 0.4 * y + 0.7 * t)
    square = (np.abs(x - (10 + 3 * t)) < 5) & (np.abs(y - height // 2) < 5)
    return np.where(square, 3000.0 - 400 * c, ramp * tint * grating), t, c, y, x


def hdr_pair(distortion: str, frames: int, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(ref, dist) linear light (T, 3, H, W) cd/m²: ``noise`` (±15 % multiplicative, per sample), ``dim`` (the
    light times 0.8 and a gamma of 0.95) or ``flicker`` (±8 % alternating every frame)."""
    ref, t, c, y, x = _scene(frames, height, width)
    if distortion == "noise":
        dist = ref * (1 + 0.15 * _hash(t, c, y, x, 1))
    elif distortion == "dim":
        dist = 0.8 * ref ** 0.95
    elif distortion == "flicker":
        dist = ref * np.where(t % 2 == 0, 1.08, 0.92)
    else:
        raise ValueError(distortion)
    return ref, dist


def pq_encode(lum: np.ndarray) -> np.ndarray:
    """SMPTE ST 2084 inverse EOTF: absolute cd/m² -> code values in [0, 1]."""
    m1, m2, c1, c2, c3 = 2610 / 16384, 2523 / 4096 * 128, 3424 / 4096, 2413 / 4096 * 32, 2392 / 4096 * 32
    y = (np.clip(lum, 0, 10000) / 10000) ** m1
    return ((c1 + c2 * y) / (1 + c3 * y)) ** m2


def hlg_encode(lum: np.ndarray) -> np.ndarray:
    """BT.2100 HLG OETF of the scene light relative to :data:`SCENE_MAX` -> code values in [0, 1]."""
    a = 0.17883277
    b, c = 1 - 4 * a, 0.5 - a * np.log(4 * a)
    e = np.clip(lum / SCENE_MAX, 0, 1)
    return np.where(e <= 1 / 12, np.sqrt(3 * e), a * np.log(np.maximum(12 * e - b, 1e-12)) + c)


ENCODERS = {"PQ": pq_encode, "HLG": hlg_encode, "linear": lambda lum: lum}


def make_input(entry: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The (ref, dist) float32 tensors an entry describes: images (1, 3, H, W) (``frames`` 1 and no ``fps``) or
    clips (1, T, 3, H, W), encoded with ``entry["eotf"]``."""
    height, width = entry["size"]
    ref, dist = hdr_pair(entry["distortion"], entry["frames"], height, width)
    encode = ENCODERS[entry["eotf"]]
    out = []
    for lum in (ref, dist):
        v = torch.from_numpy(encode(lum).astype(np.float32))
        out.append(v[None] if entry.get("fps") else v[:1])  # clip (1, T, 3, H, W) or image (1, 3, H, W)
    return out[0], out[1]
