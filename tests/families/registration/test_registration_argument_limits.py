"""Arguments whose size would break the computation are refused up front, naming the argument and its range:
``scaling_and_squaring``'s steps (2**steps overflows, velocity / 2**steps underflows) and ``lncc_loss``'s
kernel_size (the conventions build the whole d-dim window to take its float32 sum)."""

from __future__ import annotations

import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.registration import lncc_loss, scaling_and_squaring


@pytest.mark.parametrize("dtype,top", [(torch.float32, 24), (torch.float64, 53)])
def test_scaling_and_squaring_steps_range(dtype, top):
    from fusedsim.registration import max_squaring_steps

    assert max_squaring_steps(dtype) == top  # the significand widths of IEEE binary32 / binary64
    v = 0.05 * torch.randn(1, 6, 7, 2, generator=torch.Generator().manual_seed(0), dtype=dtype)
    with use_backend("reference"):
        at_limit = scaling_and_squaring(v, top)
        seven = scaling_and_squaring(v, 7)
        for steps in (top + 1, 1024, 10**6):
            with pytest.raises(ValueError, match=rf"steps must lie in 0\.\.{top} for a {str(dtype)[6:]} velocity; "
                                                 rf"got {steps}"):
                scaling_and_squaring(v, steps)
        with pytest.raises(ValueError, match=r"steps must lie in 0\.\."):
            scaling_and_squaring(v, -1)
    # a smooth small field: 7 and `top` squarings agree to the scheme's O(|v|^2 / 2^7) truncation (|v|^2 ~ 1e-2)
    assert torch.isfinite(at_limit).all()
    torch.testing.assert_close(at_limit, seven, rtol=0, atol=1e-3)


def test_lncc_refuses_a_window_larger_than_the_input():
    x = torch.rand(1, 1, 12, 12)
    with pytest.raises(ValueError, match=r"kernel_size=100001 makes a 2-D window of 1e\+10 taps, more than the "
                                         r"12x12 input .*; use kernel_size <= 1023"):
        lncc_loss(x, x, kernel_size=100001)
    # 36 000 voxels: the 2**20-tap allowance decides (101^3 <= 2**20 < 103^3)
    vol = torch.rand(1, 1, 40, 30, 30)
    with pytest.raises(ValueError, match=r"kernel_size=103 makes a 3-D window .*; use kernel_size <= 101"):
        lncc_loss(vol, vol, kernel_size=103)
    # 1100^2 voxels: the input decides (1099^2 <= 1100^2 < 1101^2); refused before anything is computed
    photo = torch.empty(1, 1, 1100, 1100)
    with pytest.raises(ValueError, match=r"kernel_size=1101 .* 1100x1100 input has voxels per channel \(1210000\)"
                                         r".*; use kernel_size <= 1099"):
        lncc_loss(photo, photo, kernel_size=1101)
    # a window wider than a small input stays allowed (zero padding), as in the references
    assert torch.isfinite(lncc_loss(x, x, kernel_size=13))
