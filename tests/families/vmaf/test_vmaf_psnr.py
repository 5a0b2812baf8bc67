"""psnr (y, cb, cr) against libvmaf's per-frame values (``==``), caps per bit depth, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fusedsim.vmaf import psnr


def test_equals_libvmaf_every_frame_and_plane(pair):
    out = psnr(list(pair.ref), list(pair.dist), pair.bit_depth)
    for key in ("psnr_y", "psnr_cb", "psnr_cr"):
        assert out[key].dtype == torch.float64 and out[key].tolist() == pair.expected(key), key


def test_luma_only():
    x = np.random.default_rng(0).integers(0, 256, size=(3, 20, 30)).astype(np.uint8)
    y = x.copy()
    y[:, 0, 0] ^= 1
    out = psnr(x, y, 8)
    assert set(out) == {"psnr_y"} and out["psnr_y"].shape == (3,)
    assert float(psnr(x[0], y[0], 8)["psnr_y"]) == out["psnr_y"].tolist()[0]


@pytest.mark.parametrize("bit_depth, cap", [(8, 60.0), (10, 72.0), (12, 84.0), (16, 108.0)])
def test_cap_for_identical_planes(bit_depth, cap):
    x = np.random.default_rng(bit_depth).integers(0, 1 << bit_depth, size=(2, 9, 7))
    assert psnr(x, x, bit_depth)["psnr_y"].tolist() == [cap, cap]


def test_one_lsb_error_is_below_the_cap():
    x = np.zeros((4, 4), np.uint16)
    y = x.copy()
    y[0, 0] = 1
    # 10*log10(1023^2 * 16) = 72.24 -> capped at 72; 12 bit: 10*log10(4095^2 * 16) = 84.28 -> 84
    assert float(psnr(x, y, 10)["psnr_y"]) == 72.0
    assert float(psnr(x, y, 8)["psnr_y"]) == 60.0
    big = np.zeros((64, 64), np.uint16)
    big2 = big.copy()
    big2[:8] = 3
    assert float(psnr(big, big2, 10)["psnr_y"]) < 72.0


def test_bad_input():
    x = np.zeros((2, 8, 8), np.uint8)
    c = np.zeros((2, 4, 4), np.uint8)
    with pytest.raises(ValueError, match="one plane or three planes"):
        psnr([x, c], [x, c], 8)
    with pytest.raises(ValueError, match=r"ref\[cb\] and dist\[cb\] must have the same shape"):
        psnr([x, c, c], [x, c[:, :3], c], 8)
    with pytest.raises(ValueError, match=r"ref\[cr\] has 1 frames"):
        psnr([x, c, c[:1]], [x, c, c[:1]], 8)
    with pytest.raises(TypeError, match="ref must hold integer samples"):
        psnr(x.astype(float), x, 8)
    with pytest.raises(ValueError, match="bit_depth=11 is not supported"):
        psnr(x, x, 11)


def test_forced_triton_backend_is_an_error_not_a_silent_pytorch_run():
    from fusedsim import use_backend
    from fusedsim.core.backend import BackendUnavailableError

    x = np.zeros((2, 8, 8), np.uint8)
    with use_backend("triton"), pytest.raises(BackendUnavailableError, match="psnr has no Triton kernel"):
        psnr(x, x, 8)
    with use_backend("reference"):
        assert psnr(x, x, 8)["psnr_y"].tolist() == [60.0, 60.0]
