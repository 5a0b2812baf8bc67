"""libvmaf 3.2.0's ``float_vif`` (``vif.c``, ``vif_tools.c``), float32 operation by operation: the twin.

Per frame pair (float luma from :func:`~.common_twin.to_vmaf_float`), four scales. Scale ``s`` uses a Gaussian of
``size_s = max(odd_ceil((2**(4-s) + 1) * kernelscale), 3)`` taps (17, 9, 5, 3 by default) with
``sigma = size_s / 5``, built in float32 as libvmaf builds it (:func:`vif_filter`). Before scale ``s > 0`` both
images are filtered with scale ``s``'s filter and every second row and column kept (``floor(n/2)``).

At each scale, with the filter ``F``: ``mu1 = F*x``, ``mu2 = F*y``, ``xx = F*(x*x)``, ``yy``, ``xy`` alike
(:func:`~.common_twin.separable_filter`), then per pixel in float32 (``eps = 1e-10f``, ``snsq`` the double
``vif_sigma_nsq``)::

    s1 = max(xx - mu1*mu1, 0); s2 = max(yy - mu2*mu2, 0); s12 = xy - mu1*mu2
    g = s12 / (s1 + eps); sv = s2 - g*s12
    if s1 < eps: g = 0, sv = s2, s1 = 0;   if s2 < eps: g = 0, sv = 0;   if g < 0: sv = s2, g = 0
    sv = max(sv, eps); g = min(g, float(gain_limit))
    num = log2f(float(1 + double(g*g*s1) / (double(sv) + snsq)));  den = log2f(float(1 + double(s1) / snsq))
    if s12 < 0: num = 0;   if s1 < snsq: num = 1 - s2 * float(powf(snsq, 2) / 65025), den = 1

``log2f`` is libvmaf's polynomial approximation (:func:`log2f_approx`). ``num`` and ``den`` of a scale are
:func:`~.common_twin.row_major_sum` of the maps (float32 values); the printed ``vif_scaleS`` is their quotient in
double (``max(., vif_scaleS_min_val)`` for S >= 1).
"""

from __future__ import annotations

import math

import torch

from fusedsim.families.vmaf_float.common_twin import f32, row_major_sum, separable_filter, to_vmaf_float

__all__ = ["LOG2_POLY", "VALID_KERNELSCALES", "float_vif_ref", "log2f_approx", "min_vif_size", "vif_filter",
           "vif_filter_size"]

N_SCALES = 4
EPS = 1.0e-10
#: libvmaf's ``log2_poly_s`` (float32), highest power first; evaluated at ``m - 1`` for ``x = m * 2**e``.
LOG2_POLY = (-0.012671635276421, 0.064841182402670, -0.157048836463065, 0.257167726303123, -0.353800560300520,
             0.480131410397451, -0.721314327952201, 1.442694803896991, 0.0)
#: ``vif_kernelscale`` values libvmaf accepts (``vif_tools.h``, float32; matched within 1e-3).
VALID_KERNELSCALES = (1.0, 1.0 / 2.0, 3.0 / 2.0, 2.0, 2.0 / 3.0, 24.0 / 10.0, 360.0 / 97.0, 4.0 / 3.0, 3.5 / 3.0,
                      3.75 / 3.0, 4.25 / 3.0, 5.0 / 3.0, 3.0, 1.0 / 2.25, 1.4746, 1.54, 1.6, 1.06667, 0.711111,
                      0.740740, 1.111111)


def vif_filter_size(scale: int, kernelscale: float) -> int:
    """Taps of scale ``scale``'s filter: ``max(odd_ceil(float32(2**(4-scale)+1) * float32(kernelscale)), 3)``."""
    f = float(torch.tensor((1 << (4 - scale)) + 1, dtype=torch.float32) * torch.tensor(kernelscale, dtype=torch.float32))
    c = math.ceil(f)
    return max(c + 1 if c % 2 == 0 else c, 3)


def vif_filter(scale: int, kernelscale: float) -> torch.Tensor:
    """libvmaf's float32 Gaussian of scale ``scale`` (``get_1d_gaussian_kernel``): ``(size,)`` float32.

    ``stdev = float32(size) / 5``; each tap ``float(exp(((-0.5 * x) / sd) * x / sd)) / float(1 / (sd * sqrt(2 pi)))``
    in float32 (the exponent and the normaliser in double); the taps are then divided by their float32 sum."""
    size = vif_filter_size(scale, kernelscale)
    sd32 = f32([size])[0] / f32([5.0])[0]
    sd = float(sd32)
    half = (size - 1) // 2
    taps = []
    for i in range(size):
        x = float(i - half)
        num = f32([math.exp(-0.5 * x / sd * x / sd)])[0]
        den = f32([1.0 / (sd * math.sqrt(2 * math.pi))])[0]
        taps.append(num / den)
    total = torch.zeros((), dtype=torch.float32)
    for t in taps:
        total = total + t
    return torch.stack([t / total for t in taps])


