"""libvmaf 3.2.0's ``ciede`` feature (``ciede.c``, after av-metrics), bit for bit up to the C library's
transcendental functions: the PyTorch twin and the specification.

Per frame pair:

* **Chroma to luma size**, as libvmaf's ``scale_chroma_planes`` does (nearest neighbour): 4:2:0 reads
  ``c[i // 2][j // 2]``; 4:4:4 reads ``c[i][j]``; **4:2:2 reads ``flat[(i // 2) * stride + j]``**, with ``flat`` the
  chroma plane laid out in rows of ``stride = align32(w / 2)`` samples, zero-padded (libvmaf's picture layout:
  its 4:2:2 path steps rows as for 4:2:0 and columns as for 4:4:4, so it reads across row ends).
* **Per pixel** ``(Y, U, V)`` of each frame, in double unless a C ``float`` stores the value (:func:`lab_ref`):
  BT.709 limited range to R'G'B' (``s = 2^(bpc-8)``: ``y = (Y - 16s) / (219s)``, ``u, v = (U|V - 128s) / (224s)``,
  ``R = y + 1.28033v``, ``G = y - 0.21482u - 0.38059v``, ``B = y + 2.12798u``), sRGB decoding
  (``c > 10/255``: ``((c + 0.055) / 1.055)^2.4``, else ``c / 12.92``), XYZ (sRGB D65 matrix), and CIE Lab with
  ``f(t) = t^(1/3)`` above ``216/24389`` else ``(24389/27 t + 16) / 116``, each ``f`` stored as float32 and
  ``L, a, b`` as float32.
* **CIEDE2000** (:func:`ciede2000_ref`, ``kL = 0.65, kC = 1, kH = 4``) in libvmaf's mixed float32/double arithmetic.
* ``ciede2000 = 45 - 20 * log10(sum(dE) / (w * h))``, the sum one double running sum in raster order.

``powf(c, 7)`` is the C library's (through ``ctypes``); ``powf(d, 2)`` is the correctly rounded square. The
other transcendental functions (``pow``, ``atan2``, ``sin``, ``cos``, ``exp``) are torch's here and the C library's
in libvmaf; they round a float32 result differently only when a double lands within an ulp of a float32 rounding
boundary. libvmaf takes bit depths 8, 10, 12 and 16.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections.abc import Callable

import numpy as np
import torch

from fusedsim.families.vmaf.sequential_sum_twin import sequential_sum_ref

__all__ = ["BIT_DEPTHS", "K_C", "K_H", "K_L", "ciede2000_ref", "ciede_de_sum_ref", "ciede_score", "lab_ref",
           "libvmaf_chroma_full"]

BIT_DEPTHS = (8, 10, 12, 16)
K_L, K_C, K_H = 0.65, 1.0, 4.0  # stored as float32 in libvmaf
_F32, _F64 = torch.float32, torch.float64
PI = math.pi
_25_POW_7 = 25.0 ** 7  # exact in double


def _f(x: torch.Tensor) -> torch.Tensor:
    """A double stored in a C ``float``."""
    return x.to(_F32)


def _d(x: torch.Tensor) -> torch.Tensor:
    """A float promoted to double."""
    return x.to(_F64)


@functools.cache
def _c_powf() -> Callable[[float, float], float] | None:
    """The C library's float32 ``powf`` (not correctly rounded: glibc's differs from the rounded double ``pow``
    for about 7 in 10,000 arguments), or None where none can be loaded."""
    name = ctypes.util.find_library("m")
    try:
        powf = ctypes.CDLL(name).powf if name else None
    except (OSError, AttributeError):
        return None
    if powf is not None:
        powf.restype, powf.argtypes = ctypes.c_float, [ctypes.c_float, ctypes.c_float]
    return powf


def _powf(x: torch.Tensor, y: float) -> torch.Tensor:
    """C's ``powf(x, y)`` of a float32 tensor, once per distinct value (the rounded double ``pow`` without a C
    library)."""
    powf = _c_powf()
    if powf is None:
        return _f(torch.pow(_d(x), y))
    keys, inverse = np.unique(x.numpy().reshape(-1), return_inverse=True)
    values = np.fromiter((powf(v, y) for v in keys.tolist()), np.float32, len(keys))
    return torch.from_numpy(values[inverse].reshape(x.shape))


def _srgb_decode(c: torch.Tensor) -> torch.Tensor:
    return torch.where(c > 10.0 / 255.0, torch.pow((c + 0.055) * (1.0 / 1.055), 2.4), c * (1.0 / 12.92))


def _lab_f(c: torch.Tensor) -> torch.Tensor:
    kappa, epsilon = 24389.0 / 27.0, 216.0 / 24389.0
    return _f(torch.where(c > epsilon, torch.pow(c, 1.0 / 3.0), (kappa * c + 16.0) * (1.0 / 116.0)))


def lab_ref(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, bit_depth: int) -> tuple[torch.Tensor, ...]:
    """libvmaf's ``get_lab_color`` of integer samples (any shape): float32 ``(L, a, b)``."""
    scale = float(1 << (bit_depth - 8))
    y = (_d(y) - 16.0 * scale) * (1.0 / (219.0 * scale))
    u = (_d(u) - 128.0 * scale) * (1.0 / (224.0 * scale))
    v = (_d(v) - 128.0 * scale) * (1.0 / (224.0 * scale))
    r = _srgb_decode(y + 1.28033 * v)
    g = _srgb_decode(y - 0.21482 * u - 0.38059 * v)
    b = _srgb_decode(y + 2.12798 * u)
    x = r * 0.4124564390896921 + g * 0.357576077643909 + b * 0.18043748326639894
    yy = r * 0.21267285140562248 + g * 0.715152155287818 + b * 0.07217499330655958
    z = r * 0.019333895582329317 + g * 0.119192025881303 + b * 0.9503040785363677
    fx, fy, fz = _d(_lab_f(x * (1.0 / 0.95047))), _d(_lab_f(yy)), _d(_lab_f(z * (1.0 / 1.08883)))
    return _f(116.0 * fy - 16.0), _f(500.0 * (fx - fy)), _f(200.0 * (fy - fz))


