"""fusedsim.registration.lncc_loss / LNCCLoss: reference values of MONAI 1.6.1 and FireANTs 1.5, kernels, errors.

Fixtures: ``refdata/registration/lncc_*.npz``, float64 results of MONAI's ``LocalNormalizedCrossCorrelationLoss``,
FireANTs' ``losses.cc`` loss and a transcription of FireANTs' fused op, on the astronaut pair (2-D, 96×120) and
the synthetic volume (3-D, 24×28×34), every window type and k in {3, 5, 7, 9}. Losses are stored in float64
(ours must agree to 1e-12: float64 rounding of sums of ~10^4 terms); gradient maps in float32 (ours must agree to
their storage rounding, 2**-24 of the largest magnitude, with a factor 4 of margin).

Kernels run on the GPU when there is one, else through Triton's interpreter on small crops (tests/conftest.py);
the generic twin test (tests/ops/test_registry.py) also runs the ``lncc`` op on its examples.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _backends import assert_kernel_matches_twin

from fusedsim.core.backend import use_backend
from fusedsim.registration import LNCCLoss, lncc_loss

F32_STORAGE = 4 * 2.0**-24
LOSS_TOL = 1e-12
FILES = {"monai": "lncc_monai", "fireants": "lncc_fireants_fused_emulated", "fireants_torch": "lncc_fireants_torch"}
# the exact gradient in each file (FireANTs' fused op returns an approximation; its autograd gradient is stored)
GRAD_KEY = {"monai": "grad_pred", "fireants": "grad_pred_autograd", "fireants_torch": "grad_pred"}
CASES = [(conv, nd, kt, k) for conv in FILES for nd in (2, 3) for kt in ("rectangular", "gaussian")
         for k in (3, 5, 7, 9)]


@pytest.fixture(scope="module")
def data(refdata):
    folder = refdata / "registration"
    return {name: np.load(folder / f"{name}.npz") for name in ("inputs", *FILES.values())}


def _pair(data, nd, dtype=torch.float64):
    inp = data["inputs"]
    moving, fixed = (inp["moving2d"], inp["fixed2d"]) if nd == 2 else (inp["moving3d"], inp["fixed3d"])
    return torch.as_tensor(moving).to(dtype), torch.as_tensor(fixed).to(dtype)


def _loss_and_grad(pred, target, backend="reference", **kw):
    pred = pred.detach().clone().requires_grad_()
    with use_backend(backend):
        loss = lncc_loss(pred, target, **kw)
    (grad,) = torch.autograd.grad(loss.sum(), pred)
    return loss.detach(), grad


def _assert_close_to_storage(got: torch.Tensor, ref: np.ndarray, what: str) -> None:
    ref_t = torch.as_tensor(np.asarray(ref), dtype=torch.float64)
    err = (got.double() - ref_t).abs().max().item()
    scale = ref_t.abs().max().item()
    assert err <= F32_STORAGE * scale, f"{what}: max |Δ| {err:.3g} > {F32_STORAGE:.2g} × {scale:.3g}"


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.mark.parametrize("conv,nd,kt,k", CASES, ids=[f"{c}-{n}d-{t}-k{k}" for c, n, t, k in CASES])
def test_twin_matches_reference_values_and_gradients(data, conv, nd, kt, k):
    ref = data[FILES[conv]]
    key = f"d{nd}_{kt}_k{k}"
    pred, target = _pair(data, nd)
    loss, grad = _loss_and_grad(pred, target, kernel_size=k, kernel_type=kt, convention=conv)
    assert abs(loss.item() - float(ref[f"{key}_loss"])) <= LOSS_TOL, (loss.item(), float(ref[f"{key}_loss"]))
    _assert_close_to_storage(grad, ref[f"{key}_{GRAD_KEY[conv]}"], f"{key} gradient")
    if conv == "monai":
        with use_backend("reference"):
            loss_map = lncc_loss(pred, target, kernel_size=k, kernel_type=kt, reduction="none")
        _assert_close_to_storage(loss_map, ref[f"{key}_map_none"], f"{key} map")


def test_monai_sum_reduction(data):
    ref = data["lncc_monai"]
    loss, grad = _loss_and_grad(*_pair(data, 3), kernel_size=5, reduction="sum")
    assert abs(loss.item() - float(ref["d3_rectangular_k5_loss_sum"])) <= 1e-12 * abs(loss.item())
    _assert_close_to_storage(grad, ref["d3_rectangular_k5_grad_pred_sum"], "sum gradient")


@pytest.mark.parametrize("nd", [2, 3])
def test_float32_twin_is_as_accurate_as_monai_in_float32(data, nd):
    """MONAI's own float32 run (``_loss_f32``, ``_grad_f32_maxabsdiff``) sets the scale: E[x²] - mu² cancels in
    low-variance windows in any float32 implementation (MONAI's float32 loss is off by up to 2.1e-6 here). Ours
    stays within 2e-5 on the loss and within 8× MONAI's largest float32 gradient deviation."""
    ref = data["lncc_monai"]
    pred, target = _pair(data, nd, torch.float32)
    for kt in ("rectangular", "gaussian"):
        for k in (3, 9):
            key = f"d{nd}_{kt}_k{k}"
            loss, grad = _loss_and_grad(pred, target, kernel_size=k, kernel_type=kt)
            assert loss.dtype == torch.float32 and grad.dtype == torch.float32
            assert abs(loss.item() - float(ref[f"{key}_loss"])) <= 2e-5, key
            err = np.abs(grad.double().numpy() - ref[f"{key}_grad_pred"]).max()
            assert err <= 8 * float(ref[f"{key}_grad_f32_maxabsdiff"]), (key, err)


@pytest.mark.parametrize("nd,kt,k", [(2, "rectangular", 3), (2, "gaussian", 9), (3, "rectangular", 7)])
def test_fireants_fused_gradient_is_the_exact_one(data, nd, kt, k):
    """FireANTs' fused backward is an approximation: ours is the true gradient (``_grad_pred_autograd``), and its
    cosine / scale to FireANTs' two backward variants are the ones recorded with the fixture."""
    ref = data["lncc_fireants_fused_emulated"]
    key = f"d{nd}_{kt}_k{k}"
    _, grad = _loss_and_grad(*_pair(data, nd), kernel_size=k, kernel_type=kt, convention="fireants")
    g = grad.flatten()
    for variant, stored in (("ants", "cos_ants_vs_autograd"), ("exactfilt", "cos_exactfilt_vs_autograd")):
        other = torch.as_tensor(ref[f"{key}_grad_pred_{variant}"], dtype=torch.float64).flatten()
        cos = (g @ other / (g.norm() * other.norm())).item()
        assert abs(cos - float(ref[f"{key}_{stored}"])) <= 1e-6, (variant, cos)
    other = torch.as_tensor(ref[f"{key}_grad_pred_exactfilt"], dtype=torch.float64).flatten()
    scale = (g @ other / (g @ g)).item()  # least-squares scale of FireANTs' gradient on ours
    assert abs(scale / float(ref[f"{key}_scale_exactfilt_over_autograd"]) - 1) <= 1e-6


@pytest.mark.parametrize("conv,key", [("monai", "flat_monai_rect_k3"), ("fireants", "flat_fused_emul_rect_k3"),
                                      ("fireants_torch", "flat_fa_torch_rect_k3")])
def test_constant_images(data, conv, key):
    """Constant 16×18 images, k=3: MONAI's zero-variance windows give ncc = 0, FireANTs' give ncc ≈ 1. The
    constant is not recorded; the values depend on it by < 3e-11 (FireANTs' torch loss) or not at all."""
    ref = data[FILES[conv]]
    x = torch.full((1, 1, 16, 18), 0.5, dtype=torch.float64)
    with use_backend("reference"):
        loss = lncc_loss(x, x, kernel_size=3, convention=conv)
        loss_map = lncc_loss(x, x, kernel_size=3, convention=conv, reduction="none")
    assert abs(loss.item() - float(ref[key])) <= 1e-10
    if f"{key}_map" in ref:
        _assert_close_to_storage(loss_map, ref[f"{key}_map"], key)


# ------------------------------------------------------------------------------------------- Triton kernels
KERNEL_CASES = [  # (crop, convention, kernel type, k, reduction, dtype)
    ((slice(0, 1), slice(0, 1), slice(30, 46), slice(40, 60)), "monai", "gaussian", 5, "mean", torch.float32),
    ((slice(0, 1), slice(0, 1), slice(50, 66), slice(10, 30)), "fireants", "box", 3, "sum", torch.bfloat16),
    ((slice(0, 1), slice(0, 1), slice(8, 11), slice(9, 13), slice(10, 15)), "fireants_torch", "gaussian", 5,
     "none", torch.float32),
    ((slice(0, 1), slice(0, 1), slice(8, 12), slice(9, 14), slice(10, 16)), "monai", "box", 3, "mean",
     torch.float64),
]
# against the float64 twin on the same (rounded) inputs: float32 statistics ~1e-7 relative, amplified by the
# variance cancellation in low-variance windows of the real images (README: up to 3.6e-3 × max|grad| in 2-D
# float32 at k=3); 16-bit inputs get their gradients back in their dtype (2**-8 relative for bfloat16).
KERNEL_TOL = {torch.float64: (1e-10, 1e-9), torch.float32: (2e-5, 2e-3), torch.bfloat16: (2e-5, 1e-2)}


@pytest.mark.parametrize("case", KERNEL_CASES, ids=lambda c: f"{len(c[0]) - 2}d-{c[1]}-{c[2]}-k{c[3]}-{c[4]}-{c[5]}")
def test_kernels_match_twin_on_image_crops(data, kernel_device, case):
    crop, conv, kt, k, reduction, dtype = case
    pred, target = (t[crop].contiguous() for t in _pair(data, len(crop) - 2))
    if len(crop) == 4:  # two channels
        pred, target = torch.cat([pred, pred.flip(-1)], dim=1), torch.cat([target, target.flip(-1)], dim=1)
    pred, target = pred.to(dtype), target.to(dtype)
    kw = {"kernel_size": k, "kernel_type": kt, "reduction": reduction, "convention": conv}

    assert_kernel_matches_twin(lncc_loss, pred, target, kw, kernel_device, KERNEL_TOL[dtype])


def test_gradients_for_target_only(kernel_device):
    gen = torch.Generator().manual_seed(3)
    x, y = torch.rand(2, 1, 1, 9, 10, generator=gen, dtype=torch.float64)
    t = y.clone().to(kernel_device).requires_grad_()
    with use_backend("triton"):
        (g,) = torch.autograd.grad(lncc_loss(x.to(kernel_device), t, kernel_size=3), t)
    tr = y.clone().requires_grad_()
    with use_backend("reference"):
        (r,) = torch.autograd.grad(lncc_loss(x, tr, kernel_size=3), tr)
    torch.testing.assert_close(g.cpu(), r, rtol=1e-9, atol=1e-12)


SLAB_CASES = [  # (shape, k, kernel type, convention, reduction, slab, grads): volumes spanning several slabs
    ((1, 1, 7, 3, 4), 3, "gaussian", "monai", "none", 3, (True, True)),  # slabs of 3, 3 and 1 slices
]


@pytest.mark.parametrize("case", SLAB_CASES, ids=lambda c: f"k{c[1]}-{c[4]}-slab{c[5]}")
def test_slab_path_equals_stream_path_and_twin(kernel_device, case):
    """The 3-D slab path (in-plane and depth passes through a slab scratch) against the streaming path and the
    twin, with the slab size forced small so that every slab boundary and halo case occurs."""
    from fusedsim.core.registry import op
    from fusedsim.registration.lncc_kernel import lncc_plan
    from fusedsim.registration.lncc_twin import (
        REDUCE_CODES,
        lncc_constants,
        lncc_ref,
        lncc_taps,
        lncc_window_table,
    )

    shape, k, kt, conv, reduction, slab, grads = case
    gen = torch.Generator().manual_seed(11)
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    y = x + 0.5 * torch.rand(shape, generator=gen, dtype=torch.float64)
    taps = lncc_taps(k, kt, k / 3.0 if conv != "fireants" else 1.5, conv)
    scalars = (*lncc_constants(conv, taps, 3, 1e-5, 1e-5), REDUCE_CODES[reduction])
    win = lncc_window_table(taps, shape[1], torch.float64)

    def run(options):
        p, t = (v.clone().to(kernel_device).requires_grad_(g) for v, g in zip((x, y), grads))
        w = win.to(kernel_device)
        if options is None:
            out = lncc_ref(p, t, w, *scalars)
        else:
            out = op("lncc").run_plan(lncc_plan((p, t, w), scalars, **options), p, t, w)
        cot = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        wrt = [v for v in (p, t) if v.requires_grad]
        return [out.detach().cpu(), *(g.cpu() for g in torch.autograd.grad(out, wrt, cot.to(out)))]

    slab_run = run({"depth_mode": "slab", "slab": slab, "depth_block": 2})
    for other in (run({"depth_mode": "stream"}), run(None)):
        for got, ref in zip(slab_run, other):
            torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)


