"""libvmaf 3.2.0's integer VIF (feature ``vif``, ``integer_vif.c``), bit for bit: the PyTorch twin and the
specification.

Per frame pair, on integer luma ``x`` (ref) and ``y`` (dist), four scales. Every filter is a Q16 integer kernel
(sum 65536) used separably, **vertical pass first**, with reflect-101 borders on both axes at every scale
(``-i -> i``, ``n-1+i -> n-1-i``); ``rs(v, s)`` is the round-shift ``(v + 2**(s-1)) >> s`` (``v`` for ``s = 0``).

**Statistics of scale s** (filter ``F_s``: 17, 9, 5, 3 taps), at every pixel:

1. vertical: ``vx = rs(F*x, a)``, ``vy`` alike; ``vxx = rs(F*x*x, b)``, ``vyy``, ``vxy`` alike, with ``a = bpc``
   and ``b = 2*(bpc-8)`` at scale 0, ``a = b = 16`` above;
2. horizontal: ``mu1 = F*vx``, ``mu2 = F*vy`` (no shift); ``xx = rs(F*vxx, 16)``, ``yy``, ``xy`` alike;
3. ``s1 = int32(xx - rs(mu1*mu1, 32))`` (uint32 wrap), ``s2``, ``s12`` alike; ``s2 = max(s2, 0)``;
4. if ``s1 >= 131072``: ``den_log += log2_32(131072 + s1) - 2048*17``, and if also ``s12 > 0`` and ``s2 > 0``:
   ``g = s12 / (s1 + 65536e-10)``; ``sv = max(trunc(s2 - g*s12), 0)``; **then** ``g = min(g, gain_limit)``;
   ``n1 = sv + 131072``; ``n2 = trunc(g*g*s1) + n1`` (doubles, left to right);
   ``num_log += log2_64(n2) - log2_64(n1)``. Otherwise ``num_nonlog += s2`` and ``cnt_nonlog += 1``.
5. ``num = float32(num_log/2048 + (cnt_nonlog - num_nonlog/16384/65025))`` and
   ``den = float32(den_log/2048 + cnt_nonlog)``, in double then rounded once.

``log2_32``/``log2_64`` shift ``v`` right by ``k = bit_length(v) - 16`` (no rounding) and return
``T[v >> k] + 2048*k``, where ``T[i] = round(log2f(i) * 2048)`` (float32 log2, C ``round``: half away from zero).

**Scale s -> s+1:** both images are filtered with ``F_{s+1}``: vertical ``rs(., bpc)`` from scale 0, ``rs(., 16)``
above, horizontal ``rs(., 16)``, and the even rows and columns are kept (``floor(h/2) x floor(w/2)``), holding
16-bit-scale values (about ``pixel * 2**(16-bpc)``).

**Per frame:** ``integer_vif_scaleS = float32(num_S) / float32(den_S)`` (a float32 division); libvmaf's debug
columns add ``integer_vif = sum(num)/sum(den)`` in double. Every integer above stays below ``2**49`` except
``mu1*mu1`` (below ``2**64``, libvmaf's uint64), which is evaluated in 16-bit halves so int64 holds every step.
"""

from __future__ import annotations

import torch

from fusedsim.core.state import cached

__all__ = [
    "DEFAULT_GAIN_LIMIT",
    "FILTERS",
    "MIN_GAIN_LIMIT",
    "MIN_SIZE",
    "SUPPORTED_BIT_DEPTHS",
    "integer_vif_accumulators_ref",
    "integer_vif_ref",
    "log2_table",
    "num_den_from_accumulators",
    "reflect101_index",
    "vif_columns",
    "vif_feature_suffix",
]

