"""Registration ops on meta tensors (shape propagation): LNCC and warp give meta results of the shape and dtype
the same call gives on real tensors, and meta gradients of the inputs' shapes."""

from __future__ import annotations

import pytest
import torch

from fusedsim.registration import lncc_loss, warp

LNCC_CASES = [((2, 3, 12, 13), "mean", "monai"), ((2, 3, 12, 13), "none", "fireants"),
              ((1, 2, 6, 7, 8), "sum", "fireants_torch")]


@pytest.mark.parametrize("shape,reduction,convention", LNCC_CASES)
def test_lncc_meta(shape, reduction, convention):
    kw = {"kernel_size": 5, "reduction": reduction, "convention": convention}
    real = lncc_loss(torch.rand(shape), torch.rand(shape), **kw)
    x = torch.empty(shape, device="meta", requires_grad=True)
    out = lncc_loss(x, torch.empty(shape, device="meta"), **kw)
    assert out.device.type == "meta" and (out.shape, out.dtype) == (real.shape, real.dtype)
    out.sum().backward()
    assert x.grad.device.type == "meta" and x.grad.shape == x.shape


def test_warp_meta():
    image, field = (2, 3, 8, 9), (2, 5, 6, 2)
    real = warp(torch.rand(image), grid=torch.zeros(field))
    out = warp(torch.empty(image, device="meta"), grid=torch.empty(field, device="meta"))
    assert out.device.type == "meta" and (out.shape, out.dtype) == (real.shape, real.dtype)
