"""IW-SSIM on meta tensors (shape propagation): one-shot, prepared and differentiable calls give meta results of
the shape and dtype the same call gives on real tensors, and meta gradients of the inputs' shapes."""

from __future__ import annotations

import pytest
import torch

import fusedsim

SHAPE = (1, 3, 176, 176)  # IW-SSIM's minimum size


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.float64])
def test_meta_inputs_give_meta_results_of_the_real_shape(dtype):
    real_in = torch.zeros(SHAPE, dtype=dtype)
    real = fusedsim.iw_ssim(real_in, real_in)
    meta = torch.empty(SHAPE, dtype=dtype, device="meta")
    out = fusedsim.iw_ssim(meta, meta)
    assert out.device.type == "meta" and (out.shape, out.dtype) == (real.shape, real.dtype)
    prepared = fusedsim.score_prepared_iw_ssim(fusedsim.prepare_iw_ssim(meta), meta)
    assert prepared.device.type == "meta" and (prepared.shape, prepared.dtype) == (real.shape, real.dtype)


def test_meta_gradients():
    x = torch.empty(SHAPE, device="meta", requires_grad=True)
    fusedsim.iw_ssim(x, torch.empty(SHAPE, device="meta")).sum().backward()
    assert x.grad.device.type == "meta" and x.grad.shape == x.shape
