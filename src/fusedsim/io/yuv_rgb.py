"""Y'CbCr planes to R'G'B' (sRGB-encoded, not linearised) in PyTorch, on the planes' device.

The conversion is FFmpeg's definition of each colour space, in float32 arithmetic:

* **Matrix** (``bt601``, ``bt709``, ``bt2020`` (non-constant luminance), ``smpte240m``, ``fcc``): with luma
  weights Kr, Kb (Kg = 1 - Kr - Kb), R' = Y + 2(1-Kr)·Cr, B' = Y + 2(1-Kb)·Cb, G' = (Y - Kr·R' - Kb·B') / Kg.
* **Range** at bit depth ``b`` (s = 2^(b-8)): ``limited`` Y = (Y'-16s)/(219s), C = (C'-128s)/(224s); ``full``
  Y = Y'/(2^b-1), C = (C'-2^(b-1))/(2^b-1).
* **Chroma siting**: subsampled chroma is upsampled bilinearly with each chroma sample at its position on the luma
  grid: ``left`` (MPEG-2, H.264/HEVC/AV1's default for 4:2:0: co-sited horizontally, centred vertically),
  ``center`` (MPEG-1/JPEG), ``topleft`` (co-sited both ways), ``top``, ``bottomleft``, ``bottom``; edges
  repeat the last sample. ``nearest`` replicates each chroma sample over the pixels it covers instead (FFmpeg's
  fast unscaled ``rgb24`` path). Untagged streams get FFmpeg's defaults: BT.601, limited range, and the siting
  FFmpeg's decoder gives (``left`` for MPEG-2, H.264, HEVC and MPEG-4 Part 2, else ``center``).

Results are float32 in [0, 1] after clamping (``rgb_float``) or 8-bit codes rounded half up (``rgb_uint8``). These
are torch operations (on the GPU they run as a few element-wise kernels); they are the specification a fused
kernel would have to match.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

__all__ = ["MATRICES", "RANGES", "SITINGS", "Colour", "rgb_float", "rgb_uint8", "upsample_chroma"]

#: (Kr, Kb) of each matrix (ITU-R BT.601, BT.709, BT.2020 NCL, SMPTE 240M, FCC 73.682).
MATRICES: dict[str, tuple[float, float]] = {
    "bt601": (0.299, 0.114),
    "bt709": (0.2126, 0.0722),
    "bt2020": (0.2627, 0.0593),
    "smpte240m": (0.212, 0.087),
    "fcc": (0.30, 0.11),
}
RANGES = ("limited", "full")
#: chroma sample position on the luma grid, (horizontal, vertical) offset in luma samples of the first chroma
#: sample, for 2:1 subsampling (FFmpeg's AVChromaLocation names)
SITINGS: dict[str, tuple[float, float]] = {
    "left": (0.0, 0.5),
    "center": (0.5, 0.5),
    "topleft": (0.0, 0.0),
    "top": (0.5, 0.0),
    "bottomleft": (0.0, 1.0),
    "bottom": (0.5, 1.0),
}
_UPSAMPLING = ("bilinear", "nearest")


@dataclass(frozen=True)
class Colour:
    """How a clip's samples map to R'G'B': ``matrix`` (a key of :data:`MATRICES`), ``range`` (``limited`` /
    ``full``), ``siting`` (a key of :data:`SITINGS`) and ``upsampling`` (``bilinear`` / ``nearest``)."""

    matrix: str = "bt601"
    range: str = "limited"
    siting: str = "left"
    upsampling: str = "bilinear"

    def __post_init__(self) -> None:
        for name, allowed in (("matrix", MATRICES), ("range", RANGES), ("siting", SITINGS),
                              ("upsampling", _UPSAMPLING)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")

    def describe(self) -> str:
        return f"{self.matrix}, {self.range} range, chroma {self.siting} ({self.upsampling})"


@functools.lru_cache(maxsize=64)
def _axis_weights(n_out: int, n_in: int, offset: float, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Bilinear taps along one axis: output sample x reads inputs ``lo`` and ``lo+1`` (clamped) with weight
    ``w`` on the second, input k sitting at output coordinate ``factor*k + offset`` (cached: every frame of a
    clip uses the same taps)."""
    factor = n_out / n_in
    pos = (torch.arange(n_out, device=device, dtype=torch.float64) - offset) / factor
    lo = torch.floor(pos)
    w = (pos - lo).to(torch.float32)
    lo = lo.long()
    return lo.clamp(0, n_in - 1), (lo + 1).clamp(0, n_in - 1), w


