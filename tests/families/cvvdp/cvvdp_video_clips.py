"""The short clips of the ColorVideoVDP video fixtures (``cvvdp_video_fixtures.json``), made the same way by the tests
and by ``make_cvvdp_video_fixtures.py``: synthetic clips from integer arithmetic, and crops of the shared VMAF fixture
clips (refdata ``vmaf-score/clips``) converted to RGB. Each clip's bytes are checked against the SHA-256 the
fixture stores, so a change in how a clip is made cannot pass silently."""

from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path

import numpy as np
import torch

FIXTURES = Path(__file__).with_name("cvvdp_video_fixtures.json")


def load_fixtures() -> dict:
    with open(FIXTURES, encoding="utf-8") as f:
        return json.load(f)


def sha256(*arrays: torch.Tensor) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.contiguous().numpy().tobytes())
    return h.hexdigest()


def hash32(t, c, y, x, seed: int) -> np.ndarray:
    """Deterministic pseudo-random 32-bit integers from the sample's coordinates (an integer hash, no RNG)."""
    v = (t * 73856093 + c * 19349663 + y * 83492791 + x * 2654435761 + seed * 97) & 0xFFFFFFFF
    v = (v ^ (v >> 13)) * 1274126177 & 0xFFFFFFFF
    return v ^ (v >> 16)


def _hash_noise(t, c, y, x, seed: int) -> np.ndarray:
    """Deterministic pseudo-random integers 0..255 from the sample's coordinates."""
    return (hash32(t, c, y, x, seed) & 0xFF).astype(np.int64)


def synthetic_clip(kind: str, frames: int = 10, height: int = 48, width: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """(ref, dist) uint8 (1, T, 3, H, W): a moving coloured ramp with a bright square; the distortion is ``noise``
    (temporal noise, amplitude 24 codes), ``flicker`` (brightness alternating by 12 codes every frame) or
    ``judder`` (the square held for two frames)."""
    t, c, y, x = np.meshgrid(np.arange(frames), np.arange(3), np.arange(height), np.arange(width), indexing="ij")

    def scene(tt):
        base = (x * 3 + y * 2 + c * 40 + tt * 5) % 200 + 20
        sq = (np.abs(x - (8 + 3 * tt)) < 6) & (np.abs(y - height // 2) < 6)
        return np.where(sq, 235 - c * 30, base)

    ref = scene(t)
    if kind == "noise":
        dist = ref + (_hash_noise(t, c, y, x, 1) - 128) * 24 // 128
    elif kind == "flicker":
        dist = ref + np.where(t % 2 == 0, 12, -12)
    elif kind == "judder":
        dist = scene(t - t % 2)
    else:
        raise ValueError(kind)
    return _codes(ref), _codes(dist)


def _codes(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.clip(a, 0, 255).astype(np.uint8))[None]  # (1, T, 3, H, W)


# BT.709 (Kr, Kb), limited range: the clips' colour space is not signalled; any fixed conversion serves.
_KR, _KB = 0.2126, 0.0722


def _yuv420_frames(path: Path, width: int, height: int, bitdepth: int, frames: int) -> np.ndarray:
    raw = lzma.open(path).read()
    dtype = np.uint8 if bitdepth == 8 else np.dtype("<u2")
    fs = width * height + 2 * (width // 2) * (height // 2)
    data = np.frombuffer(raw, dtype).reshape(-1, fs)[:frames].astype(np.float64)
    y = data[:, :width * height].reshape(-1, height, width)
    cw, ch = width // 2, height // 2
    u = data[:, width * height:width * height + cw * ch].reshape(-1, ch, cw)
    v = data[:, width * height + cw * ch:].reshape(-1, ch, cw)
    up = lambda p: p.repeat(2, axis=1).repeat(2, axis=2)  # noqa: E731  nearest chroma upsampling
    s = 2.0 ** (bitdepth - 8)
    yy = (y - 16 * s) / (219 * s)
    cb = (up(u) - 128 * s) / (224 * s)
    cr = (up(v) - 128 * s) / (224 * s)
    r = yy + 2 * (1 - _KR) * cr
    b = yy + 2 * (1 - _KB) * cb
    g = (yy - _KR * r - _KB * b) / (1 - _KR - _KB)
    return np.clip(np.stack([r, g, b], axis=1), 0.0, 1.0)  # (T, 3, H, W) float64


def vmaf_clip(refdata: Path, name: str, frames: int, crop: tuple[int, int, int, int]) -> tuple[torch.Tensor, ...]:
    """(ref, dist) (1, T, 3, h, w) of the shared VMAF clip pair ``name`` (e.g. ``r576x324_8b``): its first
    ``frames`` frames, cropped to (top, left, h, w), converted to RGB; 8-bit clips as uint8 codes (rounded), deeper
    ones as float32 in [0, 1]."""
    clips = json.loads((refdata / "vmaf-score" / "clips" / "clips.json").read_text())
    meta = clips[f"{name}_ref"]
    top, left, h, w = crop
    out = []
    for role in ("ref", "mixed"):
        rgb = _yuv420_frames(refdata / "vmaf-score" / "clips" / f"{name}_{role}.yuv.xz", meta["width"],
                             meta["height"], meta["bitdepth"], frames)[..., top:top + h, left:left + w]
        if meta["bitdepth"] == 8:
            out.append(torch.from_numpy(np.rint(rgb * 255).astype(np.uint8))[None])
        else:
            out.append(torch.from_numpy(rgb.astype(np.float32))[None])
    return tuple(out)


def make_clip(spec: dict, refdata: Path | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The (ref, dist) clip a fixture entry describes (``clip``: ``synthetic:<kind>`` or ``vmaf:<name>``)."""
    source, name = spec["clip"].split(":", 1)
    if source == "synthetic":
        return synthetic_clip(name, spec["frames"], *spec["size"])
    if refdata is None:
        raise FileNotFoundError("refdata")
    return vmaf_clip(refdata, name, spec["frames"], tuple(spec["crop"]))