def test_slab_options_are_checked():
    from fusedsim.registration.lncc_kernel import lncc_plan

    x = torch.rand(1, 1, 4, 5, 6, dtype=torch.float64)
    win = torch.full((1, 3), 1 / 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="depth_mode must be one of"):
        lncc_plan((x, x, win), (27.0, 1.0, 0.0, 1e-5, 0.0, False, 1), depth_mode="tiles")
    with pytest.raises(ValueError, match="slab must be a positive number of slices"):
        lncc_plan((x, x, win), (27.0, 1.0, 0.0, 1e-5, 0.0, False, 1), slab=0)


# ------------------------------------------------------------------------------------------ twin gradients
@pytest.mark.parametrize("conv", list(FILES))
@pytest.mark.parametrize("shape", [(1, 2, 4, 5), (1, 1, 3, 4, 4)])
def test_twin_gradcheck(conv, shape):
    gen = torch.Generator().manual_seed(5)
    x = torch.rand(shape, generator=gen, dtype=torch.float64).requires_grad_()
    y = (x.detach() + 0.3 * torch.rand(shape, generator=gen, dtype=torch.float64)).requires_grad_()
    with use_backend("reference"):
        assert torch.autograd.gradcheck(
            lambda a, b: lncc_loss(a, b, kernel_size=3, kernel_type="gaussian", convention=conv), (x, y))


