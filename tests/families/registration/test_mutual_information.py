"""fusedsim.registration.mutual_information_loss / MutualInformationLoss: reference values of MONAI 1.6.1 and
FireANTs 1.5, kernels, errors.

Fixtures: ``refdata/registration/mi_*.npz``, float64 results of MONAI's ``GlobalMutualInformationLoss`` (Gaussian),
FireANTs' ``losses.mi`` loss and a transcription of FireANTs' fused op (exact Parzen histogram) on the astronaut
pair, its non-monotone remap (``d2mm``), the synthetic volume, and the pair scaled to [0, 255]; 16, 32 and 64
bins. Losses are float64 (ours agree to 1e-12); gradients and histograms are stored in float32 (ours agree to that
rounding: 2**-24 of the largest magnitude, with a factor 4 of margin).

Kernels run on the GPU when there is one, else through Triton's interpreter on small crops (tests/conftest.py);
the generic twin test (tests/ops/test_registry.py) also runs the ``parzen_histogram`` op on its examples.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _backends import assert_kernel_matches_twin

from fusedsim.core.backend import use_backend
from fusedsim.registration.mutual_information_twin import (
    mi_norm,
    mi_setup,
    parzen_histogram_ref,
)
from fusedsim.registration import MutualInformationLoss, mutual_information_loss

F32_STORAGE = 4 * 2.0**-24
LOSS_TOL = 1e-12
PAIRS = ("d2", "d2mm", "d3")
CASES = [(conv, pair, nb) for conv in ("monai", "fireants", "fireants_torch") for pair in PAIRS for nb in (16, 32, 64)]


@pytest.fixture(scope="module")
def data(refdata):
    folder = refdata / "registration"
    names = ("inputs", "mi_monai", "mi_fireants_torch", "mi_fireants_fused_emulated")
    return {name: np.load(folder / f"{name}.npz") for name in names}


def _pair(data, pair, dtype=torch.float64):
    inp = data["inputs"]
    moving, fixed = {"d2": ("moving2d", "fixed2d"), "d2mm": ("moving2d_mm", "fixed2d"), "d3": ("moving3d", "fixed3d"),
                     "d2x255": ("moving2d", "fixed2d")}[pair]
    scale = 255.0 if pair == "d2x255" else 1.0  # scaled in float64, as the fixture was
    return (torch.as_tensor(inp[moving]).double() * scale).to(dtype), (torch.as_tensor(inp[fixed]).double()
                                                                       * scale).to(dtype)


def _loss_and_grad(pred, target, backend="reference", **kw):
    pred = pred.detach().clone().requires_grad_()
    with use_backend(backend):
        loss = mutual_information_loss(pred, target, **kw)
    (grad,) = torch.autograd.grad(loss.sum(), pred)
    return loss.detach(), grad


def _assert_close_to_storage(got: torch.Tensor, ref: np.ndarray, what: str, factor: float = 1.0) -> None:
    ref_t = torch.as_tensor(np.asarray(ref), dtype=torch.float64)
    err = (got.double() - ref_t).abs().max().item()
    scale = ref_t.abs().max().item()
    assert err <= F32_STORAGE * factor * scale, f"{what}: max |Δ| {err:.3g} > {F32_STORAGE:.2g} × {scale:.3g}"


def _keys(conv, pair, nb):
    """(file, loss key, gradient key) of a case."""
    if conv == "monai":
        return "mi_monai", f"{pair}_b{nb}_gauss_loss", f"{pair}_b{nb}_gauss_grad_pred"
    if conv == "fireants_torch":
        return "mi_fireants_torch", f"{pair}_b{nb}_loss", f"{pair}_b{nb}_grad_pred"
    return "mi_fireants_fused_emulated", f"{pair}_b{nb}_exact_loss", f"{pair}_b{nb}_exact_grad_pred"


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.mark.parametrize("conv,pair,nb", CASES, ids=[f"{c}-{p}-b{n}" for c, p, n in CASES])
def test_twin_matches_reference_values_and_gradients(data, conv, pair, nb):
    file, loss_key, grad_key = _keys(conv, pair, nb)
    ref = data[file]
    loss, grad = _loss_and_grad(*_pair(data, pair), num_bins=nb, convention=conv)
    assert abs(loss.item() - float(ref[loss_key])) <= LOSS_TOL, (loss.item(), float(ref[loss_key]))
    _assert_close_to_storage(grad, ref[grad_key], grad_key)


@pytest.mark.parametrize("conv,file,prefix", [("monai", "mi_monai", "_gauss"),
                                              ("fireants", "mi_fireants_fused_emulated", "_exact")])
@pytest.mark.parametrize("pair", PAIRS)
def test_twin_histograms(data, conv, file, prefix, pair):
    ref = data[file]
    pred, target = _pair(data, pair)
    centres, preterm, clamp, pooled, _, _ = mi_setup(conv, 32, None, None, None)
    hist = parzen_histogram_ref(pred, target, mi_norm(pred, target, conv), centres, preterm, clamp, pooled)[0, 0]
    _assert_close_to_storage(hist[:32], ref[f"{pair}_b32{prefix}_pab"], "pab")
    if conv == "monai":  # the marginals are stored in float64: float64 rounding of means of ~10^4 terms
        torch.testing.assert_close(hist[32], torch.as_tensor(ref[f"{pair}_b32_gauss_pa"]), rtol=0, atol=1e-15)
        torch.testing.assert_close(hist[33], torch.as_tensor(ref[f"{pair}_b32_gauss_pb"]), rtol=0, atol=1e-15)


def test_images_outside_the_unit_range(data):
    """Both images ×255. FireANTs' torch loss divides by the (differentiated) maximum; its fused op rescales by the
    joint min–max and returns the gradient w.r.t. the rescaled image (255× the true one): ours is the true one."""
    pred, target = _pair(data, "d2x255")
    fat, fus = data["mi_fireants_torch"], data["mi_fireants_fused_emulated"]
    loss, grad = _loss_and_grad(pred, target, convention="fireants_torch")
    assert abs(loss.item() - float(fat["d2x255_b32_loss"])) <= LOSS_TOL
    _assert_close_to_storage(grad, fat["d2x255_b32_grad_pred"], "fireants_torch ×255 gradient")
    loss, grad = _loss_and_grad(pred, target, convention="fireants")
    assert abs(loss.item() - float(fus["d2x255_b32_exact_loss"])) <= LOSS_TOL
    _assert_close_to_storage(grad, fus["d2x255_b32_exact_grad_pred_true"], "fireants ×255 gradient")
    low, high = fus["d2x255_b32_exact_minmax"]
    _assert_close_to_storage(grad * (high - low), fus["d2x255_b32_exact_grad_pred"], "FireANTs' scaled gradient")


@pytest.mark.parametrize("pair", PAIRS)
def test_float32_twin_matches_monai_float32(data, pair):
    """MONAI's own float32 loss (``_loss_f32``) differs from float64 by < 1e-7 here; ours by < 1e-6."""
    ref = data["mi_monai"]
    for nb in (16, 64):
        loss, grad = _loss_and_grad(*_pair(data, pair, torch.float32), num_bins=nb)
        assert loss.dtype == torch.float32 and grad.dtype == torch.float32
        assert abs(loss.item() - float(ref[f"{pair}_b{nb}_gauss_loss"])) <= 1e-6
        assert abs(float(ref[f"{pair}_b{nb}_gauss_loss_f32"]) - float(ref[f"{pair}_b{nb}_gauss_loss"])) <= 1e-6


