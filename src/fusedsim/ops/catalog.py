"""Every op, declared once: schema, Triton plan (imported lazily), PyTorch twin, shape function, test examples.

This module imports neither Triton nor the kernels, so the twins (the CPU path) work where Triton is not
installed. Adding an op = one ``register_op`` call here (plus its kernel module and its twin); the dispatcher,
``torch.compile`` support and the generic twin tests (``tests/ops/test_registry.py``) follow from it.
"""

from __future__ import annotations

import torch

from fusedsim.ops.registry import Example, KernelOp, register_op
from fusedsim.reference.butteraugli_filters_ref import butteraugli_blur_ref, butteraugli_malta_ref
from fusedsim.reference.cvvdp_ref import cvvdp_mask_diff_ref
from fusedsim.reference.dssim_ref import dssim_blur_ref, dssim_lab_op_ref, dssim_ssim_map_ref
from fusedsim.reference.float_ssim_ref import MS_SSIM_LOWPASS, iqa_decimate_ref, iqa_ssim_maps_ref, to_vmaf_float
from fusedsim.reference.integer_ssim_ref import integer_ssim_ref
from fusedsim.reference.iwssim_ref import (
    corrected_eig_ref,
    info_weight_map_op_ref,
    neighbourhood_gram_op_ref,
)
from fusedsim.reference.lncc_ref import lncc_ref
from fusedsim.reference.mutual_information_ref import parzen_histogram_ref
from fusedsim.reference.recursive_gaussian_ref import recursive_gaussian_ref
from fusedsim.reference.sequential_sum_ref import sequential_sum_ref
from fusedsim.reference.ssim_ref import (
    avg_pool_half_pair_ref,
    compute_dtype,
    gaussian_window,
    ms_ssim_reduce_ref,
    ssim_reduce_ref,
    windowed_moments_ref,
)
from fusedsim.reference.ssimulacra2_ref import (
    ssimulacra2_error_pool_ref,
    ssimulacra2_linear_xyb_ref,
    ssimulacra2_reference_blur_ref,
)
from fusedsim.reference.warp_ref import compose_ref, warp_ref

#: Ops whose Triton kernels pass their twin tests in Triton's interpreter but have not yet passed them on a GPU
#: (some failed there on the H200 with Triton 3.6: ssimulacra2_error_pool, and by position in a cut-off log
#: parzen_histogram and butteraugli_blur). ``auto`` runs their twins on GPU tensors (same algorithm in PyTorch);
#: ``use_backend("triton")`` still runs the kernels, which is how the GPU tests exercise them.
GPU_PENDING = ("dssim_lab", "dssim_blur", "dssim_ssim_map", "iwssim_gram", "iwssim_eig", "iwssim_info",
               "parzen_histogram", "butteraugli_blur", "butteraugli_malta", "recursive_gaussian",
               "ssimulacra2_linear_xyb", "ssimulacra2_reference_blur", "ssimulacra2_error_pool",
               "cvvdp_mask_diff")

# ssim_reduce's ``reduce`` codes (also in ops/ssim_source.py)
MAP, STATS, MEAN, IMAGE, CHANNEL = -1, 0, 1, 2, 3

# Tolerances against the float64 twin. float64: the same formulas in another order (rounding ~1e-15, amplified
# by the variance cancellation E[x²] - mu² to ~1e-11). float32: ~1e-7 relative per statistic, up to ~1e-5 on SSIM
# and ~1e-4 on gradients in flat regions where that cancellation is worst.
SSIM_TOLERANCE = {torch.float64: (1e-9, 1e-8), torch.float32: (2e-5, 2e-4)}


