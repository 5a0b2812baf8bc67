"""fusedsim.registration.warp / compose / scaling_and_squaring: reference values, grid_sample, gradients, errors.

Fixtures: ``refdata/registration/grid_sample.npz`` and ``end_to_end.npz``, float64 torch (2.13) results of
``grid_sample(X, affine_grid(A) + u)``, FireANTs' warp composer and scaling and squaring, stored as float32 (small
arrays as float64). Our float64 results must equal them to the float32 storage rounding: 2**-24 relative to each
array's largest magnitude, with a factor 4 of margin (a stored sum of many terms may round a little further).

Kernels run on the GPU when there is one, else through Triton's interpreter on small sizes (tests/conftest.py);
the generic twin test (tests/ops/test_registry.py) also runs the ``warp`` and ``compose`` ops on their examples.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fusedsim.core import state
from fusedsim.core.backend import use_backend
from fusedsim.registration import compose, scaling_and_squaring, warp

F32_STORAGE = 4 * 2.0**-24  # relative to max |ref|: the fixtures' float32 rounding, with margin
PADS = ("zeros", "border", "reflection")


@pytest.fixture(scope="module")
def data(refdata):
    folder = refdata / "registration"
    return {name: np.load(folder / f"{name}.npz") for name in ("inputs", "grid_sample", "end_to_end")}


def _t(array, dtype=torch.float64, device="cpu"):
    return torch.as_tensor(np.asarray(array)).to(device, dtype)


def _assert_matches(got: torch.Tensor, ref: np.ndarray, what: str, rel: float = F32_STORAGE) -> float:
    ref_t = _t(ref)
    err = (got.detach().double().cpu() - ref_t).abs().max().item()
    scale = ref_t.abs().max().item()
    assert err <= rel * max(scale, 1e-30), f"{what}: max |Δ| {err:.3g} > {rel:.2g} × {scale:.3g}"
    return err


def _warp_with_grads(backend, device, x, a, u, gradout, **kw):
    leaves = [None if t is None else t.to(device).requires_grad_() for t in (x, a, u)]
    with use_backend(backend):
        out = warp(*leaves, **kw)
    grads = torch.autograd.grad(out, [t for t in leaves if t is not None], gradout.to(device))
    return out, dict(zip([n for n, t in zip(("grad_input", "grad_affine", "grad_disp"), leaves) if t is not None],
                         grads))


# ------------------------------------------------------------------------------------------------ fixtures
GS_CASES = [(2, "zeros", 1), (2, "zeros", 0), (2, "border", 1), (2, "reflection", 1), (3, "zeros", 1),
            (3, "zeros", 0), (3, "border", 1)]


@pytest.mark.parametrize("nd,pad,ac", GS_CASES, ids=[f"{n}d-{p}-ac{a}" for n, p, a in GS_CASES])
def test_warp_matches_grid_sample_fixtures(data, nd, pad, ac):
    inp, ref = data["inputs"], data["grid_sample"]
    x, a, u, go = (_t(inp[f"gs{nd}_{k}"]) for k in ("input", "affine", "disp", "gradout"))
    out, grads = _warp_with_grads("reference", "cpu", x, a, u, go, padding_mode=pad, align_corners=bool(ac))
    key = f"gs{nd}_{pad}_ac{ac}_"
    _assert_matches(out, ref[key + "out"], key + "out")
    for name, g in grads.items():
        _assert_matches(g, ref[key + name], key + name)


@pytest.mark.parametrize("nd,ac", [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_affine_only_and_nearest_fixtures(data, nd, ac):
    inp, ref = data["inputs"], data["grid_sample"]
    x, a, u, go = (_t(inp[f"gs{nd}_{k}"]) for k in ("input", "affine", "disp", "gradout"))
    lattice = tuple(u.shape[1:-1])
    out, grads = _warp_with_grads("reference", "cpu", x, a, None, go, out_shape=lattice, align_corners=bool(ac))
    key = f"gs{nd}_affineonly_ac{ac}_"
    _assert_matches(out, ref[key + "out"], key + "out")
    for name, g in grads.items():
        _assert_matches(g, ref[key + name], key + name)
    nearest = warp(x, a, u, mode="nearest", align_corners=bool(ac))
    _assert_matches(nearest, ref[f"gs{nd}_nearest_ac{ac}_out"], "nearest", rel=0.0)


@pytest.mark.parametrize("nd,aff,ac", [(n, f, a) for n in (2, 3) for f in ("aff", "noaff") for a in (0, 1)])
def test_compose_fixtures(data, nd, aff, ac):
    """FireANTs' warp_composer (u sampled at A·x + v, without adding v), and with add_v the sum v + that."""
    inp, ref = data["inputs"], data["grid_sample"]
    u, v, go = (_t(inp[f"wc{nd}_{k}"]).requires_grad_() for k in ("u", "v", "gradout"))
    a = _t(inp[f"wc{nd}_affine"]).requires_grad_() if aff == "aff" else None
    out = compose(u, v, a, add_v=False, align_corners=bool(ac))
    leaves = [u, v] + ([a] if a is not None else [])
    grads = torch.autograd.grad(out, leaves, go)
    key = f"wc{nd}_{aff}_ac{ac}_"
    _assert_matches(out, ref[key + "out"], key + "out")
    for name, g in zip(("grad_u", "grad_v", "grad_affine"), grads):
        _assert_matches(g, ref[key + name], key + name)
    with_v = compose(u, v, a, add_v=True, align_corners=bool(ac))
    torch.testing.assert_close(with_v, out + v, rtol=0, atol=1e-15)


