"""SSIMULACRA2's compiled CPU path against its twins: the recursive Gaussian and the XYB transform give the same
bits (the blur at every column structure: scalar head, 4-wide blocks, scalar tail; both radii in use), and so
does the metric (metrics/test_cpu_paths.py)."""

from __future__ import annotations

import pytest
import torch

from fusedsim.core.recursive_gaussian.cpu import recursive_gaussian_numba
from fusedsim.core.recursive_gaussian.twin import recursive_gaussian_ref


# widths below the first block (8), at block boundaries and with every tail length; heights likewise
@pytest.mark.parametrize("width", [1, 4, 7, 8, 9, 12, 13, 14, 15, 16, 40, 97])
@pytest.mark.parametrize("sigma", [1.5, 2.0])
def test_bit_identical_to_the_twin(width, sigma):
    x = torch.rand(2, 3, 11, width, generator=torch.Generator().manual_seed(width)) * 2 - 0.5
    assert torch.equal(recursive_gaussian_numba(x, sigma), recursive_gaussian_ref(x, sigma))


def test_non_contiguous_and_large_planes():
    x = torch.rand(1, 3, 300, 530, generator=torch.Generator().manual_seed(1))[:, :, 5:290:2, 3:]
    assert torch.equal(recursive_gaussian_numba(x), recursive_gaussian_ref(x))


def test_float64_runs_the_twin():
    x = torch.rand(2, 9, 13, dtype=torch.float64)
    got = recursive_gaussian_numba(x)
    assert got.dtype == torch.float64 and torch.equal(got, recursive_gaussian_ref(x))



def test_xyb_transform_bit_identical_to_the_twin():
    from fusedsim.core.xyb.cpu import linear_to_xyb_numba
    from fusedsim.core.xyb.twin import linear_to_xyb_ref

    gen = torch.Generator().manual_seed(4)
    # the linear range, tiny values (the cube root's small exponents), zeros and values above 1
    x = torch.cat([torch.rand(1, 3, 40, 33, generator=gen) ** 8, torch.rand(1, 3, 40, 33, generator=gen) * 1e-6,
                   torch.zeros(1, 3, 40, 33), torch.rand(1, 3, 40, 33, generator=gen) * 4])
    for positive in (True, False):
        assert torch.equal(linear_to_xyb_numba(x, positive), linear_to_xyb_ref(x, positive))
    assert torch.equal(linear_to_xyb_numba(x[:, :, 3:, ::3]), linear_to_xyb_ref(x[:, :, 3:, ::3]))


@pytest.mark.parametrize("ref_batch", [1, 3])
def test_error_maps_bit_identical_to_the_twin(ref_batch):
    from fusedsim.families.ssimulacra2.cpu import error_maps_numba
    from fusedsim.families.ssimulacra2.twin import error_maps_ref

    gen = torch.Generator().manual_seed(5)
    x2, mu2, s22, s12 = (torch.rand(3, 3, 21, 34, generator=gen) for _ in range(4))
    x1, mu1, s11 = (torch.rand(ref_batch, 3, 21, 34, generator=gen) for _ in range(3))
    x2[0, 0, 0, :4] = x1[0, 0, 0, :4]  # equal pixels: edge terms of exactly zero
    got = error_maps_numba(x1, x2, mu1, mu2, s11, s22, s12)
    assert got.dtype == torch.float64 and torch.equal(got, error_maps_ref(x1, x2, mu1, mu2, s11, s22, s12))


@pytest.mark.parametrize("ref_batch", [1, 3])
def test_error_pool_equals_the_twin_up_to_the_summation_order(ref_batch):
    """The compiled comparison pools each map by row sums as it makes it (no map stored); the twin takes PyTorch
    means of stored maps: the same values summed in another order, float64 rounding apart (~1e-16 relative)."""
    from fusedsim.families.ssimulacra2.cpu import ssimulacra2_error_pool_numba, ssimulacra2_pair_pool_numba
    from fusedsim.families.ssimulacra2.twin import (
        ssimulacra2_error_pool_ref,
        ssimulacra2_pair_pool_ref,
        ssimulacra2_reference_blur_ref,
    )

    gen = torch.Generator().manual_seed(6)
    x1 = torch.rand(ref_batch, 3, 45, 61, generator=gen)
    x2 = (x1 + 0.05 * torch.randn(3, 3, 45, 61, generator=gen)).clamp(0, 1)
    x2[0, 1, :5] = x1[0, 1, :5]  # equal rows: maps of exactly zero
    mu1, s11 = ssimulacra2_reference_blur_ref(x1)
    got = ssimulacra2_error_pool_numba(x1, x2, mu1, s11)
    want = ssimulacra2_error_pool_ref(x1, x2, mu1, s11)
    assert got.shape == want.shape == (3, 3, 2, 3) and got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-16)
    assert not torch.equal(want[0], want[1])  # the distorted images do differ
    if ref_batch == 3:
        torch.testing.assert_close(ssimulacra2_pair_pool_numba(x1, x2), ssimulacra2_pair_pool_ref(x1, x2),
                                   rtol=1e-13, atol=1e-16)


def test_uint8_linearisation_looks_up_the_twins_table():
    from fusedsim.families.ssimulacra2.cpu import ssimulacra2_linear_xyb_numba
    from fusedsim.families.ssimulacra2.twin import ssimulacra2_linear_xyb_ref

    codes = torch.arange(256, dtype=torch.uint8).repeat(3, 7).reshape(1, 3, 28, 64)
    for scale in (0, 1):
        assert torch.equal(ssimulacra2_linear_xyb_numba(codes, scale), ssimulacra2_linear_xyb_ref(codes, scale))