def _pair(shape, device, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    y = (x + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    return x.to(device, dtype), y.to(device, dtype)


def _window(taps: int, channels: int, device, asymmetric: bool = False, box: bool = False) -> torch.Tensor:
    win = gaussian_window(taps, 1.5, device=device)
    if asymmetric:
        win = torch.linspace(0.5, 1.5, taps, dtype=torch.float64, device=device) * win
        win = win / win.sum()
    if box:
        win = torch.full((taps,), 1.0 / taps, dtype=torch.float64, device=device)
    return win.expand(channels, -1).contiguous()


def _strided_pair(device, seed):
    """Non-contiguous inputs: sliced rows and stride-2 columns; one of them channels-last."""
    big_x, big_y = _pair((1, 2, 22, 30), device, seed)
    return big_x[:, :, 3:28, ::2], big_y.to(memory_format=torch.channels_last)[:, :, 3:28, 1::2]


# ---------------------------------------------------------------------------------------------------- SSIM
def _ssim_reduce_fake(x, y, win, c1, c2, valid, symmetric, reduce, ssim_weight):
    n, c = x.shape[:2]
    shrink = win.shape[-1] - 1 if valid else 0
    shape = {MEAN: (), IMAGE: (n,), CHANNEL: (n, c), STATS: (2, n, c)}.get(
        reduce, tuple(x.shape[:2]) + tuple(s - shrink for s in x.shape[2:]))
    return x.new_empty(shape, dtype=compute_dtype(x.dtype))


def _ssim_examples(device: torch.device) -> list[Example]:
    cases = [  # shape, taps, valid, reduce, ssim_weight, asymmetric window
        ((1, 1, 11, 11), 11, False, MEAN, -1.0, False),
        ((1, 1, 1, 1), 3, False, MEAN, 0.2, False),
        ((2, 3, 13, 17), 5, True, IMAGE, -1.0, False),
        ((1, 2, 19, 23), 7, False, CHANNEL, -1.0, True),
        ((1, 2, 20, 37), 3, True, STATS, -1.0, False),
        ((1, 1, 31, 29), 7, True, MAP, -1.0, False),
        ((2, 1, 7, 13), 3, False, MAP, -1.0, False),
        ((2, 2, 17, 21), 5, False, MEAN, 0.2, False),
        ((1, 3, 21, 19), 5, True, IMAGE, 0.7, False),
        ((1, 2, 16, 19), 5, False, CHANNEL, 0.0, False),
        ((1, 1, 70, 133), 3, True, MEAN, 0.2, False),  # several column strips
        ((1, 1, 12, 300), 3, False, IMAGE, -1.0, False),  # interior programs
        ((1, 2, 6, 7, 8), 3, False, CHANNEL, -1.0, False),
        ((1, 1, 7, 6, 8), 3, True, MEAN, 0.4, False),
        ((1, 1, 5, 7, 6), 3, True, MAP, -1.0, False),
    ]
    out = []
    for i, (shape, taps, valid, reduce, weight, asym) in enumerate(cases):
        x, y = _pair(shape, device, i)
        out.append(Example((x, y, _window(taps, shape[1], device, asym)),
                           (1e-4, 9e-4, valid, not asym, reduce, weight), grads=(0, 1),
                           note=f"{shape} K={taps} valid={valid} reduce={reduce} w={weight}"))
    x, y = _strided_pair(device, 99)
    out.append(Example((x, y, _window(9, 2, device)), (1e-4, 9e-4, False, True, CHANNEL, 0.2), grads=(0, 1),
                       note="non-contiguous"))
    x, y = _pair((2, 1, 12, 15), device, 98)
    out.append(Example((x, y, _window(5, 1, device)), (1e-4, 9e-4, True, True, IMAGE, -1.0), grads=(0,),
                       note="gradient for the first input only"))
    return out


ssim_reduce = register_op(KernelOp(
    name="ssim_reduce",
    schema="(Tensor x, Tensor y, Tensor win, float c1, float c2, bool valid, bool symmetric, int reduce, "
           "float ssim_weight) -> Tensor",
    n_tensors=3,
    plan_for="fusedsim.ops.ssim:ssim_plan",
    reference=ssim_reduce_ref,
    fake=_ssim_reduce_fake,
    examples=_ssim_examples,
    tolerance=SSIM_TOLERANCE,
    doc="SSIM of (N, C, H, W) / (N, C, D, H, W) pairs reduced in-kernel (mean, per image, per plane, per-plane "
        "SSIM+cs, or the map); with ssim_weight >= 0 the L1+SSIM loss (1-w)·mean|x-y| + w·(1-SSIM).",
))


def _ms_fake(x, y, win, weights, c1, c2, symmetric, reduce):
    n, c = x.shape[:2]
    return x.new_empty({MEAN: (), IMAGE: (n,)}.get(reduce, (n, c)), dtype=compute_dtype(x.dtype))


def _ms_examples(device: torch.device) -> list[Example]:
    out = []
    cases = [((2, 2, 21, 23), 3, (0.3, 0.3, 0.4), CHANNEL), ((1, 1, 40, 37), 5, (0.2, 0.5, 0.3), MEAN),
             ((2, 1, 34, 35), 3, (0.1, 0.2, 0.3, 0.4), IMAGE)]
    for i, (shape, taps, weights, reduce) in enumerate(cases):
        x, y = _pair(shape, device, 50 + i)
        w = torch.tensor(weights, dtype=torch.float64, device=device)
        out.append(Example((x, y, _window(taps, shape[1], device), w), (1e-4, 9e-4, True, reduce), grads=(0, 1),
                           note=f"{shape} K={taps} levels={len(weights)} reduce={reduce}"))
    x, y = _strided_pair(device, 60)
    w = torch.tensor((0.5, 0.5, 1.0), dtype=torch.float64, device=device)
    out.append(Example((x, y, _window(3, 2, device), w), (1e-4, 9e-4, True, CHANNEL), grads=(0, 1),
                       note="non-contiguous"))
    return out


ms_ssim = register_op(KernelOp(
    name="ms_ssim",
    schema="(Tensor x, Tensor y, Tensor win, Tensor weights, float c1, float c2, bool symmetric, int reduce) -> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.ssim:ms_ssim_plan",
    reference=ms_ssim_reduce_ref,
    fake=_ms_fake,
    examples=_ms_examples,
    tolerance=SSIM_TOLERANCE,
    doc="2-D MS-SSIM (pytorch-msssim): pyramid pooling fused, per-level statistics and their combination in "
        "kernels; one backward launch per level.",
))


# ------------------------------------------------------------------------------------- building blocks
def _pool_fake(x, y):
    n, c, h, w = x.shape
    return x.new_empty((2, n, c, (h + h % 2) // 2, (w + w % 2) // 2))


def _pool_examples(device: torch.device) -> list[Example]:
    out = [Example(_pair(shape, device, i), note=str(shape))
           for i, shape in enumerate([(1, 1, 1, 1), (2, 3, 7, 13), (1, 2, 16, 9), (1, 1, 33, 70)])]
    out.append(Example(_strided_pair(device, 7), note="non-contiguous"))
    return out


avg_pool_half = register_op(KernelOp(
    name="avg_pool_half",
    schema="(Tensor x, Tensor y) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.avg_pool:avg_pool_op_plan",
    reference=avg_pool_half_pair_ref,
    fake=_pool_fake,
    examples=_pool_examples,
    differentiable=False,
    tolerance={torch.float64: (1e-15, 0.0), torch.float32: (1e-6, 0.0)},
    doc="MS-SSIM downsampling of both images in one launch (pytorch-msssim's padding); forward only.",
))


def _moments_fake(x, y, win, valid):
    shrink = win.shape[-1] - 1 if valid else 0
    return x.new_empty((5, *x.shape[:2], *(s - shrink for s in x.shape[2:])), dtype=compute_dtype(x.dtype))


def _moments_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, taps, valid, box) in enumerate([((1, 1, 11, 11), 11, True, False), ((2, 3, 13, 17), 5, False, True),
                                                   ((1, 2, 9, 8, 10), 3, True, True), ((1, 1, 40, 150), 7, False, False)]):
        x, y = _pair(shape, device, 20 + i)
        out.append(Example((x, y, _window(taps, shape[1], device, box=box)), (valid,),
                           note=f"{shape} K={taps} valid={valid} box={box}"))
    return out


windowed_moments = register_op(KernelOp(
    name="windowed_moments",
    schema="(Tensor x, Tensor y, Tensor win, bool valid) -> Tensor",
    n_tensors=3,
    plan_for="fusedsim.ops.windowed_moments:moments_op_plan",
    reference=windowed_moments_ref,
    fake=_moments_fake,
    examples=_moments_examples,
    differentiable=False,
    tolerance=SSIM_TOLERANCE,
    doc="The five local moments (mu_x, mu_y, E[x²], E[y²], E[xy]) under a separable window, 2-D and 3-D.",
))


# ------------------------------------------------------------------------------------------------- warps
def _warp_batch(*tensors) -> int:
    return max(t.shape[0] for t in tensors if t.numel())


def _warp_fake(image, affine, grid, out_shape, is_displacement, mode, padding, align_corners):
    lattice = tuple(grid.shape[1:-1]) if grid.numel() else tuple(out_shape)
    return image.new_empty((_warp_batch(image, affine, grid), image.shape[1], *lattice))


def _warp_examples(device: torch.device) -> list[Example]:
    """Random images, near-identity affines and displacements of a few voxels (points rarely on a voxel edge,
    where the coordinate gradient jumps); lattices differ from the image's; batch-1 broadcasting of each input."""
    cases = [  # image shape, lattice, (batch of affine, grid; 0: absent), is_displacement, mode, padding, ac
        ((1, 1, 7, 9), (6, 8), (1, 1), True, 0, 0, True),
        ((2, 2, 9, 11), (7, 10), (2, 2), True, 0, 1, False),
        ((1, 2, 8, 9), (9, 7), (2, 0), True, 0, 2, True),
        ((2, 1, 8, 9), (5, 6), (0, 1), True, 0, 2, False),
        ((2, 2, 8, 9), (6, 7), (0, 2), False, 0, 1, True),
        ((1, 2, 8, 9), (6, 7), (1, 3), True, 1, 0, True),
        ((1, 2, 5, 6, 7), (4, 5, 6), (1, 1), True, 0, 0, True),
        ((2, 1, 5, 6, 7), (6, 4, 5), (1, 2), True, 0, 2, False),
        ((1, 1, 6, 5, 7), (4, 4, 5), (0, 2), True, 0, 1, True),
        ((2, 1, 5, 6, 7), (4, 5, 6), (2, 2), True, 1, 2, False),
    ]
    out = []
    for i, (shape, lattice, (ba, bg), is_disp, mode, pad, ac) in enumerate(cases):
        gen = torch.Generator().manual_seed(300 + i)
        nd = len(lattice)
        image = torch.rand(shape, generator=gen, dtype=torch.float64)
        affine = (torch.eye(nd, nd + 1, dtype=torch.float64) + 0.1 * torch.randn(ba, nd, nd + 1, generator=gen,
                                                                                   dtype=torch.float64)
                  if ba else torch.empty(0, dtype=torch.float64))
        grid = (0.15 * torch.randn(bg, *lattice, nd, generator=gen, dtype=torch.float64)
                if bg else torch.empty(0, dtype=torch.float64))
        if not is_disp:
            grid = torch.rand(bg, *lattice, nd, generator=gen, dtype=torch.float64) * 2.4 - 1.2
        grads = tuple(j for j, t in enumerate((image, affine, grid)) if t.numel())
        out.append(Example((image.to(device), affine.to(device), grid.to(device)), (list(lattice), is_disp, mode,
                                                                                    pad, ac),
                           grads=grads, note=f"{shape}->{lattice} A/u batch {ba}/{bg} disp={is_disp} mode={mode} "
                                             f"pad={pad} ac={ac}"))
    gen = torch.Generator().manual_seed(399)
    image = torch.rand(1, 7, 12, 10, generator=gen, dtype=torch.float64)[:, ::3].transpose(-1, -2)
    grid = 0.1 * torch.randn(1, 3, 5, 4, generator=gen, dtype=torch.float64)[..., 1:3].transpose(1, 2)
    affine = (torch.eye(2, 4, dtype=torch.float64) + 0.05 * torch.randn(1, 2, 4, generator=gen,
                                                                        dtype=torch.float64))[..., 1:]
    out.append(Example((image.to(device), affine.to(device), grid.to(device)), ([5, 3], True, 0, 0, True),
                       grads=(0, 1, 2), note="non-contiguous image, affine and grid"))
    return out


# Tolerances against the float64 twin. float64: the same formulas in another order (~1e-15). float32: points
# rounded to ~1e-7 times half the image size, so ~1e-6 on values and ~1e-5 on gradients.
WARP_TOLERANCE = {torch.float64: (1e-10, 1e-10), torch.float32: (2e-5, 2e-4)}

warp = register_op(KernelOp(
    name="warp",
    schema="(Tensor image, Tensor affine, Tensor grid, int[] out_shape, bool is_displacement, int mode, "
           "int padding, bool align_corners) -> Tensor",
    n_tensors=3,
    plan_for="fusedsim.ops.warp:warp_plan",
    reference=warp_ref,
    fake=_warp_fake,
    examples=_warp_examples,
    tolerance=WARP_TOLERANCE,
    doc="grid_sample(image, affine_grid(A) + u) (or at a full field φ) for (B, C, H, W) / (B, C, D, H, W) images "
        "without materialising the sampling grid; bilinear/nearest, zeros/border/reflection; empty affine/grid "
        "= absent; gradients for the image, the affine and the displacement.",
))


def _compose_fake(u, v, affine, add_v, align_corners):
    return u.new_empty((_warp_batch(u, v, affine), *v.shape[1:-1], v.shape[-1]))


def _compose_examples(device: torch.device) -> list[Example]:
    cases = [((1, 9, 11), (1, 7, 8), 1, True, True), ((2, 8, 9), (1, 6, 7), 0, False, False),
             ((1, 5, 6, 7), (2, 4, 5, 6), 2, True, False), ((2, 5, 4, 6), (2, 4, 5, 3), 0, True, True)]
    out = []
    for i, (u_shape, v_shape, ba, add_v, ac) in enumerate(cases):
        gen = torch.Generator().manual_seed(350 + i)
        nd = len(u_shape) - 1
        u = 0.2 * torch.randn(*u_shape, nd, generator=gen, dtype=torch.float64)
        v = 0.15 * torch.randn(*v_shape, nd, generator=gen, dtype=torch.float64)
        affine = (torch.eye(nd, nd + 1, dtype=torch.float64) + 0.1 * torch.randn(ba, nd, nd + 1, generator=gen,
                                                                                   dtype=torch.float64)
                  if ba else torch.empty(0, dtype=torch.float64))
        grads = (0, 1, 2) if ba else (0, 1)
        out.append(Example((u.to(device), v.to(device), affine.to(device)), (add_v, ac), grads=grads,
                           note=f"u {u_shape} v {v_shape} affine batch {ba} add_v={add_v} ac={ac}"))
    return out


compose = register_op(KernelOp(
    name="compose",
    schema="(Tensor u, Tensor v, Tensor affine, bool add_v, bool align_corners) -> Tensor",
    n_tensors=3,
    plan_for="fusedsim.ops.warp:compose_plan",
    reference=compose_ref,
    fake=_compose_fake,
    examples=_compose_examples,
    tolerance=WARP_TOLERANCE,
    doc="Warp composition v + u∘(A·x + v) (or u∘(A·x + v)) of channel-last displacement fields, bilinear with "
        "zero padding, in one pass; gradients for u, v and A.",
))


# -------------------------------------------------------------------------------------- DSSIM, IW-SSIM
# float32 kernels against the float64 twin: dssim's Lab and blur are a few f32 roundings from it (~1e-7
# relative; the cube root guess and Halley steps add a little); its SSIM map divides by variances of random data,
# ~1e-6. float64: fused multiply-adds in the kernels vs separate roundings in the twin (~1e-15). IW-SSIM's ops are
# float64 only; their sums run in another order (~1e-14 relative; the eigen-solvers differ by ~1e-13).
DSSIM_TOLERANCE = {torch.float64: (1e-12, 0.0), torch.float32: (2e-6, 0.0)}
IWSSIM_TOLERANCE = {torch.float64: (1e-10, 0.0)}


def _dssim_lab_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, has_alpha) in enumerate([((2, 3, 13, 17), False), ((1, 3, 19, 40), True), ((1, 3, 1, 1), True)]):
        gen = torch.Generator().manual_seed(400 + i)
        lin = torch.rand(shape, generator=gen, dtype=torch.float64) ** 2.2  # dark values reach the linear branch
        alpha = torch.rand((shape[0], 1, *shape[2:]), generator=gen, dtype=torch.float64)
        out.append(Example((lin.to(device), (alpha * lin[:, :1] if has_alpha else alpha).to(device)), (has_alpha,),
                           note=f"{shape} alpha={has_alpha}"))
    x, _ = _strided_pair(device, 410)
    out.append(Example((x[:, :1].expand(-1, 3, -1, -1), x[:, 1:2]), (True,), note="non-contiguous"))
    return out


dssim_lab = register_op(KernelOp(
    name="dssim_lab",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor lin, Tensor alpha, bool has_alpha) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.dssim_lab:dssim_lab_fwd",
    reference=dssim_lab_op_ref,
    fake=lambda lin, alpha, has_alpha: lin.new_empty(lin.shape, dtype=compute_dtype(lin.dtype)),
    examples=_dssim_lab_examples,
    differentiable=False,
    tolerance=DSSIM_TOLERANCE,
    doc="DSSIM's scaled L*a*b* of linear (premultiplied) RGB (N, 3, H, W), alpha over its pseudo-checkerboard.",
))


def _dssim_image_examples(device: torch.device, channels: int, seed: int) -> list[Example]:
    out = []
    for i, shape in enumerate([(1, channels, 1, 1), (2, channels, 2, 5), (1, channels, 13, 17), (1, channels, 9, 70)]):
        x, y = _pair(shape, device, seed + i)
        out.append(Example((x,) if channels != 3 else (x, y), note=str(shape)))
    x, y = _strided_pair(device, seed + 9)
    three = (x[:, :1].expand(-1, 3, -1, -1), y[:, :1].expand(-1, 3, -1, -1))
    out.append(Example(three[:1] if channels != 3 else three, note="non-contiguous"))
    return out


dssim_blur = register_op(KernelOp(
    name="dssim_blur",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.dssim_blur:dssim_blur_fwd",
    reference=dssim_blur_ref,
    fake=lambda x: x.new_empty(x.shape, dtype=compute_dtype(x.dtype)),
    examples=lambda device: _dssim_image_examples(device, 2, 420),
    differentiable=False,
    tolerance=DSSIM_TOLERANCE,
    doc="DSSIM's blur (3x3 kernel twice, clamp-to-edge) of every plane of (N, C, H, W).",
))

dssim_ssim_map = register_op(KernelOp(
    name="dssim_ssim_map",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor lab1, Tensor lab2) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.dssim_ssim_map:dssim_ssim_map_fwd",
    reference=dssim_ssim_map_ref,
    fake=lambda lab1, lab2: lab1.new_empty((lab1.shape[0], *lab1.shape[2:]), dtype=compute_dtype(lab1.dtype)),
    examples=lambda device: _dssim_image_examples(device, 3, 430),
    differentiable=False,
    tolerance={torch.float64: (1e-12, 0.0), torch.float32: (2e-5, 0.0)},
    doc="DSSIM's SSIM map (N, H, W) of two Lab images (N, 3, H, W): blurred moments, channel means, formula.",
))


