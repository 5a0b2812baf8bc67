"""IW-SSIM where the authors' formula divides 0 by 0 or leaves the reals (issue 38: NaN before).

* A band level whose information weights sum to 0 (neither band carries information there: flat, e.g. black vs
  white, a flat image) has weighted mean cs 1: the scale shows no difference (there cs is 1 up to σ²/C2).
* A singular neighbourhood covariance (a ramp's bands) is inverted on its range (pseudo-inverse).
* A negative weighted mean (inverted structure, where MATLAB returns a complex number) counts as 0, so an
  image against its inverse scores 0.
Identity is exactly 1 in every case; the CPU twin, the default (numba) path and the Triton path agree."""

from __future__ import annotations

import math

import pytest
import torch

import fusedsim
import fusedsim.families.iwssim.twin as spec
from fusedsim.core.backend import use_backend

SIZE = 176


def _images() -> dict[str, torch.Tensor]:
    yy, xx = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
    gen = torch.Generator().manual_seed(0)
    tex = (torch.sin(xx / 5.0) * torch.cos(yy / 7.0) + 1) * 100 + torch.rand(SIZE, SIZE, generator=gen) * 50
    grey = {"ramp": xx * 255.0 / (SIZE - 1), "vramp": yy * 255.0 / (SIZE - 1), "flat": torch.full((SIZE, SIZE), 128.0),
            "black": torch.zeros(SIZE, SIZE), "white": torch.full((SIZE, SIZE), 255.0), "texture": tex}
    return {k: v.round().to(torch.uint8).expand(3, SIZE, SIZE).contiguous() for k, v in grey.items()}


IMAGES = _images()


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_identity_is_exactly_one(name: str) -> None:
    image = IMAGES[name]
    assert fusedsim.iw_ssim(image, image).item() == 1.0
    assert fusedsim.iw_ssim(image.double() / 255, image.double() / 255, luma="matlab-float").item() == 1.0
    with use_backend("reference"):
        assert fusedsim.iw_ssim(image, image).item() == 1.0


@pytest.mark.parametrize("ref,dist", [("black", "white"), ("white", "black"), ("flat", "black"),
                                      ("ramp", "flat"), ("ramp", "vramp"), ("texture", "flat")])
def test_degenerate_pairs_are_finite_and_in_range(ref: str, dist: str) -> None:
    value = fusedsim.iw_ssim(IMAGES[ref], IMAGES[dist]).item()
    assert math.isfinite(value) and 0.0 <= value < 1.0


def test_black_vs_white_is_the_luminance_term_alone() -> None:
    """Every band is 0: the four band levels give 1 and the low-pass level its mean cs·l."""
    value = fusedsim.iw_ssim(IMAGES["black"], IMAGES["white"]).item()
    low_black = spec.laplacian_pyramid_ref(torch.zeros(1, 1, SIZE, SIZE, dtype=torch.float64))[-1]
    low_white = spec.laplacian_pyramid_ref(torch.full((1, 1, SIZE, SIZE), 255.0, dtype=torch.float64))[-1]
    cs_l = spec.cs_maps_ref(low_black, low_white, True).mean().item()
    assert value == pytest.approx(cs_l ** (spec.SCALE_WEIGHTS[-1] / sum(spec.SCALE_WEIGHTS)), rel=1e-6)


@pytest.mark.parametrize("name", ["texture", "ramp"])
def test_inverse_scores_zero(name: str) -> None:
    image = IMAGES[name]
    assert fusedsim.iw_ssim(image, 255 - image).item() == 0.0


def test_singular_covariance_uses_the_pseudo_inverse() -> None:
    gram = torch.zeros(1, 3, 3, dtype=torch.float64)
    gram[0, 0, 0] = 2.0
    eig = spec.corrected_eig_ref(gram)
    assert torch.isfinite(eig).all()
    assert torch.equal(eig[0, :3], torch.diag(torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64)))


@pytest.mark.parametrize("ref,dist", [("ramp", "ramp"), ("flat", "flat"), ("black", "white"), ("texture", "flat"),
                                      ("ramp", "vramp")])
def test_paths_agree_on_degenerate_pairs(ref: str, dist: str, kernel_device: torch.device) -> None:
    """The twin, the default CPU path (numba) and the Triton kernels (interpreter here) give the same value."""
    x, y = IMAGES[ref], IMAGES[dist]
    with use_backend("reference"):
        want = fusedsim.iw_ssim(x, y).item()
    got_default = fusedsim.iw_ssim(x, y).item()
    with use_backend("triton"):
        got_triton = fusedsim.iw_ssim(x.to(kernel_device), y.to(kernel_device)).item()
    assert math.isfinite(want)
    assert got_default == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert got_triton == pytest.approx(want, rel=1e-10, abs=1e-10)


def test_loss_gradient_is_finite_at_identity_of_a_flat_image() -> None:
    image = (IMAGES["ramp"].double() / 255).unsqueeze(0)
    dist = image.clone().requires_grad_(True)
    loss = fusedsim.families.iwssim.IWSSIMLoss()(image, dist)
    loss.backward()
    assert torch.isfinite(dist.grad).all()


def test_default_luma_passes_a_gradient_and_keeps_its_values() -> None:
    """The default luma rounds (zero gradient almost everywhere, issue 38: an all-zero gradient); the rounded grey
    passes the unrounded grey's gradient (straight-through) and its values stay the rounded ones."""
    ref = IMAGES["texture"].double().unsqueeze(0) / 255
    gen = torch.Generator().manual_seed(5)
    dist = (ref + 0.02 * torch.randn(ref.shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    want = fusedsim.iw_ssim(ref, dist)
    grey = spec.grey_ref(dist.clone().requires_grad_(True))
    assert torch.equal(grey.detach(), spec.grey_ref(dist))
    d = dist.clone().requires_grad_(True)
    got = fusedsim.iw_ssim(ref, d)
    got.backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    assert torch.isfinite(d.grad).all() and torch.count_nonzero(d.grad) > 0