#: The Q16 filters of scales 0..3 (each sums to 65536).
FILTERS = (
    (489, 935, 1640, 2640, 3896, 5274, 6547, 7455, 7784, 7455, 6547, 5274, 3896, 2640, 1640, 935, 489),
    (1244, 3663, 7925, 12590, 14692, 12590, 7925, 3663, 1244),
    (3571, 16004, 26386, 16004, 3571),
    (10904, 43728, 10904),
)
#: Bit depths libvmaf reads; every one is exact here.
SUPPORTED_BIT_DEPTHS = (8, 10, 12, 16)
#: Smallest height and width. libvmaf mirrors each border once (reflect-101), so scale s needs ``n_s - 1 >= half
#: of F_s``: 9, 5, 3, 2 at scales 0..3 of sizes n, n/2, n/4, n/8 (floored). Scale 3 binds: n >= 16 (below, libvmaf
#: reads rows and columns it never wrote).
MIN_SIZE = 16
#: libvmaf's default ``vif_enhn_gain_limit`` and the option's range ([1, 100]; 1.0 in ``vmaf_v0.6.1neg``).
DEFAULT_GAIN_LIMIT = 100.0
MIN_GAIN_LIMIT = 1.0
SIGMA_NSQ = 131072  # sigma_n^2 = 2 in the statistics' unit, (8-bit code)^2 * 65536
EPS = 65536 * 1.0e-10  # the double added to s1 before the division
N_SCALES = 4
LOG2_LO = 32767  # the table's first entry
_CHUNK_PIXELS = 1 << 20  # pixels per twin step (whole frames): the int64 working set stays ~20 x 8 MB


@cached(maxsize=1)
def _log2_table_cpu() -> torch.Tensor:
    i = torch.arange(LOG2_LO, 1 << 16, dtype=torch.float64)
    # log2f(i): the double log2 rounded once to float32 (equals float32 log2 on all 32769 entries); then C round,
    # half away from zero, of the exact product by 2048 (a power of two)
    t = torch.floor(torch.log2(i).to(torch.float32).to(torch.float64) * 2048.0 + 0.5).to(torch.int64)
    table = torch.zeros(1 << 16, dtype=torch.int64)
    table[LOG2_LO:] = t
    return table


def log2_table(device: torch.device | str | None = None) -> torch.Tensor:
    """libvmaf's ``log2_table``: ``(65536,)`` int64, ``T[i] = round(log2f(i) * 2048)`` for ``i >= 32767`` (0 below,
    never read)."""
    return _log2_table_cpu().to(device or "cpu")


def reflect101_index(n: int, half: int, device: torch.device | None = None) -> torch.Tensor:
    """Source index of each padded position ``-half .. n-1+half`` under one mirror (``(n + 2*half,)`` int64)."""
    idx = torch.arange(-half, n + half, device=device).abs()
    return (n - 1) - ((n - 1) - idx).abs()


def _rs(v: torch.Tensor, shift: int) -> torch.Tensor:
    """Round-shift: ``(v + 2**(shift-1)) >> shift``; no-op for ``shift == 0``."""
    return v if shift == 0 else (v + (1 << (shift - 1))) >> shift


def _filter(x: torch.Tensor, taps: tuple[int, ...], dim: int, step: int = 1) -> torch.Tensor:
    """Exact ``sum_k taps[k] * x[m(i - half + k)]`` along ``dim`` at positions ``i = 0, step, ...`` below
    ``step * (n // step)`` (int64)."""
    n = x.shape[dim]
    half = len(taps) // 2
    xp = x.index_select(dim, reflect101_index(n, half, x.device))
    count = n // step

    def tap(k: int) -> torch.Tensor:
        if step == 1:
            return xp.narrow(dim, k, n)
        return xp.index_select(dim, torch.arange(k, k + step * count, step, device=x.device))

    out = tap(half) * taps[half]
    for k in range(half):  # symmetric taps
        out.add_(tap(k) + tap(len(taps) - 1 - k), alpha=taps[k])
    return out