def _band(shape, seed: int, device, scale: float = 20.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(shape, generator=gen, dtype=torch.float64)).to(device)


def _iwssim_gram_examples(device: torch.device) -> list[Example]:
    return [Example((_band((2, 1, 13, 11), 440, device), _band((2, 1, 13, 11), 441, device)), (True,), note="parent"),
            Example((_band((1, 1, 40, 23), 442, device), _band((1, 1, 40, 23), 443, device)), (False,),
                    note="no parent"),
            Example((_band((1, 1, 3, 3), 444, device), _band((1, 1, 3, 3), 445, device)), (True,), note="3x3")]


iwssim_gram = register_op(KernelOp(
    name="iwssim_gram",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor ref_band, Tensor parent, bool has_parent) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.iwssim_gram:iwssim_gram_fwd",
    reference=neighbourhood_gram_op_ref,
    fake=lambda ref, parent, has_parent: ref.new_empty((ref.shape[0], *(2 * (10 if has_parent else 9,))),
                                                       dtype=torch.float64),
    examples=_iwssim_gram_examples,
    differentiable=False,
    tolerance=IWSSIM_TOLERANCE,
    doc="IW-SSIM's neighbourhood covariance C_u = YᵀY/n (3x3 neighbourhood + parent) per image, (N, K, K).",
))