def upsample_chroma(plane: torch.Tensor, height: int, width: int, siting: str = "left",
                    upsampling: str = "bilinear") -> torch.Tensor:
    """A chroma plane ``(N, h, w)`` (float) at luma size ``(N, height, width)``; sizes equal: returned as is."""
    n, h, w = plane.shape
    if (h, w) == (height, width):
        return plane
    if upsampling == "nearest":
        rows = torch.div(torch.arange(height, device=plane.device) * h, height, rounding_mode="floor")
        cols = torch.div(torch.arange(width, device=plane.device) * w, width, rounding_mode="floor")
        return plane[:, rows][:, :, cols]
    dx, dy = SITINGS[siting]
    if w != width:
        a, b, t = _axis_weights(width, w, dx * width / w / 2, plane.device)
        plane = torch.lerp(plane[:, :, a], plane[:, :, b], t)
    if h != height:
        a, b, t = _axis_weights(height, h, dy * height / h / 2, plane.device)
        plane = torch.lerp(plane[:, a, :], plane[:, b, :], t[:, None])
    return plane


def _normalised(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, bit_depth: int,
                colour: Colour) -> tuple[torch.Tensor, ...]:
    if colour.range == "limited":
        s = float(1 << (bit_depth - 8))
        y0, ys, c0, cs = 16.0 * s, 219.0 * s, 128.0 * s, 224.0 * s
    else:
        top = float((1 << bit_depth) - 1)
        y0, ys, c0, cs = 0.0, top, float(1 << (bit_depth - 1)), top
    return (y.float() - y0) / ys, (u.float() - c0) / cs, (v.float() - c0) / cs


def rgb_float(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, bit_depth: int,
              colour: Colour = Colour()) -> torch.Tensor:
    """R'G'B' float32 ``(N, 3, H, W)`` in [0, 1] from integer planes ``y`` ``(N, H, W)`` and ``u``, ``v``
    ``(N, Hc, Wc)`` (4:2:0, 4:2:2 or 4:4:4) of ``bit_depth`` bits."""
    if y.dim() != 3 or u.dim() != 3 or v.dim() != 3:
        raise ValueError(f"planes must be (N, H, W); got y {tuple(y.shape)}, u {tuple(u.shape)}, v {tuple(v.shape)}")
    if u.shape != v.shape or u.shape[0] != y.shape[0]:
        raise ValueError(f"u and v must have one shape and y's frame count; got y {tuple(y.shape)}, "
                         f"u {tuple(u.shape)}, v {tuple(v.shape)}")
    if not 8 <= bit_depth <= 16:
        raise ValueError(f"bit_depth must be 8..16; got {bit_depth!r}")
    luma, cb, cr = _normalised(y, u, v, bit_depth, colour)
    height, width = y.shape[-2:]
    cb = upsample_chroma(cb, height, width, colour.siting, colour.upsampling)
    cr = upsample_chroma(cr, height, width, colour.siting, colour.upsampling)
    kr, kb = MATRICES[colour.matrix]
    kg = 1.0 - kr - kb
    r = luma + (2.0 * (1.0 - kr)) * cr
    b = luma + (2.0 * (1.0 - kb)) * cb
    g = (luma - kr * r - kb * b) / kg
    return torch.stack((r, g, b), dim=1).clamp_(0.0, 1.0)


def rgb_uint8(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, bit_depth: int,
              colour: Colour = Colour()) -> torch.Tensor:
    """:func:`rgb_float` as 8-bit codes ``(N, 3, H, W)`` uint8, rounded to nearest (halves up)."""
    return torch.floor(rgb_float(y, u, v, bit_depth, colour) * 255.0 + 0.5).to(torch.uint8)