def test_scaling_and_squaring_fixture(data):
    velocity = _t(data["inputs"]["ss3_velocity"])
    _assert_matches(scaling_and_squaring(velocity, 6), data["grid_sample"]["ss3_n6_disp"], "ss3_n6_disp")
    assert torch.equal(scaling_and_squaring(velocity, 0), velocity)


def _monai_lncc_box(pred: torch.Tensor, target: torch.Tensor, k: int) -> torch.Tensor:
    """MONAI 1.6.1 LocalNormalizedCrossCorrelationLoss, box window, mean, per the fixture README §5 (unnormalised
    window sums with zero padding, variance floors smooth_dr = 1e-5, smooth_nr = 0, no clamp)."""
    ones = torch.ones((1, 1, k, k, k), dtype=pred.dtype)
    w = float(k**3)
    sp, st, spp, stt, spt = (F.conv3d(z, ones, padding=k // 2) for z in (pred, target, pred * pred, target * target,
                                                                         pred * target))
    cross = spt - sp / w * st
    t_var = torch.clamp(stt - st / w * st, min=1e-5)
    p_var = torch.clamp(spp - sp / w * sp, min=1e-5)
    return -(cross * cross / (t_var * p_var)).mean()


def test_end_to_end_warp_and_its_gradients(data):
    """e2e3: MONAI LNCC (k=5 box) of the warped moving volume against the fixed one; the warp's gradients carry
    the loss gradient to the displacement, the affine and the moving image."""
    inp, ref = data["inputs"], data["end_to_end"]
    moving, fixed = _t(inp["moving3d"]).requires_grad_(), _t(inp["fixed3d"])
    affine, disp = _t(inp["e2e3_affine"]).requires_grad_(), _t(inp["e2e3_disp"]).requires_grad_()
    warped = warp(moving, affine, disp, padding_mode="zeros", align_corners=True)
    _assert_matches(warped, ref["e2e3_warped"], "e2e3_warped")
    loss = _monai_lncc_box(warped, fixed, 5)
    assert abs(loss.item() - ref["e2e3_lncc_rect_k5_loss"]) < 1e-9
    g_disp, g_affine, g_moving = torch.autograd.grad(loss, [disp, affine, moving])
    _assert_matches(g_disp, ref["e2e3_lncc_rect_k5_grad_disp"], "grad_disp")
    _assert_matches(g_affine, ref["e2e3_lncc_rect_k5_grad_affine"], "grad_affine")
    _assert_matches(g_moving, ref["e2e3_lncc_rect_k5_grad_moving"], "grad_moving")


