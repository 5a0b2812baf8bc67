"""Butteraugli's element-wise stages on the CPU, compiled with numba: the twins' operations in their order.

:func:`~fusedsim.families.butteraugli.twin.bands_ref` and :func:`~fusedsim.families.butteraugli.twin.opsin_xyb_ref`
are chains of PyTorch element-wise operations (a dozen passes over the planes each, with their temporaries). Here
each is one pass per pixel that repeats the twin's operations, with the semantics PyTorch gives them:

- a Python scalar meets a float64 tensor as a float64 value; ``scalar / tensor`` is ``tensor.reciprocal() *
  scalar`` (``Tensor.__rdiv__``);
- ``torch.where(x > w, ...)`` selects (NaN fails every comparison); ``maximum`` and ``clamp_min`` keep NaN;
- FastLog2f reads the exponent from the bits of the value rounded to float32, and scales by an exact power of 2;
- square roots stay PyTorch's: its float64 ``sqrt`` is not always correctly rounded (1.4% of random values on the
  development machine differ from the IEEE result by an ulp), so the twin's bits need its own.

float64 CPU tensors (the CPU parity path) run compiled; anything else (float32, gradients, other devices) runs the
twin. The registry checks each against its twin on its examples (``tests/ops/test_registry.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
import fusedsim.families.butteraugli.twin as ref
from fusedsim.families.butteraugli.ops import butteraugli_bands, butteraugli_combine, butteraugli_opsin

__all__ = ["bands_numba", "diffmap_combine_numba", "opsin_xyb_numba"]

_F32 = ref._f32
# bands_ref's constants, as the twin passes them (float32 values held in float64)
_BANDS = np.array([_F32(0.29), _F32(0.1), _F32(0.04), _F32(1.5), _F32(0.724216145665), _F32(28.4691806922),
                   _F32(5.19175294647), _F32(2.69313763794), _F32(2.155), _F32(0.132), _F32(2.5), _F32(0.4),
                   ref._MASK_MUL, ref._MASK_BIAS, ref._MASK_SQRT_BIAS, _F32(32.2217497012), _F32(13.7697791434),
                   _F32(-0.362267051518), _F32(47.504615728)], dtype=np.float64)
_MIX = np.array(ref._MIX32, dtype=np.float64)  # (3, 4): the cone mix rows and their biases
_OPSIN = np.array([ref._MIN_SENS, ref._GAMMA_MUL, ref._GAMMA_ADD, ref._GAMMA_BIAS, *ref._LOG2_P, *ref._LOG2_Q],
                  dtype=np.float64)


@njit(cache=True, nogil=True, inline="always")
def _remove_range(x, w):  # pragma: no cover - compiled
    return x - w if x > w else (x + w if x < -w else 0.0)


@njit(cache=True, nogil=True, inline="always")
def _amplify_range(x, w):  # pragma: no cover - compiled
    return x + w if x > w else (x - w if x < -w else x + x)


@njit(cache=True, nogil=True, inline="always")
def _maximum_clamp(x, m, mul):  # pragma: no cover - compiled
    return (x + m) * mul - m if x < -m else ((x - m) * mul + m if x >= m else x)


@parallel_kernel
def _bands(lf, mf, pre, blur, out, k):  # pragma: no cover - compiled
    n, _, h, w = lf.shape
    for task in prange(n * h):
        i, y = task // h, task % h
        for x in range(w):
            mf_x = _remove_range(mf[i, 0, y, x], k[0])
            mf_y = _amplify_range(mf[i, 1, y, x], k[1])
            uhf_x = _remove_range(pre[i, 0, y, x] - blur[i, 0, y, x], k[2])
            hf_x = _remove_range(blur[i, 0, y, x], k[3])
            hf_y = _maximum_clamp(blur[i, 1, y, x], k[5], k[4])
            uhf_y = _maximum_clamp(pre[i, 1, y, x] - hf_y, k[6], k[4]) * k[7]
            hf_y = _amplify_range(hf_y * k[8], k[9])
            ax = (uhf_x + hf_x) * k[10]
            ay = uhf_y * k[11] + hf_y * k[11]
            ly = lf[i, 1, y, x]
            out[i, 0, y, x] = lf[i, 0, y, x] * k[15]
            out[i, 1, y, x] = ly * k[16]
            out[i, 2, y, x] = (k[17] * ly + lf[i, 2, y, x]) * k[18]
            out[i, 3, y, x] = mf_x
            out[i, 4, y, x] = mf_y
            out[i, 5, y, x] = mf[i, 2, y, x]
            out[i, 6, y, x] = hf_x
            out[i, 7, y, x] = hf_y
            out[i, 8, y, x] = uhf_x
            out[i, 9, y, x] = uhf_y
            out[i, 10, y, x] = ax * ax + ay * ay  # the activity's square roots: PyTorch's (see bands_numba)


def _compiled(*tensors: torch.Tensor) -> bool:
    return all(t.device.type == "cpu" and t.dtype == torch.float64 and t.dim() == 4 and not t.requires_grad
               for t in tensors)


@butteraugli_bands.cpu_kernel
def bands_numba(lf: torch.Tensor, mf: torch.Tensor, hf_pre: torch.Tensor, hf_blur: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.butteraugli.twin.bands_ref` (N, 11, H, W), compiled for float64 CPU tensors."""
    if not _compiled(lf, mf, hf_pre, hf_blur) or lf.shape[1] != 3 or hf_pre.shape[1] != 2 or len(
            {t.shape[0] for t in (lf, mf, hf_pre, hf_blur)} | {lf.shape[0]}) != 1:
        return ref.bands_ref(lf, mf, hf_pre, hf_blur)
    arrays = [t.contiguous().numpy() for t in (lf, mf, hf_pre, hf_blur)]
    n, _, h, w = lf.shape
    out = np.empty((n, ref.BANDS, h, w), dtype=np.float64)
    _bands(*arrays, out, _BANDS)
    bands = torch.from_numpy(out)
    # PyTorch's float64 sqrt is not always the correctly rounded one (its vector kernels), so the activity's two
    # square roots are taken as the twin takes them, on a contiguous plane
    act = torch.sqrt(bands[:, 10].contiguous())
    bands[:, 10] = torch.sqrt(ref._MASK_MUL * act.abs() + ref._MASK_BIAS) - ref._MASK_SQRT_BIAS
    return bands


