"""PyTorch twin of DSSIM (kornelski/dssim 3.5.0, dssim-core): the specification, the CPU path and the test oracle.

Pipeline per image pair (every step differentiable):

1. sRGB -> linear light with the exact piecewise curve (for uint8 input the same values as dssim's f32 LUT);
   alpha, when given, premultiplies the linear RGB.
2. Pyramid of up to 5 scales: each next scale is the 2x2 box average of the previous one in linear
   (premultiplied) RGB and alpha, floor size (an odd last row/column is dropped); it is made only while the
   current scale is at least 8 px in both directions, so the last scale may be 4..7 px.
3. Per scale, linear RGB -> dssim's scaled L*a*b*: XYZ (sRGB matrix, D65 (0.9505, 1, 1.089)), the Lab curve with
   dssim's cube root (polynomial guess + 2 Halley steps), ``L = 1.05 fY``, ``a = 500/220 (fX - fY) + 86.2/220``,
   ``b = 200/220 (fY - fZ) + 107.9/220``. Non-opaque pixels first get ``1 - alpha`` added to R, G and/or B by
   bits 16, 8, 32 of ``(x + 11) ^ (y + 11)`` (a pseudo-checkerboard background).
4. The blur is dssim's 3x3 kernel applied twice with clamp-to-edge, i.e. the separable 3-tap [S, C, S] twice per
   axis, which equals the 5-tap [S², 2SC, 2S² + C², 2SC, S²] over a half-sample-symmetric padding of 2 px
   (``... p1 p0 | p0 p1 ...``). The a and b channels are blurred once on their own before the statistics.
5. SSIM map from mu, E[x²], E[xy] of the three channels, averaged over the channels *before* the formula
   (c1 = 1e-4, c2 = 9e-4).
6. Scale n pools as ``1 - mean|avg - map|`` with ``avg = max(mean(map), 0) ** (0.5 ** n)``; the scales are
   combined with the weights [0.028, 0.197, 0.322, 0.298, 0.155] renormalised over the scales present;
   DSSIM = 1 / ssim - 1.

The twin computes in the dtype it is given (float32 like dssim; float64 for gradient checks). Constants are the
f32 values dssim uses.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "SCALE_WEIGHTS", "composite_ref", "dssim_blur_ref", "dssim_combine_ref", "dssim_downsample_ref",
    "dssim_lab_op_ref", "dssim_lab_ref", "dssim_pool_ref", "dssim_prep_ref", "dssim_prepare_scales_ref",
    "dssim_ref", "dssim_scale_sizes", "dssim_srgb8_half_ref", "dssim_srgb8_prep_ref", "dssim_ssim_map_ref",
    "lab_of_linear_ref", "srgb8_table_ref", "srgb8_to_linear_ref", "srgb_to_linear_ref",
]

SCALE_WEIGHTS = (0.028, 0.197, 0.322, 0.298, 0.155)
MIN_DOWNSAMPLE = 8  # a scale is halved only while both sides are at least this


def _f32(value: float) -> float:
    """The float32 rounding of ``value`` (dssim's constants are f32)."""
    return float(torch.tensor(value, dtype=torch.float32))


def _f32_div(a: float, b: float) -> float:
    return float(torch.tensor(a, dtype=torch.float32) / torch.tensor(b, dtype=torch.float32))


_SIDE, _CENTER = _f32(0.30875886), _f32(0.3824828)
_S, _C = torch.tensor(_SIDE, dtype=torch.float32), torch.tensor(_CENTER, dtype=torch.float32)
BLUR_OUTER = float(_S * _S)
BLUR_INNER = float(2.0 * _S * _C)
BLUR_MID = float(2.0 * _S * _S + _C * _C)

_D65 = (0.9505, 1.0, 1.089)
_RGB_TO_XYZ = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
#: The XYZ matrix divided by the white point, rounded to f32 as dssim's constant expressions are.
XYZ_MATRIX = tuple(tuple(_f32_div(c, _D65[row]) for c in coefs) for row, coefs in enumerate(_RGB_TO_XYZ))
LAB_EPSILON = _f32_div(216.0, 24389.0)
LAB_KAPPA = _f32_div(24389.0, 27.0 * 116.0)
LAB_OFFSET = _f32_div(16.0, 116.0)
L_SCALE = _f32(1.05)
A_SCALE, A_OFFSET = _f32_div(500.0, 220.0), _f32_div(86.2, 220.0)
B_SCALE, B_OFFSET = _f32_div(200.0, 220.0), _f32_div(107.9, 220.0)
C1 = float(torch.tensor(0.01, dtype=torch.float32) ** 2)
C2 = float(torch.tensor(0.03, dtype=torch.float32) ** 2)
INV3 = _f32_div(1.0, 3.0)


GAMMA = _f32(2.4)
_SRGB_A, _SRGB_B, _SRGB_KNEE, _SRGB_SLOPE = _f32(0.055), _f32(1.055), _f32(0.04045), _f32(12.92)
CBRT_C1, CBRT_C0 = _f32(1.51), _f32(0.2)  # the quadratic guess -0.5x² + 1.51x + 0.2


def _fma(a, b, c):
    """``a * b + c`` rounded once, as Rust's ``mul_add``: float32 operands are combined in float64 (where the
    product is exact) and rounded back; other dtypes compute it directly."""
    t = next(v for v in (a, b, c) if isinstance(v, torch.Tensor))
    if t.dtype != torch.float32:
        return a * b + c
    up = [v.double() if isinstance(v, torch.Tensor) else v for v in (a, b, c)]
    return (up[0] * up[1] + up[2]).float()


def srgb_to_linear_ref(x: torch.Tensor) -> torch.Tensor:
    """sRGB-encoded values in [0, 1] -> linear light (same shape and dtype); dssim's piecewise curve with its f32
    exponent, the power evaluated in float64 and rounded (for uint8/255 input: dssim's LUT values)."""
    base = ((x + _SRGB_A) / _SRGB_B).clamp_min(0.0)
    lin = (base.double() ** GAMMA).to(x.dtype)
    return torch.where(x <= _SRGB_KNEE, x / _SRGB_SLOPE, lin)


def srgb8_table_ref() -> torch.Tensor:
    """dssim's sRGB -> linear table for uint8 codes (256 float32 values): :func:`srgb_to_linear_ref` of u / 255 in
    float32, the values a uint8 image divided by 255 in float32 gets."""
    return srgb_to_linear_ref(torch.arange(256, dtype=torch.float32) / 255.0)


def srgb8_to_linear_ref(raw: torch.Tensor) -> torch.Tensor:
    """uint8 sRGB codes (any shape) -> float32 linear light by table look-up (bit-identical to
    :func:`srgb_to_linear_ref` of ``raw / 255`` in float32)."""
    lut = srgb8_table_ref().to(raw.device)
    return lut.index_select(0, raw.reshape(-1).to(torch.int32)).view(raw.shape)


def dssim_scale_sizes(height: int, width: int, scales: int = len(SCALE_WEIGHTS)) -> list[tuple[int, int]]:
    """(H, W) of every scale dssim computes for an image of ``height`` x ``width``."""
    sizes = [(height, width)]
    while len(sizes) < scales and min(sizes[-1]) >= MIN_DOWNSAMPLE:
        h, w = sizes[-1]
        sizes.append((h // 2, w // 2))
    return sizes


def dssim_downsample_ref(x: torch.Tensor) -> torch.Tensor:
    """2x2 box average of (N, C, H, W) -> (N, C, H // 2, W // 2), summed in dssim's order (a + b + c + d) / 4."""
    h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
    return (x[..., 0:h:2, 0:w:2] + x[..., 0:h:2, 1:w:2] + x[..., 1:h:2, 0:w:2] + x[..., 1:h:2, 1:w:2]) * 0.25


def _cbrt_poly(x: torch.Tensor) -> torch.Tensor:
    """dssim's cube root: a quadratic first guess and two Halley steps (not the exact cube root: ~5e-7 off)."""
    y = _fma(-0.5 * x + CBRT_C1, x, CBRT_C0)
    for _ in range(2):
        y3 = y * y * y
        y = y * (2.0 * x + y3) / (2.0 * y3 + x)  # 2x is exact: these are dssim's mul_adds
    return y


def _lab_curve(t: torch.Tensor) -> torch.Tensor:
    # the cube root only where it is used: keeps gradients finite on the linear branch
    safe = torch.where(t > LAB_EPSILON, t, torch.ones_like(t))
    return torch.where(t > LAB_EPSILON, _cbrt_poly(safe) - LAB_OFFSET, LAB_KAPPA * t)


def checkerboard_masks(height: int, width: int, device=None) -> torch.Tensor:
    """(3, H, W) booleans: which of R, G, B receive ``1 - alpha`` (bits 16, 8, 32 of (x + 11) ^ (y + 11))."""
    ys = torch.arange(height, device=device).view(-1, 1) + 11
    xs = torch.arange(width, device=device).view(1, -1) + 11
    n = torch.bitwise_xor(xs, ys)
    return torch.stack([(n & 16) != 0, (n & 8) != 0, (n & 32) != 0])


def dssim_lab_ref(lin: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
    """Linear (premultiplied) RGB (N, 3, H, W) [+ alpha (N, 1, H, W)] -> dssim's scaled Lab (N, 3, H, W)."""
    return lab_of_linear_ref(composite_ref(lin, alpha))


def composite_ref(lin: torch.Tensor, alpha: torch.Tensor | None) -> torch.Tensor:
    """Premultiplied linear RGB over dssim's pseudo-checkerboard (``lin`` itself without alpha)."""
    if alpha is None:
        return lin
    masks = checkerboard_masks(lin.shape[-2], lin.shape[-1], lin.device)
    return lin + masks.to(lin.dtype) * (1.0 - alpha)


def lab_of_linear_ref(lin: torch.Tensor) -> torch.Tensor:
    """Opaque linear RGB (N, 3, H, W) -> dssim's scaled Lab (N, 3, H, W)."""
    r, g, b = lin.unbind(1)
    m = XYZ_MATRIX
    f = torch.stack([_fma(b, m[i][2], _fma(g, m[i][1], r * m[i][0])) for i in range(3)], dim=1)
    x, y, z = _lab_curve(f).unbind(1)
    return torch.stack([y * L_SCALE, _fma(A_SCALE, x - y, A_OFFSET), _fma(B_SCALE, y - z, B_OFFSET)], dim=1)


def _symmetric_index(size: int, pad: int, device) -> torch.Tensor:
    """Indices of a half-sample-symmetric padding by ``pad`` (``p1 p0 | p0 p1 ... | p_last p_last-1``)."""
    idx = torch.arange(-pad, size + pad, device=device)
    period = 2 * size
    idx = torch.remainder(idx, period)
    return torch.where(idx >= size, period - 1 - idx, idx)


EDGE_CENTER = float(torch.tensor(BLUR_MID, dtype=torch.float32) + torch.tensor(BLUR_INNER, dtype=torch.float32))
EDGE_NEAR = float(torch.tensor(BLUR_OUTER, dtype=torch.float32) + torch.tensor(BLUR_INNER, dtype=torch.float32))


def _blur_axis(x: torch.Tensor, dim: int) -> torch.Tensor:
    """5-tap pass along ``dim`` in dssim's order: (p-2 + p+2)·O + (p-1 + p+1)·I + p·M inside, and the first and
    last samples with their folded weights (EDGE_CENTER, EDGE_NEAR, OUTER), which is the same value up to the
    rounding of another summation order."""
    size = x.shape[dim]
    xp = x.index_select(dim, _symmetric_index(size, 2, x.device))
    tap = [xp.narrow(dim, k, size) for k in range(5)]
    body = (tap[0] + tap[4]) * BLUR_OUTER + (tap[1] + tap[3]) * BLUR_INNER + tap[2] * BLUR_MID

    def at(i: int) -> torch.Tensor:
        return x.narrow(dim, min(max(i, 0), size - 1), 1)

    first = EDGE_CENTER * at(0) + EDGE_NEAR * at(1) + BLUR_OUTER * at(2)
    if size == 1:
        return first
    last = BLUR_OUTER * at(size - 3) + EDGE_NEAR * at(size - 2) + EDGE_CENTER * at(size - 1)
    return torch.cat([first, body.narrow(dim, 1, size - 2), last], dim=dim)


def dssim_blur_ref(x: torch.Tensor) -> torch.Tensor:
    """dssim's blur (3x3 kernel twice, clamp-to-edge) of every plane of (N, C, H, W): horizontal, then vertical."""
    return _blur_axis(_blur_axis(x, -1), -2)


Blur = Callable[[torch.Tensor], torch.Tensor]


def dssim_ssim_map_ref(lab1: torch.Tensor, lab2: torch.Tensor, blur: Blur = dssim_blur_ref) -> torch.Tensor:
    """SSIM map (N, H, W) of two Lab images (N, 3, H, W) whose a/b channels are already pre-blurred: blurred
    moments per channel, averaged over the channels, then the SSIM formula. ``blur``: :func:`dssim_blur_ref` or a
    compiled implementation of the same bits."""
    mu1, mu2 = blur(lab1), blur(lab2)
    sq1, sq2, cross = blur(lab1 * lab1), blur(lab2 * lab2), blur(lab1 * lab2)
    mu11, mu22, mu12 = mu1 * mu1, mu2 * mu2, mu1 * mu2

    def mean3(t: torch.Tensor) -> torch.Tensor:
        return (t[:, 0] + t[:, 1] + t[:, 2]) * INV3

    mu1_sq, mu2_sq, mu1_mu2 = mean3(mu11), mean3(mu22), mean3(mu12)
    sigma1_sq, sigma2_sq, sigma12 = mean3(sq1 - mu11), mean3(sq2 - mu22), mean3(cross - mu12)
    return ((2.0 * mu1_mu2 + C1) * (2.0 * sigma12 + C2)) / ((mu1_sq + mu2_sq + C1) * (sigma1_sq + sigma2_sq + C2))


def dssim_pool_ref(ssim_map: torch.Tensor, scale: int) -> torch.Tensor:
    """Score of one scale per image, float64 (N,): ``1 - mean|avg - map|``, ``avg = max(mean, 0) ** 0.5**scale``."""
    m = ssim_map.flatten(1).to(torch.float64)
    avg = m.mean(1).clamp_min(0.0) ** (0.5**scale)
    return 1.0 - (avg[:, None] - m).abs().mean(1)


def dssim_combine_ref(scores: list[torch.Tensor]) -> torch.Tensor:
    """DSSIM (N,) float64 from the per-scale scores: weighted mean over the scales present, 1 / ssim - 1."""
    weights = SCALE_WEIGHTS[: len(scores)]
    ssim = sum(w * s for w, s in zip(weights, scores)) / sum(weights)
    return 1.0 / ssim.clamp_min(torch.finfo(torch.float64).eps) - 1.0


def dssim_prep_ref(lin: torch.Tensor, alpha: torch.Tensor, has_alpha: bool, blur: Blur = dssim_blur_ref,
                   lab_of_linear: Blur = lab_of_linear_ref) -> torch.Tensor:
    """One scale's Lab (N, 3, H, W) with pre-blurred a/b, of linear RGB (N, 3, H, W) [+ alpha when ``has_alpha``]
    (the twin of the ``dssim_prep`` op). ``blur``, ``lab_of_linear``: the twins or compiled implementations of the
    same bits."""
    lab = lab_of_linear(composite_ref(lin, alpha if has_alpha else None))
    return torch.cat([lab[:, :1], blur(lab[:, 1:])], dim=1)


def dssim_srgb8_prep_ref(raw: torch.Tensor, blur: Blur = dssim_blur_ref,
                         lab_of_linear: Blur = lab_of_linear_ref) -> torch.Tensor:
    """:func:`dssim_prep_ref` of uint8 sRGB codes (N, 3, H, W), linearised by dssim's table (float32)."""
    lin = srgb8_to_linear_ref(raw)
    return dssim_prep_ref(lin, lin, False, blur, lab_of_linear)


def dssim_srgb8_half_ref(raw: torch.Tensor) -> torch.Tensor:
    """The next scale's linear RGB (N, 3, H // 2, W // 2), float32, of uint8 sRGB codes (N, 3, H, W)."""
    return dssim_downsample_ref(srgb8_to_linear_ref(raw))


def dssim_prepare_scales_ref(lin: torch.Tensor, alpha: torch.Tensor | None = None) -> list[torch.Tensor]:
    """One image's side of the comparison: per scale its Lab with pre-blurred a/b, each (N, 3, H_s, W_s)."""
    out = []
    for s, _ in enumerate(dssim_scale_sizes(lin.shape[-2], lin.shape[-1])):
        if s:
            lin = dssim_downsample_ref(lin)
            alpha = dssim_downsample_ref(alpha) if alpha is not None else None
        out.append(dssim_prep_ref(lin, alpha if alpha is not None else lin, alpha is not None))
    return out


def dssim_ref(ref: torch.Tensor, dist: torch.Tensor, ref_alpha: torch.Tensor | None = None,
              dist_alpha: torch.Tensor | None = None) -> torch.Tensor:
    """DSSIM per image, float64 (N,), of sRGB images (N, 3, H, W) in [0, 1] (floating; computed in their dtype),
    with optional straight alphas (N, 1, H, W) in [0, 1]. 0 for identical images, larger is more different."""
    ref_lin, dist_lin = srgb_to_linear_ref(ref), srgb_to_linear_ref(dist)
    if ref_alpha is not None:
        ref_lin = ref_lin * ref_alpha
    if dist_alpha is not None:
        dist_lin = dist_lin * dist_alpha
    ref_scales = dssim_prepare_scales_ref(ref_lin, ref_alpha)
    dist_scales = dssim_prepare_scales_ref(dist_lin, dist_alpha)
    scores = [dssim_pool_ref(dssim_ssim_map_ref(a, b), s) for s, (a, b) in enumerate(zip(ref_scales, dist_scales))]
    return dssim_combine_ref(scores)


def dssim_lab_op_ref(lin: torch.Tensor, alpha: torch.Tensor, has_alpha: bool,
                     lab_of_linear: Blur = lab_of_linear_ref) -> torch.Tensor:
    """Twin of the ``dssim_lab`` op: :func:`dssim_lab_ref` with ``alpha`` used only when ``has_alpha``."""
    return lab_of_linear(composite_ref(lin, alpha if has_alpha else None))
