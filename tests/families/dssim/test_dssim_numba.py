"""DSSIM's compiled CPU blur and Lab transform against their twins: the same bits (the blur at every size: the folded
first and last samples, the mirrored inner taps, planes of one or two samples), in float32 and float64."""

from __future__ import annotations

import pytest
import torch

from fusedsim.families.dssim.cpu import dssim_blur_numba
from fusedsim.families.dssim.twin import dssim_blur_ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("height", [1, 2, 3, 4, 5, 9, 37])
def test_blur_bit_identical_to_the_twin(height, dtype):
    gen = torch.Generator().manual_seed(height)
    for width in (1, 2, 3, 4, 6, 40):
        x = (torch.rand(2, 3, height, width, generator=gen, dtype=torch.float64) * 200 - 100).to(dtype)
        assert torch.equal(dssim_blur_numba(x), dssim_blur_ref(x))
    x = torch.rand(1, 2, height + 4, 50, generator=gen, dtype=torch.float64).to(dtype)[:, :, 2:-2, ::3]
    assert torch.equal(dssim_blur_numba(x), dssim_blur_ref(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lab_bit_identical_to_the_twin(dtype):
    from fusedsim.families.dssim.cpu import lab_of_linear_numba
    from fusedsim.families.dssim.twin import lab_of_linear_ref

    gen = torch.Generator().manual_seed(6)
    # the cube-root branch, the linear segment below epsilon, zeros and values above 1 (premultiplied composites)
    lin = torch.cat([torch.rand(1, 3, 30, 41, generator=gen, dtype=torch.float64),
                     torch.rand(1, 3, 30, 41, generator=gen, dtype=torch.float64) * 1e-2,
                     torch.zeros(1, 3, 30, 41), torch.rand(1, 3, 30, 41, generator=gen, dtype=torch.float64) * 2])
    lin = lin.to(dtype)
    assert torch.equal(lab_of_linear_numba(lin), lab_of_linear_ref(lin))
    assert torch.equal(lab_of_linear_numba(lin[:, :, 2:, ::2]), lab_of_linear_ref(lin[:, :, 2:, ::2]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 37, 53), (1, 3, 5, 3), (1, 3, 1, 1), (1, 3, 2, 6)])
def test_ssim_map_is_bit_identical(shape, dtype):
    """The five blur inputs, one blur over all of them and the map formula compiled: the twin's bits, borders
    (reflected taps, lines of 1-6 samples) included."""
    from fusedsim.families.dssim.cpu import dssim_ssim_map_numba
    from fusedsim.families.dssim.twin import dssim_ssim_map_ref

    gen = torch.Generator().manual_seed(12)
    lab1 = torch.rand(shape, generator=gen, dtype=dtype) * 100 - 20
    lab2 = lab1 + torch.randn(shape, generator=gen, dtype=dtype) * 3
    assert torch.equal(dssim_ssim_map_numba(lab1, lab2), dssim_ssim_map_ref(lab1, lab2))
