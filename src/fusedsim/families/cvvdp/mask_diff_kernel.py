"""ColorVideoVDP's masking step on the GPU, fused: one pass over the three channels of a band.

    cvvdp_mask_diff(test, ref, sens, blurred (N, 3, h, w)) -> D (N, 3, h, w)

Per pixel, with g = (1, 1.45, 1), the calibrated p, q_c, mask_c, d_max and W = 2^xcm_weights (4 x 4, rows = the
masking channel, columns = the masked one)::

    T' = test·sens·g_c,  R' = ref·sens·g_c,  a_c = safe_pow(|blurred_c·10^mask_c|, q_c)
    M_j = Σ_c a_c W[c, j],  d_j = safe_pow(|T'_j − R'_j|, p) / (1 + M_j),  D_j = 10^d_max d_j / (10^d_max + d_j)

with ``safe_pow(x, e) = (x + 1e-5)^e − 1e-5^e``, as the twin :func:`fusedsim.families.cvvdp.twin.
cvvdp_mask_diff_ref`. Powers are ``exp(e·log(x))`` (x ≥ 1e-5 > 0), a few float32 ulps from ``torch.pow``.
Forward only (gradients run the twin). Any strides; ``sens`` may be broadcast over the batch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.data import cvvdp_params
from fusedsim.core.fast_math import fast_log2
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.cvvdp.ops import cvvdp_mask_diff

__all__ = ["cvvdp_mask_diff_fwd"]

_BLOCK = 256


@triton.jit
def spow(x, e, eps_e, EPS: tl.constexpr):
    """safe_pow for x >= 0: (x + eps)^e - eps^e, as exp2(e log2(x + eps)) with the hardware's approximate log2
    and exp2 (a few float32 ulps from torch.pow; libdevice's accurate log was 40 % of the masking kernels'
    instructions)."""
    return tl.exp2(e * fast_log2(x + EPS)) - eps_e


@triton.jit
def _load(base, n, c, row, col, sn, sc, sh, sw, ok, ACC: tl.constexpr):
    return tl.load(base + n * sn + c * sc + row * sh + col * sw, mask=ok, other=0.0).to(ACC)


@triton.jit
def _channel(T, R, S, B, n, c, row, col, ok, tsn, tsc, tsh, tsw, rsn, rsc, rsh, rsw, ssn, ssc, ssh, ssw, bsn, bsc,
             bsh, bsw, gain, q, eps_q, P, EPS_P, MC, EPS: tl.constexpr, ACC: tl.constexpr):
    """(masker a_c, raw difference safe_pow(|T' - R'|, p)) of channel c."""
    s = _load(S, n, c, row, col, ssn, ssc, ssh, ssw, ok, ACC)
    tp = _load(T, n, c, row, col, tsn, tsc, tsh, tsw, ok, ACC) * s * gain
    rp = _load(R, n, c, row, col, rsn, rsc, rsh, rsw, ok, ACC) * s * gain
    b = _load(B, n, c, row, col, bsn, bsc, bsh, bsw, ok, ACC)
    a = spow(tl.abs(b * MC), q, eps_q, EPS)
    d = spow(tl.abs(tp - rp), P, EPS_P, EPS)
    return a, d


@triton.jit
def soft(d, m, MAXV):
    du = d / (1.0 + m)
    return MAXV * du / (MAXV + du)


@triton.jit
def _cvvdp_mask_diff_kernel(T, R, S, B, OUT, HW, W, tsn, tsc, tsh, tsw, rsn, rsc, rsh, rsw, ssn, ssc, ssh, ssw,
                            bsn, bsc, bsh, bsw, G1: tl.constexpr, Q0: tl.constexpr, Q1: tl.constexpr,
                            Q2: tl.constexpr, EQ0: tl.constexpr, EQ1: tl.constexpr, EQ2: tl.constexpr,
                            P: tl.constexpr, EPS_P: tl.constexpr, MC: tl.constexpr, MAXV: tl.constexpr,
                            W00: tl.constexpr, W01: tl.constexpr, W02: tl.constexpr, W10: tl.constexpr,
                            W11: tl.constexpr, W12: tl.constexpr, W20: tl.constexpr, W21: tl.constexpr,
                            W22: tl.constexpr, EPS: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = p < HW
    row = p // W
    col = p % W
    a0, d0 = _channel(T, R, S, B, n, 0, row, col, ok, tsn, tsc, tsh, tsw, rsn, rsc, rsh, rsw, ssn, ssc, ssh, ssw,
                      bsn, bsc, bsh, bsw, 1.0, Q0, EQ0, P, EPS_P, MC, EPS, ACC)
    a1, d1 = _channel(T, R, S, B, n, 1, row, col, ok, tsn, tsc, tsh, tsw, rsn, rsc, rsh, rsw, ssn, ssc, ssh, ssw,
                      bsn, bsc, bsh, bsw, G1, Q1, EQ1, P, EPS_P, MC, EPS, ACC)
    a2, d2 = _channel(T, R, S, B, n, 2, row, col, ok, tsn, tsc, tsh, tsw, rsn, rsc, rsh, rsw, ssn, ssc, ssh, ssw,
                      bsn, bsc, bsh, bsw, 1.0, Q2, EQ2, P, EPS_P, MC, EPS, ACC)
    m0 = a0 * W00 + a1 * W10 + a2 * W20
    m1 = a0 * W01 + a1 * W11 + a2 * W21
    m2 = a0 * W02 + a1 * W12 + a2 * W22
    out = OUT + n * 3 * HW + p
    ty = OUT.dtype.element_ty
    tl.store(out, soft(d0, m0, MAXV).to(ty), mask=ok)
    tl.store(out + HW, soft(d1, m1, MAXV).to(ty), mask=ok)
    tl.store(out + 2 * HW, soft(d2, m2, MAXV).to(ty), mask=ok)


@cached(maxsize=4)
def mask_constants(dtype: torch.dtype) -> tuple:
    """The calibrated constants rounded as the twin forms them in ``dtype`` (float32 powers for float32)."""
    prm = cvvdp_params()

    def t(v):
        return torch.tensor(v, dtype=dtype)

    eps = t(1e-5)
    q = [t(v) for v in prm.mask_q[:3]]
    p = t(prm.mask_p)
    w = (2 ** t(prm.xcm_weights)).view(4, 4)[:3, :3]
    consts = (1.45, *q, *(eps ** v for v in q), p, eps ** p, 10 ** t(prm.mask_c), 10 ** t(prm.d_max),
              *w.reshape(-1))
    return tuple(float(c) for c in consts) + (1e-5,)


@cached(maxsize=128)
def _launcher(shape, strides, dtype) -> tuple[Launcher, tuple]:
    n, _, h, w = shape
    cdt = compute_dtype(dtype)
    acc = tl.float64 if cdt == torch.float64 else tl.float32
    launch = Launcher(_cvvdp_mask_diff_kernel, (triton.cdiv(h * w, _BLOCK), n), num_warps=4)
    return launch, (h * w, w, *(s for st in strides for s in st), *mask_constants(cdt), acc, _BLOCK)


@cvvdp_mask_diff.triton_launcher
def cvvdp_mask_diff_fwd(test: torch.Tensor, ref: torch.Tensor, sens: torch.Tensor,
                        blurred: torch.Tensor) -> torch.Tensor:
    """D (N, 3, h, w) in the compute dtype; ``ref``, ``sens`` and ``blurred`` broadcast to ``test``'s shape."""
    shape = tuple(test.shape)
    ref, sens, blurred = (x.expand(shape) for x in (ref, sens, blurred))
    strides = tuple(tuple(x.stride()) for x in (test, ref, sens, blurred))
    launch, tail = _launcher(shape, strides, test.dtype)
    out = torch.empty(shape, dtype=compute_dtype(test.dtype), device=test.device)
    launch(test, ref, sens, blurred, out, *tail)
    return out
