"""The compiled CPU windowed moments (fusedsim.core.moments.cpu) against their twin: 'valid' and 'same'
windows, per-channel windows, windows longer than the image (zero padding only), float32 and float64."""

from __future__ import annotations

import pytest
import torch

from fusedsim.core.moments.cpu import windowed_moments_numba
from fusedsim.core.moments.twin import windowed_moments_ref

# float64: the taps summed in window order where conv2d may sum them otherwise (~1e-16 relative); float32: ~1e-7
TOLERANCE = {torch.float64: (1e-13, 1e-15), torch.float32: (2e-6, 1e-6)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape,taps,valid", [((1, 1, 11, 11), 11, True), ((2, 3, 13, 17), 5, False),
                                              ((1, 2, 5, 4), 7, False), ((1, 1, 40, 150), 7, True)])
def test_matches_the_twin(shape, taps, valid, dtype):
    gen = torch.Generator().manual_seed(taps)
    x, y = (torch.rand(shape, generator=gen, dtype=dtype) for _ in range(2))
    win = torch.rand(shape[1], taps, generator=gen, dtype=dtype)
    got, want = windowed_moments_numba(x, y, win, valid), windowed_moments_ref(x, y, win, valid)
    rtol, atol = TOLERANCE[dtype]
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


def test_three_d_and_gradients_run_the_twin():
    x = torch.rand(1, 1, 6, 7, 8, dtype=torch.float64)
    win = torch.rand(1, 3, dtype=torch.float64)
    assert torch.equal(windowed_moments_numba(x, x, win, True), windowed_moments_ref(x, x, win, True))
    g = torch.rand(1, 1, 9, 9, dtype=torch.float64, requires_grad=True)
    assert windowed_moments_numba(g, g.detach(), win, True).requires_grad
