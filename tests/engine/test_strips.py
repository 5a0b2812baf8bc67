"""Strip mode equals full mode: one strip identically, several within the float32 reduction error of full."""

from __future__ import annotations

import itertools

import pytest
import torch
from engine_pairs import image_pair

from fusedsim.engine import Scorer
from fusedsim.engine.strips import plan_strips
from fusedsim.ssim import ssim

# Full mode reduces the float32 map (or squared errors) in float32, strips sum float64 partial sums: the two differ
# by float32 rounding of a mean of ~1e5 values (relative ~1e-7 for SSIM; PSNR's dB error is 4.3 * relative MSE error).
TOLERANCE = {"ssim": 1e-6, "psnr": 1e-4}


@pytest.mark.parametrize("height, body, halo", [(200, 64, 5), (200, 64, 0), (37, 10, 5), (11, 4, 5), (1, 64, 0),
                                                (403, 7, 96)])
def test_plan_partitions_rows_and_carries_the_halo(height, body, halo):
    plan = plan_strips(height, body, halo)
    bodies = [(a, b) for _, _, a, b in plan]
    assert bodies[0][0] == 0 and bodies[-1][1] == height
    assert all(b0[1] == b1[0] for b0, b1 in itertools.pairwise(bodies))  # a partition, in order
    for r0, r1, a, b in plan:
        assert (r0, r1) == (max(0, a - halo), min(height, b + halo))
    assert all(b - a == body for a, b in bodies[:-1])
    assert bodies[-1][1] - bodies[-1][0] >= min(height, halo, body)  # a last body under the halo was merged


def test_plan_merges_a_short_last_body():
    assert plan_strips(196, 64, 5) == [(0, 69, 0, 64), (59, 133, 64, 128), (123, 196, 128, 196)]
    assert plan_strips(132, 64, 5)[-1] == (59, 132, 64, 132)  # 4 leftover rows (< the halo) join the body before
    assert plan_strips(136, 64, 5)[-1] == (123, 136, 128, 136)


@pytest.mark.parametrize("channels, bits", [(3, 8), (1, 16)])
def test_strips_equal_full_for_ssim_and_psnr(channels, bits):
    ref, dist = image_pair(200, 300, channels, bits)
    full = Scorer(["ssim", "psnr"], device="cpu", memory="full").score(ref, dist)
    strips = Scorer(["ssim", "psnr"], device="cpu", memory=64).score(ref, dist)
    assert strips.backend == "cpu strip 64" and full.backend == "cpu full"
    for name, tol in TOLERANCE.items():
        assert strips.values[name] == pytest.approx(full.values[name], abs=tol), name
    # and against a float64 oracle of the full image
    x, y = ref.pixels.double(), dist.pixels.double()
    assert strips.values["ssim"] == pytest.approx(float(ssim(x, y, data_range=ref.data_range)), abs=1e-6)
    mse = float((x - y).square().mean())
    assert strips.values["psnr"] == pytest.approx(10 * torch.log10(torch.tensor(ref.data_range**2 / mse)).item(),
                                                  abs=1e-4)
    assert 0.2 < strips.values["ssim"] < 0.95  # a pair the halo matters for


def test_a_strip_without_its_halo_would_differ():
    """The test above is sensitive to the halo: scoring bodies alone (no context rows) changes SSIM."""
    ref, dist = image_pair()
    full = Scorer(["ssim"], device="cpu", memory="full").score(ref, dist).values["ssim"]
    parts = [ssim(ref.pixels[..., a:b, :], dist.pixels[..., a:b, :], data_range=255, reduction="none")
             for a, b in ((0, 64), (64, 128), (128, 200))]
    no_halo = float(sum(p.double().sum() for p in parts) / sum(p.numel() for p in parts))
    assert abs(no_halo - full) > 1e-4


def test_one_strip_is_the_full_computation():
    ref, dist = image_pair()
    full = Scorer(["ssim", "psnr"], device="cpu", memory="full").score(ref, dist)
    one = Scorer(["ssim", "psnr"], device="cpu", memory="strip:200").score(ref, dist)
    assert one.values == full.values and one.backend == "cpu full"


def test_ms_ssim_strips_follow_the_pyramid():
    """Each body owns, at every level, the window centres between the images of its edges; odd level sizes (zero
    padding in pytorch-msssim's pooling) included: 331 -> 166 -> 83 -> 42 -> 21 rows."""
    for height, width, body in ((331, 180, 64), (200, 170, 24)):
        ref, dist = image_pair(height, width)
        full = Scorer(["ms-ssim"], device="cpu", memory="full").score(ref, dist)
        strips = Scorer(["ms-ssim"], device="cpu", memory=body).score(ref, dist)
        assert strips.backend == f"cpu strip {body}"
        # full mode averages each level's maps in float32; strips add float64 sums: float32 rounding apart
        assert strips.values["ms-ssim"] == pytest.approx(full.values["ms-ssim"], abs=1e-6)
        assert 0.3 < full.values["ms-ssim"] < 0.99


def test_metrics_without_a_strip_path_run_full():
    ref, dist = image_pair(40, 48)
    full = Scorer(["dssim"], device="cpu", memory="full").score(ref, dist)
    strip = Scorer(["dssim", "ssim"], device="cpu", memory=16).score(ref, dist)
    assert strip.backends == {"dssim": "cpu full", "ssim": "cpu strip 16"}
    assert strip.values["dssim"] == full.values["dssim"]


def test_strips_match_pytorch_msssim():
    """Against the reference implementation in float64 (pytorch-msssim 1.0.0): our float32 computation loses
    ~1e-5 to the cancellation in sigma² = E[x²] - mu² with 0..255 values (as in tests/cli/test_score_cli.py)."""
    pytorch_msssim = pytest.importorskip("pytorch_msssim")
    ref, dist = image_pair(331, 257)
    strips = Scorer(["ssim", "ms-ssim"], device="cpu", memory=48).score(ref, dist)
    assert set(strips.backends.values()) == {"cpu strip 48"}
    x, y = ref.pixels.double(), dist.pixels.double()
    assert strips.values["ssim"] == pytest.approx(pytorch_msssim.ssim(x, y, data_range=255).item(), abs=2e-5)
    assert strips.values["ms-ssim"] == pytest.approx(pytorch_msssim.ms_ssim(x, y, data_range=255).item(), abs=2e-5)


def test_psnr_strips_sum_in_blocks(monkeypatch):
    from fusedsim.families.ssim import strip_sums as _strip_sums

    ref, dist = image_pair(200, 300)
    full = Scorer(["psnr"], device="cpu", memory="full").score(ref, dist).values["psnr"]
    monkeypatch.setattr(_strip_sums, "_PSNR_BLOCK", 2000)  # 2 rows of 900 values per block
    assert Scorer(["psnr"], device="cpu", memory=64).score(ref, dist).values["psnr"] == pytest.approx(full, abs=1e-4)
