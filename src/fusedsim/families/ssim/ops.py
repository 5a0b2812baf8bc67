"""SSIM family ops: ssim_reduce, ms_ssim and their building blocks (avg_pool_half, windowed_moments)."""

from __future__ import annotations

import torch

from fusedsim.core.examples import (
    CHANNEL,
    IMAGE,
    MAP,
    MEAN,
    SSIM_TOLERANCE,
    STATS,
    example_pair,
    strided_example_pair,
    example_window,
)
from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.core.moments.twin import compute_dtype, windowed_moments_ref
from fusedsim.families.ssim.twin import avg_pool_half_pair_ref, ms_ssim_reduce_ref, ssim_reduce_ref


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
        x, y = example_pair(shape, device, i)
        out.append(Example((x, y, example_window(taps, shape[1], device, asym)),
                           (1e-4, 9e-4, valid, not asym, reduce, weight), grads=(0, 1),
                           note=f"{shape} K={taps} valid={valid} reduce={reduce} w={weight}"))
    x, y = strided_example_pair(device, 99)
    out.append(Example((x, y, example_window(9, 2, device)), (1e-4, 9e-4, False, True, CHANNEL, 0.2), grads=(0, 1),
                       note="non-contiguous"))
    x, y = example_pair((2, 1, 12, 15), device, 98)
    out.append(Example((x, y, example_window(5, 1, device)), (1e-4, 9e-4, True, True, IMAGE, -1.0), grads=(0,),
                       note="gradient for the first input only"))
    return out


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.ssim.avg_pool  # noqa: F401
    import fusedsim.families.ssim.kernels  # noqa: F401


ssim_reduce = register_op(KernelOp(
    name="ssim_reduce",
    schema="(Tensor x, Tensor y, Tensor win, float c1, float c2, bool valid, bool symmetric, int reduce, "
           "float ssim_weight) -> Tensor",
    n_tensors=3,
    load_triton=_import_triton,
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
        x, y = example_pair(shape, device, 50 + i)
        w = torch.tensor(weights, dtype=torch.float64, device=device)
        out.append(Example((x, y, example_window(taps, shape[1], device), w), (1e-4, 9e-4, True, reduce), grads=(0, 1),
                           note=f"{shape} K={taps} levels={len(weights)} reduce={reduce}"))
    x, y = strided_example_pair(device, 60)
    w = torch.tensor((0.5, 0.5, 1.0), dtype=torch.float64, device=device)
    out.append(Example((x, y, example_window(3, 2, device), w), (1e-4, 9e-4, True, CHANNEL), grads=(0, 1),
                       note="non-contiguous"))
    return out


ms_ssim = register_op(KernelOp(
    name="ms_ssim",
    schema="(Tensor x, Tensor y, Tensor win, Tensor weights, float c1, float c2, bool symmetric, int reduce) -> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
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
    out = [Example(example_pair(shape, device, i), note=str(shape))
           for i, shape in enumerate([(1, 1, 1, 1), (2, 3, 7, 13), (1, 2, 16, 9), (1, 1, 33, 70)])]
    out.append(Example(strided_example_pair(device, 7), note="non-contiguous"))
    return out


avg_pool_half = register_op(KernelOp(
    name="avg_pool_half",
    schema="(Tensor x, Tensor y) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=avg_pool_half_pair_ref,
    fake=_pool_fake,
    examples=_pool_examples,
    differentiable=False,
    tolerance={torch.float64: (1e-15, 0.0), torch.float32: (1e-6, 0.0)},
    doc="MS-SSIM downsampling of both images in one launch (pytorch-msssim's padding); forward only.",
))