def _hue(b: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``get_h_prime(b, a')``: ``atan2(b, a')`` in [0, 2 pi) as float32 (0 where both are 0)."""
    angle = _f(torch.atan2(_d(b), _d(a)))
    angle = torch.where(angle < 0.0, _f(_d(angle) + 2.0 * PI), angle)
    return torch.where((b == 0) & (a == 0), torch.zeros_like(angle), angle)


def ciede2000_ref(lab1: tuple[torch.Tensor, ...], lab2: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """libvmaf's ``ciede2000`` of float32 Lab colours (any shape): float32 dE00."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    two = torch.tensor(2.0, dtype=_F32)
    delta_l = l2 - l1
    l_bar = (l1 + l2) / two
    c1 = _f(torch.sqrt(_d(a1) ** 2 + _d(b1) ** 2))
    c2 = _f(torch.sqrt(_d(a2) ** 2 + _d(b2) ** 2))
    c_bar = (c1 + c2) / two
    c_bar7 = torch.pow(_d(c_bar), 7.0)
    g = 1.0 - torch.sqrt(c_bar7 / (c_bar7 + _25_POW_7))
    a1p = _f(_d(a1) + _d(a1 / two) * g)
    a2p = _f(_d(a2) + _d(a2 / two) * g)
    c1p = _f(torch.sqrt(_d(a1p) ** 2 + _d(b1) ** 2))
    c2p = _f(torch.sqrt(_d(a2p) ** 2 + _d(b2) ** 2))
    c_bar_p = (c1p + c2p) / two
    delta_c = c2p - c1p
    l50 = _d(l_bar - torch.tensor(50.0, dtype=_F32)) ** 2
    s_l = _f(1.0 + (0.015 * l50) / torch.sqrt(20.0 + l50))
    s_c = _f(1.0 + 0.045 * _d(c_bar_p))
    h1, h2 = _hue(b1, a1p), _hue(b2, a2p)
    dh = h2 - h1
    delta_h = torch.where(_d(torch.abs(dh)) <= PI, dh,  # C compares in double (torch would round PI to float32)
                          torch.where(h2 <= h1, _f(_d(dh) + 2.0 * PI), _f(_d(dh) - 2.0 * PI)))
    delta_h = torch.where((c1 == 0) | (c2 == 0), torch.zeros_like(delta_h), delta_h)
    delta_upper_h = _f(2.0 * torch.sqrt(_d(c1p * c2p)) * torch.sin(_d(delta_h) / 2.0))
    hsum = _d(h1 + h2)
    h_bar = _f(torch.where(torch.abs(_d(h1 - h2)) > PI, (hsum + 2.0 * PI) / 2.0, hsum / 2.0))
    hb = _d(h_bar)
    t = _f(1.0 - 0.17 * torch.cos(hb - PI / 6.0) + 0.24 * torch.cos(2.0 * hb)
           + 0.32 * torch.cos(3.0 * hb + PI / 30.0) - 0.20 * torch.cos(4.0 * hb - 7.0 * PI / 20.0))
    s_h = _f(1.0 + 0.015 * _d(c_bar_p) * _d(t))
    # get_r_sub_t: float32 powf, a float-typed degrees_to_radians argument
    degrees = _f((_d(_f(hb * (180.0 / PI))) - 275.0) * (1.0 / 25.0))
    cp7 = _powf(c_bar_p, 7.0)
    ratio = cp7 / (cp7 + torch.tensor(_25_POW_7, dtype=_F32))
    bump = _f(60.0 * torch.exp(-_d(_f(_d(degrees) ** 2))))
    r_t = _f(-2.0 * torch.sqrt(_d(ratio)) * torch.sin(_d(_f(_d(bump) * (PI / 180.0)))))
    lightness = delta_l / (torch.tensor(K_L, dtype=_F32) * s_l)
    chroma = delta_c / (torch.tensor(K_C, dtype=_F32) * s_c)
    hue = delta_upper_h / (torch.tensor(K_H, dtype=_F32) * s_h)
    return _f(torch.sqrt(_d(lightness) ** 2 + _d(chroma) ** 2 + _d(hue) ** 2 + _d(r_t * chroma * hue)))


def libvmaf_chroma_full(c: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """A chroma plane ``(N, hc, wc)`` brought to luma size ``(N, h, w)`` as libvmaf's ciede does (see the module
    docstring); the layout follows from the sizes: ``hc = h`` and ``wc = w`` is 4:4:4, ``wc = w // 2`` with
    ``hc = h`` is 4:2:2, else 4:2:0 (``hc >= ceil(h/2) - 1``... read as ``c[i // 2][j // 2]``)."""
    n, hc, wc = c.shape
    if hc == h and wc == w:
        return c
    if c.dtype == torch.uint16:  # CUDA cannot index or fill uint16; the samples fit int32 exactly
        c = c.to(torch.int32)
    rows = torch.arange(h, device=c.device) // 2
    if hc == h:  # 4:2:2: libvmaf's row walk of 4:2:0 over zero-padded rows of align32(wc) samples
        stride = (wc + 31) & ~31
        flat = torch.zeros(n, h * stride, dtype=c.dtype, device=c.device)
        flat.view(n, h, stride)[:, :, :wc] = c
        index = rows[:, None] * stride + torch.arange(w, device=c.device)[None, :]
        return flat[:, index]
    cols = torch.arange(w, device=c.device) // 2
    return c[:, rows[:, None], cols[None, :]]


def ciede_de_sum_ref(ref_y: torch.Tensor, ref_u: torch.Tensor, ref_v: torch.Tensor, dist_y: torch.Tensor,
                     dist_u: torch.Tensor, dist_v: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """libvmaf's per-frame sum of dE00 over all pixels of luma-size integer planes, each ``(N, H, W)``: ``(N,)``
    float64 on the inputs' device, the double running sum in raster order."""
    n = ref_y.shape[0]
    lab1 = lab_ref(*(p.detach().cpu() for p in (ref_y, ref_u, ref_v)), bit_depth)
    lab2 = lab_ref(*(p.detach().cpu() for p in (dist_y, dist_u, dist_v)), bit_depth)
    de = ciede2000_ref(lab1, lab2)
    return sequential_sum_ref(_d(de).reshape(n, -1)).to(ref_y.device)


def ciede_score(de_sum: float, pixels: int) -> float:
    """``45 - 20 * log10(sum / pixels)`` in double (``+inf`` for identical frames, printed ``null`` by libvmaf)."""
    if de_sum == 0.0:
        return math.inf
    return 45.0 - 20.0 * math.log10(de_sum / float(pixels))
