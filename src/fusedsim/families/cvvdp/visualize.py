"""ColorVideoVDP's heat maps as pictures, the way pycvvdp 0.5.7 draws them (``visualize_diff_map``): the per-pixel
map (pycvvdp's "raw" heatmap, 0 = no visible difference, 1 - JOD/10) coloured over a tone-mapped grey copy of the
frame, so that where and how much a difference shows can be seen at a glance.

* ``threshold``: blue, cyan, green, yellow, red at map values 0, 0.025, 0.05, 0.075, 0.1 (red: 1 JOD and more).
* ``supra-threshold``: cyan, white, yellow at 0, 0.15, 0.3 (yellow: 3 JOD and more).
* ``raw``: the map itself in grey.

Each colour is divided by its own luminance (Rec. 709 weights) and multiplied by the context: the log luminance of
the frame tone-mapped into 60% of the display range (linearly when its range is that small already, else by a
histogram of 1024 bins flattened with exponent 1/3), so dark and bright regions keep their detail. pycvvdp
tone-maps a block of frames at once (its block size follows the GPU's free memory) and takes its context from its
filtered channels; here each frame is tone-mapped on its own, from the frame's luminance, so a picture does not
depend on how frames were batched. Output: sRGB values in [0, 1] (B, 3, H, W), written as they are.
"""

from __future__ import annotations

import torch

__all__ = ["HEATMAP_TYPES", "heatmap_picture", "tonemapped_log_luminance"]

HEATMAP_TYPES = ("threshold", "supra-threshold", "raw")
_REC709 = (0.212656, 0.715158, 0.072186)
_COLOURS = {  # (map values, RGB colours)
    "threshold": ((0.0, 0.025, 0.05, 0.075, 0.1),
                  ((0.2, 0.2, 1.0), (0.2, 1.0, 1.0), (0.2, 1.0, 0.2), (1.0, 1.0, 0.2), (1.0, 0.2, 0.2))),
    "supra-threshold": ((0.0, 0.15, 0.3), ((0.2, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 0.2))),
}
_DISPLAY_RANGE = 0.6  # share of [0, 1] the context's tone-mapped luminance spans
_BINS = 1024


def _srgb_to_linear(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def tonemapped_log_luminance(frame: torch.Tensor) -> torch.Tensor:
    """The context of one frame: sRGB (3, H, W) in [0, 1] -> its log luminance tone-mapped into the middle 60% of
    [0, 1], (1, H, W)."""
    if frame.dim() != 3 or frame.shape[0] != 3:
        raise ValueError(f"frame must be (3, H, W) sRGB; got {tuple(frame.shape)}")
    lin = _srgb_to_linear(frame.float().clamp(0.0, 1.0))
    y = sum(w * lin[c] for c, w in enumerate(_REC709)).unsqueeze(0)
    positive = y[y > 0]
    floor = positive.min() if positive.numel() else torch.tensor(1e-6, device=y.device)
    b = torch.log(torch.clamp(y, min=floor))
    lo, hi = b.min(), b.max()
    if hi - lo < _DISPLAY_RANGE:  # already narrow: a linear stretch around the middle
        return (b - lo) / (hi - lo + 1e-3) * _DISPLAY_RANGE + (1 - _DISPLAY_RANGE) / 2
    counts = torch.histc(b, _BINS, float(lo), float(hi))
    weights = (counts / counts.sum()) ** (1 / 3)
    curve = torch.cumsum(weights / weights.sum(), 0) * _DISPLAY_RANGE + (1 - _DISPLAY_RANGE) / 2
    levels = torch.linspace(float(lo), float(hi), _BINS, device=b.device)
    return _interp(levels, curve, b)


def _interp(x: torch.Tensor, v: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Piecewise-linear ``v(x)`` at ``q`` (``x`` increasing), constant beyond the ends."""
    q = q.clamp(float(x[0]), float(x[-1]))
    hi = torch.searchsorted(x, q.contiguous()).clamp(1, x.numel() - 1)
    lo = hi - 1
    t = (q - x[lo]) / (x[hi] - x[lo])
    return v[lo] + (v[hi] - v[lo]) * t


def heatmap_picture(diff_map: torch.Tensor, frames: torch.Tensor, kind: str = "supra-threshold") -> torch.Tensor:
    """Pictures of heat maps ``diff_map`` (B, 1, H, W) (pycvvdp's raw heatmap) over ``frames`` (B, 3, H, W) sRGB
    in [0, 1] (uint8 codes are scaled): (B, 3, H, W) float32 sRGB in [0, 1]."""
    if kind not in HEATMAP_TYPES:
        raise ValueError(f"heatmap type must be one of {', '.join(HEATMAP_TYPES)}; got {kind!r}")
    if diff_map.dim() != 4 or diff_map.shape[1] != 1 or frames.dim() != 4 or frames.shape[1] != 3 \
            or diff_map.shape[0] != frames.shape[0] or diff_map.shape[-2:] != frames.shape[-2:]:
        raise ValueError(f"diff_map must be (B, 1, H, W) and frames (B, 3, H, W) of the same B, H, W; got "
                         f"{tuple(diff_map.shape)} and {tuple(frames.shape)}")
    d = diff_map.float().clamp(0.0, 1.0)
    if kind == "raw":
        return d.expand(-1, 3, -1, -1).contiguous()
    if frames.dtype == torch.uint8:
        frames = frames.float() / 255.0
    at, colours = _COLOURS[kind]
    x = torch.tensor(at, device=d.device)
    rgb = torch.tensor(colours, device=d.device)
    lum = sum(w * rgb[:, c] for c, w in enumerate(_REC709))
    chroma = rgb / (lum[:, None] + 1e-4)  # each colour at unit luminance
    context = torch.stack([tonemapped_log_luminance(f) for f in frames])
    picture = torch.cat([_interp(x, chroma[:, c], d) for c in range(3)], dim=1)
    return (picture * context).clamp(0.0, 1.0)