# ------------------------------------------------------------------------------------------------ API
def test_module_equals_function():
    gen = torch.Generator().manual_seed(1)
    x, y = torch.rand(2, 2, 3, 12, 13, generator=gen)
    module = LNCCLoss(kernel_size=5, kernel_type="rectangular", convention="fireants", reduction="sum")
    assert "fireants" in repr(module)
    with use_backend("reference"):
        assert torch.equal(module(x, y), lncc_loss(x, y, 5, "box", convention="fireants", reduction="sum"))


def test_bad_inputs():
    x = torch.rand(1, 1, 12, 12)
    with pytest.raises(ValueError, match="pred and target must have the same shape"):
        lncc_loss(x, torch.rand(1, 1, 12, 13))
    with pytest.raises(TypeError, match="pred must be a floating tensor"):
        lncc_loss(x.to(torch.uint8), x.to(torch.uint8))
    with pytest.raises(TypeError, match="same dtype"):
        lncc_loss(x, x.double())
    with pytest.raises(ValueError, match=r"pred must be \(N, C, H, W\) or \(N, C, D, H, W\)"):
        lncc_loss(x[0], x[0])
    with pytest.raises(ValueError, match="kernel_size must be a positive odd integer; got 4"):
        lncc_loss(x, x, kernel_size=4)
    with pytest.raises(TypeError, match="kernel_size must be an int"):
        lncc_loss(x, x, kernel_size=3.0)
    with pytest.raises(ValueError, match="kernel_type must be one of"):
        LNCCLoss(kernel_type="triangular")
    with pytest.raises(ValueError, match="convention must be one of"):
        lncc_loss(x, x, convention="ants")
    with pytest.raises(ValueError, match="reduction must be one of"):
        lncc_loss(x, x, reduction="batch")
    with pytest.raises(ValueError, match="sigma must be a finite number > 0"):
        lncc_loss(x, x, kernel_type="gaussian", sigma=0.0)
    with pytest.raises(ValueError, match="sigma applies to kernel_type='gaussian' only"):
        lncc_loss(x, x, sigma=2.0)
    with pytest.raises(ValueError, match="smooth_dr must be a finite number >= 0"):
        lncc_loss(x, x, smooth_dr=-1e-5)