def _monai_mi_gaussian(pred: torch.Tensor, target: torch.Tensor, bins: int = 32) -> torch.Tensor:
    """MONAI 1.6.1 GlobalMutualInformationLoss, gaussian Parzen windows, per the fixture README §5: bin centres
    linspace(0, 1, bins), σ = 0.5 × their mean spacing, 1/(2σ²) (MONAI builds these three in float32: the loss
    then matches to 1e-16), inputs clamped to [0, 1], weights normalised per voxel,
    MI = Σ pab·log((pab + 1e-7)/(pa·pb + 1e-7) + 1e-7), loss -mean over the batch."""
    centres = torch.linspace(0, 1, bins)
    preterm = (1 / (2 * (torch.mean(centres[1:] - centres[:-1]) * 0.5) ** 2)).to(pred.dtype)
    centres = centres.to(pred.dtype)

    def weights(x):
        w = torch.exp(-preterm * (x.clamp(0, 1).reshape(x.shape[0], -1, 1) - centres) ** 2)
        return w / w.sum(-1, keepdim=True)

    wa, wb = weights(pred), weights(target)
    pab = wa.transpose(1, 2) @ wb / wa.shape[1]
    papb = wa.mean(1, keepdim=True).transpose(1, 2) @ wb.mean(1, keepdim=True)
    return -(pab * torch.log((pab + 1e-7) / (papb + 1e-7) + 1e-7)).sum((1, 2)).mean()


def test_end_to_end_2d_mutual_information_gradients(data):
    """e2e2mm: MONAI MI (32 bins) of the warped, intensity-remapped moving photo against the fixed one; the
    warp carries the loss gradient to the displacement and the affine."""
    inp, ref = data["inputs"], data["end_to_end"]
    affine, disp = _t(inp["e2e2_affine"]).requires_grad_(), _t(inp["e2e2_disp"]).requires_grad_()
    loss = _monai_mi_gaussian(warp(_t(inp["moving2d_mm"]), affine, disp), _t(inp["fixed2d"]))
    assert abs(loss.item() - ref["e2e2mm_mi_gauss_b32_loss"]) < 1e-9
    g_disp, g_affine = torch.autograd.grad(loss, [disp, affine])
    _assert_matches(g_disp, ref["e2e2mm_mi_gauss_b32_grad_disp"], "grad_disp")
    _assert_matches(g_affine, ref["e2e2mm_mi_gauss_b32_grad_affine"], "grad_affine")


@pytest.mark.parametrize("nd,pad,ac", [(2, "reflection", 1), (3, "zeros", 0)])
def test_kernel_matches_fixtures(data, kernel_device, nd, pad, ac):
    """The Triton kernels on full fixture inputs (float64), forward and all three gradients."""
    inp, ref = data["inputs"], data["grid_sample"]
    x, a, u, go = (_t(inp[f"gs{nd}_{k}"]) for k in ("input", "affine", "disp", "gradout"))
    out, grads = _warp_with_grads("triton", kernel_device, x, a, u, go, padding_mode=pad, align_corners=bool(ac))
    key = f"gs{nd}_{pad}_ac{ac}_"
    _assert_matches(out, ref[key + "out"], key + "out")
    for name, g in grads.items():
        _assert_matches(g, ref[key + name], key + name)


