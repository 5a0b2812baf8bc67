"""ColorVideoVDP's Laplacian pyramid steps on the GPU: reduce (blur + decimate) and expand (upsample + blur).

    cvvdp_reduce(x (N, C, H, W)) -> (N, C, ceil(H/2), ceil(W/2))
    cvvdp_expand(x (N, C, h, w), H, W) -> (N, C, H, W)        (h = ceil(H/2), w = ceil(W/2))

Both are the 5-tap kernel k = [0.05, 0.25, 0.4, 0.25, 0.05] along each axis (vertical pass first, as the twins
:func:`fusedsim.families.cvvdp.twin.cvvdp_reduce_ref` / ``cvvdp_expand_ref`` do with cuDNN convolutions).

reduce: output o along an axis of n inputs takes inputs p = 2o + t - 2 (t = 0..4) with weight k[t] where
0 <= p < n (zero padding), plus pycvvdp's edge terms: at o = 0, + k1 x[0] + k0 x[1]; at the last output,
+ k3 x[n-1] + k4 x[n-2] when the *input height* H is odd, else + k4 x[n-1] (pycvvdp decides the column rule from
the rows too). Here the edge terms are folded into the tap weights (they land on taps already loaded).

expand: the twin interleaves zeros (x at even positions 2..2h of a padded line, x[0] copied to position 0 and
x[h-1] to 2h+2) and filters with 2k. Only even positions are non-zero, so output i takes x[i//2 - 1],
x[i//2], x[i//2 + 1] (indices clamped to [0, h-1], which is exactly the copied pad) with weights
(0.1, 0.8, 0.1) for even i and (0, 0.5, 0.5) for odd i: a 3 x 3 stencil per output pixel.

Float32 sums in another order than cuDNN's: a few ulps from the twins. Forward only (the gradient path runs the
twins). One program = a block of columns of one plane, four output rows (reduce) or one (expand).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.ops import cvvdp_expand, cvvdp_reduce

__all__ = ["block_for", "cvvdp_expand_fwd", "cvvdp_reduce_fwd", "expand_at", "expand_pair_at"]

_BLOCK = 256
_REDUCE_ROWS = 4  # output rows a reduce program: 11 input row loads for 4 rows, not 20


def block_for(width: int) -> tuple[int, int]:
    """(columns per program, warps): up to 256 columns, fewer for narrow levels (the pyramid's top)."""
    block = max(32, min(_BLOCK, triton.next_power_of_2(width)))
    return block, max(1, min(4, block // 64))
# The twin's kernel in float32 (k0 = 0.25 - 0.4/2 rounds to 0.05f), and twice it for the expand.
_K = tuple(float(v) for v in torch.tensor([0.25 - 0.2, 0.25, 0.4, 0.25, 0.25 - 0.2], dtype=torch.float32))
_K2 = tuple(float(v) for v in torch.tensor(_K, dtype=torch.float32) * 2)


@triton.jit
def _reduce_weight(o, t: tl.constexpr, n, n_out, ODD: tl.constexpr, K0: tl.constexpr, K1: tl.constexpr,
                   K2: tl.constexpr, K3: tl.constexpr, K4: tl.constexpr):
    """(weight, clamped input index) of tap t of output o along an axis of n inputs, edge terms folded in."""
    p = 2 * o + (t - 2)
    if t == 0:
        kt = K0
    elif t == 1:
        kt = K1
    elif t == 2:
        kt = K2
    elif t == 3:
        kt = K3
    else:
        kt = K4
    w = tl.where((p >= 0) & (p < n), kt, 0.0)
    first = o == 0
    w += tl.where(first & (p == 0), K1, 0.0) + tl.where(first & (p == 1), K0, 0.0)
    last = o == n_out - 1
    if ODD:
        w += tl.where(last & (p == n - 1), K3, 0.0) + tl.where(last & (p == n - 2), K4, 0.0)
    else:
        w += tl.where(last & (p == n - 1), K4, 0.0)
    return w, tl.minimum(tl.maximum(p, 0), n - 1)


@triton.jit
def _row_weight(o, p, n, n_out, ODD: tl.constexpr, K0: tl.constexpr, K1: tl.constexpr,
                K2: tl.constexpr, K3: tl.constexpr, K4: tl.constexpr):
    """Weight of input row ``p`` (scalar) in outputs ``o`` (vector) along an axis of n inputs: the tap t = p - 2o + 2
    of :func:`_reduce_weight`, 0 where o does not reach p; the edge terms folded in."""
    t = p - 2 * o + 2
    kt = tl.where(t == 0, K0, tl.where(t == 1, K1, tl.where(t == 2, K2, tl.where(t == 3, K3, K4))))
    w = tl.where((t >= 0) & (t <= 4) & (p >= 0) & (p < n), kt, 0.0)
    first = o == 0
    w += tl.where(first & (p == 0), K1, 0.0) + tl.where(first & (p == 1), K0, 0.0)
    last = o == n_out - 1
    if ODD:
        w += tl.where(last & (p == n - 1), K3, 0.0) + tl.where(last & (p == n - 2), K4, 0.0)
    else:
        w += tl.where(last & (p == n - 1), K4, 0.0)
    return w


@triton.jit
def _column_sums(base, io0, H, W, HO, c0, c1, c2, c3, c4, ok, EDGE: tl.constexpr, ODD: tl.constexpr,
                 K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr, K4: tl.constexpr,
                 ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """The five column taps' sums over rows (ROWS, BLOCK) of output rows io0 .. io0 + ROWS - 1: each of their
    2 ROWS + 3 input rows is loaded once and added to every output row it reaches, rows in order."""
    io = io0 + tl.arange(0, ROWS)
    cs0 = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    cs1 = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    cs2 = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    cs3 = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    cs4 = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for k in tl.static_range(2 * ROWS + 3):
        r = 2 * io0 + (k - 2)
        if EDGE:
            wr = _row_weight(io, r, H, HO, ODD, K0, K1, K2, K3, K4)[:, None]
            r = tl.minimum(tl.maximum(r, 0), H - 1)
        else:  # away from both ends the weight is the tap's alone: t = k - 2q, known when compiled
            t = k - 2 * tl.arange(0, ROWS)
            wr = tl.where(t == 0, K0, tl.where(t == 1, K1, tl.where(t == 2, K2, tl.where(t == 3, K3, tl.where(
                t == 4, K4, 0.0)))))[:, None]
        row = base + r.to(tl.int64) * W
        cs0 += wr * tl.load(row + c0, mask=ok, other=0.0).to(tl.float32)[None, :]
        cs1 += wr * tl.load(row + c1, mask=ok, other=0.0).to(tl.float32)[None, :]
        cs2 += wr * tl.load(row + c2, mask=ok, other=0.0).to(tl.float32)[None, :]
        cs3 += wr * tl.load(row + c3, mask=ok, other=0.0).to(tl.float32)[None, :]
        cs4 += wr * tl.load(row + c4, mask=ok, other=0.0).to(tl.float32)[None, :]
    return cs0, cs1, cs2, cs3, cs4


@triton.jit
def _reduce_kernel(X, OUT, H, W, HO, WO, sxp, ODD: tl.constexpr, K0: tl.constexpr, K1: tl.constexpr,
                   K2: tl.constexpr, K3: tl.constexpr, K4: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """ROWS output rows a program (:func:`_column_sums`): the same sums in the same order as one output row at a
    time; programs away from the plane's top and bottom take their row weights from the tap alone."""
    io0 = tl.program_id(1) * ROWS
    plane = tl.program_id(2).to(tl.int64)
    jo = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = jo < WO
    base = X + plane * sxp
    wc0, c0 = _reduce_weight(jo, 0, W, WO, ODD, K0, K1, K2, K3, K4)
    wc1, c1 = _reduce_weight(jo, 1, W, WO, ODD, K0, K1, K2, K3, K4)
    wc2, c2 = _reduce_weight(jo, 2, W, WO, ODD, K0, K1, K2, K3, K4)
    wc3, c3 = _reduce_weight(jo, 3, W, WO, ODD, K0, K1, K2, K3, K4)
    wc4, c4 = _reduce_weight(jo, 4, W, WO, ODD, K0, K1, K2, K3, K4)
    if (io0 >= 1) & (io0 + ROWS < HO) & (2 * io0 + 2 * ROWS < H):
        cs0, cs1, cs2, cs3, cs4 = _column_sums(base, io0, H, W, HO, c0, c1, c2, c3, c4, ok, False, ODD, K0, K1, K2,
                                               K3, K4, ROWS, BLOCK)
    else:
        cs0, cs1, cs2, cs3, cs4 = _column_sums(base, io0, H, W, HO, c0, c1, c2, c3, c4, ok, True, ODD, K0, K1, K2,
                                               K3, K4, ROWS, BLOCK)
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    acc += wc0[None, :] * cs0
    acc += wc1[None, :] * cs1
    acc += wc2[None, :] * cs2
    acc += wc3[None, :] * cs3
    acc += wc4[None, :] * cs4
    io = io0 + tl.arange(0, ROWS)
    out = OUT + plane * HO * WO + io[:, None].to(tl.int64) * WO + jo[None, :]
    tl.store(out, acc, mask=(io[:, None] < HO) & ok[None, :])


@triton.jit
def expand_at(base, i, j, h, w, ok):
    """cvvdp_expand of the plane at ``base`` (h, w contiguous) at output row ``i`` (scalar), columns ``j``."""
    bi = i // 2
    odd_i = (i % 2) == 1
    wy0 = tl.where(odd_i, 0.0, 0.1)
    wy1 = tl.where(odd_i, 0.5, 0.8)
    wy2 = tl.where(odd_i, 0.5, 0.1)
    r0 = tl.maximum(bi - 1, 0).to(tl.int64) * w
    r1 = tl.minimum(bi, h - 1).to(tl.int64) * w
    r2 = tl.minimum(bi + 1, h - 1).to(tl.int64) * w
    bj = j // 2
    odd_j = (j % 2) == 1
    c0 = tl.maximum(bj - 1, 0)
    c1 = tl.minimum(bj, w - 1)
    c2 = tl.minimum(bj + 1, w - 1)
    v0 = (wy0 * tl.load(base + r0 + c0, mask=ok, other=0.0) + wy1 * tl.load(base + r1 + c0, mask=ok, other=0.0)
          + wy2 * tl.load(base + r2 + c0, mask=ok, other=0.0))
    v1 = (wy0 * tl.load(base + r0 + c1, mask=ok, other=0.0) + wy1 * tl.load(base + r1 + c1, mask=ok, other=0.0)
          + wy2 * tl.load(base + r2 + c1, mask=ok, other=0.0))
    v2 = (wy0 * tl.load(base + r0 + c2, mask=ok, other=0.0) + wy1 * tl.load(base + r1 + c2, mask=ok, other=0.0)
          + wy2 * tl.load(base + r2 + c2, mask=ok, other=0.0))
    wx0 = tl.where(odd_j, 0.0, 0.1)
    wx1 = tl.where(odd_j, 0.5, 0.8)
    wx2 = tl.where(odd_j, 0.5, 0.1)
    return wx0 * v0 + wx1 * v1 + wx2 * v2


@triton.jit
def _stencil_rows(x0, x1, x2, WY0: tl.constexpr, WY1: tl.constexpr, WY2: tl.constexpr):
    return WY0 * x0 + WY1 * x1 + WY2 * x2


@triton.jit
def expand_pair_at(base, bi, j, h, w, ok):
    """:func:`expand_at` at output rows 2 bi and 2 bi + 1 (the same three input rows): each of the nine inputs is
    loaded once for both rows; the same sums as two calls."""
    r0 = tl.maximum(bi - 1, 0).to(tl.int64) * w
    r1 = tl.minimum(bi, h - 1).to(tl.int64) * w
    r2 = tl.minimum(bi + 1, h - 1).to(tl.int64) * w
    bj = j // 2
    odd_j = (j % 2) == 1
    c0 = tl.maximum(bj - 1, 0)
    c1 = tl.minimum(bj, w - 1)
    c2 = tl.minimum(bj + 1, w - 1)
    x00, x10, x20 = (tl.load(base + r0 + c0, mask=ok, other=0.0), tl.load(base + r1 + c0, mask=ok, other=0.0),
                     tl.load(base + r2 + c0, mask=ok, other=0.0))
    x01, x11, x21 = (tl.load(base + r0 + c1, mask=ok, other=0.0), tl.load(base + r1 + c1, mask=ok, other=0.0),
                     tl.load(base + r2 + c1, mask=ok, other=0.0))
    x02, x12, x22 = (tl.load(base + r0 + c2, mask=ok, other=0.0), tl.load(base + r1 + c2, mask=ok, other=0.0),
                     tl.load(base + r2 + c2, mask=ok, other=0.0))
    wx0 = tl.where(odd_j, 0.0, 0.1)
    wx1 = tl.where(odd_j, 0.5, 0.8)
    wx2 = tl.where(odd_j, 0.5, 0.1)
    even = (wx0 * _stencil_rows(x00, x10, x20, 0.1, 0.8, 0.1) + wx1 * _stencil_rows(x01, x11, x21, 0.1, 0.8, 0.1)
            + wx2 * _stencil_rows(x02, x12, x22, 0.1, 0.8, 0.1))
    odd = (wx0 * _stencil_rows(x00, x10, x20, 0.0, 0.5, 0.5) + wx1 * _stencil_rows(x01, x11, x21, 0.0, 0.5, 0.5)
           + wx2 * _stencil_rows(x02, x12, x22, 0.0, 0.5, 0.5))
    return even, odd


@triton.jit
def _expand_kernel(X, OUT, h, w, HO, WO, sxp, BLOCK: tl.constexpr):
    i = tl.program_id(1)
    plane = tl.program_id(2).to(tl.int64)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = j < WO
    v = expand_at(X + plane * sxp, i, j, h, w, ok)
    tl.store(OUT + plane * HO * WO + i.to(tl.int64) * WO + j, v, mask=ok)


def _planes(x: torch.Tensor) -> torch.Tensor:
    """x as contiguous float32 planes (the metric's buffers already are: no copy)."""
    x = x if x.dtype == torch.float32 else x.float()
    return x.contiguous()


@cached(maxsize=128)
def _reduce_launcher(n: int, c: int, h: int, w: int) -> tuple[Launcher, tuple]:
    ho, wo = (h + 1) // 2, (w + 1) // 2
    block, warps = block_for(wo)
    grid = (triton.cdiv(wo, block), triton.cdiv(ho, _REDUCE_ROWS), n * c)
    launch = Launcher(_reduce_kernel, grid, num_warps=warps)
    return launch, (h, w, ho, wo, h * w, h % 2 == 1, *_K, _REDUCE_ROWS, block)


@cvvdp_reduce.triton_launcher
def cvvdp_reduce_fwd(x: torch.Tensor) -> torch.Tensor:
    """One pyramid reduction (N, C, H, W) -> (N, C, ceil(H/2), ceil(W/2)), float32."""
    x = _planes(x)
    n, c, h, w = x.shape
    launch, tail = _reduce_launcher(n, c, h, w)
    out = torch.empty((n, c, (h + 1) // 2, (w + 1) // 2), dtype=torch.float32, device=x.device)
    launch(x, out, *tail)
    return out


@cached(maxsize=128)
def _expand_launcher(n: int, c: int, h: int, w: int, ho: int, wo: int) -> tuple[Launcher, tuple]:
    block, warps = block_for(wo)
    launch = Launcher(_expand_kernel, (triton.cdiv(wo, block), ho, n * c), num_warps=warps)
    return launch, (h, w, ho, wo, h * w, block)


@cvvdp_expand.triton_launcher
def cvvdp_expand_fwd(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Expand (N, C, h, w) to (N, C, height, width), float32 (h = ceil(height/2), w = ceil(width/2))."""
    x = _planes(x)
    n, c, h, w = x.shape
    if h != (height + 1) // 2 or w != (width + 1) // 2:
        raise ValueError(f"cvvdp_expand: a ({h}, {w}) level expands to twice its size; got ({height}, {width})")
    launch, tail = _expand_launcher(n, c, h, w, int(height), int(width))
    out = torch.empty((n, c, height, width), dtype=torch.float32, device=x.device)
    launch(x, out, *tail)
    return out
