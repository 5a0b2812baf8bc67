"""The ``monai`` convention's Gaussian LNCC taps are MONAI 1.6.1's to the bit (issue 38: they were 1-2 float32 ulp
off at k = 11, 15, 17 because ``-(x²)/(2σ²)`` rounds differently from MONAI's ``(-0.5/σ²)·x²``)."""

from __future__ import annotations

import pytest
import torch

from fusedsim.families.registration import lncc_loss
from fusedsim.families.registration.lncc_twin import lncc_loss_ref, lncc_taps


def monai_gaussian_kernel(kernel_size: int) -> torch.Tensor:
    """A transcription of ``monai.losses.image_dissimilarity.make_gaussian_kernel`` (MONAI 1.6.1)."""
    sigma = kernel_size / 3.0
    half = kernel_size // 2
    x = torch.arange(-half, half + 1, dtype=torch.float)
    return torch.exp(-0.5 / (sigma * sigma) * x**2)


@pytest.mark.parametrize("k", [3, 5, 7, 9, 11, 13, 15, 17, 21])
def test_monai_taps_equal_monai(k: int) -> None:
    taps = lncc_taps(k, "gaussian", k / 3.0, "monai")
    assert taps.dtype == torch.float64  # float32 values carried in float64
    assert torch.equal(taps.float(), monai_gaussian_kernel(k))


@pytest.mark.parametrize("k", [11, 15])
def test_kernel_and_twin_use_the_same_taps(k: int) -> None:
    """The public call (Triton interpreter here) and the twin agree: both are built from :func:`lncc_taps`."""
    gen = torch.Generator().manual_seed(k)
    x, y = torch.rand(1, 1, 24, 24, generator=gen), torch.rand(1, 1, 24, 24, generator=gen)
    got = lncc_loss(x, y, kernel_size=k, kernel_type="gaussian")
    want = lncc_loss_ref(x.double(), y.double(), kernel_size=k, kernel_type="gaussian")
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
