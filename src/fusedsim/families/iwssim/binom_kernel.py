"""IW-SSIM's pyramid filter (matlabPyrTools' binom5 with reflect1 edges) along one axis, as one Triton kernel.

    iwssim_binom(x (N, C, H, W), dim, step) -> every step-th output of binom5 along dim (-1: W, -2: H)

out[j] = Σ_i k_i · x[reflect(j·step + i - 2)], the five products added one by one in the twin's order
(``iwssim_ref.binom_filter_ref``: ((k0·x0 + k1·x1) + k2·x2) + ...) with no fused multiply-add, so the result
equals the CPU twin's bit for bit. On the GPU the twin's fallback is a cuDNN float64 convolution, which took
14 of 31 ms of a 16 MP IW-SSIM call on an H200; this kernel reads each sample once per tap from L1/L2 and
writes each output once. Forward only (the differentiable path is the twin). reflect: q = |p|, then
2(size - 1) - q past the last sample (mirror about the edge sample, as the twin's index table).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.iwssim.twin import BINOM5
from fusedsim.families.iwssim.ops import iwssim_binom

BH, BW = 16, 64


@triton.jit
def reflect1(p, size):
    """matlabPyrTools' reflect1 index of position p (|p| < size): mirror about the first and last samples."""
    q = tl.abs(p)
    return tl.where(q > size - 1, 2 * (size - 1) - q, q)


@triton.jit
def _binom_kernel(X, K, OUT, H, W, HO, WO, sxp, sxh, sxw, STEP: tl.constexpr, ALONG_W: tl.constexpr,
                  BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    pid_w = tl.program_id(0)
    pid_h = tl.program_id(1)
    plane = tl.program_id(2)
    rows = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    ok = (rows < HO) & (cols < WO)
    base = X + plane.to(tl.int64) * sxp
    if ALONG_W:
        size = W
        pos = cols * STEP
    else:
        size = H
        pos = rows * STEP
    acc = tl.zeros([BLOCK_H, BLOCK_W], X.dtype.element_ty)
    for i in tl.static_range(5):
        q = reflect1(pos + (i - 2), size)
        if ALONG_W:
            ptr = base + rows.to(tl.int64) * sxh + q.to(tl.int64) * sxw
        else:
            ptr = base + q.to(tl.int64) * sxh + cols.to(tl.int64) * sxw
        v = tl.load(ptr, mask=ok, other=0.0)
        term = tl.load(K + i).to(v.dtype) * v  # the twin's taps are in x's dtype
        if i == 0:
            acc = term
        else:
            acc = acc + term
    tl.store(OUT + (plane.to(tl.int64) * HO + rows) * WO + cols, acc, mask=ok)


@cached(maxsize=16)
def binom_taps(device: torch.device) -> torch.Tensor:
    return torch.tensor(BINOM5, dtype=torch.float64, device=device)  # float64 through memory, not as arguments


@cached(maxsize=128)
def _launcher(planes: int, ho: int, wo: int, dtype: torch.dtype, step: int, along_w: bool,
              ints: tuple[int, ...]) -> Launcher:
    """One launcher per grid, dtype and integer arguments (``ints``: the input's size and strides): a launcher
    reuses the kernel it compiled first, which Triton specialised on them (1 and multiples of 16 are constants)."""
    grid = (triton.cdiv(wo, BW), triton.cdiv(ho, BH), planes)
    return Launcher(_binom_kernel, grid, num_warps=4, enable_fp_fusion=False)


@iwssim_binom.triton_launcher
def iwssim_binom(x: torch.Tensor, dim: int, step: int) -> torch.Tensor:
    """binom5 of (N, C, H, W) along ``dim`` (-1 or -2), every ``step``-th output (see the module docstring)."""
    if x.dim() != 4 or dim not in (-1, -2, 2, 3):
        raise ValueError(f"iwssim_binom filters (N, C, H, W) along dim -1 or -2; got shape {tuple(x.shape)}, dim {dim}")
    if step not in (1, 2):
        raise ValueError(f"iwssim_binom: step must be 1 or 2; got {step}")
    along_w = dim in (-1, 3)
    n, c, h, w = x.shape
    x = x.reshape(n * c, h, w)  # a view for the usual layouts; reshape copies the rest
    ho, wo = (h, -(-w // step)) if along_w else (-(-h // step), w)
    out = torch.empty((n, c, ho, wo), dtype=x.dtype, device=x.device)
    if out.numel():
        strides = x.stride()
        _launcher(n * c, ho, wo, x.dtype, step, along_w, (h, w, *strides))(
            x, binom_taps(x.device), out, h, w, ho, wo, *strides, step, along_w, BH, BW)
    return out
