"""``lane_shift`` (``ops/lane_shift.py``): a row shifted by S columns through warp shuffles of three aligned
32-column segments equals the zero-padded shift, for every reach the kernels use (|S| <= 32), across tile and
image borders. Runs on the GPU when there is one, else through Triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from fusedsim.core.lane_shift import MAX_SHIFT, lane_shift


@triton.jit
def _shifted_rows_kernel(X, OUT, W, S: tl.constexpr, BW: tl.constexpr):
    row = tl.program_id(1)
    cols = tl.program_id(0) * BW + tl.arange(0, BW)
    ptr = X + row * W + cols
    lo = tl.load(ptr - 32, mask=(cols >= 32) & (cols - 32 < W), other=0.0)
    mid = tl.load(ptr, mask=cols < W, other=0.0)
    hi = tl.load(ptr + 32, mask=cols + 32 < W, other=0.0)
    tl.store(OUT + row * W + cols, lane_shift(lo, mid, hi, S, BW), mask=cols < W)


def _zero_padded_shift(x: torch.Tensor, s: int) -> torch.Tensor:
    """out[:, i] = x[:, i + s], zero outside the row."""
    out = torch.zeros_like(x)
    w = x.shape[1]
    src = torch.arange(w) + s
    keep = (src >= 0) & (src < w)
    out[:, keep] = x[:, src[keep]]
    return out


@pytest.mark.parametrize("block_w", [32, 64])
@pytest.mark.parametrize("shift", [-MAX_SHIFT, -31, -5, -1, 0, 1, 7, 31, MAX_SHIFT])
def test_lane_shift_is_the_zero_padded_shift(kernel_device, shift, block_w):
    x = torch.randn(3, 100, generator=torch.Generator().manual_seed(shift + 40)).to(kernel_device)
    out = torch.full_like(x, float("nan"))
    _shifted_rows_kernel[(triton.cdiv(100, block_w), 3)](x, out, 100, S=shift, BW=block_w, num_warps=block_w // 32)
    torch.testing.assert_close(out.cpu(), _zero_padded_shift(x.cpu(), shift), rtol=0, atol=0)
