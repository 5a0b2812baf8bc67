"""DSSIM against kornelski/dssim 3.5.0 (refdata/perceptual, README "DSSIM"): the four upstream locked values, the
corpus transcription as a cross-check, identity, alpha, cached == one-shot, the Triton path (interpreter on small
crops) == the twin, gradients and bad inputs."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from PIL import Image

import fusedsim
from fusedsim.core.backend import use_backend
from fusedsim.families.dssim.twin import dssim_scale_sizes

# (ref crop, dist crop, expected): crops as dssim's sub_image(left, top, width, height); the values are upstream's
# `ssim_locked_values` test (dssim-core/src/dssim.rs), listed in the refdata README.
LOCKED = [
    (None, None, 0.0009483923725199794),
    ((2, 3, 44, 33), (17, 9, 44, 33), 0.10810340934514495),
    ((22, 8, 61, 40), (22, 8, 61, 40), 0.001675780079775091),
]
# The float32 twin reproduces dssim-core's f32 arithmetic (LUT, mul_adds, blur edge weights, summation order);
# measured |Δ| <= 2.3e-16 on the locked values, so only the f64 pooling sums' order is left. The issue's goal is
# 1e-6 (upstream's own tolerance is 5e-6).
LOCKED_TOL = 1e-12
# The corpus rows are an unofficial numpy transcription, itself up to 9.1e-7 off the locked values; we differ from
# it by at most 2.5e-6 (measured), inside upstream's 5e-6.
TRANSCRIPTION_TOL = 5e-6
#: PTX instructions of the SSIM-map kernel for sm_90 (loops over one row's body): about 1,360; twice that is room
#: for changes, far below the ~9,600 of the earlier unrolled kernel (~8 s to compile offline, 11.9 s on an H200).
SSIM_MAP_INSTRUCTION_BOUND = 2800


def _rgba(refdata, name: str) -> torch.Tensor:
    path = refdata / "perceptual" / "images" / name
    return torch.from_numpy(np.array(Image.open(path).convert("RGBA"))).permute(2, 0, 1).contiguous()


def _rgb(refdata, name: str) -> torch.Tensor:
    path = refdata / "perceptual" / "images" / name
    return torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).contiguous()


def _crop(image: torch.Tensor, box) -> torch.Tensor:
    if box is None:
        return image
    left, top, width, height = box
    return image[:, top:top + height, left:left + width]


@pytest.fixture(scope="module")
def fixtures(refdata):
    return _rgba(refdata, "dssim_fixtures/test1-sm.png"), _rgba(refdata, "dssim_fixtures/test2-sm.png")


@pytest.mark.parametrize("ref_box,dist_box,expected", LOCKED)
def test_upstream_locked_values(fixtures, ref_box, dist_box, expected):
    test1, test2 = fixtures  # RGBA8 like upstream's lodepng decode32 (fully opaque)
    got = fusedsim.dssim(_crop(test1, ref_box), _crop(test2, dist_box))
    assert got.dtype == torch.float64 and got.shape == ()
    assert abs(got.item() - expected) <= LOCKED_TOL


def test_identity_is_exactly_zero(fixtures):
    test1, _ = fixtures
    assert fusedsim.dssim(test1, test1.clone()).item() == 0.0
    assert fusedsim.dssim(test1[:3], test1[:3].clone()).item() == 0.0


def test_corpus_transcription_cross_check(refdata):
    with open(refdata / "perceptual" / "scores.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] == "dssim" and r["implementation"].startswith("UNOFFICIAL")
                and r["extra"].startswith("NOT")]
    assert len(rows) == 43  # every corpus pair, identities included
    worst = 0.0
    for row in rows:
        got = fusedsim.dssim(_rgb(refdata, row["ref"]), _rgb(refdata, row["dist"])).item()
        worst = max(worst, abs(got - float(row["value"])))
    assert worst <= TRANSCRIPTION_TOL, worst


def test_scale_count_stops_below_8_px():
    # dssim halves a scale only while both sides are >= 8, so the last scale may be 4..7 px
    assert dssim_scale_sizes(33, 44) == [(33, 44), (16, 22), (8, 11), (4, 5)]
    assert dssim_scale_sizes(40, 61) == [(40, 61), (20, 30), (10, 15), (5, 7)]
    assert len(dssim_scale_sizes(500, 500)) == 5 and dssim_scale_sizes(7, 100) == [(7, 100)]


def test_opaque_alpha_equals_rgb_and_transparent_pixels_show_the_checkerboard():
    gen = torch.Generator().manual_seed(0)
    rgb = torch.randint(0, 256, (2, 3, 21, 26), generator=gen, dtype=torch.uint8)
    other = torch.randint(0, 256, (2, 3, 21, 26), generator=gen, dtype=torch.uint8)
    opaque = torch.full((2, 1, 21, 26), 255, dtype=torch.uint8)
    assert torch.equal(fusedsim.dssim(torch.cat([rgb, opaque], 1), torch.cat([other, opaque], 1)),
                       fusedsim.dssim(rgb, other))
    # fully transparent: premultiplied colour is 0, so both images are the same checkerboard
    clear = torch.zeros_like(opaque)
    assert torch.all(fusedsim.dssim(torch.cat([rgb, clear], 1), torch.cat([other, clear], 1)) == 0.0)
    half = torch.full_like(opaque, 128)
    assert torch.all(fusedsim.dssim(torch.cat([rgb, half], 1), torch.cat([other, half], 1)) > 0.0)


def test_cached_reference_equals_one_shot(fixtures):
    test1, test2 = fixtures
    ref, dists = test1[:3, :48, :64], [test2[:3, :48, :64], test1[:3, 1:49, :64]]
    metric = fusedsim.Metric("dssim", device="cpu").set_reference(ref)
    for dist in dists:
        assert torch.equal(metric.score(dist), fusedsim.dssim(ref, dist))
    batch = torch.stack([ref, ref.flip(-1)])
    dist = torch.stack(dists)
    assert torch.equal(fusedsim.Metric("dssim", device="cpu").set_reference(batch).score(dist),
                       fusedsim.dssim(batch, dist))
    rgba_ref, rgba_dist = test1[:, :40, :50].clone(), test2[:, :40, :50].clone()
    rgba_ref[3, 10:30] = 100  # translucent rows
    assert torch.equal(fusedsim.Metric("dssim", device="cpu").set_reference(rgba_ref).score(rgba_dist),
                       fusedsim.dssim(rgba_ref, rgba_dist))


@pytest.mark.parametrize("ref_box,dist_box,expected", LOCKED[1:])
def test_triton_path_meets_the_locked_values(fixtures, kernel_device, ref_box, dist_box, expected):
    """The kernels reproduce the twin's float32 arithmetic, so the whole GPU path meets upstream's values too."""
    test1, test2 = fixtures
    ref, dist = _crop(test1, ref_box).to(kernel_device), _crop(test2, dist_box).to(kernel_device)
    with use_backend("triton"):
        got = fusedsim.dssim(ref, dist)
        cached = fusedsim.Metric("dssim", device=kernel_device).set_reference(ref).score(dist)
    assert abs(got.item() - expected) <= LOCKED_TOL
    assert torch.equal(got, cached)


def test_triton_path_with_alpha_equals_twin(kernel_device):
    gen = torch.Generator().manual_seed(1)
    ref = torch.rand(1, 4, 19, 23, generator=gen)
    dist = (ref + 0.05 * torch.randn(ref.shape, generator=gen)).clamp(0, 1)
    with use_backend("triton"):
        got = fusedsim.dssim(ref.to(kernel_device), dist.to(kernel_device))
    with use_backend("reference"):
        want = fusedsim.dssim(ref, dist)
    # with alpha the GPU result differs from the CPU twin in the last bits of float32 SSIM (7.9e-8 on the H200,
    # about one float32 ulp at 1.0, where DSSIM = 1/SSIM - 1 is formed): allow 3 ulp
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1.8e-7)


def test_gradients_pass_gradcheck_and_reach_both_inputs():
    gen = torch.Generator().manual_seed(2)
    ref = torch.rand(1, 3, 9, 10, generator=gen, dtype=torch.float64)  # two scales
    dist = (ref + 0.1 * torch.randn(ref.shape, generator=gen, dtype=torch.float64)).clamp(0.01, 0.99)
    ref, dist = ref.requires_grad_(), dist.requires_grad_()
    assert torch.autograd.gradcheck(fusedsim.dssim, (ref, dist), eps=1e-6, atol=1e-6, fast_mode=True)
    assert torch.autograd.gradcheck(lambda d: fusedsim.dssim(ref.detach()[..., :8, :8], d),
                                    (dist.detach()[..., :8, :8].clone().requires_grad_(),), eps=1e-6, atol=1e-6)
    loss = fusedsim.DSSIMLoss()(ref, dist)
    g_ref, g_dist = torch.autograd.grad(loss, (ref, dist))
    assert g_ref.abs().sum() > 0 and g_dist.abs().sum() > 0
    assert loss.item() == fusedsim.dssim(ref, dist).item()
    # a cached reference keeps the gradient for dist (on the CPU, where the one-shot call runs)
    cached = fusedsim.Metric("dssim", device="cpu").set_reference(ref.detach()).score(dist)
    torch.testing.assert_close(torch.autograd.grad(cached, dist)[0], torch.autograd.grad(
        fusedsim.dssim(ref.detach(), dist), dist)[0], rtol=0, atol=0)


def test_float32_gradients_run_the_twin_and_match_float64():
    gen = torch.Generator().manual_seed(3)
    ref = torch.rand(2, 3, 16, 18, generator=gen, dtype=torch.float64)
    dist = (ref + 0.1 * torch.randn(ref.shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    grads = []
    for dtype in (torch.float32, torch.float64):
        x = dist.to(dtype).requires_grad_()
        grads.append(torch.autograd.grad(fusedsim.DSSIMLoss()(ref.to(dtype), x), x)[0].double())
    # float32 rounding of the variances (E[x²] - mu², values ~0.5) against their ~1e-2 size: ~1e-4 relative
    assert ((grads[0] - grads[1]).norm() / grads[1].norm()).item() < 1e-3


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_ssim_map_kernel_compiles_small_for_sm90(dtype):
    """Compiled for an H100 (no GPU needed; under 1 s here): the SSIM-map kernel loops over channels and rows with
    one row's body. A bound on its instruction count catches a return to unrolled code; the row loop carries all 25
    window states (5 rows x 5 moments: a dropped one would read a zero tile on a GPU, unseen by the interpreter);
    no FMA contraction and IEEE division (dssim's bits)."""
    from _offline_compile import carried_per_loop, compiled_asm

    import fusedsim.families.dssim.twin as spec
    from fusedsim.families.dssim.blur_kernel import BLUR_CONSTANTS

    kernel = "fusedsim.families.dssim.ssim_map_kernel:_dssim_ssim_map_kernel"
    signature = {"X": f"*{dtype}", "Y": f"*{dtype}", "OUT": f"*{dtype}",
                 **{name: "i32" for name in ("H", "W", "sxn", "sxc", "sxh", "sxw", "syn", "syc", "syh", "syw")}}
    constexprs = dict(zip(("O", "I", "M", "EC", "EN", "C1", "C2", "INV3", "ACC", "BH", "BW"),
                          (*BLUR_CONSTANTS, spec.C1, spec.C2, spec.INV3, f"tl.float{dtype[2:]}", 8, 64)))
    options = {"num_warps": 4, "enable_fp_fusion": False}  # the launcher's
    ptx = compiled_asm(kernel, signature, constexprs, "ptx", **options)
    instructions = [line for line in ptx.splitlines()
                    if line.rstrip().endswith(";") and not line.lstrip().startswith((".", "//"))]
    assert len(instructions) < SSIM_MAP_INSTRUCTION_BOUND, len(instructions)
    assert f"fma.rn.f{dtype[2:]}" not in ptx and "div.full" not in ptx and f"div.rn.f{dtype[2:]}" in ptx
    assert carried_per_loop(kernel, signature, constexprs, **options) == [8, 25]  # channel loop: 6 sums, 2 pointers


@pytest.mark.parametrize("ref,dist,error,match", [
    (torch.zeros(1, 2, 8, 8), torch.zeros(1, 2, 8, 8), ValueError, "3 sRGB channels"),
    (torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 9), ValueError, "same shape"),
    (torch.zeros(1, 4, 8, 8), torch.zeros(1, 3, 8, 8), ValueError, "both be RGB or both RGBA"),
    (torch.full((1, 3, 8, 8), 1.5), torch.zeros(1, 3, 8, 8), ValueError, "ref must hold sRGB values"),
    (torch.zeros(1, 4, 8, 8), torch.cat([torch.zeros(1, 3, 8, 8), torch.full((1, 1, 8, 8), 2.0)], 1), ValueError,
     "dist alpha must hold"),
    (np.zeros((8, 8, 3)), torch.zeros(3, 8, 8), TypeError, "ref must be a torch.Tensor"),
    (torch.zeros(1, 3, 8, 8, dtype=torch.int32), torch.zeros(1, 3, 8, 8, dtype=torch.int32), TypeError, "uint8"),
    (torch.zeros(0, 3, 8, 8), torch.zeros(0, 3, 8, 8), ValueError, "empty"),
])
def test_bad_inputs_name_the_argument(ref, dist, error, match):
    with pytest.raises(error, match=match):
        fusedsim.dssim(ref, dist)


def test_cached_reference_rejects_a_different_shape():
    metric = fusedsim.Metric("dssim").set_reference(torch.zeros(3, 8, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match="reference's shape"):
        metric.score(torch.zeros(3, 8, 9, dtype=torch.uint8))