def _iwssim_eig_examples(device: torch.device) -> list[Example]:
    gen = torch.Generator().manual_seed(450)
    a = torch.randn(2, 4, 6, generator=gen, dtype=torch.float64)
    b = torch.randn(1, 10, 3, generator=gen, dtype=torch.float64)  # rank 3 plus a ridge: 7 equal eigenvalues
    return [Example(((a @ a.mT).to(device),), note="4x4"),
            Example(((b @ b.mT + 1e-3 * torch.eye(10, dtype=torch.float64)).to(device),), note="10x10 degenerate")]


iwssim_eig = register_op(KernelOp(
    name="iwssim_eig",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor gram) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.iwssim_eig:iwssim_eig_fwd",
    reference=corrected_eig_ref,
    fake=lambda gram: gram.new_empty((gram.shape[0], gram.shape[1] + 1, gram.shape[1]), dtype=torch.float64),
    examples=_iwssim_eig_examples,
    differentiable=False,
    # the inverse's error is ~cond·eps·|C⁻¹| (cond ~2e4, |C⁻¹| ~1e3 for the degenerate example: ~2e-9 absolute)
    tolerance={torch.float64: (2e-8, 0.0)},
    doc="IW-SSIM's corrected eigenvalues and inverse of a covariance (Jacobi on the GPU, no host sync).",
))


