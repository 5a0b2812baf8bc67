"""Perceptual-metric ops: SSIMULACRA2 (registered when the ``perceptual`` family loads)."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.ssimulacra2.twin import (
    ssimulacra2_error_pool_ref,
    ssimulacra2_linear_xyb_ref,
    ssimulacra2_pair_pool_ref,
    ssimulacra2_reference_blur_ref,
)


# The kernels compute the reference's float32 arithmetic, as the float32 twin does (FMA evaluated in float64 and
# rounded once, which differs from a true FMA only when the float64 sum lands on a float32 midpoint: ~1 in 2**29
# FMAs, then by 1 ulp); pooled sums are float64 in another order (~1e-16). Hence 1e-6 relative.
SSIMULACRA2_TOLERANCE = {torch.float32: (1e-6, 0.0)}
# The CPU path under ``auto`` (``cpu=``): the twins with the recursive Gaussian and the XYB transform compiled by
# numba (the same bits)


def _srgb_images(shape, device, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    ref = torch.randint(0, 256, shape, generator=gen)
    dist = (ref + torch.randint(-24, 25, shape, generator=gen)).clamp(0, 255)
    if dtype == torch.uint8:
        return ref.to(device, torch.uint8), dist.to(device, torch.uint8)
    return (ref / 255.0).to(device, dtype), (dist / 255.0).to(device, dtype)


def _xyb_images(shape, device, seed, ref_batch=None):
    ref, dist = _srgb_images(shape, torch.device("cpu"), seed, torch.uint8)
    x1 = ssimulacra2_linear_xyb_ref(ref[: ref_batch or shape[0]], 0)[0]
    return x1.to(device), ssimulacra2_linear_xyb_ref(dist, 0)[0].to(device)


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.ssimulacra2.xyb_kernel  # noqa: F401
    import fusedsim.families.ssimulacra2.kernel  # noqa: F401


def _import_cpu() -> None:
    """The compiled CPU kernels of these ops (numba), imported on first CPU call under ``auto``."""
    import fusedsim.families.ssimulacra2.cpu  # noqa: F401




def _linear_xyb_examples(device: torch.device) -> list[Example]:
    codes = _srgb_images((2, 3, 7, 9), device, 100, torch.uint8)[0]
    out = [Example((codes,), (0,), note="uint8 sRGB"),
           Example((codes,), (1,), note="uint8 sRGB, linearised and averaged (odd sizes)"),
           Example((_srgb_images((1, 3, 8, 5), device, 101)[0],), (0,), note="float sRGB"),
           Example((_srgb_images((1, 3, 8, 5), device, 101)[0],), (1,), note="float sRGB, averaged"),
           Example((torch.rand(1, 3, 9, 7, generator=torch.Generator().manual_seed(102)).to(device),), (2,),
                   note="linear, averaged, odd sizes")]
    x = torch.rand(1, 3, 22, 30, generator=torch.Generator().manual_seed(103)).to(device)
    out.append(Example((x[:, :, 3:20, ::2],), (0,), note="non-contiguous sRGB"))
    out.append(Example((x[:, :, 3:20, ::2],), (1,), note="non-contiguous sRGB, averaged"))
    out.append(Example((x.to(memory_format=torch.channels_last)[:, :, 2:13],), (3,), note="channels-last"))
    return out


ssimulacra2_linear_xyb = register_op(KernelOp(
    name="ssimulacra2_linear_xyb",
    schema="(Tensor x, int scale) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=ssimulacra2_linear_xyb_ref,
    fake=lambda x, scale: x.new_empty(
        (1 if scale == 0 else 2, x.shape[0], 3, *((s + 1) // 2 if scale else s for s in x.shape[2:])),
        dtype=torch.float32 if x.dtype == torch.uint8 else x.dtype),
    examples=_linear_xyb_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    load_cpu=_import_cpu,
    doc="SSIMULACRA2's colour step of one scale: sRGB -> XYB (scale 0); sRGB linearised and 2x2-averaged (scale "
        "1) or the previous linear image averaged (scale >= 2) -> (linear RGB, XYB).",
))


ssimulacra2_reference_blur = register_op(KernelOp(
    name="ssimulacra2_reference_blur",
    schema="(Tensor x1) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=ssimulacra2_reference_blur_ref,
    fake=lambda x1: x1.new_empty((2, *x1.shape)),
    examples=lambda device: [Example((_xyb_images(shape, device, 110 + i)[0],), note=str(shape))
                             for i, shape in enumerate([(1, 3, 9, 10), (2, 3, 6, 13)])],
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    load_cpu=_import_cpu,
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
    schema="(Tensor x1, Tensor x2, Tensor mu1, Tensor s11) -> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
    reference=ssimulacra2_error_pool_ref,
    fake=lambda x1, x2, mu1, s11: x2.new_empty((x2.shape[0], 3, 2, 3), dtype=torch.float64),
    examples=_error_pool_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    load_cpu=_import_cpu,
    doc="SSIMULACRA2's comparison of one scale: blurs of x2, x2², x1·x2, SSIM and edge maps, L1/L4 pooling "
        "(N, 3, 2, 3) float64; the blurred maps stay in registers.",
))


ssimulacra2_pair_pool = register_op(KernelOp(
    name="ssimulacra2_pair_pool",
    schema="(Tensor x1, Tensor x2) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=ssimulacra2_pair_pool_ref,
    fake=lambda x1, x2: x2.new_empty((x2.shape[0], 3, 2, 3), dtype=torch.float64),
    examples=lambda device: [Example(_xyb_images(shape, device, 130 + i), note=str(shape))
                             for i, shape in enumerate([(2, 3, 8, 9), (1, 3, 11, 6), (1, 3, 17, 40)])],
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    load_cpu=_import_cpu,
    doc="SSIMULACRA2's one-shot comparison of one scale: ssimulacra2_error_pool with the reference-side blurs "
        "G(x1), G(x1²) finished in the same kernel (never written).",
))