# ------------------------------------------------------------------------------------------- Triton kernels
KERNEL_CASES = [  # (pair, crop, channels, convention, bins, reduction, dtype)
    ("d2", (slice(20, 52), slice(30, 70)), 1, "monai", 32, "mean", torch.float32),
    ("d2mm", (slice(40, 64), slice(50, 82)), 2, "monai", 23, "none", torch.bfloat16),
    ("d2x255", (slice(10, 40), slice(20, 50)), 2, "fireants", 32, "sum", torch.float32),
    ("d2x255", (slice(10, 40), slice(20, 50)), 2, "fireants_torch", 16, "none", torch.float32),
    ("d3", (slice(6, 12), slice(8, 15), slice(9, 17)), 2, "fireants_torch", 64, "mean", torch.float64),
]
# against the float64 twin on the same (rounded) inputs: histogram means of float32 products of exp (~1e-7
# relative, ~1e-6 on MI); 16-bit inputs get their gradients back in their dtype (2**-8 relative for bfloat16).
KERNEL_TOL = {torch.float64: (1e-10, 1e-9), torch.float32: (1e-5, 1e-4), torch.bfloat16: (1e-5, 1e-2)}


@pytest.mark.parametrize("case", KERNEL_CASES, ids=lambda c: f"{c[0]}-{c[3]}-b{c[4]}-{c[5]}-{c[6]}")
def test_kernels_match_twin_on_image_crops(data, kernel_device, case):
    pair, crop, channels, conv, nb, reduction, dtype = case
    pred, target = (t[(slice(None), slice(None), *crop)].contiguous() for t in _pair(data, pair))
    if channels == 2:
        pred, target = torch.cat([pred, target], dim=1), torch.cat([target, pred.flip(-1)], dim=1)
    pred, target = pred.to(dtype), target.to(dtype)
    kw = {"num_bins": nb, "reduction": reduction, "convention": conv}

    assert_kernel_matches_twin(mutual_information_loss, pred, target, kw, kernel_device, KERNEL_TOL[dtype])