def test_cached_calls_still_validate_and_follow_the_backend(kernel_device):
    """The public call is looked up by metadata and options: a later call with a different option, an option of
    another type that compares equal (True == 1) or another backend must not reuse the earlier call."""
    gen = torch.Generator().manual_seed(5)
    x, y = (t.to(kernel_device) for t in torch.rand(2, 1, 1, 6, 9, 10, generator=gen, dtype=torch.float64))
    with use_backend("reference"):
        twin = lncc_loss(x, y, kernel_size=1)
        assert torch.equal(lncc_loss(x, y, kernel_size=1), twin)  # the cached call gives the same value
        with pytest.raises(TypeError, match="kernel_size must be an int"):
            lncc_loss(x, y, kernel_size=True)
        with pytest.raises(TypeError, match="smooth_dr must be a number"):
            lncc_loss(x, y, smooth_dr=[1e-5])  # unhashable: validated, not looked up
        box3 = lncc_loss(x, y, kernel_size=3)
        assert not torch.equal(box3, twin)
        assert not torch.equal(lncc_loss(x, y, kernel_size=3, kernel_type="gaussian"), box3)
    with use_backend("triton"):
        kernel = lncc_loss(x, y, kernel_size=3)
    torch.testing.assert_close(kernel, box3, rtol=1e-10, atol=1e-12)
