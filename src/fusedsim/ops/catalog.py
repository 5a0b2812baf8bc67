"""Every op, declared once: schema, Triton plan (imported lazily), PyTorch twin, shape function, test examples.

This module imports neither Triton nor the kernels, so the twins (the CPU path) work where Triton is not
installed. Adding an op = one ``register_op`` call here (plus its kernel module and its twin); the dispatcher,
``torch.compile`` support and the generic twin tests (``tests/ops/test_registry.py``) follow from it.
"""

from __future__ import annotations

import torch

from fusedsim.ops.registry import Example, KernelOp, register_op
from fusedsim.reference.float_ssim_ref import MS_SSIM_LOWPASS, iqa_decimate_ref, iqa_ssim_maps_ref, to_vmaf_float
from fusedsim.reference.integer_ssim_ref import integer_ssim_ref
from fusedsim.reference.sequential_sum_ref import sequential_sum_ref
from fusedsim.reference.ssim_ref import (
    avg_pool_half_pair_ref,
    compute_dtype,
    gaussian_window,
    ms_ssim_reduce_ref,
    ssim_reduce_ref,
    windowed_moments_ref,
)

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
