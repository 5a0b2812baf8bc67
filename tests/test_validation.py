"""Shared argument checks: ``check_positive`` takes what pytorch-msssim takes for data_range, and nothing else."""

from __future__ import annotations

import fractions

import numpy as np
import pytest
import torch

import fusedsim
from fusedsim.core.validation import check_positive


@pytest.mark.parametrize("value, expected", [
    (1, 1.0), (2.5, 2.5), (np.float32(1), 1.0), (np.float64(255), 255.0), (np.int64(3), 3.0), (np.uint8(255), 255.0),
    (torch.tensor(2.0), 2.0), (torch.tensor(7, dtype=torch.int32), 7.0), (torch.tensor(0.5, dtype=torch.float16), 0.5),
    (torch.tensor(1.0, requires_grad=True), 1.0), (fractions.Fraction(1, 4), 0.25),
])
def test_accepted_scalars(value, expected):
    out = check_positive(value, "data_range")
    assert type(out) is float and out == expected


@pytest.mark.parametrize("value, error, match", [
    (True, TypeError, "data_range must be a number; got bool"),
    (np.bool_(True), TypeError, "must be a number"),
    ("1", TypeError, "got str"),
    (None, TypeError, "got NoneType"),
    (1 + 0j, TypeError, "got complex"),
    (torch.tensor([1.0]), TypeError, r"0-d tensor; got a tensor of shape \(1,\)"),
    (torch.tensor(True), TypeError, "real number; got a torch.bool tensor"),
    (float("nan"), ValueError, "finite number > 0; got nan"),
    (np.float32("inf"), ValueError, "finite number > 0"),
    (torch.tensor(float("nan")), ValueError, "finite number > 0"),
    (0, ValueError, "got 0"),
    (-1.0, ValueError, "got -1.0"),
    (np.float32(0), ValueError, "> 0"),
])
def test_refused_values(value, error, match):
    with pytest.raises(error, match=match):
        check_positive(value, "data_range")


def test_ssim_takes_numpy_and_tensor_data_range_like_pytorch_msssim():
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(1, 3, 32, 32, generator=g), torch.rand(1, 3, 32, 32, generator=g)
    expected = fusedsim.ssim(x, y, data_range=1.0)
    for data_range in (np.float32(1), np.float64(1), torch.tensor(1.0), torch.tensor(1)):
        assert torch.equal(fusedsim.ssim(x, y, data_range=data_range), expected)
        assert torch.equal(fusedsim.ms_ssim(x.repeat(1, 1, 6, 6), y.repeat(1, 1, 6, 6), data_range=data_range),
                           fusedsim.ms_ssim(x.repeat(1, 1, 6, 6), y.repeat(1, 1, 6, 6), data_range=1.0))
    pytorch_msssim = pytest.importorskip("pytorch_msssim")
    reference = pytorch_msssim.ssim(x.double(), y.double(), data_range=np.float32(1))
    assert float(fusedsim.ssim(x, y, data_range=np.float32(1))) == pytest.approx(float(reference), abs=1e-5)