def _iwssim_info_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, has_parent) in enumerate([((2, 1, 23, 19), True), ((1, 1, 11, 30), False)]):
        ref = _band(shape, 460 + i, device)
        dist = ref + _band(shape, 470 + i, device, 5.0)
        parent = _band(shape, 480 + i, device, 30.0)
        ref[0, 0, 6:10, 7:12] = 0.0  # flat patches exercise the tol rules
        dist[-1, 0, 5:9, 8:12] = 3.0
        k = 10 if has_parent else 9
        eig = corrected_eig_ref(neighbourhood_gram_op_ref(ref.cpu(), parent.cpu(), has_parent)).to(device)
        assert eig.shape[-1] == k
        out.append(Example((ref, dist, parent, eig), (has_parent,), note=f"{shape} parent={has_parent}"))
    return out


iwssim_info = register_op(KernelOp(
    name="iwssim_info",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor ref_band, Tensor dist_band, Tensor parent, Tensor eig, bool has_parent) -> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.iwssim_info:iwssim_info_fwd",
    reference=info_weight_map_op_ref,
    fake=lambda ref, dist, parent, eig, has_parent: ref.new_empty((ref.shape[0], ref.shape[2] - 10,
                                                                   ref.shape[3] - 10), dtype=torch.float64),
    examples=_iwssim_info_examples,
    differentiable=False,
    tolerance=IWSSIM_TOLERANCE,
    doc="IW-SSIM's information-content weights of a band pair (N, 1, H, W) on the 'valid' 11x11 region.",
))


# ----------------------------------------------------------------------------------------------- VMAF
def _integer_ssim_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, bits) in enumerate([((1, 1, 1), 8), ((2, 9, 13), 8), ((1, 37, 70), 10), ((1, 20, 19), 12)]):
        gen = torch.Generator().manual_seed(i)
        ref = torch.randint(0, 1 << bits, shape, generator=gen)
        dist = (ref + torch.randint(-40, 41, shape, generator=gen)).clamp(0, (1 << bits) - 1)
        dtype = torch.uint8 if bits == 8 else torch.int16
        out.append(Example((ref.to(device, dtype), dist.to(device, dtype)), (bits,), note=f"{shape} {bits}-bit"))
    return out


integer_ssim = register_op(KernelOp(
    name="integer_ssim",
    schema="(Tensor ref, Tensor dist, int bit_depth) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.integer_ssim:integer_ssim_fwd",
    reference=integer_ssim_ref,
    fake=lambda ref, dist, bit_depth: ref.new_empty(ref.shape[0], dtype=torch.float64),
    examples=_integer_ssim_examples,
    differentiable=False,
    tolerance=None,  # bit-identical to libvmaf, hence to the twin
    cpu="fusedsim.cpu.integer_ssim_numba:integer_ssim_numba",  # numba, the twin's bits (CPU path under auto)
    doc="libvmaf's integer SSIM per frame of integer luma (N, H, W), float64, bit-exact.",
))


