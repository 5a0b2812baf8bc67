"""CAMBI's per-run set-up, as libvmaf 3.2.0's ``cambi.c`` ``init`` derives it from the options: encode size,
window, visibility thresholds, the luminance floor and the spatial-mask threshold. Torch-free: the command line
validates options with it before any frame is read.

Thresholds are codes of the 10-bit limited range (foot 64, head 940) whatever the input bit depth, with luminance
from BT.1886 (Lw 300, Lb 0.01, gamma 2.4) or PQ, in double as libvmaf computes them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["CambiSettings", "NUM_SCALES", "SCALE_WEIGHTS", "CONTRAST_WEIGHTS", "EOTFS", "cambi_settings",
           "resize_indices"]

NUM_SCALES = 5
#: Weight of each scale's pooled score (finest first).
SCALE_WEIGHTS = (16, 8, 4, 2, 1)
#: libvmaf's ``g_contrast_weights``: the weight of a contrast step of d + 1 codes.
CONTRAST_WEIGHTS = (1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9)
MIN_ENCODE_SIDE = 216  # libvmaf refuses an encode (and a source) whose width and height are both below this
RECIPROCAL_LUT_SIZE = 4226  # the window's pixel count must index libvmaf's reciprocal table
MASK_FILTER_SIZE = 7
_FOOT, _HEAD = 64, 940  # 10-bit limited range
_HIGH_RES_PIXELS = {1080: 1920 * 1080, 1440: 2560 * 1440, 2160: 3840 * 2160}


def _bt1886(v: float) -> float:
    lw, lb, gamma = 300.0, 0.01, 2.4
    a = math.pow(math.pow(lw, 1.0 / gamma) - math.pow(lb, 1.0 / gamma), gamma)
    b = math.pow(lb, 1.0 / gamma) / (math.pow(lw, 1.0 / gamma) - math.pow(lb, 1.0 / gamma))
    return a * math.pow(max(v + b, 0.0), gamma)


def _pq(v: float) -> float:
    m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875
    num = max(math.pow(v, 1.0 / m2) - c1, 0.0)
    den = c2 - c3 * math.pow(v, 1.0 / m2)
    return 10000 * math.pow(num / den, 1.0 / m1)


EOTFS: dict[str, Callable[[float], float]] = {"bt1886": _bt1886, "pq": _pq}


def _luminance(code: int, eotf: Callable[[float], float]) -> float:
    clipped = min(max(code, _FOOT), _HEAD)
    return eotf((clipped - _FOOT) / (_HEAD - _FOOT))


def _visible(code: int, step: int, tvi: float, eotf: Callable[[float], float]) -> bool:
    mean = _luminance(code, eotf)
    return _luminance(code + step, eotf) - mean > tvi * mean


def _tvi_for_step(step: int, tvi: float, eotf: Callable[[float], float]) -> int:
    """The code at which a step of ``step`` codes is visible and is not one code higher (libvmaf's bisection,
    ``get_tvi_for_diff``): 0 when not visible at the foot, 1023 when still visible at the top of the search."""

    def where(code: int) -> int:  # -1: too big (not visible), 1: too small (visible one code higher), 0: found
        if not _visible(code, step, tvi, eotf):
            return -1
        return 1 if _visible(code + 1, step, tvi, eotf) else 0

    foot, head = _FOOT, _HEAD - step - 1
    at = where(foot)
    if at != 1:
        return 0 if at == -1 else foot
    at = where(head)
    if at != -1:
        return 1023 if at == 1 else head
    while True:
        mid = foot + (head - foot) // 2
        at = where(mid)
        if at == 0:
            return mid
        if at == -1:
            head = mid
        else:
            foot = mid


def _vlt_luma(threshold: float, eotf: Callable[[float], float]) -> int:
    code = _FOOT
    while _luminance(code, eotf) < threshold:
        code += 1
    return 0 if code == _FOOT else code


def _window(base: int, width: int, height: int, high_res: bool) -> int:
    ws = ((base * (width + height)) // 375) >> 4
    if high_res:
        ws = (ws + 1) >> 1
    return ws | 1


def _ceil_log2(n: int) -> int:
    return 0 if n == 0 else (n - 1).bit_length()


def _mask_threshold(width: int, height: int) -> int:
    return (MASK_FILTER_SIZE * MASK_FILTER_SIZE + 3 * (_ceil_log2((width >> 6) * (height >> 6)) - 11) - 1) >> 1


def _scale_sizes(width: int, height: int, high_res: bool) -> tuple[tuple[int, int], ...]:
    sizes = []
    for scale in range(NUM_SCALES):
        if scale > 0 or high_res:
            width, height = (width + 1) >> 1, (height + 1) >> 1
        sizes.append((height, width))
    return tuple(sizes)


@dataclass(frozen=True)
class CambiSettings:
    """What one CAMBI run computes with. Sizes are (height, width); ``tvi`` holds, per contrast step d + 1, the
    largest 10-bit code at which the step is visible (libvmaf stores it plus ``num_diffs``: see ``cambi.c``)."""

    enc_height: int
    enc_width: int
    anti_dither: bool  # enc_bitdepth < 10: each pixel becomes the floor mean of its 2x2 block
    window: int  # the c-value window's side (odd), adjusted to the encode size
    high_res: bool  # the speed-up is active: scale 0 is already decimated once
    topk: float
    tvi: tuple[int, ...]
    vlt_luma: int
    mask_threshold: int
    max_val: float

    @property
    def num_diffs(self) -> int:
        return len(self.tvi)

    @property
    def band(self) -> tuple[int, int]:
        """The codes ``[low, high]`` the window histograms count (libvmaf's exact pruning: no other code can
        change a c-value)."""
        low = max(self.vlt_luma - 3 * self.num_diffs + 1, 0)
        return low, self.tvi[-1] + self.num_diffs

    @property
    def scale_sizes(self) -> tuple[tuple[int, int], ...]:
        return _scale_sizes(self.enc_width, self.enc_height, self.high_res)


def _resolve(width: int, height: int, enc_bitdepth: int, window_size: int,
             topk: float, tvi_threshold: float, vis_lum_threshold: float, max_log_contrast: int, eotf: str,
             high_res_speedup: int, max_val: float, hrs_pixels: int, what: str) -> CambiSettings:
    if eotf not in EOTFS:
        raise ValueError(f"cambi eotf must be one of {', '.join(EOTFS)}; got {eotf!r}")
    high_res = high_res_speedup in _HIGH_RES_PIXELS and hrs_pixels >= _HIGH_RES_PIXELS[high_res_speedup]
    window = _window(window_size, width, height, high_res)
    if window * window >= RECIPROCAL_LUT_SIZE:
        raise ValueError(f"cambi window_size {window_size} gives a {window}-pixel window at {width}x{height}, too "
                         f"large for libvmaf's reciprocal table ({window}^2 >= {RECIPROCAL_LUT_SIZE}): lower "
                         f"window_size")
    num_diffs = 1 << max_log_contrast
    curve = EOTFS[eotf]
    tvi = tuple(_tvi_for_step(d + 1, tvi_threshold, curve) for d in range(num_diffs))
    settings = CambiSettings(height, width, enc_bitdepth < 10, window, high_res, topk, tvi,
                             _vlt_luma(vis_lum_threshold, curve), _mask_threshold(width, height), max_val)
    pad = window >> 1
    for scale, (h, w) in enumerate(settings.scale_sizes):
        if h < pad or w < pad:
            raise ValueError(f"cambi at {what} {width}x{height}: scale {scale} is {w}x{h}, smaller than half the "
                             f"{window}-pixel window; libvmaf reads outside the picture there (stale buffer rows), "
                             f"which cannot be reproduced: lower window_size or use a larger encode size")
    return settings


@functools.lru_cache(maxsize=64)  # a clip's every batch asks for the same settings (their tables cost ~0.1 ms)
def cambi_settings(width: int, height: int, bit_depth: int, *, enc_width: int = 0, enc_height: int = 0,
                   enc_bitdepth: int = 0, src_width: int = 0, src_height: int = 0, window_size: int = 65,
                   topk: float = 0.6, tvi_threshold: float = 0.019, vis_lum_threshold: float = 0.0,
                   max_log_contrast: int = 2, eotf: str = "bt1886", high_res_speedup: int = 0,
                   max_val: float = 1000.0) -> tuple[CambiSettings, CambiSettings]:
    """The settings of the distorted (encode) and the source (``full_ref``) computations for frames of
    ``width`` x ``height`` at ``bit_depth``, with libvmaf's resolution of the options: an encode size of 0 (or
    larger than the input) is the input size, an encode bit depth of 0 is the input's; the speed-up applies from
    its resolution up (of the encode); the source defaults to the input size. ValueError where libvmaf's ``init``
    fails, and where a scale would be narrower than half the window (libvmaf reads stale rows there)."""
    if enc_bitdepth == 0:
        enc_bitdepth = bit_depth
    if enc_width == 0 or enc_height == 0 or enc_width > width or enc_height > height:
        enc_width, enc_height = width, height
    if src_width == 0 or src_height == 0:
        src_width, src_height = width, height
    if enc_width < MIN_ENCODE_SIDE and enc_height < MIN_ENCODE_SIDE:
        raise ValueError(f"cambi needs an encode width or height of at least {MIN_ENCODE_SIDE}; got "
                         f"{enc_width}x{enc_height} (libvmaf refuses it)")
    if src_width < MIN_ENCODE_SIDE and src_height < MIN_ENCODE_SIDE:
        raise ValueError(f"cambi needs a source width or height of at least {MIN_ENCODE_SIDE}; got "
                         f"{src_width}x{src_height} (libvmaf refuses it; the source defaults to the input size)")
    if (src_width > enc_width and src_height < enc_height) or (src_width < enc_width and src_height > enc_height):
        raise ValueError(f"cambi src_width x src_height {src_width}x{src_height} must not be larger than the encode "
                         f"size {enc_width}x{enc_height} in one side and smaller in the other (libvmaf refuses it)")
    common = dict(enc_bitdepth=enc_bitdepth, window_size=window_size, topk=topk, tvi_threshold=tvi_threshold,
                  vis_lum_threshold=vis_lum_threshold, max_log_contrast=max_log_contrast, eotf=eotf,
                  high_res_speedup=high_res_speedup, max_val=max_val, hrs_pixels=enc_width * enc_height)
    dist = _resolve(enc_width, enc_height, what="encode size", **common)
    src = _resolve(src_width, src_height, what="source size", **common)
    return dist, src


def resize_indices(size_in: int, size_out: int) -> np.ndarray:
    """libvmaf's nearest-neighbour source index of each output position along one axis: a float32 position
    starting at ``ratio/2 - 0.5`` and advanced by repeated float32 addition of ``ratio = in/out``, taken as
    ``(int)(pos + 0.5)``. ``(size_out,)`` int64; the identity when the sizes are equal."""
    if size_in == size_out:
        return np.arange(size_out, dtype=np.int64)
    ratio = np.float32(np.float32(size_in) / np.float32(size_out))
    pos = np.float32(np.float64(ratio / np.float32(2)) - 0.5)
    out = np.empty(size_out, dtype=np.int64)
    for i in range(size_out):
        out[i] = int(np.float64(pos) + 0.5)
        pos = np.float32(pos + ratio)
    return out
