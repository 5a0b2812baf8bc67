"""libvmaf's integer SSIM (feature ``ssim``), bit for bit: the PyTorch twin and the specification.

Per frame, on the luma plane of integer samples (``L = 2**bit_depth - 1``):

1. **Moments.** A separable 9-tap integer Gaussian ``g = [2, 9, 28, 55, 68, 55, 28, 9, 2]`` (sum 256) is applied
   horizontally, then vertically, at every pixel, to ``s``, ``d``, ``s*s``, ``s*d`` and ``d*d``. Taps that fall
   outside the picture are skipped (zero padding), and the in-bounds weight ``w = Wv(y) * Wh(x)`` is kept
   (65536 inside, smaller at the borders). No shift, no rounding: every moment is an exact int64.
2. **Per-pixel term** in IEEE double, in this order (``wd = double(w)``)::

       c1  = ((double(L*L) * (0.01*0.01)) * wd) * wd
       c2  = ((double(L*L) * (0.03*0.03)) * wd) * wd
       mx2 = mux*mux; mxy = mux*muy; my2 = muy*muy          # doubles of the int moments
       num = (wd * (2*mxy + c1)) * (c2 + 2*(xy*wd - mxy))
       den = ((mx2 + my2) + c1) * ((((x2*wd - mx2) + y2*wd) - my2) + c2)
       term = num / den

   which is ``w * SSIM`` with C1 = (0.01 L)^2, C2 = (0.03 L)^2 on the normalised moments.
3. **Pooling.** ``sum(term) / sum(w)``, where ``sum(term)`` runs left to right over the pixels in row-major order
   in one double (see :func:`~fusedsim.families.vmaf.sequential_sum_twin.sequential_sum_ref`) and ``sum(w)`` is exact.

16-bit input: libvmaf computes ``L*L`` in a 32-bit ``int``, which overflows, so its 16-bit scores are not the
algorithm above. ``intended_16bit=True`` gives the algorithm's value with the exact ``L*L``; nothing else does.
"""

from __future__ import annotations

import torch

from fusedsim.families.vmaf.sequential_sum_twin import sequential_sum_ref

__all__ = [
    "GAUSS_TAPS",
    "SUPPORTED_BIT_DEPTHS",
    "integer_ssim_constants",
    "integer_ssim_moments_ref",
    "integer_ssim_ref",
    "integer_ssim_terms_ref",
    "integer_ssim_weight_sum",
]

#: The 9-tap integer Gaussian (sigma 1.5, scaled to 256) used both ways.
GAUSS_TAPS = (2, 9, 28, 55, 68, 55, 28, 9, 2)
#: Bit depths with defined libvmaf behaviour; 16 only with ``intended_16bit=True``.
SUPPORTED_BIT_DEPTHS = (8, 10, 12)
_HALF = 4


def integer_ssim_constants(bit_depth: int) -> tuple[float, float]:
    """``(double(L*L) * (0.01*0.01), double(L*L) * (0.03*0.03))`` as libvmaf evaluates them (one rounding each)."""
    peak = (1 << bit_depth) - 1
    l2 = float(peak * peak)
    return l2 * (0.01 * 0.01), l2 * (0.03 * 0.03)


def _inbounds_weight(n: int, device: torch.device) -> torch.Tensor:
    """Sum of the taps of ``GAUSS_TAPS`` that land inside ``[0, n)`` for each position (int64, shape ``(n,)``)."""
    pos = torch.arange(n, device=device)
    w = torch.zeros(n, dtype=torch.int64, device=device)
    for k, g in enumerate(GAUSS_TAPS):
        src = pos + (k - _HALF)
        w += g * ((src >= 0) & (src < n)).to(torch.int64)
    return w


def integer_ssim_weight_sum(height: int, width: int) -> int:
    """Exact ``sum(w)`` over a ``height x width`` frame: ``(sum of Wv) * (sum of Wh)``."""
    cpu = torch.device("cpu")
    return int(_inbounds_weight(height, cpu).sum()) * int(_inbounds_weight(width, cpu).sum())


def _filter_1d(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Exact integer 9-tap filter along ``dim`` with out-of-range taps skipped (zero padding)."""
    n = x.shape[dim]
    pad = [0, 0] * (x.dim() - 1 - (dim % x.dim())) + [_HALF, _HALF]
    xp = torch.nn.functional.pad(x, pad)

    def tap(k: int) -> torch.Tensor:
        return xp.narrow(dim, k, n)

    # symmetric taps: g[k] == g[8-k]
    out = GAUSS_TAPS[_HALF] * tap(_HALF)
    for k in range(_HALF):
        out += GAUSS_TAPS[k] * (tap(k) + tap(2 * _HALF - k))
    return out


def integer_ssim_moments_ref(ref: torch.Tensor, dist: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Exact int64 moments ``(mux, muy, x2, xy, y2, w)`` of integer frames ``(N, H, W)``; ``w`` is ``(H, W)``."""
    s = ref.to(torch.int64)
    d = dist.to(torch.int64)
    stack = torch.stack((s, d, s * s, s * d, d * d))  # (5, N, H, W)
    m = _filter_1d(_filter_1d(stack, -1), -2)
    h, w = s.shape[-2:]
    weight = _inbounds_weight(h, s.device)[:, None] * _inbounds_weight(w, s.device)[None, :]
    return m[0], m[1], m[2], m[3], m[4], weight


def integer_ssim_terms_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """Per-pixel double terms ``w * SSIM`` (float64, ``(N, H, W)``) in libvmaf's operation order."""
    mux, muy, x2, xy, y2, weight = integer_ssim_moments_ref(ref, dist)
    k1, k2 = integer_ssim_constants(bit_depth)
    wd = weight.to(torch.float64)
    c1 = k1 * wd * wd
    c2 = k2 * wd * wd
    mx = mux.to(torch.float64)
    my = muy.to(torch.float64)
    mx2 = mx * mx
    mxy = mx * my
    my2 = my * my
    num = wd * (2.0 * mxy + c1) * (c2 + 2.0 * (xy.to(torch.float64) * wd - mxy))
    den = (mx2 + my2 + c1) * (x2.to(torch.float64) * wd - mx2 + y2.to(torch.float64) * wd - my2 + c2)
    return num / den


def integer_ssim_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """libvmaf ``ssim`` per frame of integer frames ``(N, H, W)``; returns ``(N,)`` float64.

    Inputs are assumed checked (integer dtype, values in ``[0, 2**bit_depth)``, equal shapes); the public
    :func:`fusedsim.families.vmaf.integer_ssim` does that.
    """
    n, h, w = ref.shape
    out = torch.empty(n, dtype=torch.float64)
    # frame by frame keeps the int64 working set at ~25 copies of one frame
    for i in range(n):
        terms = integer_ssim_terms_ref(ref[i : i + 1], dist[i : i + 1], bit_depth)
        out[i] = sequential_sum_ref(terms.reshape(1, h * w))[0].cpu()
    # a tensor divisor: true IEEE division on every device (never a multiplication by the reciprocal)
    return (out / torch.full_like(out, float(integer_ssim_weight_sum(h, w)))).to(ref.device)