@parallel_kernel
def _opsin(rgb, blurred, out, it, mix, k):  # pragma: no cover - compiled
    n, _, h, w = rgb.shape
    min_sens, gamma_mul, gamma_add, gamma_bias = k[0], k[1], k[2], k[3]
    p0, p1, p2, q0, q1, q2 = k[4], k[5], k[6], k[7], k[8], k[9]
    for task in prange(n * h):
        i, y = task // h, task % h
        # per row: the clamped blurred mix and its float32 bits (FastLog2f's exponent), then the rest
        arg = np.empty((3, w), dtype=np.float64)
        bits = np.empty((3, w), dtype=np.float32)
        for x in range(w):
            br, bg, bb = blurred[i, 0, y, x] * it, blurred[i, 1, y, x] * it, blurred[i, 2, y, x] * it
            for c in range(3):
                pre = mix[c, 0] * br + (mix[c, 1] * bg + (mix[c, 2] * bb + mix[c, 3]))
                floor = max(mix[c, 3], min_sens)
                p = pre if (pre != pre or pre > floor) else floor  # torch.maximum: NaN stays
                arg[c, x] = p
                bits[c, x] = np.float32((p if (p != p or p > 0.0) else 0.0) + gamma_bias)
        ints = bits.view(np.int32)
        for x in range(w):
            r, g, b = rgb[i, 0, y, x] * it, rgb[i, 1, y, x] * it, rgb[i, 2, y, x] * it
            v0 = v1 = v2 = 0.0
            for c in range(3):
                p = arg[c, x]
                v = (p if (p != p or p > 0.0) else 0.0) + gamma_bias
                exponent = np.float64((ints[c, x] - np.int32(0x3F2AAAAB)) >> 23)
                m = v * 2.0 ** -exponent - 1.0
                log2 = ((p2 * m + p1) * m + p0) / ((q2 * m + q1) * m + q0) + exponent
                gamma = gamma_mul * log2 + gamma_add
                sens = gamma / p
                sens = sens if (sens != sens or sens > min_sens) else min_sens
                cur = mix[c, 0] * r + (mix[c, 1] * g + (mix[c, 2] * b + mix[c, 3]))
                o = cur * sens
                o = o if (o != o or o > mix[c, 3]) else mix[c, 3]
                if c == 0:
                    v0 = o
                elif c == 1:
                    v1 = o
                else:
                    v2 = o
            out[i, 0, y, x] = v0 - v1
            out[i, 1, y, x] = v0 + v1
            out[i, 2, y, x] = v2


@butteraugli_opsin.cpu_kernel
def opsin_xyb_numba(rgb: torch.Tensor, blurred: torch.Tensor, intensity_target: float) -> torch.Tensor:
    """:func:`~fusedsim.families.butteraugli.twin.opsin_xyb_ref` (N, 3, H, W), compiled for float64 CPU tensors."""
    if not _compiled(rgb, blurred) or rgb.shape != blurred.shape or rgb.shape[1] != 3:
        return ref.opsin_xyb_ref(rgb, blurred, intensity_target)
    a, b = rgb.contiguous().numpy(), blurred.contiguous().numpy()
    out = np.empty_like(a)
    _opsin(a, b, out, _F32(intensity_target), _MIX, _OPSIN)
    return torch.from_numpy(out)


@njit(cache=True, nogil=True, inline="always")
def _l2_asymmetric(v0, v1, w_gt, w_lt, k04):  # pragma: no cover - compiled
    diff = v0 - v1
    fabs0 = abs(v0)
    small = k04 * fabs0
    if v0 < 0:
        v = v1 + small if v1 > -small else (-v1 - fabs0 if v1 < -fabs0 else 0.0)
    else:
        v = small - v1 if v1 < small else (v1 - fabs0 if v1 > fabs0 else 0.0)
    return diff * diff * w_gt + w_lt * (v * v)