def _vmaf_float_frames(shape, device, seed: int, bit_depth: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """libvmaf float luma (integer codes / scaler) of a frame pair, as ``to_vmaf_float`` makes it."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bit_depth) - 1
    ref = torch.randint(0, top + 1, shape, generator=gen)
    dist = (ref + torch.randint(-40, 41, shape, generator=gen)).clamp(0, top)
    return tuple(to_vmaf_float(t, bit_depth).to(device) for t in (ref, dist))  # type: ignore[return-value]


def _iqa_decimate_examples(device: torch.device) -> list[Example]:
    lpf = torch.from_numpy(MS_SSIM_LOWPASS.copy())
    out = []
    for i, (shape, factor, bits) in enumerate([((1, 22, 22), 2, 8), ((2, 23, 31), 2, 10), ((1, 45, 37), 4, 8),
                                               ((1, 33, 71), 5, 12), ((1, 11, 12), 3, 8)]):
        img, _ = _vmaf_float_frames(shape, device, 40 + i, bits)
        kernel = lpf if factor == 2 else torch.full((factor, factor), 1.0 / (factor * factor)).float()
        out.append(Example((img, kernel.to(device)), (factor,), note=f"{shape} factor {factor}"))
    return out


def _iqa_ssim_maps_examples(device: torch.device) -> list[Example]:
    cases = [((1, 11, 11), 8), ((2, 13, 17), 8), ((1, 40, 61), 10), ((1, 12, 300), 12)]
    out = [Example(_vmaf_float_frames(shape, device, 50 + i, bits), (), note=f"{shape} {bits}-bit")
           for i, (shape, bits) in enumerate(cases)]
    flat = torch.full((1, 15, 14), 77.0, device=device)  # zero variances: the clamps and the s-term rule
    out.append(Example((flat, flat.clone()), (), note="flat frames"))
    return out


iqa_decimate = register_op(KernelOp(
    name="iqa_decimate",
    schema="(Tensor img, Tensor kernel, int factor) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.iqa_ssim:iqa_decimate_fwd",
    reference=iqa_decimate_ref,
    fake=lambda img, kernel, factor: img.new_empty(
        (img.shape[0], img.shape[1] // factor + (img.shape[1] & 1), img.shape[2] // factor + (img.shape[2] & 1))),
    examples=_iqa_decimate_examples,
    differentiable=False,
    tolerance=None,  # libvmaf's float32/double arithmetic, operation for operation
    doc="libvmaf's _iqa_decimate: k x k float32 kernel at every factor-th pixel, mirrored borders, (N, H, W).",
))

iqa_ssim_maps = register_op(KernelOp(
    name="iqa_ssim_maps",
    schema="(Tensor ref, Tensor cmp) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.iqa_ssim:iqa_ssim_maps_fwd",
    reference=iqa_ssim_maps_ref,
    fake=lambda ref, cmp: ref.new_empty((ref.shape[0], 4, ref.shape[1] - 10, ref.shape[2] - 10),
                                        dtype=torch.float64),
    examples=_iqa_ssim_maps_examples,
    differentiable=False,
    tolerance=None,  # libvmaf's float32/double arithmetic, operation for operation
    doc="libvmaf's _iqa_ssim per-pixel terms (l*c*s, l, c, s) over the valid region, float64 (N, 4, H-10, W-10).",
))


def _seqsum_examples(device: torch.device) -> list[Example]:
    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(2, 1500, generator=gen, dtype=torch.float64) * torch.logspace(-8, 8, 1500, dtype=torch.float64)
    ties = torch.tensor([[2.0**53, 1.0, 1.0, -(2.0**53), 0.5, 2.0**-60, 3.0]], dtype=torch.float64)
    return [Example((rows.to(device),), note="magnitudes over 16 decades"), Example((ties.to(device),), note="ties"),
            Example((torch.zeros(2, 0, dtype=torch.float64, device=device),), note="empty rows")]


sequential_sum = register_op(KernelOp(
    name="sequential_sum",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.sequential_sum:sequential_sum_fwd",
    reference=sequential_sum_ref,
    fake=lambda x: x.new_empty(x.shape[0]),
    examples=_seqsum_examples,
    differentiable=False,
    tolerance=None,  # bit-identical: the left-to-right double sum
    doc="Left-to-right float64 sum of each row (N, L) -> (N,), bit-identical to the sequential loop.",
))


# ------------------------------------------------------------------------------------------- registration
def _lncc_fake(pred, target, win, scale, q, nr, floor, dr_add, clamp, reduce):
    return pred.new_empty(tuple(pred.shape) if reduce == -1 else (), dtype=compute_dtype(pred.dtype))


def _lncc_examples(device: torch.device) -> list[Example]:
    from fusedsim.reference.lncc_ref import lncc_constants, lncc_taps, lncc_window_table

    cases = [  # shape, K, kernel type, convention, reduce (1 mean, 2 sum, -1 map), grads
        ((1, 1, 5, 6), 3, "box", "fireants", 1, (0, 1)),  # the smallest: the twin's gradcheck runs on it
        ((1, 2, 7, 8), 5, "gaussian", "monai", 2, (0,)),
        ((1, 1, 8, 7), 5, "gaussian", "fireants_torch", -1, (0, 1)),  # asymmetric window
        ((1, 1, 4, 5, 6), 3, "gaussian", "monai", 1, (0, 1)),
        ((1, 2, 3, 4, 5), 3, "box", "fireants", -1, (1,)),
    ]
    out = []
    for i, (shape, k, kind, conv, reduce, grads) in enumerate(cases):
        x, y = _pair(shape, device, 70 + i)
        taps = lncc_taps(k, kind, k / 3.0 if conv != "fireants" else 1.5, conv)
        scale, q, nr, floor, dr_add, clamp = lncc_constants(conv, taps, len(shape) - 2, 1e-5, 1e-5)
        out.append(Example((x, y, lncc_window_table(taps, shape[1], torch.float64, device)),
                           (scale, q, nr, floor, dr_add, clamp, reduce), grads=grads,
                           note=f"{shape} K={k} {kind} {conv} reduce={reduce}"))
    x, y = _strided_pair(device, 77)
    taps = lncc_taps(3, "box", 1.0, "monai")
    out.append(Example((x, y, lncc_window_table(taps, 2, torch.float64, device)),
                       (*lncc_constants("monai", taps, 2, 0.0, 1e-5), 1), grads=(0, 1), note="non-contiguous"))
    return out


lncc = register_op(KernelOp(
    name="lncc",
    schema="(Tensor pred, Tensor target, Tensor win, float scale, float q, float nr, float floor, float dr_add, "
           "bool clamp, int reduce) -> Tensor",
    n_tensors=3,
    plan_for="fusedsim.ops.lncc:lncc_plan",
    reference=lncc_ref,
    fake=_lncc_fake,
    examples=_lncc_examples,
    # float32: moments to ~1e-7 relative, ncc through the variance cancellation E[x²] - mu² to ~1e-6, gradients
    # (a second cancellation in the adjoint sums) to ~1e-5 on these well-conditioned random pairs
    tolerance={torch.float64: (1e-9, 1e-8), torch.float32: (2e-5, 2e-4)},
    doc="Local normalised cross-correlation loss (MONAI and FireANTs conventions) of (N, C, H, W) / (N, C, D, H, W) "
        "pairs: -mean, -sum or the -ncc map; exact gradients for both inputs.",
))


def _hist_fake(pred, target, norm, centres, preterm, clamp, pooled):
    n, c = pred.shape[:2]
    nb = centres.shape[0]
    return pred.new_empty((n, 1 if pooled else c, nb + 2, nb), dtype=compute_dtype(pred.dtype))


def _hist_examples(device: torch.device) -> list[Example]:
    from fusedsim.reference.mutual_information_ref import mi_bins

    cases = [  # shape, bins, convention (its centres and sigma), (lo, scale), clamp, pooled
        ((1, 1, 3, 4), 4, "monai", (0.0, 1.0), True, True),  # the smallest: the twin's gradcheck runs on it
        ((1, 1, 7, 9), 16, "monai", (0.0, 1.0), True, True),
        ((2, 3, 6, 5), 7, "fireants", (0.0, 1.0), False, False),
        ((1, 2, 9, 11), 23, "monai", (0.1, 1.3), True, True),  # values pushed past both clamp bounds
        ((1, 2, 4, 5, 6), 32, "fireants_torch", (-0.2, 0.8), True, False),
    ]
    out = []
    for i, (shape, nb, conv, (lo, scale), clamp, pooled) in enumerate(cases):
        x, y = (0.05 + 0.9 * t for t in _pair(shape, device, 90 + i))  # no value on a clamp bound (a kink)
        centres, preterm = mi_bins(nb, 0.5 if conv == "monai" else 1.0, conv)
        norm = torch.tensor([[lo, scale]] * shape[1], dtype=torch.float64, device=device)
        norm[-1, 1] *= 0.9
        out.append(Example((x, y, norm, centres.to(device)), (preterm, clamp, pooled), grads=(0, 1, 2),
                           note=f"{shape} bins={nb} {conv} norm=({lo}, {scale}) clamp={clamp} pooled={pooled}"))
    return out


parzen_histogram = register_op(KernelOp(
    name="parzen_histogram",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor pred, Tensor target, Tensor norm, Tensor centres, float preterm, bool clamp, bool pooled) "
           "-> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.mutual_information:histogram_plan",
    reference=parzen_histogram_ref,
    fake=_hist_fake,
    examples=_hist_examples,
    # float32: each histogram entry is a mean of products of normalised weights (~1e-7 relative); gradients
    # carry the exp and the bin-centre differences (~1e-6)
    tolerance={torch.float64: (1e-10, 1e-9), torch.float32: (1e-5, 1e-4)},
    doc="Gaussian-Parzen joint histogram (pab, pa, pb) of (N, C, *S) pairs per plane or per image (MONAI's "
        "pooled channels), for mutual information; exact gradients for both images and the intensity map.",
))


# ------------------------------------------------------------------------------------------ Butteraugli
# Tolerances against the float64 twin: float64 differs only by summation order (~1e-15 relative); float32 rounds
# each tap product and the renormalising division (~1e-7 relative per value, a few ulps through 33 taps).
BUTTERAUGLI_TOLERANCE = {torch.float64: (1e-10, 0.0), torch.float32: (2e-5, 0.0)}


def _butteraugli_blur_examples(device: torch.device) -> list[Example]:
    cases = [((2, 3, 13, 17), 1.2), ((1, 2, 11, 40), 7.15593339443), ((1, 1, 20, 9), 3.22489901262),
             ((2, 1, 9, 14), 1.56416327805), ((1, 1, 1, 3), 1.2), ((1, 1, 5, 2), 7.15593339443)]
    out = [Example((_pair(shape, device, 70 + i)[0],), (sigma,), note=f"{shape} sigma={sigma}")
           for i, (shape, sigma) in enumerate(cases)]
    x = _strided_pair(device, 79)[1]
    out.append(Example((x,), (1.2,), note="non-contiguous, mirrored borders"))
    out.append(Example((x,), (2.7,), note="non-contiguous, renormalised borders (the masking blur)"))
    return out


butteraugli_blur = register_op(KernelOp(
    name="butteraugli_blur",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor x, float sigma) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.butteraugli_blur:butteraugli_blur_plan",
    reference=butteraugli_blur_ref,
    fake=lambda x, sigma: x.new_empty(x.shape, dtype=compute_dtype(x.dtype)),
    examples=_butteraugli_blur_examples,
    differentiable=False,
    tolerance=BUTTERAUGLI_TOLERANCE,
    doc="Butteraugli's (libjxl 0.7) separable Gaussian blur of (N, C, H, W) planes: 5 taps mirrored, longer "
        "windows truncated at 2.25 sigma and renormalised at the borders.",
))


def _butteraugli_malta_examples(device: torch.device) -> list[Example]:
    out = []
    cases = [((1, 8, 8), (18.72, 23.4, 4498534.45, 0.6116, True)), ((2, 13, 17), (1.32, 0.88, 71.78, 0.399, False)),
             ((1, 19, 37), (208.2, 138.8, 5.0, 0.399, True))]
    for i, (shape, scalars) in enumerate(cases):
        gen = torch.Generator().manual_seed(80 + i)
        a = torch.randn(shape, generator=gen, dtype=torch.float64) * 3
        b = torch.where(torch.rand(shape, generator=gen) < 0.3, a * 0.8, a + torch.randn(shape, generator=gen))
        out.append(Example((a.to(device), b.to(device)), scalars, note=f"{shape} low_freq={scalars[-1]}"))
    x, y = _strided_pair(device, 88)  # values in [0, 1]: the band check of the asymmetric term still switches
    out.append(Example((x[0], y[0]), (1.32, 0.88, 71.78, 0.399, False), note="non-contiguous"))
    return out


butteraugli_malta = register_op(KernelOp(
    name="butteraugli_malta",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor lum0, Tensor lum1, float w_0gt1, float w_0lt1, float norm1, float mulli, bool low_freq) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.butteraugli_malta:butteraugli_malta_plan",
    reference=butteraugli_malta_ref,
    fake=lambda lum0, lum1, *scalars: lum0.new_empty(lum0.shape, dtype=compute_dtype(lum0.dtype)),
    examples=_butteraugli_malta_examples,
    differentiable=False,
    tolerance=BUTTERAUGLI_TOLERANCE,
    doc="Butteraugli's Malta line-filter difference of two (N, H, W) planes (HF or LF line set), libjxl 0.7.",
))


# ------------------------------------------------------------------------------------------ SSIMULACRA2
# The kernels compute the reference's float32 arithmetic, as the float32 twin does (FMA evaluated in float64 and
# rounded once, which differs from a true FMA only when the float64 sum lands on a float32 midpoint: ~1 in 2**29
# FMAs, then by 1 ulp); pooled sums are float64 in another order (~1e-16). Hence 1e-6 relative.
SSIMULACRA2_TOLERANCE = {torch.float32: (1e-6, 0.0)}


def _srgb_images(shape, device, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    ref = torch.randint(0, 256, shape, generator=gen)
    dist = (ref + torch.randint(-24, 25, shape, generator=gen)).clamp(0, 255)
    if dtype == torch.uint8:
        return ref.to(device, torch.uint8), dist.to(device, torch.uint8)
    return (ref / 255.0).to(device, dtype), (dist / 255.0).to(device, dtype)


def _xyb_images(shape, device, seed, ref_batch=None):
    ref, dist = _srgb_images(shape, torch.device("cpu"), seed, torch.uint8)
    x1 = ssimulacra2_linear_xyb_ref(ref[: ref_batch or shape[0]], False)[1]
    return x1.to(device), ssimulacra2_linear_xyb_ref(dist, False)[1].to(device)


def _recursive_gaussian_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, sigma) in enumerate([((1, 1, 5, 4), 1.5), ((2, 3, 9, 13), 1.5), ((1, 7, 30), 1.5),
                                        ((2, 12, 11), 1.5), ((1, 1, 12, 25), 2.0)]):
        gen = torch.Generator().manual_seed(90 + i)
        out.append(Example((torch.rand(shape, generator=gen).to(device),), (sigma,), note=f"{shape} sigma={sigma}"))
    x = torch.rand(1, 2, 22, 30, generator=torch.Generator().manual_seed(95)).to(device)[:, :, 3:20, ::2]
    out.append(Example((x,), (1.5,), note="non-contiguous"))
    return out


recursive_gaussian = register_op(KernelOp(
    name="recursive_gaussian",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor x, float sigma) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.recursive_gaussian:recursive_gaussian_plan",
    reference=recursive_gaussian_ref,
    fake=lambda x, sigma: x.new_empty(x.shape),
    examples=_recursive_gaussian_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="libjxl's recursive Gaussian (Charalampidis IIR, zero padding) of every (H, W) plane, float32 with the "
        "reference's step structure (SSIMULACRA2 uses sigma 1.5).",
))


def _linear_xyb_examples(device: torch.device) -> list[Example]:
    out = [Example((_srgb_images((2, 3, 7, 9), device, 100, torch.uint8)[0],), (False,), note="uint8 sRGB"),
           Example((_srgb_images((1, 3, 8, 5), device, 101)[0],), (False,), note="float sRGB"),
           Example((torch.rand(1, 3, 9, 7, generator=torch.Generator().manual_seed(102)).to(device),), (True,),
                   note="downsample odd sizes")]
    x = torch.rand(1, 3, 22, 30, generator=torch.Generator().manual_seed(103)).to(device)
    out.append(Example((x[:, :, 3:20, ::2],), (False,), note="non-contiguous sRGB"))
    out.append(Example((x.to(memory_format=torch.channels_last)[:, :, 2:13],), (True,), note="channels-last"))
    return out


ssimulacra2_linear_xyb = register_op(KernelOp(
    name="ssimulacra2_linear_xyb",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor x, bool downsample) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.xyb:linear_xyb_plan",
    reference=ssimulacra2_linear_xyb_ref,
    fake=lambda x, downsample: x.new_empty(
        (2, x.shape[0], 3, *((s + 1) // 2 if downsample else s for s in x.shape[2:])),
        dtype=torch.float32 if x.dtype == torch.uint8 else x.dtype),
    examples=_linear_xyb_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="SSIMULACRA2's colour step: sRGB (or the previous scale's linear RGB, 2x2-averaged) -> (linear RGB, XYB).",
))


ssimulacra2_reference_blur = register_op(KernelOp(
    name="ssimulacra2_reference_blur",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor x1) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.ssimulacra2:reference_blur_plan",
    reference=ssimulacra2_reference_blur_ref,
    fake=lambda x1: x1.new_empty((2, *x1.shape)),
    examples=lambda device: [Example((_xyb_images(shape, device, 110 + i)[0],), note=str(shape))
                             for i, shape in enumerate([(1, 3, 9, 10), (2, 3, 6, 13)])],
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="SSIMULACRA2's reference-side blurs of one scale: G(x1), G(x1²) (products formed in the kernel).",
))


def _error_pool_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, ref_batch) in enumerate([((2, 3, 8, 9), 1), ((1, 3, 11, 6), None)]):
        x1, x2 = _xyb_images(shape, torch.device("cpu"), 120 + i, ref_batch)
        mu1, s11 = ssimulacra2_reference_blur_ref(x1)
        out.append(Example(tuple(t.to(device) for t in (x1, x2, mu1, s11)),
                           note=f"{shape} reference batch {ref_batch or shape[0]}"))
    return out


ssimulacra2_error_pool = register_op(KernelOp(
    name="ssimulacra2_error_pool",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor x1, Tensor x2, Tensor mu1, Tensor s11) -> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.ssimulacra2:error_pool_plan",
    reference=ssimulacra2_error_pool_ref,
    fake=lambda x1, x2, mu1, s11: x2.new_empty((x2.shape[0], 3, 2, 3), dtype=torch.float64),
    examples=_error_pool_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="SSIMULACRA2's comparison of one scale: blurs of x2, x2², x1·x2, SSIM and edge maps, L1/L4 pooling "
        "(N, 3, 2, 3) float64; the blurred maps stay in registers.",
))


def _cvvdp_mask_examples(device: torch.device) -> list[Example]:
    """Band contrasts of a test/reference pair (~0.1), CSF sensitivities (5..100) and a positive blurred masker."""
    out = []
    for i, (shape, sens_batch) in enumerate([((1, 3, 1, 1), None), ((2, 3, 7, 13), 1), ((1, 3, 16, 9), None)]):
        gen = torch.Generator().manual_seed(140 + i)
        test = 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        ref = test + 0.05 * torch.randn(shape, generator=gen, dtype=torch.float64)
        sens = 5 + 95 * torch.rand((sens_batch or shape[0], *shape[1:]), generator=gen, dtype=torch.float64)
        blurred = (test * sens).abs() * torch.rand(shape, generator=gen, dtype=torch.float64)
        out.append(Example(tuple(t.to(device) for t in (test, ref, sens, blurred)),
                           note=f"{shape} sensitivity batch {sens_batch or shape[0]}"))
    test, ref, sens, blurred = (t.transpose(-1, -2) for t in out[-1].tensors)
    out.append(Example((test, ref, sens, blurred), note="non-contiguous"))
    return out


cvvdp_mask_diff = register_op(KernelOp(
    name="cvvdp_mask_diff",
    triton_by_default=False,  # in GPU_PENDING
    schema="(Tensor test, Tensor ref, Tensor sens, Tensor blurred) -> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.cvvdp_mask_diff:cvvdp_mask_diff_fwd",
    reference=cvvdp_mask_diff_ref,
    fake=lambda test, ref, sens, blurred: test.new_empty(test.shape, dtype=compute_dtype(test.dtype)),
    examples=_cvvdp_mask_examples,
    differentiable=False,
    # float32 only (the metric's GPU dtype): the kernel's powers are exp(e log x), a few ulps from torch.pow,
    # amplified by e log x (|.| <= ~45) to ~3e-6 relative; the float64 path runs the twin.
    tolerance={torch.float32: (5e-5, 0.0)},
    doc="ColorVideoVDP's masking of one band after the phase-uncertainty blur: cross-channel masker, masked and "
        "soft-clamped differences (N, 3, h, w).",
))
