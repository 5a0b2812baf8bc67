"""The fused MS-SSIM path (one pyramid launch, the combine folded into the level kernels) against the per-level
path it replaces (``MSSSIMPlan(fused_pyramid=False)``): the same floating-point operations in the same order, so
the pyramid, the gradients and per-channel values are compared with ``torch.equal``; and the launches each path
makes. A mean or per-image value ends in ``tl.sum`` over planes, whose order on a GPU follows the launching
kernel's warps (the last SSIM level's, not the combine kernel's): there, 8 ulp relative.

Runs on the GPU when there is one, else on the CPU through Triton's interpreter (small sizes).
"""

from __future__ import annotations

import pytest
import torch

import fusedsim.core.launch as _launch
from fusedsim.ssim.avg_pool import avg_pool_plan
from fusedsim.ssim.ms_pyramid import PyramidPlan
from fusedsim.ssim.kernels import MSSSIMPlan
from fusedsim.ssim.kernel_source import REDUCE_CHANNEL, REDUCE_IMAGE, REDUCE_MEAN
from fusedsim.core.moments.twin import compute_dtype, gaussian_window


def _pair(shape, device, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    y = (x + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)


@pytest.mark.parametrize("shape, levels, dtype", [
    ((2, 3, 37, 45), 4, torch.float32),  # odd at every level
    ((1, 1, 181, 183), 5, torch.float32),  # the smallest 5-level MS-SSIM with an 11 window, odd sides
    ((1, 2, 23, 18), 3, torch.float16),  # 16-bit: every level rounded to the input dtype before the next
    ((3, 1, 9, 7), 2, torch.float64),
])
def test_pyramid_equals_per_level_pooling(kernel_device, shape, levels, dtype):
    x, y = _pair(shape, kernel_device, dtype, seed=levels)
    x = x.transpose(2, 3).contiguous().transpose(2, 3)  # strided input
    plan = PyramidPlan(shape, x.stride(), y.stride(), dtype, levels)
    got_x, got_y = plan.forward(x, y, torch.full((plan.length,), float("nan"), dtype=dtype, device=kernel_device))
    xs, ys = x, y
    for level, (px, py) in enumerate(zip(got_x, got_y), start=1):
        ref, _ = avg_pool_plan(tuple(xs.shape), xs.stride(), ys.stride(), dtype, kernel_device).forward(xs, ys)
        assert torch.equal(px, ref[0]) and torch.equal(py, ref[1]), f"level {level}"
        xs, ys = ref[0], ref[1]


def _run(plan, x, y, win, weights, cotangent, needs):
    out, saved = plan.forward(x, y, win, weights)
    dx, dy, _, _ = plan.backward((x, y, win, weights), saved, cotangent, (*needs, False, False))
    return out, dx, dy


def _plans(x, taps, levels, reduce):
    args = (tuple(x.shape), x.stride(), x.stride(), x.dtype, x.device, taps, 1e-4, 9e-4, True, levels, reduce)
    return MSSSIMPlan(*args, fused_pyramid=False), MSSSIMPlan(*args, fused_pyramid=True)


@pytest.mark.parametrize("shape, levels, reduce, needs, dtype", [
    ((2, 2, 13, 11), 3, REDUCE_MEAN, (True, True), torch.float64),  # 13x11 -> 7x6 -> 4x3: odd at levels 0, 1
    ((2, 3, 11, 9), 3, REDUCE_IMAGE, (True, True), torch.float32),
    ((2, 2, 10, 9), 2, REDUCE_CHANNEL, (True, True), torch.float64),
    ((1, 3, 11, 13), 2, REDUCE_CHANNEL, (False, True), torch.float16),
])
def test_fused_path_equals_per_level_path(kernel_device, shape, levels, reduce, needs, dtype):
    x, y = _pair(shape, kernel_device, dtype, seed=sum(shape))
    win = gaussian_window(3, 1.5, dtype=compute_dtype(x.dtype), device=kernel_device).expand(shape[1], -1)
    win = win.contiguous()
    gen = torch.Generator().manual_seed(levels)
    weights = torch.rand(levels, generator=gen, dtype=torch.float64).to(kernel_device, compute_dtype(dtype))
    old, new = _plans(x, 3, levels, reduce)
    cotangent = torch.randn(old.out_shape, generator=gen, dtype=torch.float64).to(kernel_device, old.acc)
    if reduce == REDUCE_CHANNEL:  # a strided upstream gradient, read in place by the fused path
        cotangent = cotangent.t().contiguous().t()
    got, ref = _run(new, x, y, win, weights, cotangent, needs), _run(old, x, y, win, weights, cotangent, needs)
    if reduce == REDUCE_CHANNEL:
        assert torch.equal(got[0], ref[0])
    else:
        eps = torch.finfo(old.acc).eps
        torch.testing.assert_close(got[0], ref[0], rtol=8 * eps, atol=0)
    for g, r in zip(got[1:], ref[1:]):
        assert (g is None) == (r is None)
        if r is not None:
            assert torch.equal(g, r), (g - r).abs().max()


def test_launch_counts(kernel_device, monkeypatch):
    """Forward: levels + 1 launches fused (2 levels before); backward: levels (levels + 1 before)."""
    calls = []
    original = _launch.Launcher.__call__
    monkeypatch.setattr(_launch.Launcher, "__call__", lambda self, *a: (calls.append(1), original(self, *a))[1])
    levels = 2
    x, y = _pair((1, 1, 9, 10), kernel_device, torch.float32, seed=3)
    win = gaussian_window(3, 1.5, device=kernel_device).expand(1, -1).contiguous()
    weights = torch.tensor([0.4, 0.6], device=kernel_device)
    for plan, (fwd, bwd) in zip(_plans(x, 3, levels, REDUCE_MEAN), [(2 * levels, levels + 1),
                                                                    (levels + 1, levels)]):
        calls.clear()
        out, saved = plan.forward(x, y, win, weights)
        assert len(calls) == fwd
        calls.clear()
        plan.backward((x, y, win, weights), saved, torch.ones_like(out), (True, True, False, False))
        assert len(calls) == bwd
