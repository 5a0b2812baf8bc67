"""The SSIM twin against the original implementations: pytorch-msssim 1.0.0 and scikit-image."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fusedsim
from fusedsim.core.moments.twin import gaussian_window
from fusedsim.ssim.twin import ssim_maps_ref

pytorch_msssim = pytest.importorskip("pytorch_msssim")

# pytorch-msssim builds its window in float32; ours is float64. The window difference (<1e-7 relative) moves
# SSIM by well under 1e-6, the tolerance the issue sets for float64 agreement.
TOL = 1e-6


def _pair(shape, data_range, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * data_range
    y = (x + 0.15 * data_range * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, data_range)
    return x, y


@pytest.mark.parametrize("data_range", [1.0, 255.0])
@pytest.mark.parametrize("shape", [(2, 3, 37, 41), (1, 1, 11, 11), (1, 2, 15, 13, 17)])
@pytest.mark.parametrize("size_average", [True, False])
def test_ssim_matches_pytorch_msssim(shape, data_range, size_average):
    x, y = _pair(shape, data_range)
    with fusedsim.use_backend("reference"):
        ours = fusedsim.ssim(x, y, data_range=data_range, size_average=size_average)
    theirs = pytorch_msssim.ssim(x, y, data_range=data_range, size_average=size_average)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)


@pytest.mark.parametrize("win_size,win_sigma,K", [(7, 1.0, (0.01, 0.03)), (11, 1.5, (0.02, 0.05))])
def test_ssim_options_match_pytorch_msssim(win_size, win_sigma, K):
    x, y = _pair((2, 3, 29, 31), 255.0, seed=3)
    with fusedsim.use_backend("reference"):
        ours = fusedsim.ssim(x, y, win_size=win_size, win_sigma=win_sigma, K=K, nonnegative_ssim=True)
    theirs = pytorch_msssim.ssim(x, y, win_size=win_size, win_sigma=win_sigma, K=K, nonnegative_ssim=True)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)


@pytest.mark.parametrize("data_range", [1.0, 255.0])
@pytest.mark.parametrize("shape", [(2, 3, 161, 170), (1, 1, 163, 161)])
def test_ms_ssim_matches_pytorch_msssim(shape, data_range):
    x, y = _pair(shape, data_range, seed=1)
    with fusedsim.use_backend("reference"):
        ours = fusedsim.ms_ssim(x, y, data_range=data_range, size_average=False)
    theirs = pytorch_msssim.ms_ssim(x, y, data_range=data_range, size_average=False)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)


def test_ms_ssim_5d_matches_pytorch_msssim():
    # pytorch-msssim checks only the last two sides; a 3-D volume with every side > 160 is valid for both.
    x, y = _pair((1, 1, 161, 161, 162), 1.0, seed=2)
    with fusedsim.use_backend("reference"):
        ours = fusedsim.ms_ssim(x, y, data_range=1.0, win_size=3)
    theirs = pytorch_msssim.ms_ssim(x, y, data_range=1.0, win_size=3)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)


def test_ms_ssim_custom_weights_match():
    x, y = _pair((1, 3, 170, 165), 255.0, seed=4)
    weights = [0.2, 0.3, 0.5]
    with fusedsim.use_backend("reference"):
        ours = fusedsim.ms_ssim(x, y, weights=weights)
    theirs = pytorch_msssim.ms_ssim(x, y, weights=weights)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)


def test_modules_match_pytorch_msssim():
    x, y = _pair((2, 3, 170, 171), 255.0, seed=5)
    with fusedsim.use_backend("reference"):
        ours = (fusedsim.SSIM(channel=3)(x, y), fusedsim.MS_SSIM(channel=3)(x, y))
    theirs = (pytorch_msssim.SSIM(channel=3)(x, y), pytorch_msssim.MS_SSIM(channel=3)(x, y))
    torch.testing.assert_close(ours[0], theirs[0], atol=TOL, rtol=0)
    torch.testing.assert_close(ours[1], theirs[1], atol=TOL, rtol=0)


def _photo_pairs(refdata):
    images = refdata / "perceptual" / "images"
    pairs = []
    for dist in sorted(images.glob("*__*.png"))[:12]:
        ref = images / (dist.name.split("__")[0] + ".png")
        pairs.append((ref, dist))
    return pairs


def test_twin_matches_scikit_image_on_photos(refdata):
    from PIL import Image
    from skimage.metrics import structural_similarity

    pairs = _photo_pairs(refdata)
    assert pairs, "no photo pairs found"
    for ref, dist in pairs:
        a = np.asarray(Image.open(ref).convert("RGB"), dtype=np.float64)
        b = np.asarray(Image.open(dist).convert("RGB"), dtype=np.float64)
        expected = structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                         data_range=255, channel_axis=2)
        x = torch.from_numpy(a).permute(2, 0, 1)[None]
        y = torch.from_numpy(b).permute(2, 0, 1)[None]
        with fusedsim.use_backend("reference"):
            ours = fusedsim.ssim(x, y, data_range=255).item()
        # float64 on both sides, same window (skimage truncates at 3.5 sigma = 11 taps): rounding only.
        assert abs(ours - expected) < 1e-9, (dist.name, ours, expected)


def test_same_padding_equals_explicit_zero_padded_conv():
    x, y = _pair((2, 2, 19, 23), 1.0, seed=6)
    g = gaussian_window(11, 1.5)
    kernel = (g[:, None] * g[None, :]).expand(2, 1, 11, 11)

    def blur(t):
        return F.conv2d(F.pad(t, (5, 5, 5, 5)), kernel, groups=2)

    mu_x, mu_y = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mu_x**2, blur(y * y) - mu_y**2, blur(x * y) - mu_x * mu_y
    c1, c2 = 0.01**2, 0.03**2
    expected = ((2 * mu_x * mu_y + c1) * (2 * sxy + c2)) / ((mu_x**2 + mu_y**2 + c1) * (sxx + syy + c2))
    got, _ = ssim_maps_ref(x, y, g.expand(2, -1), c1, c2, "same")
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    with fusedsim.use_backend("reference"):
        torch.testing.assert_close(fusedsim.fused_ssim(x, y), expected.mean(), atol=1e-12, rtol=0)
        valid = fusedsim.fused_ssim(x, y, padding="valid")
    torch.testing.assert_close(valid, expected[..., 5:-5, 5:-5].mean(), atol=1e-12, rtol=0)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("shape", [(1, 2, 9, 10), (1, 1, 5, 6, 7)])
def test_twin_gradcheck(padding, shape):
    x, y = _pair(shape, 1.0, seed=7)
    x.requires_grad_(True)
    y.requires_grad_(True)
    window = 5 if len(shape) == 4 else 3

    def f(a, b):
        with fusedsim.use_backend("reference"):
            return fusedsim.fused_ssim(a, b, padding=padding, window_size=window, reduction="channel",
                                       check_finite=False)

    assert torch.autograd.gradcheck(f, (x, y), eps=1e-6, atol=1e-6, fast_mode=True)


def test_twin_properties_hold_for_random_images():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=25, deadline=None)
    @given(h=st.integers(11, 24), w=st.integers(11, 24), seed=st.integers(0, 2**16), scale=st.floats(0.01, 0.5))
    def check(h, w, seed, scale):
        x, _ = _pair((1, 2, h, w), 1.0, seed=seed)
        y = (x + scale * torch.randn(x.shape, generator=torch.Generator().manual_seed(seed + 1),
                                     dtype=torch.float64)).clamp(0, 1)
        with fusedsim.use_backend("reference"):
            xy = fusedsim.ssim(x, y, data_range=1.0, reduction="channel")
            yx = fusedsim.ssim(y, x, data_range=1.0, reduction="channel")
            xx = fusedsim.ssim(x, x, data_range=1.0, reduction="channel")
        torch.testing.assert_close(xy, yx, atol=1e-12, rtol=0)  # symmetric in its arguments
        assert bool((xy <= 1 + 1e-12).all())  # bounded by the identity score
        torch.testing.assert_close(xx, torch.ones_like(xx), atol=1e-12, rtol=0)

    del hypothesis
    check()
