"""libvmaf's CIEDE2000 in Triton: one lane per pixel computes both Lab colours and dE00 in libvmaf's mixed
float32/double arithmetic (every C promotion written out: a Python constant would take a float32 tensor's type in
Triton, not double as in C; ``div_rn`` for float32 divisions; ``enable_fp_fusion=False``), CUDA's ``pow``,
``atan2``, ``sin``, ``cos`` and ``exp`` for the C library's, and for its float32 ``powf(c, 7)`` the double ``pow``
rounded to float32 (glibc's ``powf`` is not correctly rounded: they differ for about 7 in 10,000 arguments). The
per-pixel dE00 are then summed in one double running sum per frame by
:func:`~fusedsim.families.vmaf.sequential_sum_kernel.sequential_sum_fwd`, bit for bit.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import on_tensors_device
from fusedsim.families.ciede.ops import ciede_de_sum
from fusedsim.families.vmaf.ops import sequential_sum

__all__ = ["ciede_de_fwd", "ciede_de_sum_fwd"]

if triton_interpreting():  # the interpreter cannot call libdevice
    from fusedsim.families.ciede import interpreter_math as libdevice
else:
    from triton.language.extra import libdevice

_PI = math.pi
_TWO_PI = 2.0 * math.pi
_25_POW_7 = 25.0 ** 7


@triton.jit
def _pow(x, y: tl.constexpr):
    """Double ``pow(x, y)``: the exponent as a double tensor (libdevice dispatches on both argument types, and a
    bare Python float would become a float32 constant)."""
    return libdevice.pow(x, tl.full(x.shape, y, tl.float64))


@triton.jit
def _srgb_decode(c):
    return tl.where(c > 10.0 / 255.0, _pow((c + 0.055) * (1.0 / 1.055), 2.4), c * (1.0 / 12.92))


@triton.jit
def _lab_f(c):
    big = _pow(tl.maximum(c, 0.0), 1.0 / 3.0)
    return tl.where(c > 216.0 / 24389.0, big, (24389.0 / 27.0 * c + 16.0) * (1.0 / 116.0)).to(tl.float32)


@triton.jit
def _lab(y_ptr, u_ptr, v_ptr, offs, live, scale: tl.constexpr):
    y = tl.load(y_ptr + offs, mask=live, other=0).to(tl.float64)
    u = tl.load(u_ptr + offs, mask=live, other=0).to(tl.float64)
    v = tl.load(v_ptr + offs, mask=live, other=0).to(tl.float64)
    y = (y - 16.0 * scale) * (1.0 / (219.0 * scale))
    u = (u - 128.0 * scale) * (1.0 / (224.0 * scale))
    v = (v - 128.0 * scale) * (1.0 / (224.0 * scale))
    r = _srgb_decode(y + 1.28033 * v)
    g = _srgb_decode(y - 0.21482 * u - 0.38059 * v)
    b = _srgb_decode(y + 2.12798 * u)
    x = r * 0.4124564390896921 + g * 0.357576077643909 + b * 0.18043748326639894
    yy = r * 0.21267285140562248 + g * 0.715152155287818 + b * 0.07217499330655958
    z = r * 0.019333895582329317 + g * 0.119192025881303 + b * 0.9503040785363677
    fx = _lab_f(x * (1.0 / 0.95047)).to(tl.float64)
    fy = _lab_f(yy).to(tl.float64)
    fz = _lab_f(z * (1.0 / 1.08883)).to(tl.float64)
    return (116.0 * fy - 16.0).to(tl.float32), (500.0 * (fx - fy)).to(tl.float32), (200.0 * (fy - fz)).to(tl.float32)


@triton.jit
def _hue(b, a):
    angle = libdevice.atan2(b.to(tl.float64), a.to(tl.float64)).to(tl.float32)
    angle = tl.where(angle < 0.0, (angle.to(tl.float64) + 6.283185307179586).to(tl.float32), angle)
    return tl.where((b == 0.0) & (a == 0.0), 0.0, angle)


@triton.jit
def _de00(l1, a1, b1, l2, a2, b2):
    PI: tl.constexpr = 3.141592653589793
    delta_l = l2 - l1
    l_bar = tl.div_rn(l1 + l2, 2.0)
    c1 = tl.sqrt(a1.to(tl.float64) * a1.to(tl.float64) + b1.to(tl.float64) * b1.to(tl.float64)).to(tl.float32)
    c2 = tl.sqrt(a2.to(tl.float64) * a2.to(tl.float64) + b2.to(tl.float64) * b2.to(tl.float64)).to(tl.float32)
    c_bar = tl.div_rn(c1 + c2, 2.0)
    c_bar7 = _pow(c_bar.to(tl.float64), 7.0)
    g = 1.0 - tl.sqrt(c_bar7 / (c_bar7 + 6103515625.0))
    a1p = (a1.to(tl.float64) + tl.div_rn(a1, 2.0).to(tl.float64) * g).to(tl.float32)
    a2p = (a2.to(tl.float64) + tl.div_rn(a2, 2.0).to(tl.float64) * g).to(tl.float32)
    c1p = tl.sqrt(a1p.to(tl.float64) * a1p.to(tl.float64) + b1.to(tl.float64) * b1.to(tl.float64)).to(tl.float32)
    c2p = tl.sqrt(a2p.to(tl.float64) * a2p.to(tl.float64) + b2.to(tl.float64) * b2.to(tl.float64)).to(tl.float32)
    c_bar_p = tl.div_rn(c1p + c2p, 2.0)
    delta_c = c2p - c1p
    lm = (l_bar - 50.0).to(tl.float64)
    l50 = lm * lm
    s_l = (1.0 + (0.015 * l50) / tl.sqrt(20.0 + l50)).to(tl.float32)
    s_c = (1.0 + 0.045 * c_bar_p.to(tl.float64)).to(tl.float32)
    h1 = _hue(b1, a1p)
    h2 = _hue(b2, a2p)
    dh = h2 - h1
    wrapped = tl.where(h2 <= h1, (dh.to(tl.float64) + 2.0 * PI).to(tl.float32),
                       (dh.to(tl.float64) - 2.0 * PI).to(tl.float32))
    delta_h = tl.where(tl.abs(dh).to(tl.float64) <= PI, dh, wrapped)
    delta_h = tl.where((c1 == 0.0) | (c2 == 0.0), 0.0, delta_h)
    delta_upper_h = (2.0 * tl.sqrt((c1p * c2p).to(tl.float64))
                     * libdevice.sin(delta_h.to(tl.float64) / 2.0)).to(tl.float32)
    hsum = (h1 + h2).to(tl.float64)
    h_bar = tl.where(tl.abs((h1 - h2).to(tl.float64)) > PI, (hsum + 2.0 * PI) / 2.0, hsum / 2.0).to(tl.float32)
    hb = h_bar.to(tl.float64)
    t = (1.0 - 0.17 * libdevice.cos(hb - PI / 6.0) + 0.24 * libdevice.cos(2.0 * hb)
         + 0.32 * libdevice.cos(3.0 * hb + PI / 30.0) - 0.20 * libdevice.cos(4.0 * hb - 7.0 * PI / 20.0)).to(tl.float32)
    s_h = (1.0 + 0.015 * c_bar_p.to(tl.float64) * t.to(tl.float64)).to(tl.float32)
    degrees = (((hb * (180.0 / PI)).to(tl.float32).to(tl.float64) - 275.0) * (1.0 / 25.0)).to(tl.float32)
    cp7 = _pow(c_bar_p.to(tl.float64), 7.0).to(tl.float32)  # powf, via a double rounded once
    ratio = tl.div_rn(cp7, cp7 + 6103515648.0)  # powf(25, 7) in float32
    dd = degrees.to(tl.float64)
    bump = (60.0 * libdevice.exp(-((dd * dd).to(tl.float32).to(tl.float64)))).to(tl.float32)
    rad = (bump.to(tl.float64) * (PI / 180.0)).to(tl.float32)
    r_t = (-2.0 * tl.sqrt(ratio.to(tl.float64)) * libdevice.sin(rad.to(tl.float64))).to(tl.float32)
    lightness = tl.div_rn(delta_l, 0.65 * s_l)
    chroma = tl.div_rn(delta_c, 1.0 * s_c)
    hue = tl.div_rn(delta_upper_h, 4.0 * s_h)
    ld = lightness.to(tl.float64)
    cd = chroma.to(tl.float64)
    hd = hue.to(tl.float64)
    return tl.sqrt(ld * ld + cd * cd + hd * hd + (r_t * chroma * hue).to(tl.float64)).to(tl.float32)


@triton.jit
def _ciede_kernel(ry, ru, rv, dy, du, dv, out_ptr, HW, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    f = tl.program_id(1).to(tl.int64)
    p = pid * BLOCK + tl.arange(0, BLOCK)
    live = p < HW
    offs = f * HW + p
    l1, a1, b1 = _lab(ry, ru, rv, offs, live, SCALE)
    l2, a2, b2 = _lab(dy, du, dv, offs, live, SCALE)
    tl.store(out_ptr + offs, _de00(l1, a1, b1, l2, a2, b2).to(tl.float64), mask=live)


def _flat(x: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.uint16:
        x = x.to(torch.int32)
    return x.contiguous()


@on_tensors_device
def ciede_de_fwd(ref_y: torch.Tensor, ref_u: torch.Tensor, ref_v: torch.Tensor, dist_y: torch.Tensor,
                 dist_u: torch.Tensor, dist_v: torch.Tensor, bit_depth: int, block: int | None = None) -> torch.Tensor:
    """dE00 of every pixel of luma-size planes ``(N, H, W)``: ``(N, H*W)`` float64 (float32 values)."""
    n, h, w = ref_y.shape
    out = torch.empty(n, h * w, dtype=torch.float64, device=ref_y.device)
    if out.numel() == 0:
        return out
    planes = [_flat(p) for p in (ref_y, ref_u, ref_v, dist_y, dist_u, dist_v)]
    blk = block or (triton.next_power_of_2(h * w) if triton_interpreting() else 256)
    _ciede_kernel[(triton.cdiv(h * w, blk), n)](*planes, out, h * w, SCALE=float(1 << (bit_depth - 8)), BLOCK=blk,
                                                num_warps=4, enable_fp_fusion=False)
    return out


@ciede_de_sum.triton_launcher
def ciede_de_sum_fwd(ref_y: torch.Tensor, ref_u: torch.Tensor, ref_v: torch.Tensor, dist_y: torch.Tensor,
                     dist_u: torch.Tensor, dist_v: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """Per-frame dE00 sums of luma-size planes on their device: ``(N,)`` float64 (the twin's contract)."""
    return sequential_sum(ciede_de_fwd(ref_y, ref_u, ref_v, dist_y, dist_u, dist_v, bit_depth))
