"""Butteraugli's compiled element-wise stages (fusedsim.families.butteraugli.stages_cpu) give the twins' bits on the
CPU: values on both sides of every dead zone and soft clamp, dark pixels at the sensitivity floor, batches."""

from __future__ import annotations

import pytest
import torch

from fusedsim.families.butteraugli.stages_cpu import bands_numba, opsin_xyb_numba
from fusedsim.families.butteraugli.filters_twin import butteraugli_blur_ref
from fusedsim.families.butteraugli.twin import bands_ref, opsin_xyb_ref


def _planes(shape, scales, seed):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x * torch.tensor(scales, dtype=torch.float64).view(1, -1, 1, 1)


@pytest.mark.parametrize("shape", [(2, 37, 61), (1, 1, 1), (1, 9, 130)])
def test_bands_are_bit_identical(shape):
    n, h, w = shape
    lf = _planes((n, 3, h, w), (5.0, 20.0, 10.0), 1)
    mf = _planes((n, 3, h, w), (0.4, 0.15, 2.0), 2)  # around the MF dead zones (0.29, 0.1)
    pre = _planes((n, 2, h, w), (2.0, 40.0), 3)
    blur = pre * 0.7 + _planes((n, 2, h, w), (0.05, 6.0), 4)  # around the HF ranges and the soft clamps
    got = bands_numba(lf, mf, pre, blur)
    assert got.shape == (n, 11, h, w) and torch.equal(got, bands_ref(lf, mf, pre, blur))


@pytest.mark.parametrize("intensity_target", [80.0, 250.0])
def test_opsin_is_bit_identical(intensity_target):
    gen = torch.Generator().manual_seed(5)
    rgb = torch.rand(2, 3, 33, 47, generator=gen, dtype=torch.float64) ** 2.2
    rgb.view(-1)[::7] = 0.0  # dark pixels: the sensitivity floor and the output clamp
    rgb[0, :, 0, :5] = 1.0
    blurred = butteraugli_blur_ref(rgb, 1.2)
    got = opsin_xyb_numba(rgb, blurred, intensity_target)
    assert torch.equal(got, opsin_xyb_ref(rgb, blurred, intensity_target))


def test_other_dtypes_and_gradients_run_the_twins():
    rgb = torch.rand(1, 3, 5, 6, dtype=torch.float32)
    assert torch.equal(opsin_xyb_numba(rgb, rgb, 80.0), opsin_xyb_ref(rgb, rgb, 80.0))
    x = torch.rand(1, 3, 5, 6, dtype=torch.float64, requires_grad=True)
    assert opsin_xyb_numba(x, x.detach(), 80.0).requires_grad


@pytest.mark.parametrize("reference", ["batch 1", "expanded", "batch N"])
@pytest.mark.parametrize("with_half", [True, False])
def test_combine_is_bit_identical(reference, with_half):
    from fusedsim.families.butteraugli.stages_cpu import diffmap_combine_numba
    from fusedsim.families.butteraugli.twin import BANDS, diffmap_combine_ref

    n, h, w = 3, 17, 11
    gen = torch.Generator().manual_seed(11)
    scales = (3.0, 20.0, 30.0, 0.5, 0.5, 2.0, 1.5, 3.0, 0.05, 1.0, 1.0)
    ref_n = n if reference == "batch N" else 1
    b0 = _planes((ref_n, BANDS, h, w), scales, 12)
    # distorted bands near the reference's (both sides of the asymmetric HF range) and far from it
    b1 = b0 * (0.2 + 1.2 * torch.rand((n, BANDS, h, w), generator=gen, dtype=torch.float64))
    b1 = b1 + _planes((n, BANDS, h, w), scales, 13) * 0.3
    ac_x, ac_y = torch.rand((2, n, h, w), generator=gen, dtype=torch.float64) * 100
    act0 = torch.rand((ref_n, h, w), generator=gen, dtype=torch.float64) * 5
    act1 = torch.rand((n, h, w), generator=gen, dtype=torch.float64) * 5
    mask = torch.rand((ref_n, h, w), generator=gen, dtype=torch.float64) * 10
    if reference == "expanded":
        b0, act0, mask = (t.expand(n, *t.shape[1:]) for t in (b0, act0, mask))
    half = (torch.rand((n, (h + 1) // 2, (w + 1) // 2), generator=gen, dtype=torch.float64) if with_half
            else torch.empty(0, dtype=torch.float64))
    args = (b0, b1, ac_x, ac_y, act0, act1, mask, half, 0.8)
    got, want = diffmap_combine_numba(*args), diffmap_combine_ref(*args)
    assert got.shape == (n, h, w) and torch.equal(got, want)