def min_vif_size(kernelscale: float) -> int:
    """Smallest frame side libvmaf's single mirror can filter at every scale (each scale's side is at least half
    its filter plus one; the sides halve three times)."""
    need = 1
    for scale in range(N_SCALES):
        half = vif_filter_size(scale, kernelscale) // 2
        need = max(need, (half + 1) << scale)
        if scale > 0:  # the decimation filter of scale s reads scale s-1
            need = max(need, (half + 1) << (scale - 1))
    return need


def log2f_approx(x: torch.Tensor) -> torch.Tensor:
    """libvmaf's ``log2f_approx`` of float32 ``x >= 1`` (the callers' range): exponent plus a degree-8 polynomial
    of the mantissa minus one, Horner's rule in float32."""
    bits = x.view(torch.int32)
    exponent = (bits >> 23) & 0xFF
    mant = (bits & 0x7FFFFF) | 0x3F800000
    t = mant.view(torch.float32) - torch.ones((), dtype=torch.float32, device=x.device)
    poly = f32(LOG2_POLY, x.device)
    var = torch.zeros_like(x)
    for k in range(len(LOG2_POLY)):
        var = var * t + poly[k]
    return (exponent - 127).to(torch.float32) + var


def _statistics(mu1, mu2, xx, yy, xy, gain_limit: float, sigma_nsq: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pixel ``num`` and ``den`` maps (float32) of one scale."""
    dev = mu1.device
    zero = torch.zeros((), dtype=torch.float32, device=dev)
    one = torch.ones((), dtype=torch.float32, device=dev)
    eps = f32([EPS], dev)[0]
    square = float(f32([float(f32([sigma_nsq])[0]) ** 2])[0])  # powf(float(snsq), 2.0f)
    sigma_max_inv = f32([square / (255.0 * 255.0)], dev)[0]
    s1 = torch.clamp_min(xx - mu1 * mu1, 0.0)
    s2 = torch.clamp_min(yy - mu2 * mu2, 0.0)
    s12 = xy - mu1 * mu2
    g = s12 / (s1 + eps)
    sv = s2 - g * s12
    low1 = s1 < eps
    g = torch.where(low1, zero, g)
    sv = torch.where(low1, s2, sv)
    s1 = torch.where(low1, zero, s1)
    low2 = s2 < eps
    g = torch.where(low2, zero, g)
    sv = torch.where(low2, zero, sv)
    neg = g < 0
    sv = torch.where(neg, s2, sv)
    g = torch.where(neg, zero, g)
    sv = torch.maximum(sv, eps)
    g = torch.minimum(g, f32([gain_limit], dev)[0])
    num_arg = (1.0 + (g * g * s1).double() / (sv.double() + sigma_nsq)).to(torch.float32)
    den_arg = (1.0 + s1.double() / sigma_nsq).to(torch.float32)
    num = log2f_approx(num_arg)
    den = log2f_approx(den_arg)
    num = torch.where(s12 < 0, zero, num)
    flat = s1.double() < sigma_nsq
    num = torch.where(flat, one - s2 * sigma_max_inv, num)
    den = torch.where(flat, one, den)
    return num, den


def float_vif_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                  kernelscale: float = 1.0, sigma_nsq: float = 2.0, skip_scale0: int = 0) -> torch.Tensor:
    """libvmaf's float VIF ``num`` and ``den`` per scale of integer frames ``(N, H, W)``: ``(N, 8)`` float64
    (float32 values) ``[num0, den0, ..., num3, den3]``; with ``skip_scale0`` scale 0 is ``(0, -1)`` as libvmaf
    prints it. Inputs are assumed checked (:func:`fusedsim.families.vmaf_float.api.float_vif` does that)."""
    x = to_vmaf_float(ref, bit_depth)
    y = to_vmaf_float(dist, bit_depth)
    out = torch.empty(x.shape[0], 2 * N_SCALES, dtype=torch.float64, device=x.device)
    for scale in range(N_SCALES):
        taps = vif_filter(scale, kernelscale).to(x.device)
        if scale > 0:
            h, w = x.shape[-2] // 2, x.shape[-1] // 2  # libvmaf keeps floor(n/2); the stepped filter ceil(n/2)
            x = separable_filter(x, taps, step=2)[..., :h, :w]
            y = separable_filter(y, taps, step=2)[..., :h, :w]
        if skip_scale0 and scale == 0:
            out[:, 0], out[:, 1] = 0.0, -1.0
            continue
        mu1 = separable_filter(x, taps)
        mu2 = separable_filter(y, taps)
        xx = separable_filter(x, taps, products=x)
        yy = separable_filter(y, taps, products=y)
        xy = separable_filter(x, taps, products=y)
        num, den = _statistics(mu1, mu2, xx, yy, xy, gain_limit, sigma_nsq)
        out[:, 2 * scale] = row_major_sum(num).double()
        out[:, 2 * scale + 1] = row_major_sum(den).double()
    return out