# ------------------------------------------------------------------------------------ against grid_sample
def _random_case(shape, lattice, seed, dtype=torch.float64, batches=(None, None)):
    gen = torch.Generator().manual_seed(seed)
    nd = len(lattice)
    b = shape[0]
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    a = torch.eye(nd, nd + 1, dtype=torch.float64) + 0.1 * torch.randn(batches[0] or b, nd, nd + 1, generator=gen,
                                                                        dtype=torch.float64)
    u = 0.2 * torch.randn(batches[1] or b, *lattice, nd, generator=gen, dtype=torch.float64)
    return x.to(dtype), a.to(dtype), u.to(dtype)


def _torch_warp(x, a, u, lattice, mode, pad, ac):
    b = max(x.shape[0], a.shape[0], u.shape[0])
    grid = F.affine_grid(a.expand(b, *a.shape[1:]), [b, 1, *lattice], align_corners=ac) + u
    return F.grid_sample(x.expand(b, *x.shape[1:]), grid, mode=mode, padding_mode=pad, align_corners=ac)


GS_RANDOM = [(nd, mode, pad, ac) for nd in (2, 3) for mode in ("bilinear", "nearest") for pad in PADS
             for ac in (True, False)]


@pytest.mark.parametrize("backend", ["reference", "triton"])
@pytest.mark.parametrize("nd,mode,pad,ac", GS_RANDOM, ids=[f"{n}d-{m}-{p}-ac{int(a)}" for n, m, p, a in GS_RANDOM])
def test_equals_grid_sample_of_affine_grid_plus_displacement(backend, kernel_device, nd, mode, pad, ac):
    """grid_sample(image, affine_grid(A) + u) with every mode, padding and align_corners; values within float64
    rounding (points computed in another order: 1e-12), gradients too (the same chain rule, grid_sample's)."""
    shape, lattice = ((2, 2, 9, 11), (7, 10)) if nd == 2 else ((2, 2, 5, 6, 7), (4, 5, 6))
    x, a, u = _random_case(shape, lattice, seed=GS_RANDOM.index((nd, mode, pad, ac)))
    device = kernel_device if backend == "triton" else torch.device("cpu")
    leaves = [t.to(device).requires_grad_() for t in (x, a, u)]
    with use_backend(backend):
        out = warp(*leaves, mode=mode, padding_mode=pad, align_corners=ac)
    ref_leaves = [t.clone().requires_grad_() for t in (x, a, u)]
    ref = _torch_warp(*ref_leaves, lattice, mode, pad, ac)
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-12, atol=1e-12)
    go = torch.randn(ref.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    got = torch.autograd.grad(out, leaves, go.to(device))
    want = torch.autograd.grad(ref, ref_leaves, go)
    for name, g, w in zip(("image", "affine", "disp"), got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-10, atol=1e-10, msg=name)


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_many_channels(kernel_device, nd, mode):
    """Six channels (the forward's tiled programs, see ForwardLaunch): every channel must equal
    grid_sample's (float64 rounding), the last included."""
    shape, lattice = ((2, 6, 9, 11), (7, 10)) if nd == 2 else ((2, 6, 5, 6, 7), (4, 5, 6))
    x, a, u = _random_case(shape, lattice, seed=30 + nd)
    with use_backend("triton"):
        out = warp(*(t.to(kernel_device) for t in (x, a, u)), mode=mode, padding_mode="reflection")
    ref = _torch_warp(x, a, u, lattice, mode, "reflection", True)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("pad", PADS)
def test_tiled_forward_equals_memory_order(kernel_device, nd, pad):
    """The forward's two voxel layouts (BLOCK voxels in memory order, or tiles of rows and slices) move only which
    program computes a voxel: bit-identical outputs, on a lattice that leaves partial tiles along every axis."""
    from fusedsim.registration.warp_kernel import ForwardLaunch, warp_plan
    from fusedsim.registration.warping import PADDINGS

    shape, lattice = ((2, 5, 9, 11), (7, 37)) if nd == 2 else ((2, 5, 5, 6, 7), (3, 5, 35))
    x, a, u = (t.float().to(kernel_device) for t in _random_case(shape, lattice, seed=50 + nd))
    scalars = (lattice, True, 0, PADDINGS[pad], True)
    outs = [warp_plan((x, a, u), scalars, ForwardLaunch(tiled_min_channels=channels)).forward(x, a, u)[0]
            for channels in (1000, 1)]
    assert torch.equal(outs[0], outs[1])
    assert outs[0].abs().sum() > 0  # a real sample, not two empty outputs
    with use_backend("triton"):
        assert torch.equal(warp(x, a, u, padding_mode=pad), outs[1])  # 5 channels: the public call tiles


@pytest.mark.parametrize("batches", [(1, 2), (2, 1), (1, 1)], ids=["affine1", "disp1", "both1"])
def test_batch_one_broadcasts(kernel_device, batches):
    """Image, affine and displacement of batch 1 broadcast against batch 2; their gradients sum over the batch."""
    x, a, u = _random_case((1, 2, 5, 6, 7), (4, 5, 6), seed=11, batches=batches)
    x2 = torch.cat([x, x.flip(-1)])
    for backend, device in (("reference", torch.device("cpu")), ("triton", kernel_device)):
        leaves = [t.to(device).requires_grad_() for t in (x2, a, u)]
        with use_backend(backend):
            out = warp(*leaves, padding_mode="border")
        ref_leaves = [t.clone().requires_grad_() for t in (x2, a, u)]
        ref = _torch_warp(*ref_leaves, (4, 5, 6), "bilinear", "border", True)
        torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-12, atol=1e-12)
        got = torch.autograd.grad(out.sum(), leaves)
        want = torch.autograd.grad(ref.sum(), ref_leaves)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            torch.testing.assert_close(g.cpu(), w, rtol=1e-10, atol=1e-10)


