"""Meta tensors (no storage: shape propagation, deferred initialisation) through every public SSIM function: the
result has the shape and dtype the same call gives on real CPU tensors, on the meta device, and a training call's
backward gives meta gradients of the inputs' shapes."""

from __future__ import annotations

import pytest
import torch

import fusedsim

CASES = {
    "fused_ssim": (lambda x, y: fusedsim.fused_ssim(x, y), (2, 3, 24, 20)),
    "fused_ssim valid": (lambda x, y: fusedsim.fused_ssim(x, y, padding="valid"), (2, 3, 24, 20)),
    "fused_ssim 3-D": (lambda x, y: fusedsim.fused_ssim(x, y, window_size=7), (1, 1, 9, 10, 11)),
    "ssim": (lambda x, y: fusedsim.ssim(x, y, data_range=1.0), (2, 3, 24, 20)),
    "ssim map": (lambda x, y: fusedsim.ssim(x, y, data_range=1.0, reduction="none"), (2, 3, 24, 20)),
    "ssim per image": (lambda x, y: fusedsim.ssim(x, y, data_range=1.0, size_average=False), (2, 3, 24, 20)),
    "ms_ssim": (lambda x, y: fusedsim.ms_ssim(x, y, data_range=1.0), (1, 3, 161, 170)),
    "ms_ssim per channel": (lambda x, y: fusedsim.ms_ssim(x, y, data_range=1.0, reduction="channel"), (1, 3, 161, 170)),
    "l1_ssim_loss": (lambda x, y: fusedsim.l1_ssim_loss(x, y), (2, 3, 24, 20)),
    "l1_ssim_loss per image": (lambda x, y: fusedsim.l1_ssim_loss(x, y, reduction="image"), (2, 3, 24, 20)),
}


@pytest.mark.parametrize("name", CASES)
def test_meta_inputs_give_meta_results_of_the_real_shape(name):
    fn, shape = CASES[name]
    real = fn(torch.rand(shape, generator=torch.Generator().manual_seed(0)), torch.rand(shape))
    x = torch.empty(shape, device="meta", requires_grad=True)
    out = fn(x, torch.empty(shape, device="meta"))
    assert out.device.type == "meta"
    assert (out.shape, out.dtype) == (real.shape, real.dtype)
    out.sum().backward()
    assert x.grad.device.type == "meta" and x.grad.shape == x.shape


def test_meta_inputs_refuse_what_needs_values():
    x = torch.empty(1, 1, 16, 16, device="meta")
    with pytest.raises(ValueError, match="check_finite=True reads the values"):
        fusedsim.ssim(x, x, data_range=1.0, check_finite=True)
    with pytest.raises(ValueError, match="data_range is a meta tensor"):
        fusedsim.ssim(x, x, data_range=torch.tensor(1.0, device="meta"))