def _mul_round32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(a*b + 2**31) >> 32`` for ``0 <= a, b < 2**32`` (libvmaf's uint64 product, which int64 cannot hold)."""
    ah, al = a >> 16, a & 0xFFFF
    bh, bl = b >> 16, b & 0xFFFF
    return ah * bh + ((((ah * bl + al * bh) << 16) + al * bl + (1 << 31)) >> 32)


def _wrap32(v: torch.Tensor) -> torch.Tensor:
    """The int32 whose bits are the low 32 bits of ``v`` (libvmaf's ``(int32_t)`` of a uint32 difference)."""
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _log2_fixed(v: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """libvmaf's ``log2_32`` / ``log2_64`` of ``v >= 2**17`` (int64 < 2**53): ``T[v >> k] + 2048*k``."""
    _, bits = torch.frexp(v.to(torch.float64))  # v = m * 2**bits, 0.5 <= m < 1: bits = bit length (exact)
    k = bits.to(torch.int64) - 16
    return table[v >> k] + 2048 * k


def _scale_accumulators(x: torch.Tensor, y: torch.Tensor, scale: int, bit_depth: int, gain_limit: float,
                        table: torch.Tensor) -> torch.Tensor:
    """``(num_log, den_log, num_nonlog, cnt_nonlog)`` of one scale: ``(N, 4)`` int64 of int64 frames ``(N, h, w)``."""
    taps = FILTERS[scale]
    shift_mu = bit_depth if scale == 0 else 16
    shift_sq = 2 * (bit_depth - 8) if scale == 0 else 16
    stack = torch.stack((x, y))
    v_mu = _rs(_filter(stack, taps, -2), shift_mu)
    v_sq = _rs(_filter(torch.stack((x * x, y * y, x * y)), taps, -2), shift_sq)
    mu1, mu2 = _filter(v_mu, taps, -1)
    xx, yy, xy = _rs(_filter(v_sq, taps, -1), 16)
    s1 = _wrap32(xx - _mul_round32(mu1, mu1))
    s2 = _wrap32(yy - _mul_round32(mu2, mu2)).clamp_min(0)
    s12 = _wrap32(xy - _mul_round32(mu1, mu2))

    big = s1 >= SIGMA_NSQ
    den_log = torch.where(big, _log2_fixed(torch.where(big, s1 + SIGMA_NSQ, SIGMA_NSQ), table) - 2048 * 17, 0)
    gain = big & (s12 > 0) & (s2 > 0)
    one = torch.ones_like(s1)
    s1d = torch.where(gain, s1, one).to(torch.float64)
    s12d = torch.where(gain, s12, one).to(torch.float64)
    g = s12d / (s1d + EPS)
    sv = torch.trunc(torch.where(gain, s2, one).to(torch.float64) - g * s12d).to(torch.int64).clamp_min(0)
    g = torch.clamp_max(g, gain_limit)  # after sv: the limit does not change sv
    n1 = sv + SIGMA_NSQ
    n2 = torch.trunc((g * g) * s1d).to(torch.int64) + n1
    num_log = torch.where(gain, _log2_fixed(n2, table) - _log2_fixed(n1, table), 0)
    small = ~big
    return torch.stack((num_log.sum((-2, -1)), den_log.sum((-2, -1)), torch.where(small, s2, 0).sum((-2, -1)),
                        small.sum((-2, -1))), dim=-1)


def _subsample(x: torch.Tensor, next_scale: int, bit_depth: int) -> torch.Tensor:
    """Scale ``next_scale``'s image from the previous one (int64 ``(N, h, w)`` -> ``(N, h//2, w//2)``)."""
    taps = FILTERS[next_scale]
    v = _rs(_filter(x, taps, -2, step=2), bit_depth if next_scale == 1 else 16) & 0xFFFF
    return _rs(_filter(v, taps, -1, step=2), 16) & 0xFFFF


def integer_vif_accumulators_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int,
                                 gain_limit: float = DEFAULT_GAIN_LIMIT) -> torch.Tensor:
    """libvmaf's integer accumulators ``(num_log, den_log, num_nonlog, cnt_nonlog)`` per scale of integer frames
    ``(N, H, W)``: ``(N, 4, 4)`` int64 (frame, scale, accumulator)."""
    n = ref.shape[0]
    table = log2_table(ref.device)
    out = torch.empty(n, N_SCALES, 4, dtype=torch.int64, device=ref.device)
    step = max(1, _CHUNK_PIXELS // max(1, ref.shape[1] * ref.shape[2]))
    for s0 in range(0, n, step):
        x = ref[s0:s0 + step].to(torch.int64)
        y = dist[s0:s0 + step].to(torch.int64)
        for scale in range(N_SCALES):
            if scale > 0:
                x, y = _subsample(x, scale, bit_depth), _subsample(y, scale, bit_depth)
            out[s0:s0 + step, scale] = _scale_accumulators(x, y, scale, bit_depth, float(gain_limit), table)
    return out


def num_den_from_accumulators(acc: torch.Tensor) -> torch.Tensor:
    """libvmaf's per-scale ``num`` and ``den`` (float32 values, widened) from the accumulators ``(N, 4, 4)`` int64:
    ``(N, 8)`` float64, ``[num0, den0, num1, den1, ..., den3]`` (``.view(N, 4, 2)``: scale, (num, den))."""
    a = acc.to(torch.float64)
    num_log, den_log, num_nonlog, cnt = a.unbind(-1)

    def div(t: torch.Tensor, d: float) -> torch.Tensor:
        # a tensor divisor: a true IEEE division on every device (CUDA divides by a Python scalar through its
        # reciprocal, which is inexact for 65025)
        return t / torch.full_like(t, d)

    num = div(num_log, 2048.0) + (cnt - div(div(num_nonlog, 16384.0), 65025.0))
    den = div(den_log, 2048.0) + cnt
    return torch.stack((num, den), dim=-1).to(torch.float32).to(torch.float64).flatten(-2)


def integer_vif_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int,
                    gain_limit: float = DEFAULT_GAIN_LIMIT) -> torch.Tensor:
    """libvmaf's integer VIF ``num`` and ``den`` per scale of integer frames ``(N, H, W)``: ``(N, 8)`` float64
    (float32 values), laid out as in :func:`num_den_from_accumulators`.

    Inputs are assumed checked (integer dtype, values in ``[0, 2**bit_depth)``, equal shapes, at least
    ``MIN_SIZE`` each way, ``1 <= gain_limit <= 100``); :func:`fusedsim.vif.integer_vif` does that.
    """
    return num_den_from_accumulators(integer_vif_accumulators_ref(ref, dist, bit_depth, gain_limit))


def vif_feature_suffix(gain_limit: float) -> str:
    """libvmaf's name suffix for a non-default gain limit: ``_egl_<%g of the value>`` (``_egl_1`` for 1.0)."""
    return "" if gain_limit == DEFAULT_GAIN_LIMIT else "_egl_%g" % gain_limit


def vif_columns(num_den: torch.Tensor, gain_limit: float = DEFAULT_GAIN_LIMIT, debug: bool = False,
                ) -> dict[str, torch.Tensor]:
    """libvmaf's per-frame columns from :func:`integer_vif_ref`'s ``(N, 8)``: each ``(N,)`` float64.

    ``integer_vif_scale0..3`` (the float32 division ``num/den``, widened); with ``debug``, also ``integer_vif``
    (``sum(num) / sum(den)`` in double, 1.0 when the sum of den is 0), ``integer_vif_num``, ``integer_vif_den`` and
    ``integer_vif_{num,den}_scale0..3``. Every name carries :func:`vif_feature_suffix`.
    """
    suffix = vif_feature_suffix(gain_limit)
    nd = num_den.unflatten(-1, (N_SCALES, 2))
    num, den = nd[..., 0], nd[..., 1]
    ratio = (num.to(torch.float32) / den.to(torch.float32)).to(torch.float64)
    out = {f"integer_vif_scale{s}{suffix}": ratio[..., s] for s in range(N_SCALES)}
    if not debug:
        return out
    total_num = ((num[..., 0] + num[..., 1]) + num[..., 2]) + num[..., 3]
    total_den = ((den[..., 0] + den[..., 1]) + den[..., 2]) + den[..., 3]
    score = torch.where(total_den == 0, torch.ones_like(total_den), total_num / torch.where(
        total_den == 0, torch.ones_like(total_den), total_den))
    out[f"integer_vif{suffix}"] = score
    out[f"integer_vif_num{suffix}"] = total_num
    out[f"integer_vif_den{suffix}"] = total_den
    for s in range(N_SCALES):
        out[f"integer_vif_num_scale{s}{suffix}"] = num[..., s]
        out[f"integer_vif_den_scale{s}{suffix}"] = den[..., s]
    return out