@njit(cache=True, nogil=True, inline="always")
def _mask_y(delta, offset, scaler, mul, scale):  # pragma: no cover - compiled
    v = scale * (1.0 + (1.0 / (scaler * delta + offset)) * mul)  # mul / tensor: its reciprocal times mul
    return v * v


@parallel_kernel
def _combine(b0, b1, ac_x, ac_y, act0, act1, mask, total, k):  # pragma: no cover - compiled
    """Everything of the twin's combine before its square root, into ``total`` (N, H, W)."""
    n, _, h, w = b1.shape
    for task in prange(n * h):
        i, y = task // h, task % h
        r = 0 if b0.shape[0] == 1 else i  # the reference side may be one image for N distorted ones
        for x in range(w):
            ax = ac_x[i, y, x] + _l2_asymmetric(b0[r, 6, y, x], b1[i, 6, y, x], k[0], k[1], k[4])
            ay = ac_y[i, y, x] + _l2_asymmetric(b0[r, 7, y, x], b1[i, 7, y, x], k[2], k[3], k[4])
            m0 = b0[r, 3, y, x] - b1[i, 3, y, x]
            m1 = b0[r, 4, y, x] - b1[i, 4, y, x]
            m2 = b0[r, 5, y, x] - b1[i, 5, y, x]
            l0 = b0[r, 0, y, x] - b1[i, 0, y, x]
            l1 = b0[r, 1, y, x] - b1[i, 1, y, x]
            l2 = b0[r, 2, y, x] - b1[i, 2, y, x]
            ax = ax + m0 * m0 * k[5]
            ay = ay + m1 * m1 * k[6]
            ab = m2 * m2 * k[7]
            dc0, dc1, dc2 = l0 * l0 * k[8], l1 * l1 * k[9], l2 * l2 * k[10]
            da = act0[r, y, x] - act1[i, y, x]
            ay = ay + k[11] * (da * da)
            delta = mask[r, y, x]
            ac_mask = _mask_y(delta, k[12], k[13], k[14], k[18])
            dc_mask = _mask_y(delta, k[15], k[16], k[17], k[18])
            total[i, y, x] = (dc0 * dc_mask + dc1 * dc_mask + dc2 * dc_mask) + (ax * ac_mask + ay * ac_mask
                                                                                 + ab * ac_mask)


@butteraugli_combine.cpu_kernel
def diffmap_combine_numba(bands0: torch.Tensor, bands1: torch.Tensor, ac_x: torch.Tensor, ac_y: torch.Tensor,
                          act0: torch.Tensor, act1: torch.Tensor, mask: torch.Tensor, half: torch.Tensor,
                          hf_asymmetry: float) -> torch.Tensor:
    """:func:`~fusedsim.families.butteraugli.twin.diffmap_combine_ref` (N, H, W), compiled up to the square root
    for float64 CPU tensors (the root and the half-resolution mix are the twin's PyTorch operations)."""
    n = bands1.shape[0]
    tensors = (bands0, bands1, ac_x, ac_y, act0, act1, mask)
    if (any(t.device.type != "cpu" or t.dtype != torch.float64 or t.requires_grad for t in (*tensors, half))
            or bands0.dim() != 4 or bands0.shape[1:] != bands1.shape[1:]
            or any(t.shape[1:] != bands1.shape[2:] for t in (ac_x, ac_y, act0, act1, mask))
            or any(t.shape[0] != n for t in (ac_x, ac_y, act1))
            or len({t.shape[0] for t in (bands0, act0, mask)}) != 1 or bands0.shape[0] not in (1, n)):
        return ref.diffmap_combine_ref(bands0, bands1, ac_x, ac_y, act0, act1, mask, half, hf_asymmetry)
    if n > 1 and all(t.shape[0] == n and t.stride(0) == 0 for t in (bands0, act0, mask)):
        # an expanded reference: read its one image
        bands0, act0, mask = bands0[:1], act0[:1], mask[:1]
    arrays = [t.contiguous().numpy() for t in tensors]
    h, w = bands1.shape[-2:]
    total = np.empty((n, h, w), dtype=np.float64)
    wx_gt, wx_lt, wy_gt, wy_lt = ref.combine_constants(hf_asymmetry)
    k = np.array([wx_gt, wx_lt, wy_gt, wy_lt, _F32(0.4), _F32(ref._WMUL[3]), _F32(ref._WMUL[4]), _F32(ref._WMUL[5]),
                  _F32(ref._WMUL[6]), _F32(ref._WMUL[7]), _F32(ref._WMUL[8]), _F32(10.0), *ref._AC_MASK,
                  *ref._DC_MASK, ref._GLOBAL_SCALE], dtype=np.float64)
    _combine(*arrays, total, k)
    diffmap = torch.sqrt(torch.from_numpy(total))  # the twin's own square root (see the module docstring)
    if half.numel():
        up = half.repeat_interleave(2, dim=-2).repeat_interleave(2, dim=-1)[..., :h, :w]
        diffmap = diffmap * 0.85 + 0.5 * up
    return diffmap