def test_full_field_and_no_field(kernel_device):
    """is_displacement=False samples at φ itself; without a field, the affine alone on out_shape's lattice."""
    x, a, _ = _random_case((1, 2, 9, 11), (7, 10), seed=3)
    phi = torch.rand(1, 7, 10, 2, dtype=torch.float64) * 2.2 - 1.1
    for backend, device in (("reference", torch.device("cpu")), ("triton", kernel_device)):
        with use_backend(backend):
            full = warp(x.to(device), grid=phi.to(device), is_displacement=False, padding_mode="reflection")
            aff = warp(x.to(device), a.to(device), out_shape=(1, 2, 7, 10), align_corners=False)
            same = warp(x.to(device))
        torch.testing.assert_close(full.cpu(), F.grid_sample(x, phi, padding_mode="reflection", align_corners=True),
                                   rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(aff.cpu(), _torch_warp(x, a, torch.zeros(1, 7, 10, 2, dtype=torch.float64),
                                                          (7, 10), "bilinear", "zeros", False), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(same.cpu(), x, rtol=1e-12, atol=1e-12)


def test_compose_and_scaling_and_squaring_kernels(kernel_device):
    """compose on the kernels against the twin (values and gradients for u, v, A), and the squaring recursion."""
    gen = torch.Generator().manual_seed(21)
    u = 0.2 * torch.randn(2, 5, 6, 7, 3, generator=gen, dtype=torch.float64)
    v = 0.2 * torch.randn(1, 4, 5, 6, 3, generator=gen, dtype=torch.float64)
    a = torch.eye(3, 4, dtype=torch.float64) + 0.05 * torch.randn(2, 3, 4, generator=gen, dtype=torch.float64)
    results = {}
    for backend, device in (("reference", torch.device("cpu")), ("triton", kernel_device)):
        leaves = [t.to(device).requires_grad_() for t in (u, v, a)]
        with use_backend(backend):
            out = compose(*leaves, align_corners=False)
            vel = scaling_and_squaring(leaves[0][:1], 3)
        go = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        results[backend] = [out, vel, *torch.autograd.grad(out, leaves, go.to(device))]
    for got, want in zip(results["triton"], results["reference"]):
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-10, atol=1e-12)


def test_low_precision_images(kernel_device):
    """bf16/fp16 images with float32 fields: computed in float32, returned in the image dtype."""
    x, a, u = _random_case((1, 2, 9, 11), (7, 10), seed=8, dtype=torch.float32)
    for dtype in (torch.bfloat16, torch.float16):
        xl = x.to(dtype)
        want = _torch_warp(xl.float(), a, u, (7, 10), "bilinear", "zeros", True)
        for backend, device in (("reference", torch.device("cpu")), ("triton", kernel_device)):
            leaves = [t.to(device).requires_grad_() for t in (xl, a, u)]
            with use_backend(backend):
                out = warp(*leaves)
            assert out.dtype == dtype
            torch.testing.assert_close(out.float().cpu(), want, rtol=0, atol=2 ** -7)  # one bf16 rounding
            g = torch.autograd.grad(out.float().sum(), leaves)
            assert [t.dtype for t in g] == [dtype, torch.float32, torch.float32]


def test_twin_gradcheck_every_padding():
    """The twin is the specification of the gradients: finite differences in float64, all paddings, both
    align_corners, 2-D and 3-D, and the composition."""
    for i, (nd, pad, ac) in enumerate([(2, p, a) for p in PADS for a in (True, False)] + [(3, "border", False)]):
        shape, lattice = ((1, 1, 5, 6), (4, 5)) if nd == 2 else ((1, 1, 4, 3, 5), (3, 3, 2))
        x, a, u = (t.requires_grad_() for t in _random_case(shape, lattice, seed=40 + i))
        assert torch.autograd.gradcheck(lambda *ts, p=pad, c=ac: warp(*ts, padding_mode=p, align_corners=c),
                                        (x, a, u), eps=1e-6, atol=1e-6)
    gen = torch.Generator().manual_seed(50)
    u = (0.3 * torch.randn(1, 5, 6, 2, generator=gen, dtype=torch.float64)).requires_grad_()
    v = (0.3 * torch.randn(1, 4, 5, 2, generator=gen, dtype=torch.float64)).requires_grad_()
    a = (torch.eye(2, 3, dtype=torch.float64) + 0.1 * torch.randn(1, 2, 3, generator=gen,
                                                                   dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda *ts: compose(*ts), (u, v, a), eps=1e-6, atol=1e-6)


def test_kernel_backward_is_deterministic_for_the_field_and_affine(kernel_device):
    """dL/du is written per voxel and dL/dA reduced in a fixed order: repeated runs are bitwise equal."""
    x, a, u = _random_case((2, 2, 5, 6, 7), (4, 5, 6), seed=9, batches=(2, 1))
    runs = []
    for _ in range(2):
        leaves = [x.to(kernel_device), a.to(kernel_device).requires_grad_(), u.to(kernel_device).requires_grad_()]
        with use_backend("triton"):
            out = warp(*leaves)
        runs.append(torch.autograd.grad(out.square().sum(), leaves[1:]))
    for g0, g1 in zip(*runs):
        assert torch.equal(g0, g1)


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors():
    x = torch.rand(1, 1, 8, 9)
    u = torch.zeros(1, 8, 9, 2)
    a = torch.eye(2, 3)[None]
    cases = [
        (lambda: warp(x.numpy()), TypeError, "image must be a torch.Tensor"),
        (lambda: warp(x.to(torch.int32)), TypeError, "image must be a floating tensor"),
        (lambda: warp(x[0]), ValueError, r"image must be \(B, C, H, W\)"),
        (lambda: warp(x[:0]), ValueError, "image is empty"),
        (lambda: warp(x, torch.eye(3, 4)[None]), ValueError, r"affine must have shape \(B, 2, 3\)"),
        (lambda: warp(x, torch.eye(2, 3)), ValueError, "affine must have shape"),
        (lambda: warp(x, a, torch.zeros(1, 8, 9, 3)), ValueError, "grid must be a channel-last field"),
        (lambda: warp(x, a, torch.zeros(1, 8, 9, 2, dtype=torch.int64)), TypeError, "grid must be a floating"),
        (lambda: warp(x, a, torch.zeros(1, 4, 8, 9, 3)), ValueError, "grid must be a channel-last field"),
        (lambda: warp(torch.rand(2, 1, 8, 9), torch.eye(2, 3).expand(3, 2, 3)), ValueError, "batch sizes"),
        (lambda: warp(x, a, u, out_shape=(5, 5)), ValueError, "disagrees with the grid's lattice"),
        (lambda: warp(x, a, out_shape=(5,)), ValueError, "out_shape must hold the 2 spatial sizes"),
        (lambda: warp(x, a, out_shape=(5, 0)), ValueError, "out_shape sizes must be >= 1"),
        (lambda: warp(x, a, out_shape="55"), TypeError, "out_shape must be a sequence of ints"),
        (lambda: warp(x, a, u, is_displacement=False), ValueError, "affine must be None when is_displacement"),
        (lambda: warp(x, is_displacement=False), ValueError, "is_displacement=False needs grid"),
        (lambda: warp(x, a, u, mode="bicubic"), ValueError, "mode must be one of"),
        (lambda: warp(x, a, u, mode="trilinear"), ValueError, "mode='trilinear' is for 3-D"),
        (lambda: warp(x, a, u, padding_mode="wrap"), ValueError, "padding_mode must be one of"),
        (lambda: warp(x, a, u, align_corners=1), TypeError, "align_corners must be a bool"),
        (lambda: warp(x, a, u.to("meta")), ValueError, "grid is on meta"),
        (lambda: compose(u, torch.zeros(1, 4, 5, 3)), ValueError, "v must be a channel-last field"),
        (lambda: compose(torch.zeros(1, 8, 9, 3), u), ValueError, "u must be a channel-last field"),
        (lambda: compose(u, u, torch.eye(3, 4)[None]), ValueError, "affine must have shape"),
        (lambda: compose(u, torch.zeros(3, 8, 9, 2), a.expand(2, 2, 3)), ValueError, "batch sizes"),
        (lambda: compose(u, u, add_v=None), TypeError, "add_v must be a bool"),
        (lambda: scaling_and_squaring(u, -1), ValueError, r"steps must lie in 0\.\.24 for a float32 velocity"),
        (lambda: scaling_and_squaring(u, 2.0), TypeError, "steps must be an int"),
        (lambda: scaling_and_squaring(x, 2), ValueError, "velocity must be a channel-last field"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()


@pytest.mark.parametrize("channels", [2, 6], ids=["memory-order", "tiled"])
def test_64_bit_indexing_path(kernel_device, monkeypatch, channels):
    """The kernels' int64 offsets (taken when a tensor spans 2**31 elements) on a small case, by lowering the
    threshold, in both forward layouts: same values and gradients as the twin."""
    import fusedsim.registration.warp_kernel as kernels
    from fusedsim.core.registry import op

    monkeypatch.setattr(kernels, "_INT31", 16)
    state.reset()
    x, a, u = _random_case((2, channels, 5, 6, 7), (4, 5, 6), seed=17, batches=(1, 2))
    tensors = [t.to(kernel_device).requires_grad_() for t in (x, a, u)]
    scalars = ([4, 5, 6], True, 0, 2, False)
    plan = op("warp").make_plan(tuple(tensors), scalars)
    assert plan.index64
    out = op("warp").run_plan(plan, *tensors)
    grads = torch.autograd.grad(out.square().sum(), tensors)
    ref_leaves = [t.detach().cpu().requires_grad_() for t in tensors]
    ref = op("warp").reference(*ref_leaves, *scalars)
    want = torch.autograd.grad(ref.square().sum(), ref_leaves)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-12, atol=1e-12)
    for g, w in zip(grads, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-10, atol=1e-10)
    state.reset()