# ------------------------------------------------------------------------------------------ twin gradients
@pytest.mark.parametrize("conv", ["monai", "fireants", "fireants_torch"])
def test_twin_gradcheck(conv):
    gen = torch.Generator().manual_seed(4)
    # fireants_torch past 1: its (differentiated) division by the maximum; fireants treats its min-max rescaling as
    # constant, like the reference, so finite differences would see it move: inside [0, 1] there
    scale = 3.0 if conv == "fireants_torch" else 0.9
    x = (0.05 + scale * torch.rand(1, 2, 3, 4, generator=gen, dtype=torch.float64)).requires_grad_()
    y = (0.05 + scale * torch.rand(1, 2, 3, 4, generator=gen, dtype=torch.float64)).requires_grad_()
    with use_backend("reference"):
        assert torch.autograd.gradcheck(
            lambda a, b: mutual_information_loss(a, b, num_bins=8, convention=conv, reduction="none"), (x, y))


# ------------------------------------------------------------------------------------------------ API
def test_module_equals_function():
    gen = torch.Generator().manual_seed(1)
    x, y = torch.rand(2, 2, 3, 12, 13, generator=gen)
    module = MutualInformationLoss(num_bins=16, convention="fireants", reduction="none")
    assert "fireants" in repr(module)
    with use_backend("reference"):
        out = module(x, y)
        assert out.shape == (2, 3)
        assert torch.equal(out, mutual_information_loss(x, y, 16, convention="fireants", reduction="none"))
        assert mutual_information_loss(x, y, 16, reduction="none").shape == (2,)  # MONAI pools the channels


def test_bad_inputs():
    x = torch.rand(1, 1, 12, 12)
    with pytest.raises(ValueError, match="pred and target must have the same shape"):
        mutual_information_loss(x, torch.rand(1, 1, 12, 13))
    with pytest.raises(TypeError, match="pred must be a floating tensor"):
        mutual_information_loss(x.to(torch.int32), x.to(torch.int32))
    with pytest.raises(ValueError, match="num_bins must be an integer from 2 to 256; got 1"):
        mutual_information_loss(x, x, num_bins=1)
    with pytest.raises(TypeError, match="num_bins must be an int"):
        MutualInformationLoss(num_bins=32.0)
    with pytest.raises(ValueError, match="sigma_ratio must be a finite number > 0"):
        mutual_information_loss(x, x, sigma_ratio=0.0)
    with pytest.raises(ValueError, match="convention must be one of"):
        mutual_information_loss(x, x, convention="ants")
    with pytest.raises(ValueError, match="reduction must be one of"):
        mutual_information_loss(x, x, reduction="batch")
    with pytest.raises(ValueError, match="smooth_nr must be a finite number >= 0"):
        mutual_information_loss(x, x, smooth_nr=float("nan"))
