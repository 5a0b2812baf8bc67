"""``Metric.set_reference`` keeps its own copy of the reference (issue 38): editing the caller's tensor afterwards
must not change later scores, for the metrics whose state is the tensor itself and the prepared ones alike."""

from __future__ import annotations

import pytest
import torch

import fusedsim


@pytest.mark.parametrize("name", ["ssim", "psnr", "ms_ssim", "ssimulacra2", "dssim"])
def test_editing_the_reference_after_set_reference_changes_nothing(name: str) -> None:
    gen = torch.Generator().manual_seed(1)
    ref = torch.rand(1, 3, 176, 176, generator=gen)
    dist = (ref + 0.05 * torch.randn(1, 3, 176, 176, generator=gen)).clamp(0, 1)
    metric = fusedsim.Metric(name, device="cpu").set_reference(ref)
    before = metric.score(dist)
    ref.mul_(0.5)
    after = metric.score(dist)
    assert torch.equal(torch.as_tensor(before), torch.as_tensor(after)), name
