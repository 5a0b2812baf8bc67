"""fusedsim.Metric (cached reference) and the sRGB input contract of the perceptual metrics."""

import pytest
import torch

import fusedsim
from fusedsim.metrics.srgb_input import srgb_pair


def _pair(shape=(2, 3, 24, 24), seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen)
    return x, (x + 0.1 * torch.randn(shape, generator=gen)).clamp(0, 1)


def test_metric_scores_like_the_one_shot_call():
    ref, dist = _pair()
    m = fusedsim.Metric("ssim", device="cpu", data_range=1.0).set_reference(ref)
    assert torch.equal(m.score(dist), fusedsim.ssim(ref, dist, data_range=1.0))
    assert torch.equal(m(ref, dist), fusedsim.ssim(ref, dist, data_range=1.0))


def test_metric_needs_a_reference_and_refuses_video_features():
    with pytest.raises(RuntimeError, match="set_reference"):
        fusedsim.Metric("psnr", device="cpu").score(torch.rand(1, 3, 8, 8))
    with pytest.raises(ValueError, match="video planes"):
        fusedsim.Metric("vmaf:ssim", device="cpu")
    with pytest.raises(ValueError, match="unknown metric"):
        fusedsim.Metric("no-such-metric")
    with pytest.raises(TypeError, match="dist must be a torch.Tensor"):
        fusedsim.Metric("psnr", device="cpu").set_reference(torch.rand(1, 3, 8, 8)).score([1, 2])


def test_srgb_pair_converts_uint8_and_adds_the_batch_dimension():
    ref = torch.randint(0, 256, (3, 9, 11), dtype=torch.uint8)
    pair = srgb_pair(ref, ref.flip(-1), "m")
    assert pair.ref.shape == (1, 3, 9, 11) and not pair.batched
    assert pair.ref.dtype == torch.float32
    assert torch.equal(pair.ref[0], ref.float() / 255.0)


def test_srgb_pair_keeps_uint8_codes_when_asked():
    ref = torch.randint(0, 256, (3, 9, 11), dtype=torch.uint8)
    pair = srgb_pair(ref, torch.rand(3, 9, 11), "m", keep_uint8=True)  # codes and floats may be mixed, as before
    assert pair.ref.dtype == torch.uint8 and pair.ref.shape == (1, 3, 9, 11)
    assert torch.equal(pair.ref[0], ref)
    with pytest.raises(TypeError, match="same dtype"):  # float64 against codes read as float32
        srgb_pair(ref, torch.rand(3, 9, 11, dtype=torch.float64), "m", keep_uint8=True)
    with pytest.raises(ValueError, match="at least 10 px"):  # the same checks as without it
        srgb_pair(ref, ref, "m", min_size=10, keep_uint8=True)


@pytest.mark.parametrize("ref, dist, error, match", [
    (torch.rand(1, 1, 8, 8), torch.rand(1, 1, 8, 8), ValueError, "3 sRGB channels"),
    (torch.rand(1, 3, 8, 8), torch.rand(1, 3, 8, 9), ValueError, "same shape"),
    (torch.rand(3, 8, 8) * 255, torch.rand(3, 8, 8), ValueError, r"ref must hold sRGB values in \[0, 1\]"),
    (torch.rand(3, 8, 8), torch.full((3, 8, 8), float("nan")), ValueError, "dist must hold sRGB values"),
    (torch.rand(3, 8, 8).double(), torch.rand(3, 8, 8), TypeError, "same dtype"),
    (torch.randint(0, 9, (3, 8, 8)), torch.randint(0, 9, (3, 8, 8)), TypeError, "uint8"),
    (torch.rand(8, 8), torch.rand(8, 8), ValueError, r"\(N, 3, H, W\) or \(3, H, W\)"),
    (torch.rand(3, 4, 8), torch.rand(3, 4, 8), ValueError, "at least 6 px per side"),
])
def test_srgb_pair_names_the_bad_argument(ref, dist, error, match):
    with pytest.raises(error, match=match):
        srgb_pair(ref, dist, "m", min_size=6)
